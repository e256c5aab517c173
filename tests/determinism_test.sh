#!/usr/bin/env bash
# Determinism: for each implementation named, trains twice with the same seed and requires
# the two checkpoints (parameters and optimizer state, every bit) to be byte-identical, and
# once with another seed, whose checkpoint must differ (so the comparison can fail). Runs on a
# fixed subset of the data (the first TRAIN_IMAGES training and TEST_IMAGES test images), one
# epoch at batch 512, so even the naive kernels take seconds.
# Usage: determinism_test.sh MLP_TRAIN DATA_DIR DEVICE IMPL... [MLP_TRAIN OPTIONS...]
#   e.g. determinism_test.sh build/mlp_train data/mnist cpu naive tiled blas --threads 2
# Options (everything from the first argument starting with '-') go to every run, except
# "--threads A,B": then the first run uses A threads and the second B (and the other seed's
# run A), which asks for the same bits whatever the thread count; and "--second-with OPTION" (one
# word, once): the second run alone adds OPTION, which asks for the same bits with it as without.
# --impl fused must run its whole-epoch kernel (the header says so), not fall back to tiled.
# Exits 77 (skipped) for DEVICE gpu where no GPU is present.
set -u
TRAIN_IMAGES=4000 # 7 batches of 512 and a last one of 416
TEST_IMAGES=1000
mlp_train=$1 data=$2 device=$3
shift 3
impls=()
while [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; do impls+=("$1"); shift; done
options=()
threads=("" "")
second_only=()
while [ $# -gt 0 ]; do
    if [ "$1" = --threads ] && [ $# -gt 1 ]; then
        threads=("${2%%,*}" "${2#*,}")
        shift 2
    elif [ "$1" = --second-with ] && [ $# -gt 1 ]; then
        second_only=("$2")
        shift 2
    else
        options+=("$1")
        shift
    fi
done
source "$(dirname "$0")/script_checks.sh" # $work, fail, $failures

# idx_head SRC DST N: the first N items of the IDX file SRC (raw or gzip), as a gzip file DST.
idx_head() {
    local src=$1 dst=$2 n=$3
    gzip -dcf "$src" >"$work/raw"
    local dims item=1 d
    dims=$(od -An -tu1 -j3 -N1 "$work/raw" | tr -d ' ')
    for ((d = 1; d < dims; d++)); do
        item=$((item * $(od -An -tu4 --endian=big -j$((4 + 4 * d)) -N4 "$work/raw" | tr -d ' ')))
    done
    {
        head -c 4 "$work/raw"
        printf "$(printf '\\%03o' $((n >> 24 & 255)) $((n >> 16 & 255)) $((n >> 8 & 255)) $((n & 255)))"
        tail -c +9 "$work/raw" | head -c $((4 * (dims - 1) + n * item))
    } | gzip -1 >"$dst"
}

mkdir "$work/data"
for split in train:$TRAIN_IMAGES t10k:$TEST_IMAGES; do
    for kind in images-idx3 labels-idx1; do
        name=${split%%:*}-$kind-ubyte
        src=$data/$name.gz
        [ -f "$src" ] || src=$data/$name
        idx_head "$src" "$work/data/$name.gz" "${split#*:}"
    done
done

# train NAME IMPL SEED THREADS [OPTION...]: one epoch, saved to $work/NAME.ckpt; exit status of
# mlp_train. fused runs its kernel (--fused-pass whole): at batch 512 it would take the tiled step.
train() {
    local kernel=()
    [ "$2" = fused ] && kernel=(--fused-pass whole)
    "$mlp_train" --device "$device" --impl "$2" "${kernel[@]}" --data "$work/data" --epochs 1 --batch 512 \
        --seed "$3" ${4:+--threads "$4"} --quiet "${options[@]}" "${@:5}" --save "$work/$1.ckpt" \
        >"$work/$1.out" 2>&1
}

for impl in "${impls[@]}"; do
    what="$device $impl${options[*]:+ ${options[*]}}"
    [ -z "${threads[0]}" ] || what="$what --threads ${threads[0]}"
    [ "${threads[1]}" = "${threads[0]}" ] || what="$what,${threads[1]}"
    [ ${#second_only[@]} -eq 0 ] || what="$what, the second run with ${second_only[*]}"
    if ! train first "$impl" 42 "${threads[0]}"; then
        if [ "$device" = gpu ] && grep -q 'no GPU here' "$work/first.out"; then
            echo "skipped: $(cat "$work/first.out")"
            exit 77
        fi
        fail "$what: mlp_train failed: $(tail -3 "$work/first.out")"
        continue
    fi
    train second "$impl" 42 "${threads[1]}" "${second_only[@]}" && train other_seed "$impl" 43 "${threads[0]}" || {
        fail "$what: mlp_train failed: $(tail -3 "$work/second.out" "$work/other_seed.out")"
        continue
    }
    # both runs must have run the kernel: grep -L names a run that did not
    fell_back=$([ "$impl" = fused ] && grep -L '^execution: each epoch in one persistent kernel' "$work/first.out" "$work/second.out" | head -n 1)
    if [ -n "$fell_back" ]; then
        fail "$what: the fused kernel did not run (it fell back) in $(basename "$fell_back" .out): $(grep -m1 '^execution' "$fell_back")"
        continue
    fi
    digest=$(sha256sum <"$work/first.ckpt" | cut -c1-16)
    if ! cmp -s "$work/first.ckpt" "$work/second.ckpt"; then
        fail "$what: the same seed gave different checkpoints" \
             "($(cmp -l "$work/first.ckpt" "$work/second.ckpt" | wc -l) bytes differ)"
    elif cmp -s "$work/first.ckpt" "$work/other_seed.ckpt"; then
        fail "$what: seeds 42 and 43 gave the same checkpoint: nothing was compared"
    else
        echo "$what: bit-identical (sha256 $digest...)"
    fi
done
[ $failures -eq 0 ] || exit 1
