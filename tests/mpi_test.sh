#!/usr/bin/env bash
# Data parallelism under mpirun (docs/distributed.md), on the CPU, oversubscribed so that 2 cores
# can hold 4 ranks. Skips (77) where Open MPI's mpirun is missing.
# Usage: mpi_test.sh parameters TEST_DISTRIBUTED
#          test_distributed on 1, 2 and 4 ranks: parameters after one step and after an epoch
#          equal one rank's; then a rank that exits mid-job must end the job, not hang it
#        mpi_test.sh parameters-gpu TEST_DISTRIBUTED
#          the same on the GPU, one rank per GPU: 1, 2, 4... ranks as the GPUs allow, with the
#          p2p all-reduce and NCCL's, compared with each other; on 2 GPUs or more, a rank that
#          stops calling the p2p all-reduce must end the job; skips (77) without a GPU
#        mpi_test.sh training-gpu MLP_TRAIN DATA_DIR
#          2 GPUs: mlp_train on MNIST, 2 epochs at batch 512, 2 ranks with --allreduce p2p and
#          nccl: the same bits (on 2 ranks both sum a + b), within 0.2 points of one GPU; with
#          --sharded-update on, each: the same bits again (checkpoints, optimizer state included),
#          and in BF16 (whose products read the parameters' BF16 copy);
#          784-1024-1024-10 with --allreduce-overlap on and off: the same bits; a rank killed
#          mid-run on the p2p path ends the job; skips (77) with fewer than 2 GPUs
#        mpi_test.sh training MLP_TRAIN DATA_DIR
#          mlp_train on MNIST, 2 epochs at batch 512: mpirun -np 1 gives the bits of a run
#          without mpirun, 2 and 4 ranks a test accuracy within 0.2 points of it; --save on 4
#          ranks writes one whole file; 2 ranks with --sharded-update on save the bits of 2
#          without (optimizer state included); a batch that does not split, a rank that fails
#          and a rank that is killed each end the job with a message
#        mpi_test.sh refusal MLP_TRAIN_WITHOUT_MPI DATA_DIR
#          a build without MPI started as one of two ranks refuses to run
set -u
mode=$1
shift
command -v mpirun >/dev/null || { echo "skipped: no mpirun (tools/setup.sh installs Open MPI)"; exit 77; }
mpirun --version 2>&1 | grep -q 'Open MPI' || { echo "skipped: mpirun is not Open MPI's"; exit 77; }
# Open MPI does not free what it allocates at start: LeakSanitizer (tools/test.sh's sanitized
# build) looks for leaks in the runs without mpirun only
launch=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" mpirun --oversubscribe)
[ "$(id -u)" -ne 0 ] || launch+=(--allow-run-as-root) # Open MPI refuses root without it
source "$(dirname "$0")/script_checks.sh" # $work, fail, $failures

# ends_with_message SECONDS PATTERN -- COMMAND...: the command must end within SECONDS (no hang),
# with a status other than 0, and print PATTERN (an extended regular expression)
ends_with_message() {
    local seconds=$1 pattern=$2
    shift 3
    timeout "$seconds" "$@" >"$work/out" 2>&1
    local status=$?
    if [ $status -eq 124 ]; then
        fail "still running after $seconds s (a hang): $*"
    elif [ $status -eq 0 ]; then
        fail "exit 0, wanted a failure: $*"
    elif ! grep -Eq -- "$pattern" "$work/out"; then
        fail "output lacks /$pattern/: $*"; tail -5 "$work/out" | sed 's/^/    /' >&2
    else
        echo "ends in $seconds s or less, exit $status, with /$pattern/: ${*: -4}"
    fi
}

# run_test_distributed TEST_DISTRIBUTED DEVICE RANKS...: test_distributed on each number of ranks
run_test_distributed() {
    local test_distributed=$1 device=$2 ranks
    shift 2
    for ranks in "$@"; do
        timeout 600 "${launch[@]}" -x NCCL_NVLS_ENABLE=0 -np "$ranks" "$test_distributed" "$device" \
            >"$work/out" 2>&1 || fail "$ranks ranks: test_distributed $device failed"
        cat "$work/out"
    done
}

parameters() {
    run_test_distributed "$1" cpu 1 2 4
    ends_with_message 60 'rank 1 exits with status 1' -- "${launch[@]}" -np 2 "$1" exit 1
}

parameters-gpu() {
    local gpus ranks=() n
    gpus=$(gpu_count)
    [ "$gpus" -gt 0 ] || { echo "skipped: no GPU"; exit 77; }
    for n in 1 2 4 8; do [ "$n" -le "$gpus" ] && ranks+=("$n"); done
    run_test_distributed "$1" gpu "${ranks[@]}"
    [ "$gpus" -ge 2 ] || return 0
    ends_with_message 60 'rank 0 of 2: the p2p all-reduce waited 2 s for rank 1' -- \
        "${launch[@]}" -np 2 "$1" stall 1
}

gpu_count() {
    local gpus
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    [ -z "${CUDA_VISIBLE_DEVICES:-}" ] || gpus=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
    echo "$gpus"
}

training-gpu() {
    local mlp_train=$1 data=$2 allreduce accuracy alone
    [ "$(gpu_count)" -ge 2 ] || { echo "skipped: fewer than 2 GPUs"; exit 77; }
    local run=(--device gpu --impl tiled --data "$data" --epochs 2 --batch 512 --quiet --json)
    "$mlp_train" "${run[@]}" >"$work/alone.json" 2>"$work/err" || { fail "alone: $(tail -3 "$work/err")"; return; }
    alone=$(grep -o '"test_accuracy": [0-9.e+-]*' "$work/alone.json" | tail -n 1 | cut -d' ' -f2)
    for allreduce in p2p nccl; do
        timeout 300 "${launch[@]}" -x NCCL_NVLS_ENABLE=0 -np 2 "$mlp_train" "${run[@]}" \
            --allreduce $allreduce --save "$work/$allreduce.ckpt" >"$work/$allreduce.json" 2>"$work/err" ||
            { fail "2 ranks, --allreduce $allreduce: $(tail -3 "$work/err")"; continue; }
        accuracy=$(grep -o '"test_accuracy": [0-9.e+-]*' "$work/$allreduce.json" | tail -n 1 | cut -d' ' -f2)
        echo "2 ranks, --allreduce $allreduce: test accuracy $accuracy (alone $alone), $(grep -o '"all_reduce": "[^"]*"' "$work/$allreduce.json")"
        awk -v a="$accuracy" -v b="$alone" 'BEGIN { d = a - b; exit !(d <= 0.002 && d >= -0.002) }' ||
            fail "2 ranks, --allreduce $allreduce: test accuracy $accuracy, alone $alone: more than 0.2 points apart"
    done
    cmp -s "$work/p2p.ckpt" "$work/nccl.ckpt" && echo "p2p and NCCL trained the same bits" ||
        fail "2 ranks: --allreduce p2p and nccl trained different bits"
    for allreduce in p2p nccl; do
        timeout 300 "${launch[@]}" -x NCCL_NVLS_ENABLE=0 -np 2 "$mlp_train" "${run[@]}" --allreduce $allreduce \
            --sharded-update on --save "$work/sharded_$allreduce.ckpt" >"$work/sharded.json" 2>"$work/err" ||
            { fail "2 ranks, --allreduce $allreduce --sharded-update on: $(tail -3 "$work/err")"; continue; }
        grep -q '"sharded_update": true' "$work/sharded.json" ||
            fail "2 ranks, --allreduce $allreduce --sharded-update on: the report says the update was not sharded"
        cmp -s "$work/p2p.ckpt" "$work/sharded_$allreduce.ckpt" &&
            echo "--allreduce $allreduce --sharded-update on: the bits of the whole update" ||
            fail "2 ranks: --allreduce $allreduce --sharded-update on trained other bits than the whole update"
    done
    # BF16: the products read a BF16 copy of the parameters, which the all-gather must renew;
    # TF32: an FP16 copy of each rank's batch, which the all-gather must leave alone
    local sharded precision
    for precision in bf16 tf32; do
        for sharded in off on; do
            timeout 300 "${launch[@]}" -x NCCL_NVLS_ENABLE=0 -np 2 "$mlp_train" "${run[@]}" --allreduce nccl \
                --precision $precision --sharded-update $sharded --save "$work/${precision}_$sharded.ckpt" \
                >/dev/null 2>"$work/err" || fail "2 ranks, $precision, --sharded-update $sharded: $(tail -3 "$work/err")"
        done
        cmp -s "$work/${precision}_off.ckpt" "$work/${precision}_on.ckpt" &&
            echo "$precision --sharded-update on: the bits of the whole update" ||
            fail "2 ranks, $precision: --sharded-update on trained other bits than the whole update"
    done
    # 784-1024-1024-10: its top layers' gradients (4.2 MB) are summed beside layer 1's backward
    local overlap
    for overlap in on off; do
        timeout 300 "${launch[@]}" -x NCCL_NVLS_ENABLE=0 -np 2 "$mlp_train" "${run[@]}" --allreduce p2p \
            --hidden 1024,1024 --epochs 1 --allreduce-overlap $overlap --save "$work/overlap_$overlap.ckpt" \
            >"$work/overlap_$overlap.json" 2>"$work/err" ||
            fail "2 ranks, --allreduce-overlap $overlap: $(tail -3 "$work/err")"
    done
    grep -q '"all_reduce_overlap": true' "$work/overlap_on.json" ||
        fail "2 ranks, --allreduce-overlap on, 784-1024-1024-10: the report says no all-reduce was overlapped"
    cmp -s "$work/overlap_on.ckpt" "$work/overlap_off.ckpt" &&
        echo "the top layers' all-reduce beside the backward pass and the whole gradient's after it: the same bits" ||
        fail "2 ranks: --allreduce-overlap on and off trained different bits"
    # rank 1 is killed mid-run, rank 0 waiting for it in the p2p all-reduce
    ends_with_message 120 'signal 9|killed|Killed' -- "${launch[@]}" -np 2 sh -c \
        '"$@" & if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then sleep 4; kill -9 $!; fi; wait $!' sh \
        "$mlp_train" "${run[@]}" --allreduce p2p --epochs 5000
}

training() {
    local mlp_train=$1 data=$2 ranks
    local run=(--device cpu --impl blas --data "$data" --epochs 2 --batch 512 --threads 1 --quiet)
    "$mlp_train" "${run[@]}" --json --save "$work/alone.ckpt" >"$work/alone.json" 2>"$work/err" ||
        { fail "mlp_train alone: $(tail -3 "$work/err")"; return; }
    local alone
    alone=$(grep -o '"test_accuracy": [0-9.e+-]*' "$work/alone.json" | tail -n 1 | cut -d' ' -f2)
    echo "alone: test accuracy $alone"
    for ranks in 1 2 4; do
        mkdir "$work/$ranks"
        timeout 300 "${launch[@]}" -np $ranks "$mlp_train" "${run[@]}" --json \
            --save "$work/$ranks/model.ckpt" >"$work/$ranks.json" 2>"$work/err" ||
            { fail "$ranks ranks: $(tail -3 "$work/err")"; continue; }
        local accuracy
        accuracy=$(grep -o '"test_accuracy": [0-9.e+-]*' "$work/$ranks.json" | tail -n 1 | cut -d' ' -f2)
        echo "$ranks ranks: test accuracy $accuracy, $(grep -o '"all_reduce": "[^"]*"' "$work/$ranks.json")"
        awk -v a="$accuracy" -v b="$alone" 'BEGIN { d = a - b; exit !(d <= 0.002 && d >= -0.002) }' ||
            fail "$ranks ranks: test accuracy $accuracy, alone $alone: more than 0.2 points apart"
        [ "$(grep -c '^mlp_train [0-9]' "$work/err")" -eq 1 ] ||
            fail "$ranks ranks: the report's header is not printed once (by rank 0): $(head -3 "$work/err")"
        [ "$(ls "$work/$ranks")" = model.ckpt ] ||
            fail "$ranks ranks: --save left $(ls "$work/$ranks" | tr '\n' ' ')(wanted model.ckpt alone)"
        "$mlp_train" --device cpu --data "$data" --load "$work/$ranks/model.ckpt" --eval --json \
            >"$work/eval.json" 2>"$work/err" || fail "$ranks ranks: the checkpoint does not load: $(cat "$work/err")"
    done
    cmp -s "$work/alone.ckpt" "$work/1/model.ckpt" ||
        fail "mpirun -np 1 trained other bits than a run without mpirun"
    # each rank sums and updates its shard: on 2 ranks the same sums (a + b), so the same bits
    if timeout 300 "${launch[@]}" -np 2 "$mlp_train" "${run[@]}" --json --sharded-update on \
        --save "$work/sharded.ckpt" >"$work/sharded.json" 2>"$work/err"; then
        grep -q '"sharded_update": true' "$work/sharded.json" ||
            fail "2 ranks, --sharded-update on: the report says the update was not sharded"
        cmp -s "$work/2/model.ckpt" "$work/sharded.ckpt" &&
            echo "2 ranks, --sharded-update on: the bits of the whole update" ||
            fail "2 ranks: --sharded-update on trained other bits than the whole update"
    else
        fail "2 ranks, --sharded-update on: $(tail -3 "$work/err")"
    fi

    # --eval on 3 ranks at the default batch (64, which 3 does not divide): the test pass shares
    # its rows unevenly, and gives the accuracy of one process
    "$mlp_train" --device cpu --data "$data" --load "$work/alone.ckpt" --eval --json \
        >"$work/eval_alone.json" 2>/dev/null || fail "--eval alone failed"
    if timeout 120 "${launch[@]}" -np 3 "$mlp_train" --device cpu --data "$data" \
        --load "$work/alone.ckpt" --eval --json >"$work/eval_3.json" 2>"$work/err"; then
        local one three
        one=$(grep -o '"test_accuracy": [0-9.e+-]*' "$work/eval_alone.json" | cut -d' ' -f2)
        three=$(grep -o '"test_accuracy": [0-9.e+-]*' "$work/eval_3.json" | cut -d' ' -f2)
        echo "--eval: test accuracy alone $one, on 3 ranks $three"
        awk -v a="$three" -v b="$one" 'BEGIN { d = a - b; exit !(d <= 1e-6 && d >= -1e-6) }' ||
            fail "--eval on 3 ranks: test accuracy $three, alone $one"
    else
        fail "--eval on 3 ranks failed: $(tail -3 "$work/err")"
    fi

    ends_with_message 60 'does not split across 4 ranks.*--batch 508 or 512' -- \
        "${launch[@]}" -np 4 "$mlp_train" "${run[@]}" --batch 510
    # rank 1 cannot read its data while rank 0 trains and waits for it in the all-reduce
    ends_with_message 120 'rank 1 of 2: .*nowhere' -- "${launch[@]}" -np 2 sh -c \
        'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec "$@" --data "$0"; fi; exec "$@"' \
        "$work/nowhere" "$mlp_train" "${run[@]}"
    # rank 1 is killed mid-epoch
    ends_with_message 120 'signal 9|killed|Killed' -- "${launch[@]}" -np 2 sh -c \
        '"$@" & if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then sleep 3; kill -9 $!; fi; wait $!' sh \
        "$mlp_train" "${run[@]}" --epochs 20
}

# A build without MPI, started by mpirun as one of two ranks, would train alone on each: it
# must refuse, on every rank, with a message.
refusal() {
    local mlp_train=$1 data=$2
    ends_with_message 60 'built without MPI, so each rank would train alone' -- \
        "${launch[@]}" -np 2 "$mlp_train" --device cpu --data "$data" --epochs 1 --batch 512 --quiet
}

"$mode" "$@"
[ $failures -eq 0 ] || exit 1
echo "mpi_test $mode: passed"
