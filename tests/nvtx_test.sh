#!/usr/bin/env bash
# Proves mlp_train emits its NVTX ranges with the documented nesting, by running it with a
# recording injection library in place of a profiler (NVTX's own loading mechanism:
# NVTX_INJECTION64_PATH). On a machine with a GPU the GPU run is checked too.
# Usage: nvtx_test.sh MLP_TRAIN RECORDER_LIBRARY DATA_DIR
set -u
mlp_train=$1 recorder=$2 data=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

check_run() {
    local device=$1
    local record="$work/$device.txt"
    NVTX_INJECTION64_PATH=$recorder NVTX_RECORD_FILE=$record \
        "$mlp_train" --device "$device" --impl blas --data "$data" --epochs 1 --batch 4096 --quiet \
        >"$work/$device.out" 2>&1 || { echo "FAIL: $device run: $(tail -3 "$work/$device.out")" >&2; failures=$((failures + 1)); return; }
    for path in run run/epoch run/epoch/step run/epoch/step/h2d run/epoch/step/forward \
        run/epoch/step/backward run/epoch/step/update run/epoch/d2h run/epoch/eval; do
        grep -qx "mlp_train:$path" "$record" || { echo "FAIL: $device: no range mlp_train:$path" >&2; failures=$((failures + 1)); }
    done
    if grep -q UNBALANCED "$record"; then
        echo "FAIL: $device: $(grep UNBALANCED "$record")" >&2
        failures=$((failures + 1))
    fi
    echo "$device ranges:"; sed 's/^/  /' "$record"
}

check_run cpu
if "$mlp_train" --device gpu --epochs 1 --batch 60000 --data "$data" --quiet >/dev/null 2>&1; then
    check_run gpu
fi
[ $failures -eq 0 ] || { echo "nvtx_test: $failures failures" >&2; exit 1; }
echo "nvtx_test: ranges and nesting as documented"
