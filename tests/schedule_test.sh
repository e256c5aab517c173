#!/usr/bin/env bash
# Time to accuracy: --schedule, --weight-decay, --label-smoothing, --validation,
# --test-each-epoch and --target-accuracy on real MNIST.
#   - every implementation on DEVICE, one epoch at batch 512 on a onecycle schedule with
#     warm-up, weight decay and label smoothing: test accuracies within 0.3 points of each other;
#   - resume in the middle of a cosine schedule (--schedule-epochs): the bits of a run that was
#     not interrupted; a resumed run continues its checkpoint's schedule without being told;
#   - --validation: the same held-out images for a seed (the same results twice), the JSON and
#     the CSV say which set each figure is from, and the test set is evaluated once, or after
#     each epoch with --test-each-epoch (its own columns);
#   - --target-accuracy: stops at the first epoch that reaches it, or says it did not, exit 0.
# Usage: schedule_test.sh MLP_TRAIN DATA_DIR DEVICE IMPL...   (gpu: exits 77 without a GPU)
set -u
mlp_train=$1 data=$2 device=$3
shift 3
source "$(dirname "$0")/script_checks.sh" # $work, fail, $failures
if [ "$device" = gpu ] && ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    echo "skipped: no GPU"; exit 77
fi
run=(--device "$device" --data "$data" --batch 512 --quiet)
[ "$device" = cpu ] && run+=(--threads 2)
field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# every implementation, the same schedule and regularization
accuracies=()
for impl in "$@"; do
    kernel=() # fused runs its kernel: at batch 512 it would take the tiled step
    [ "$impl" = fused ] && kernel=(--fused-pass whole)
    "$mlp_train" "${run[@]}" --impl "$impl" "${kernel[@]}" --epochs 1 --schedule onecycle --warmup 30 \
        --weight-decay 5e-4 --label-smoothing 0.1 --json \
        >"$work/$impl.json" 2>"$work/err" || { fail "$impl: $(tail -2 "$work/err")"; continue; }
    accuracies+=("$(field "$work/$impl.json" 'd["test_accuracy"]')")
    echo "$device $impl, onecycle, weight decay, label smoothing, 1 epoch: test accuracy ${accuracies[-1]}"
done
[ ${#accuracies[@]} -gt 0 ] && python3 -c "import sys; a = [float(x) for x in sys.argv[1:]]; sys.exit(max(a) - min(a) > 0.003)" "${accuracies[@]}" ||
    fail "$device: the implementations' test accuracies differ by more than 0.3 points: ${accuracies[*]}"

# resume in the middle of a schedule
impl=$1
cosine=(--impl "$impl" --schedule cosine --warmup 40)
"$mlp_train" "${run[@]}" "${cosine[@]}" --epochs 2 --save "$work/whole.ckpt" >/dev/null 2>&1 || fail "the whole run failed"
"$mlp_train" "${run[@]}" "${cosine[@]}" --epochs 1 --schedule-epochs 2 --save "$work/half.ckpt" >/dev/null 2>&1 || fail "the first half failed"
"$mlp_train" "${run[@]}" --impl "$impl" --load "$work/half.ckpt" --epochs 1 --save "$work/resumed.ckpt" \
    >"$work/resumed.out" 2>&1 || fail "the resumed half failed"
grep -q 'cosine schedule over 236 updates (warm-up 40)' "$work/resumed.out" ||
    fail "the resumed run does not continue the checkpoint's schedule: $(grep training: "$work/resumed.out")"
cmp -s "$work/whole.ckpt" "$work/resumed.ckpt" && echo "$device $impl: resumed mid-schedule, the bits of the whole run" ||
    fail "$device $impl: resumed mid-schedule, other bits than the whole run"

# a validation split
for i in 1 2; do
    "$mlp_train" "${run[@]}" --impl "$impl" --epochs 1 --validation 5000 --json >"$work/val$i.json" 2>/dev/null ||
        fail "--validation run $i failed"
done
cmp -s <(field "$work/val1.json" '[(e["train_loss"], e["validation_loss"]) for e in d["epochs"]]') <(field "$work/val2.json" '[(e["train_loss"], e["validation_loss"]) for e in d["epochs"]]') ||
    fail "--validation: two runs of one seed differ"
[ "$(field "$work/val1.json" '(d["config"]["validation_images"], d["config"]["train_images"], "validation_accuracy" in d["epochs"][0], "test_accuracy" in d["epochs"][0])')" = "(5000, 55000, True, False)" ] ||
    fail "--validation: the JSON does not say 5000 validation images of 60000, per epoch: $(head -c 300 "$work/val1.json")"

"$mlp_train" "${run[@]}" --impl "$impl" --epochs 1 --validation 1000 --log "$work/val.csv" >/dev/null 2>&1 ||
    fail "--validation --log failed"
head -1 "$work/val.csv" | grep -q ',validation_loss,validation_accuracy,' ||
    fail "--validation: the CSV's columns are not named validation: $(head -1 "$work/val.csv")"

# the test set after each epoch too: the same training and validation figures as without it,
# and its last epoch's test figures those that the run without it measures once, at the end
"$mlp_train" "${run[@]}" --impl "$impl" --epochs 2 --validation 1000 --test-each-epoch --json \
    --log "$work/each.csv" >"$work/each.json" 2>/dev/null || fail "--test-each-epoch failed"
"$mlp_train" "${run[@]}" --impl "$impl" --epochs 2 --validation 1000 --json >"$work/once.json" 2>/dev/null ||
    fail "--validation run without --test-each-epoch failed"
[ "$(field "$work/each.json" '["test_accuracy" in e for e in d["epochs"]]')" = "[True, True]" ] ||
    fail "--test-each-epoch: the JSON lacks each epoch's test figures: $(head -c 400 "$work/each.json")"
seen='[(e["train_loss"], e["validation_loss"]) for e in d["epochs"]] + [d["test_accuracy"], d["test_loss"]]'
[ "$(field "$work/each.json" "$seen")" = "$(field "$work/once.json" "$seen")" ] ||
    fail "--test-each-epoch changed the training, the validation or the final test figures"
[ "$(field "$work/each.json" '(d["epochs"][-1]["test_accuracy"], d["epochs"][-1]["test_loss"])')" = "$(field "$work/once.json" '(d["test_accuracy"], d["test_loss"])')" ] ||
    fail "--test-each-epoch: the last epoch's test figures are not those measured at the end"
head -1 "$work/each.csv" | grep -q ',validation_accuracy,time_s,images_per_s,test_loss,test_accuracy$' ||
    fail "--test-each-epoch: the CSV lacks the test columns: $(head -1 "$work/each.csv")"

# a target
"$mlp_train" "${run[@]}" --impl "$impl" --epochs 5 --target-accuracy 0.5 --json >"$work/t.json" 2>/dev/null || fail "--target-accuracy 0.5 failed"
[ "$(field "$work/t.json" '(len(d["epochs"]), d["target"]["reached"], d["target"]["epoch"])')" = "(1, True, 1)" ] ||
    fail "--target-accuracy 0.5: did not stop after epoch 1: $(field "$work/t.json" 'd.get("target")')"
"$mlp_train" "${run[@]}" --impl "$impl" --epochs 1 --target-accuracy 0.9999 >"$work/t.out" 2>&1 ||
    fail "--target-accuracy 0.9999 not reached: exit $?, wanted 0"
grep -q 'target 99.99% (test) not reached in 1 epochs' "$work/t.out" || fail "--target-accuracy 0.9999: no 'not reached' line"
[ $failures -eq 0 ] || exit 1
echo "schedule_test $device: passed"
