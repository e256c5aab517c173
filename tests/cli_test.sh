#!/usr/bin/env bash
# The command line as users meet it: --help, usage errors (exit 2), runtime errors (exit 1) with
# messages that name the problem, save → load → eval, a corrupt checkpoint, divergence, --log,
# --profile's split on the CPU.
# Usage: cli_test.sh MLP_TRAIN DATA_DIR   (DATA_DIR holds the real MNIST files)
set -u
mlp_train=$1
data=$2
source "$(dirname "$0")/script_checks.sh" # $work, fail, $failures
checks=0

# expect STATUS PATTERN -- COMMAND...: the command exits with STATUS and its stdout+stderr
# match the extended regular expression PATTERN.
expect() {
    local status=$1 pattern=$2
    shift 3
    checks=$((checks + 1))
    "$@" >"$work/out" 2>&1
    local got=$?
    if [ "$got" -ne "$status" ]; then
        fail "exit $got (wanted $status): $*"; sed 's/^/    /' "$work/out" | tail -5 >&2
    elif ! grep -Eq -- "$pattern" "$work/out"; then
        fail "output lacks /$pattern/: $*"; sed 's/^/    /' "$work/out" | tail -5 >&2
    fi
}

json_accuracy() { grep -o '"test_accuracy": [0-9.e+-]*' "$1" | tail -n 1 | cut -d' ' -f2; }

quick=(--device cpu --impl blas --data "$data" --epochs 1 --batch 512 --quiet)

# --help, --version
expect 0 'Usage: mlp_train' -- "$mlp_train" --help
expect 0 '--precision fp32\|tf32\|bf16' -- "$mlp_train" --help
expect 0 '^mlp_train [0-9]+\.[0-9]+\.[0-9]+' -- "$mlp_train" --version

# usage errors: exit 2 and a message naming the option
expect 2 '--batch wants an integer' -- "$mlp_train" --batch 0
expect 2 '--batch wants an integer' -- "$mlp_train" --batch 12x
expect 2 "--impl: unknown value 'fast'" -- "$mlp_train" --impl fast
expect 2 "--device: unknown value 'tpu'" -- "$mlp_train" --device tpu
expect 2 "unknown option '--bogus'" -- "$mlp_train" --bogus
expect 2 "needs a value" -- "$mlp_train" --epochs
expect 2 "unexpected argument 'extra'" -- "$mlp_train" extra
expect 2 '--hidden wants widths' -- "$mlp_train" --hidden 256,,10
expect 2 '--lr wants a number' -- "$mlp_train" --lr -1
expect 2 '--overlap only applies with --data host' -- "$mlp_train" --overlap
expect 2 '--eval needs --load' -- "$mlp_train" --eval
expect 2 'the CPU always reads host memory' -- "$mlp_train" --device cpu --data host
expect 2 "--graph: unknown value 'maybe'" -- "$mlp_train" --graph maybe
expect 2 '--graph on records CUDA graphs: it needs --device gpu' -- "$mlp_train" --device cpu --graph on
expect 2 '--graph on cannot replay steps that copy each batch' -- "$mlp_train" --device gpu --data host --graph on
expect 2 '--impl fused runs on the GPU' -- "$mlp_train" --device cpu --impl fused
expect 2 "--fused-pass: unknown value 'always'" -- "$mlp_train" --impl fused --fused-pass always
expect 2 '--fused-pass chooses how --impl fused trains; give --impl fused' -- \
    "$mlp_train" --impl tiled --fused-pass whole
expect 2 "--precision: unknown value 'fp16'" -- "$mlp_train" --precision fp16
expect 2 "needs a value" -- "$mlp_train" --precision
expect 2 '--precision bf16 needs the GPU.*CPU implementations multiply in FP32 only' -- \
    "$mlp_train" --device cpu --precision bf16
expect 2 '--precision tf32 needs the GPU.*CPU implementations multiply in FP32 only' -- \
    "$mlp_train" --precision tf32 --device cpu --impl tiled
expect 2 '--precision tf32 applies to --impl tiled, blas and fused' -- \
    "$mlp_train" --device gpu --impl naive --precision tf32
expect 2 '--allreduce chooses how GPU ranks sum.*MPI_Allreduce' -- \
    "$mlp_train" --device cpu --allreduce p2p
expect 2 "--allreduce: unknown value 'ring'" -- "$mlp_train" --allreduce ring
expect 2 '--allreduce-overlap chooses how GPU ranks sum.*MPI_Allreduce' -- \
    "$mlp_train" --device cpu --allreduce-overlap off
expect 2 "--allreduce-overlap: unknown value 'maybe'" -- "$mlp_train" --allreduce-overlap maybe
expect 2 "--sharded-update: unknown value 'yes'" -- "$mlp_train" --sharded-update yes
expect 2 '--sharded-update on sums each rank.s shard after the backward pass' -- \
    "$mlp_train" --device gpu --sharded-update on --allreduce-overlap on
# time to accuracy: schedules, validation, target
expect 2 "--schedule: unknown value 'linear'" -- "$mlp_train" --schedule linear
expect 2 '--warmup wants an integer' -- "$mlp_train" --warmup -5
expect 2 '--warmup 118 is as long as the schedule or longer: it spans 118 updates \(1 epochs of 118\)' -- \
    "$mlp_train" "${quick[@]}" --schedule cosine --warmup 118
expect 2 '--validation 60000 leaves no training images' -- "$mlp_train" "${quick[@]}" --validation 60000
expect 2 '--validation wants an integer' -- "$mlp_train" --validation 0
expect 2 "--test-each-epoch goes with --validation" -- "$mlp_train" --test-each-epoch
expect 2 "--weight-decay wants a number from 0 to 1e6" -- "$mlp_train" --weight-decay -0.1
expect 2 "--weight-decay wants a number from 0 to 1e6" -- "$mlp_train" --weight-decay abc
expect 2 "--weight-decay and --label-smoothing apply to training" -- "$mlp_train" --load x --eval --weight-decay 1e-4
expect 2 "lr times the decay must stay below 1" -- "$mlp_train" --lr 0.5 --weight-decay 2
expect 2 "--label-smoothing wants a number in \[0, 1\)" -- "$mlp_train" --label-smoothing 1
expect 2 "--label-smoothing wants a number in \[0, 1\)" -- "$mlp_train" --label-smoothing 0.99999999
expect 2 "--label-smoothing wants a number in \[0, 1\)" -- "$mlp_train" --label-smoothing -0.1
expect 2 "--target-accuracy wants an accuracy in \(0, 1\]" -- "$mlp_train" --target-accuracy 0
expect 2 "--target-accuracy wants an accuracy in \(0, 1\]" -- "$mlp_train" --target-accuracy 1.5
expect 2 '--validation and --target-accuracy apply to training' -- "$mlp_train" --load x --eval --validation 10

# needs_gpu PATTERN -- COMMAND...: without a GPU, a runtime error (exit 1) whose message matches
# PATTERN; where a GPU is present the run simply works (exit 0)
needs_gpu() {
    local pattern=$1
    shift 2
    checks=$((checks + 1))
    "$@" >"$work/out" 2>&1
    local status=$?
    if [ $status -eq 1 ]; then
        grep -Eq -- "$pattern" "$work/out" || fail "$*: no /$pattern/ in: $(cat "$work/out")"
    elif [ $status -ne 0 ]; then
        fail "$*: exit $status: $(tail -3 "$work/out")"
    fi
}

needs_gpu '--device gpu: no GPU here' -- \
    "$mlp_train" --device gpu --impl naive --data "$data" --epochs 1 --batch 2048 --quiet
# --precision without --device: the GPU is implied, and its absence named
needs_gpu 'no GPU here .*--precision bf16 needs the GPU' -- \
    "$mlp_train" --precision bf16 --impl tiled --data "$data" --epochs 1 --batch 2048 --quiet

# --precision fp32 on the CPU: the default, named in the header and in the JSON config
expect 0 '^precision: fp32$' -- "$mlp_train" "${quick[@]}" --precision fp32
expect 0 '"config": \{.*"precision": "fp32"' -- "$mlp_train" "${quick[@]}" --json

# weight decay and label smoothing: named in the header and in the JSON config
expect 0 '^training: .*weight decay 0.0005 \(weights\), label smoothing 0.1 \(train_loss is the smoothed loss\)' -- \
    "$mlp_train" "${quick[@]}" --weight-decay 5e-4 --label-smoothing 0.1
expect 0 '"weight_decay": 0.000500000024, "label_smoothing": 0.100000001' -- \
    "$mlp_train" "${quick[@]}" --weight-decay 5e-4 --label-smoothing 0.1 --json

# no --impl: the fastest for the device (on the CPU, tiled); the header and the JSON name the
# thread count asked for (the backend is made on another thread, which once reported its own)
expect 0 'on cpu \(CPU, 1 thread, cache-tiled GEMM\)' -- \
    "$mlp_train" --device cpu --data "$data" --epochs 1 --batch 2048 --threads 1
expect 0 '"device_description": "CPU, 3 threads, naive loops"' -- \
    "$mlp_train" "${quick[@]}" --impl naive --batch 4096 --threads 3 --json

# bad data: missing directory, a truncated file, a label out of range
expect 1 "$work/nowhere: .*(No such file|neither)" -- "$mlp_train" --data "$work/nowhere" --device cpu
mkdir -p "$work/cut" "$work/badlabel"
cp "$data"/*.gz "$work/cut/" && cp "$data"/*.gz "$work/badlabel/" # .gz only: a raw copy would be read instead
gzip -dc "$data/train-labels-idx1-ubyte.gz" | head -c 30000 | gzip >"$work/cut/train-labels-idx1-ubyte.gz"
expect 1 "train-labels-idx1-ubyte.gz: .*truncated" -- "$mlp_train" "${quick[@]}" --data "$work/cut"
gzip -dc "$data/t10k-labels-idx1-ubyte.gz" >"$work/labels"
printf '\x0a' | dd of="$work/labels" bs=1 seek=100 conv=notrunc status=none
gzip <"$work/labels" >"$work/badlabel/t10k-labels-idx1-ubyte.gz"
expect 1 "t10k-labels-idx1-ubyte.gz: .*label 10" -- "$mlp_train" "${quick[@]}" --data "$work/badlabel"

# idx_images FILE COUNT ROWS COLS / idx_labels FILE COUNT: small IDX files (zero pixels, label 0)
idx_images() {
    { printf '\x00\x00\x08\x03'; be32 "$2"; be32 "$3"; be32 "$4"; head -c $(($2 * $3 * $4)) /dev/zero; } |
        gzip >"$1"
}
idx_labels() { { printf '\x00\x00\x08\x01'; be32 "$2"; head -c "$2" /dev/zero; } | gzip >"$1"; }
be32() { printf "$(printf '\\%03o' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)))"; }

# training and test images of different sizes: refused, naming both sizes (a smaller training
# image once read past its buffer; a larger one trained on misaligned rows)
for size in 20 32; do
    mkdir -p "$work/mixed$size"
    cp "$data"/t10k-*.gz "$work/mixed$size/"
    idx_images "$work/mixed$size/train-images-idx3-ubyte.gz" 100 $size $size
    idx_labels "$work/mixed$size/train-labels-idx1-ubyte.gz" 100
    expect 1 "training images are ${size}x${size} pixels but the test images are 28x28" -- \
        "$mlp_train" "${quick[@]}" --data "$work/mixed$size"
done

# train, save, load, evaluate: the same accuracy; --log and --json written
# (stdout alone: with --json it holds the JSON object and nothing else)
checks=$((checks + 1))
"$mlp_train" "${quick[@]}" --json --save "$work/model.ckpt" --log "$work/log.csv" >"$work/train.json" 2>"$work/train.err" ||
    fail "training with --json --save --log: $(tail -3 "$work/train.err")"
trained=$(json_accuracy "$work/train.json")
checks=$((checks + 1))
"$mlp_train" --device cpu --impl blas --data "$data" --load "$work/model.ckpt" --eval --json >"$work/eval.json" 2>"$work/eval.err" ||
    fail "--load --eval --json: $(tail -3 "$work/eval.err")"
grep -q '"confusion": \[\[' "$work/eval.json" || fail "--eval --json has no confusion matrix"
evaluated=$(json_accuracy "$work/eval.json")
checks=$((checks + 1))
[ -n "$trained" ] && [ "$trained" = "$evaluated" ] || fail "accuracy after training $trained, after loading $evaluated"
checks=$((checks + 1))
[ "$(head -n 1 "$work/log.csv")" = "epoch,train_loss,train_accuracy,test_loss,test_accuracy,time_s,images_per_s" ] &&
    [ "$(wc -l <"$work/log.csv")" -eq 2 ] || fail "log.csv: $(cat "$work/log.csv")"
checks=$((checks + 1))
ls "$work" | grep -q '\.tmp\.' && fail "a temporary file was left behind: $(ls "$work")"
if command -v python3 >/dev/null; then
    checks=$((checks + 1))
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["epochs"][0]["epoch"] == 1 and 0 < d["test_accuracy"] <= 1' \
        "$work/train.json" || fail "--json output is not the documented JSON"
    checks=$((checks + 1))
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["confusion"]) == 10' \
        "$work/eval.json" || fail "--eval --json output is not JSON with a confusion matrix"
fi
expect 0 'confusion matrix' -- "$mlp_train" --device cpu --data "$data" --load "$work/model.ckpt" --eval

# resume: the epochs continue from the checkpoint's count
expect 0 '^ +2 ' -- "$mlp_train" "${quick[@]}" --load "$work/model.ckpt"

# a checkpoint refused: a flipped byte, a shape mismatch, the wrong optimizer
cp "$work/model.ckpt" "$work/flipped.ckpt"
printf '\x55' | dd of="$work/flipped.ckpt" bs=1 seek=5000 conv=notrunc status=none
expect 1 'checksum mismatch' -- "$mlp_train" --device cpu --data "$data" --load "$work/flipped.ckpt" --eval
expect 1 "model is 784-256-10, not 784-128-10" -- "$mlp_train" "${quick[@]}" --load "$work/model.ckpt" --hidden 128
expect 1 'trained with sgd; resume it with --optimizer sgd' -- "$mlp_train" "${quick[@]}" --load "$work/model.ckpt" --optimizer adam

# a checkpoint of 784 inputs resumed on images of another size: refused, naming both
mkdir -p "$work/small"
for split in train:100 t10k:50; do
    idx_images "$work/small/${split%%:*}-images-idx3-ubyte.gz" "${split#*:}" 20 20
    idx_labels "$work/small/${split%%:*}-labels-idx1-ubyte.gz" "${split#*:}"
done
expect 1 "model.ckpt: the checkpoint's model takes 784 inputs.*are 20x20 \(400 pixels\)" -- \
    "$mlp_train" "${quick[@]}" --data "$work/small" --load "$work/model.ckpt"

# output paths refused before the first epoch, naming the path: a missing folder for --log or
# --save (the run would have trained, then lost its results), a FIFO or a link to nothing
mkfifo "$work/fifo"
ln -s "$work/nothing-here" "$work/dangling.ckpt"
for bad in "--log $work/nowhere/log.csv --save $work/kept.ckpt" "--save $work/nowhere/model.ckpt" \
    "--save $work/fifo" "--save $work/dangling.ckpt"; do
    path=${bad#* }
    expect 1 "${path%% *}: (cannot write there|exists and is not a regular file|a symbolic link to nothing)" -- \
        "$mlp_train" "${quick[@]}" $bad
    checks=$((checks + 1))
    grep -q '^ *1 ' "$work/out" && fail "$bad: refused only after training"
done
checks=$((checks + 1))
[ -p "$work/fifo" ] && [ ! -e "$work/kept.ckpt" ] || fail "a refused run wrote or replaced a file"
expect 2 "--save and --log both name" -- "$mlp_train" "${quick[@]}" --save "$work/x" --log "$work/x"

# out of host memory: a model of 14.6 GB of parameters, under a 4 GB address-space limit (so
# it fails at once, whatever the machine has): exit 1 and a message naming host memory, no
# crash. Skipped under AddressSanitizer, which needs terabytes of address space to start.
if ldd "$mlp_train" 2>/dev/null | grep -q libasan; then
    echo "cli_test: the host-memory check is skipped under AddressSanitizer"
else
    expect 1 'host memory' -- bash -c 'ulimit -v 4000000 && exec "$@"' limited \
        "$mlp_train" "${quick[@]}" --threads 2 --hidden 60000,60000 --save "$work/huge.ckpt"
    checks=$((checks + 1))
    [ ! -e "$work/huge.ckpt" ] || fail "a run out of host memory saved a checkpoint"
fi

# --profile on the CPU: each phase split into GEMM and the other operations, in the table and
# in the JSON
expect 0 'training pass [0-9.]+ ms: gemm [0-9.]+ ms \([0-9.]+%\), other operations [0-9.]+ ms' -- \
    "$mlp_train" "${quick[@]}" --impl tiled --profile
expect 0 '"forward": \{"ms": [0-9.]+, "count": [0-9]+, "gemm_ms": [0-9.]+, "other_operations_ms"' -- \
    "$mlp_train" "${quick[@]}" --profile --json

# divergence is reported, not printed as garbage, and nothing is saved
expect 1 'training diverged in epoch 1' -- "$mlp_train" "${quick[@]}" --lr 100000 --save "$work/nan.ckpt"
checks=$((checks + 1))
[ ! -e "$work/nan.ckpt" ] || fail "a diverged run saved a checkpoint"

expect 2 '--eval only evaluates; --no-train-metrics applies to training' -- \
    "$mlp_train" --eval --load "$work/model.ckpt" --no-train-metrics
expect 1 "training diverged in epoch 1: the evaluation's loss is" -- \
    "$mlp_train" "${quick[@]}" --lr 100000 --no-train-metrics

# --no-train-metrics: the same training, its metrics marked as not measured in every output
expect 0 '^ +1 +- +- +0\.[0-9]{4} ' -- "$mlp_train" "${quick[@]}" --no-train-metrics --log "$work/untracked.csv"
checks=$((checks + 1))
[ "$(sed -n 2p "$work/untracked.csv" | cut -d, -f1-3)" = "1,," ] &&
    [ "$(sed -n 2p "$work/untracked.csv" | cut -d, -f4)" = "$(sed -n 2p "$work/log.csv" | cut -d, -f4)" ] ||
    fail "--no-train-metrics --log: $(cat "$work/untracked.csv") against $(cat "$work/log.csv")"
if command -v python3 >/dev/null; then
    checks=$((checks + 1))
    "$mlp_train" "${quick[@]}" --no-train-metrics --json >"$work/untracked.json" 2>/dev/null &&
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); e=d["epochs"][0]
assert e["train_loss"] is None and e["train_accuracy"] is None and d["config"]["train_metrics"] is False' \
            "$work/untracked.json" || fail "--no-train-metrics --json: $(head -c 300 "$work/untracked.json")"
fi

if [ $failures -ne 0 ]; then
    echo "cli_test: $failures of $checks checks failed" >&2
    exit 1
fi
echo "cli_test: all $checks checks passed"
