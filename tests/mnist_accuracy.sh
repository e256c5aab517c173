#!/usr/bin/env bash
# Trains on the real MNIST files and checks the test accuracy reaches a floor.
# Usage: mnist_accuracy.sh MLP_TRAIN DATA_DIR DEVICE IMPL EPOCHS MIN_ACCURACY [MORE OPTIONS...]
# For IMPL fused, the fused kernel must have run (not its fallback). Exits 77 (skipped) for
# DEVICE gpu where no GPU is present.
set -u
mlp_train=$1 data=$2 device=$3 impl=$4 epochs=$5 floor=$6
shift 6
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$mlp_train" --device "$device" --impl "$impl" --data "$data" --epochs "$epochs" --json --quiet "$@" >"$out" 2>"$out.err"
status=$?
if [ $status -ne 0 ]; then
    if [ "$device" = gpu ] && grep -q 'no GPU here' "$out.err"; then
        echo "skipped: $(cat "$out.err")"; rm -f "$out.err"; exit 77
    fi
    echo "FAIL: mlp_train exited $status: $(tail -3 "$out.err")" >&2; rm -f "$out.err"; exit 1
fi
rm -f "$out.err"
if [ "$impl" = fused ] && ! grep -q '"execution": "whole"' "$out"; then
    echo "FAIL: the fused kernel did not run (it fell back to the tiled step)" >&2; exit 1
fi
accuracy=$(grep -o '"test_accuracy": [0-9.e+-]*' "$out" | tail -n 1 | cut -d' ' -f2)
echo "$device $impl, $epochs epochs $*: test accuracy $accuracy (floor $floor)"
awk -v a="$accuracy" -v f="$floor" 'BEGIN { exit !(a + 0 >= f + 0) }' || {
    echo "FAIL: accuracy $accuracy is below $floor" >&2; exit 1; }
