#!/usr/bin/env bash
# Proves mlp_train emits its NVTX ranges with the documented nesting, by running it with a
# recording injection library in place of a profiler (NVTX's own loading mechanism:
# NVTX_INJECTION64_PATH). On a machine with a GPU the GPU runs are checked too.
# Usage: nvtx_test.sh MLP_TRAIN RECORDER_LIBRARY DATA_DIR
set -u
mlp_train=$1 recorder=$2 data=$3
source "$(dirname "$0")/script_checks.sh" # $work, fail, $failures

# check_run NAME "ARGS" RANGE... : runs mlp_train with ARGS under the recorder and checks that
# each RANGE (a path of nested ranges) was seen, that every range was closed, and that the
# host's wait for the device is a range of its own, never inside d2h (which names the copy).
# Batches are 4096 rows unless ARGS set --batch (the later option counts). Returns 77 where
# the run found no GPU.
check_run() {
    local name=$1 args=$2
    shift 2
    local record="$work/$name.txt"
    # shellcheck disable=SC2086 # ARGS is a list of words
    NVTX_INJECTION64_PATH=$recorder NVTX_RECORD_FILE=$record \
        "$mlp_train" --batch 4096 $args --data "$data" --epochs 1 --quiet >"$work/$name.out" 2>&1 || {
        grep -q 'no GPU here' "$work/$name.out" && return 77
        fail "$name run: $(tail -3 "$work/$name.out")"
        return 1
    }
    for path in "$@"; do
        grep -qx "mlp_train:$path" "$record" || fail "$name: no range mlp_train:$path"
    done
    if grep -q UNBALANCED "$record"; then
        fail "$name: $(grep UNBALANCED "$record")"
    fi
    if grep -q 'd2h/' "$record"; then
        fail "$name: a range inside d2h: $(grep 'd2h/' "$record" | head -1)"
    fi
    echo "$name ranges:"; sed 's/^/  /' "$record"
}

after_pass=(run/epoch/d2h run/epoch/wait run/epoch/eval run/epoch/eval/wait)
phases=(run run/epoch run/epoch/step run/epoch/step/h2d run/epoch/step/forward
        run/epoch/step/backward run/epoch/step/update "${after_pass[@]}")
check_run cpu "--device cpu --impl blas" "${phases[@]}"
# the GPU's runs: skipped only where there is no GPU; a GPU run that fails fails the test
check_run gpu-direct "--device gpu --impl blas --graph off" "${phases[@]}"
if [ $? -ne 77 ]; then
    # a run of steps replayed from a CUDA graph is one range; a fused pass is one range per epoch
    check_run gpu-graph "--device gpu --impl blas" run run/epoch run/epoch/steps run/epoch/steps/compute \
        "${after_pass[@]}"
    # the fused kernel, asked for at a batch where it is not the faster (it would train step by
    # step, with no fused pass to check)
    check_run gpu-fused "--device gpu --impl fused --fused-pass whole --batch 512" run run/epoch run/epoch/compute \
        "${after_pass[@]}"
    if grep -q "run/epoch/steps/h2d" "$work/gpu-graph.txt"; then
        fail "replayed steps cannot show their phases, but h2d was recorded"
    fi
else
    echo "nvtx_test: no GPU here: the GPU runs skipped"
fi
[ $failures -eq 0 ] || { echo "nvtx_test: $failures failures" >&2; exit 1; }
echo "nvtx_test: ranges and nesting as documented"
