#!/usr/bin/env bash
# Proves mlp_train emits its NVTX ranges with the documented nesting, by running it with a
# recording injection library in place of a profiler (NVTX's own loading mechanism:
# NVTX_INJECTION64_PATH). On a machine with a GPU the GPU run is checked too.
# Usage: nvtx_test.sh MLP_TRAIN RECORDER_LIBRARY DATA_DIR
set -u
mlp_train=$1 recorder=$2 data=$3
source "$(dirname "$0")/script_checks.sh" # $work, fail, $failures

# check_run NAME "ARGS" RANGE... : runs mlp_train with ARGS under the recorder and checks that
# each RANGE (a path of nested ranges) was seen and that every range was closed. Batches are
# 4096 rows unless ARGS set --batch (the later option counts).
check_run() {
    local name=$1 args=$2
    shift 2
    local record="$work/$name.txt"
    # shellcheck disable=SC2086 # ARGS is a list of words
    NVTX_INJECTION64_PATH=$recorder NVTX_RECORD_FILE=$record \
        "$mlp_train" --batch 4096 $args --data "$data" --epochs 1 --quiet \
        >"$work/$name.out" 2>&1 || { fail "$name run: $(tail -3 "$work/$name.out")"; return; }
    for path in "$@"; do
        grep -qx "mlp_train:$path" "$record" || fail "$name: no range mlp_train:$path"
    done
    if grep -q UNBALANCED "$record"; then
        fail "$name: $(grep UNBALANCED "$record")"
    fi
    echo "$name ranges:"; sed 's/^/  /' "$record"
}

phases=(run run/epoch run/epoch/step run/epoch/step/h2d run/epoch/step/forward
        run/epoch/step/backward run/epoch/step/update run/epoch/d2h run/epoch/eval)
check_run cpu "--device cpu --impl blas" "${phases[@]}"
if "$mlp_train" --device gpu --epochs 1 --batch 60000 --data "$data" --quiet >/dev/null 2>&1; then
    check_run gpu-direct "--device gpu --impl blas --graph off" "${phases[@]}"
    # a run of steps replayed from a CUDA graph is one range; a fused pass is one range per epoch
    check_run gpu-graph "--device gpu --impl blas" run run/epoch run/epoch/steps run/epoch/steps/compute \
        run/epoch/d2h run/epoch/eval
    # the fused kernel keeps each block's activations for the whole batch in shared memory: at
    # 4096 rows they do not fit, and it would train step by step (no fused pass to check)
    check_run gpu-fused "--device gpu --impl fused --batch 512" run run/epoch run/epoch/compute run/epoch/d2h \
        run/epoch/eval
    if grep -q "run/epoch/steps/h2d" "$work/gpu-graph.txt"; then
        fail "replayed steps cannot show their phases, but h2d was recorded"
    fi
fi
[ $failures -eq 0 ] || { echo "nvtx_test: $failures failures" >&2; exit 1; }
echo "nvtx_test: ranges and nesting as documented"
