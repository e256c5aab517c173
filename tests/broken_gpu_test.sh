#!/usr/bin/env bash
# A GPU whose driver is installed but fails must read as a failure, never as "no GPU" (which
# skips the GPU tests, exit 77, and would report a broken machine green). With a failing
# stand-in for the driver's library first on LD_LIBRARY_PATH (tests/broken_driver/), every
# entry point that asks for a GPU must exit 1 and say the GPU fails.
# Usage: broken_gpu_test.sh DRIVER_DIR MLP_TRAIN MLP_BENCH GPU_TEST DATA_DIR
set -u
driver=$1 mlp_train=$2 mlp_bench=$3 gpu_test=$4 data=$5
source "$(dirname "$0")/script_checks.sh" # $work, fail, $failures

# broken STATUS PATTERN -- COMMAND...: under the failing driver, COMMAND exits STATUS and says PATTERN
broken() {
    local status=$1 pattern=$2
    shift 3
    LD_LIBRARY_PATH=$driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$@" >"$work/out" 2>&1
    local got=$?
    [ $got -eq "$status" ] || fail "exit $got (wanted $status): $*: $(tail -3 "$work/out")"
    grep -Eq -- "$pattern" "$work/out" || fail "no /$pattern/ from $*: $(tail -3 "$work/out")"
}

quick=(--data "$data" --epochs 1 --batch 2048 --quiet)
broken 1 'the GPU fails: .*CUDA fails' -- "$mlp_train" --device gpu --impl tiled "${quick[@]}"
broken 1 'the GPU fails: .*--device cpu' -- "$mlp_train" "${quick[@]}"
broken 1 'a GPU is here but unusable' -- "$gpu_test"
broken 1 'the GPU fails' -- "$mlp_bench" dot --device gpu --sizes 1K --repeats 1 --warmup 0 --quiet
broken 1 'FAIL: mlp_train exited 1' -- "$(dirname "$0")/mnist_accuracy.sh" "$mlp_train" "$data" gpu tiled 1 0.9
[ $failures -eq 0 ] || exit 1
echo "broken_gpu_test: a failing driver fails every GPU entry point"
