#!/usr/bin/env bash
# Build, prove and measure mlp_train on a machine with a GPU, in stages, so one call of a
# time-limited GPU host does several of them. Logs and results go to out/ (or $RESULTS); when
# $OUT is set (the device tool's return folder, which takes few files) they are also packed
# into $OUT/results.tar.gz. Each stage ends by printing a short summary.
# Usage: tools/device_run.sh STAGE...   (with none, or one it does not know: this text, exit 2)
# Environment: BUILD_DIR (default build-device/), RESULTS (default out/), NSYS (the nsys
# command: .device/nsys.sh where that exists, else nsys on the PATH), COMPARE_LIMIT_S (default
# 540: the compare stages stop compare.py then, which still writes what ran, inside the device
# tool's 10 minutes a call).
#   build     configure and build BUILD_DIR (Release, native CPU code, CUDA for this GPU)
#   test      every CTest test (CPU and GPU)
#   gputest   the GPU's CTest tests alone (label gpu; CI runs the CPU's)
#   sanitize  compute-sanitizer memcheck, racecheck and initcheck on the GPU test programs, side by
#             side (SANITIZE_TOOLS="racecheck" runs one tool; the memcheck runs of mlp_train come
#             with memcheck); all three at once outrun a 10-minute call: one tool a call
#   fused     the fused kernel under compute-sanitizer: its test (memcheck, racecheck), and
#             memcheck on a whole pass of mlp_train --impl fused (4 units a block, many stages)
#   ncu       Nsight Compute on the first steps' kernels, selected by NVTX range
#   train     10 epochs of each GPU implementation at batch 64 and 512
#   profile   --profile tables: data resident, host pageable, host pinned, host overlapped
#   steptrace the kernels of a graph-replayed step with their durations and gaps (nsys, node trace;
#             STEPTRACE_IMPLS, STEPTRACE_BATCHES, STEPTRACE_PRECISIONS)
#   nsys      an Nsight Systems trace of --impl tiled --batch 512 and its summary tables
#   compare   tools/peers/compare.py: every GPU implementation (--graph on and off) against
#             PyTorch eager, PyTorch with a CUDA graph and JAX (lax.scan) at batch 16, 64, 512 and
#             2048, and whole 10-epoch processes at batch 512 (compare_gpu.md, compare_gpu.json)
#   strongest tools/peers/compare.py: tiled and fused against the peers at their strongest (JAX,
#             PyTorch's CUDA graph, PyTorch compiled) at STRONGEST_BATCHES (default 512) and
#             STRONGEST_PRECISIONS (default fp32), in the pairing without training sums on either
#             side, the one that binds (STRONGEST_SUMS="with without" for both); on a fresh host
#             torch.compile's autotuning takes 3-5 minutes for each batch, precision and sums
#             setting, so one of each is what fits a 10-minute call with the build
#             (strongest.md, strongest.json)
#   precision --precision fp32, tf32 and bf16 for tiled, blas and fused (fused takes the tiled step
#             in TF32 and BF16): 10 epochs at batch 64 and 512, epoch ms and test accuracy against
#             FP32 in points, and the goal (within 0.3 points) (tools/peers/compare.py
#             --precisions; precision.md, precision.json)
#   odd       shapes the tests do not use: GEMMs of odd sizes (all transposes, every GPU GEMM),
#             training with odd widths and batches on each GPU implementation, Fashion-MNIST
#   example   the README's line: mlp_train --impl tiled --batch 512 (3 epochs)
#   cpu       CPU implementations with 1 and all threads next to PyTorch on the CPU
#             (tools/peers/compare.py)
#   threads   the CPU thread-scaling study (docs/performance.md): the machine (cores, SMT, caches,
#             OpenBLAS builds, the FP32 FMA peak on 1..all threads), GEMM GFLOP/s at 1 and all threads (2048^3 and the MLP's shapes),
#             a tiled step's operations in sequence and alone (cpu_step_ops, 2 and all threads),
#             then each CPU implementation at 1, 2, 4, 8, 16 threads (batch 512, 4 epochs,
#             median of the last 3) with the --profile split and the Amdahl fit, PyTorch at 1
#             and all threads (tools/peers/thread_scaling.py); about 2 minutes on 16 cores
#   bench     mlp_bench: GEMM sweeps (GPU; CPU at 1 and all threads), the MLP's shapes, dot
#             product and max pooling, as CSV and tables, then the plots if matplotlib is there
#   speed     epoch ms of tiled, blas (graphs on and off) and fused at batch 16, 64, 512, 2048
#   startup   whole-process wall time of 10 epochs at batch 512 beside the floor, an empty CUDA
#             program's (tools/probes/cuda_floor.cu), in interleaved rounds (STARTUP_ROUNDS), with
#             the median difference; then the start-up breakdown (--profile)
#   limits    models too large for the GPU's memory (a huge --hidden, a huge --batch on top):
#             each must end with exit 1 and a message, not a crash
#   ladder    the GEMM ladder (docs/kernels.md): its test under compute-sanitizer memcheck (small
#             shapes) and racecheck (tiny shapes) and in full, then mlp_bench on every rung and cuBLAS in
#             each precision (256..4096 and the MLP's shapes) into ladder.csv, and its table
#   mpi       data parallelism (docs/distributed.md): process scaling on the CPU's cores (1, 2, 4,
#             8, 16 ranks x 1 thread and x cores/ranks threads, blas and tiled, batch 512, 2 epochs)
#             next to OpenMP's thread scaling, and Open MPI's all-reduce algorithms at 16 ranks,
#             as tables (mpi_cpu.md); then the single-GPU NCCL proof: test_distributed gpu on one
#             rank, and mpirun -np 1 --device gpu (NCCL all-reduce in every step, in the CUDA
#             graph) against the same run without mpirun, every GPU implementation (mpi_gpu.md)
#   multigpu  (2 GPUs or more) multigputest, multigpuspeed and p2p
#   multigputest  (2 GPUs) test_distributed gpu on 1 and 2 ranks (parameters against one GPU's,
#             with the p2p all-reduce and NCCL's, whole and sharded updates; the all-reduces and
#             their halves against each other; a stalled rank) and mpi_test.sh training-gpu (p2p
#             and NCCL, whole and sharded, train the same bits; a killed rank); compute-sanitizer
#             memcheck on 2-rank runs of each all-reduce and of the sharded update, racecheck and
#             memcheck on the all-reduces alone. NCCL_NVLS_ENABLE=0 throughout
#   multigpuspeed  (2 GPUs) tiled and blas on 784-256-10, and tiled on 784-1024-1024-10, at global
#             batch 512, 2048 and 8192, 6 epochs: one GPU (and at half the batch: the bound), 2
#             ranks with each all-reduce, whole, overlapped (784-1024-1024-10) and sharded, and
#             with --profile for the all-reduce's time; each run's test accuracy within 0.2
#             points of one GPU's (multigpu.md: tools/tables/multigpu_table.py)
#   plans     the tiled GEMM's layer-1 products (batch 16 to 2048) with each tile and
#             split-K count forced (mlp_bench --plan) against its own choice (plans.md)
#   p2p       (2 GPUs; also run by multigpu) tiled on 2 ranks at batch 512, 2048 and 8192: the
#             p2p all-reduce one-shot and two-shot against NCCL, --profile (multigpu_p2p.md)
#   nccl      (2 GPUs) tiled on 2 ranks at batch 512 and 8192 with each of
#             NCCL's protocols (NCCL_PROTO), the all-reduce's time from --profile (multigpu_nccl.md)
#   study     tools/study.sh, the parallel-computing study, on this build: docs/study (REPORT.md,
#             PNGs, results.json) regenerated here and copied into out/study
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${RESULTS:-$root/out}
build=${BUILD_DIR:-$root/build-device}
data=$root/data/mnist
mlp=$build/mlp_train
cd "$root" || exit 1
# Nsight Systems: $NSYS, else the wrapper a GPU host's set-up may stage in .device/, else nsys
nsys=${NSYS:-.device/nsys.sh}
[ -n "${NSYS:-}" ] || [ -x "$nsys" ] || nsys=nsys

stage_build() {
    tools/fetch_data.sh >/dev/null # the data comes gzipped (the upload is capped); start-up reads the raw files this adds
    nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader | tee "$out/gpu.txt"
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 || { tail -20 "$out/cmake.log"; return 1; }
    cmake --build "$build" -j "$(nproc)" >"$out/build.log" 2>&1 || { grep -E 'error|Error' "$out/build.log" | head -30; return 1; }
    grep -iE 'warning' "$out/build.log" | head -10
    grep -E '^-- (MPI|NCCL) \(' "$out/cmake.log"
    echo "build: ok"
}

# Every test must run here: on a machine with a GPU a skipped test (exit 77) means a GPU test
# that found no GPU, and fails the stage.
stage_test() {
    local one_gpu=()
    [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 2 ] || one_gpu=(-LE multigpu) # they skip
    ctest --test-dir "$build" --output-on-failure -j 4 "${one_gpu[@]}" "$@" >"$out/ctest.log" 2>&1
    local status=$?
    grep -E 'Test +#|tests passed|FAIL|Skipped|Not Run' "$out/ctest.log" | sed 's/  */ /g'
    [ $status -eq 0 ] || grep -B2 -A12 -E 'FAIL|\*\*\*Failed' "$out/ctest.log" | head -80
    if nvidia-smi -L 2>/dev/null | grep -q '^GPU' && grep -q 'Skipped' "$out/ctest.log"; then
        echo "test: FAIL: tests skipped on a machine with a GPU: $(grep -c 'Skipped' "$out/ctest.log")"
        status=1
    fi
    return $status
}

stage_gputest() { stage_test -L gpu; }

# One compute-sanitizer run in the background: NAME TOOL COMMAND...; its log is
# $out/sanitize_NAME.log, its exit status $out/sanitize_NAME.status (124: stopped after
# $SANITIZE_LIMIT_S seconds, default 470, so that the stage reports within a 10-minute call). The
# environment of the call (MLP_TEST_PART, MLP_TEST_SHAPES) goes with it.
start_sanitizer() {
    local name=$1 tool=$2
    shift 2
    (timeout "${SANITIZE_LIMIT_S:-470}" compute-sanitizer --tool "$tool" --error-exitcode 99 "$@" \
        >"$out/sanitize_$name.log" 2>&1
     echo $? >"$out/sanitize_$name.status") &
}

# compute-sanitizer is slow (one run after another, the stage took more than 450 s), and each
# run keeps one CPU core busy with the GPU mostly idle: the runs go side by side, then their
# results are read in order.
stage_sanitize() {
    local tools=" ${SANITIZE_TOOLS:-memcheck racecheck initcheck} " tool test part parts shapes name names=()
    for tool in $tools; do
        for test in test_gpu_ops test_gpu_training test_gpu_kernels; do
            parts=all shapes=small
            [ "$tool" = racecheck ] && [ "$test" = test_gpu_training ] && parts=fused # the rest: same kernels as test_gpu_ops
            [ "$tool" = initcheck ] && [ "$test" = test_gpu_kernels ] && continue # inputs all uploaded
            # whole, these ran past 450 s side by side with the others: in parts (racecheck's GEMMs
            # also on the tiny shapes)
            [ "$tool" = racecheck ] && [ "$test" = test_gpu_ops ] &&
                parts="gemm_tiled gemm_blocked gemm_others gemm_epilogue output_layer other" shapes=tiny
            [ "$tool" = initcheck ] && [ "$test" = test_gpu_training ] && parts="trainings recorded fused others"
            for part in $parts; do
                name=${tool}_$test
                [ "$parts" = all ] || name+=_$part
                MLP_TEST_PART=$part MLP_TEST_SHAPES=$shapes start_sanitizer "$name" "$tool" "$build/$test"
                names+=("$name")
            done
        done
    done
    if [[ "$tools" == *" memcheck "* ]]; then
        start_sanitizer mlp_train memcheck "$mlp" --device gpu --impl tiled --data host --overlap \
            --data "$data" --epochs 1 --batch 1000 --quiet
        # BF16: the operands rounded into the reserved workspace, inside recorded steps
        start_sanitizer mlp_train_bf16 memcheck "$mlp" --device gpu --impl tiled --precision bf16 \
            --data "$data" --epochs 1 --batch 1000 --quiet
        names+=(mlp_train mlp_train_bf16)
    fi
    wait
    report_sanitizers "${names[@]}"
}

# The results of the background runs named, in order; fails if any did.
report_sanitizers() {
    local status=0 name s
    for name in "$@"; do
        s=$(cat "$out/sanitize_$name.status" 2>/dev/null || echo missing)
        echo "compute-sanitizer $name: exit $s; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize_$name.log" | tail -1)"
        [ "$s" = 0 ] || { status=1; grep -m 20 -E '=========' "$out/sanitize_$name.log"; }
    done
    return $status
}

# The fused kernel's own proof: its test under memcheck and racecheck (a one-stage and a
# three-stage batch), then memcheck on a whole pass of mlp_train: 4 units a block, many stages.
stage_fused() {
    local status=0 tool s
    for tool in memcheck racecheck; do
        MLP_TEST_PART=fused MLP_TEST_SHAPES=small compute-sanitizer --tool $tool --error-exitcode 99 \
            "$build/test_gpu_training" >"$out/fused_$tool.log" 2>&1
        s=$?
        echo "compute-sanitizer $tool test_gpu_training (fused, small shapes): exit $s; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/fused_$tool.log" | tail -1)"
        [ $s -eq 0 ] || { status=1; grep -m 20 -E '=========|FAIL' "$out/fused_$tool.log"; }
    done
    compute-sanitizer --tool memcheck --error-exitcode 99 "$mlp" --device gpu --impl fused --fused-pass whole \
        --hidden 300 --batch 1000 --epochs 1 --data "$data" --quiet >"$out/fused_memcheck_mlp_train.log" 2>&1
    s=$?
    echo "compute-sanitizer memcheck mlp_train --impl fused --hidden 300 --batch 1000: exit $s; $(grep 'ERROR SUMMARY' "$out/fused_memcheck_mlp_train.log")"
    [ $s -eq 0 ] || status=1
    return $status
}

stage_train() {
    printf '%-6s %6s %10s %14s %12s\n' impl batch test_acc median_epoch_s first_epoch_s | tee "$out/train.txt"
    for impl in naive tiled blas; do
        for batch in 64 512; do
            local json="$out/train_${impl}_$batch.json"
            "$mlp" --device gpu --impl $impl --batch $batch --epochs 10 --data "$data" --json --quiet >"$json" ||
                { echo "train $impl $batch failed"; continue; }
            python3 - "$json" "$impl" "$batch" <<'PY' | tee -a "$out/train.txt"
import json, statistics, sys
d = json.load(open(sys.argv[1])); t = [e["time_s"] for e in d["epochs"]]
print(f"{sys.argv[2]:<6} {sys.argv[3]:>6} {100 * d['test_accuracy']:9.2f}% {statistics.median(t[1:]):14.4f} {t[0]:12.4f}")
PY
        done
    done
}

stage_profile() {
    : >"$out/profile.txt"
    for placement in "--data device" "--data host" "--data host --pinned" "--data host --overlap"; do
        echo "== --impl blas --batch 512 $placement" >>"$out/profile.txt"
        # shellcheck disable=SC2086
        "$mlp" --device gpu --impl blas --batch 512 --epochs 2 --data "$data" $placement --profile --quiet \
            >>"$out/profile.txt" 2>&1
    done
    grep -E '^==|run phases|^ +(h2d|forward|backward|update|d2h|eval|other) ' "$out/profile.txt" | tail -40
}

# have_nsys STAGE: whether the nsys command runs here (says why not)
have_nsys() {
    command -v "$nsys" >/dev/null || { echo "$1: no Nsight Systems ($nsys): set NSYS or put nsys on the PATH"; return 1; }
}

stage_nsys() {
    have_nsys nsys || return 1
    local impl
    for impl in tiled blas; do
        "$nsys" profile -t cuda,nvtx -o "/tmp/mlp_train_$impl" -f true "$mlp" --device gpu --impl $impl \
            --batch 512 --epochs 2 --data "$data" --quiet >"$out/nsys_profile_$impl.log" 2>&1
        "$nsys" stats -r nvtx_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum "/tmp/mlp_train_$impl.nsys-rep" \
            >"$out/nsys_stats_$impl.txt" 2>&1
        echo "== nsys, --impl $impl --batch 512: kernels"
        grep -A12 'cuda_gpu_kern_sum' "$out/nsys_stats_$impl.txt" | cut -c1-200
    done
}

# The kernels of a graph-replayed step, each with its duration and the idle gap before it:
# Nsight Systems with --cuda-graph-trace=node (every kernel of a replayed graph traced), 2 epochs,
# then tools/tables/step_trace.py; STEPTRACE_IMPLS, STEPTRACE_BATCHES and STEPTRACE_PRECISIONS
# choose the runs (default: tiled and blas at 512 and 2048, FP32).
stage_steptrace() {
    have_nsys steptrace || return 1
    local impl batch precision name
    for impl in ${STEPTRACE_IMPLS:-tiled blas}; do
        for batch in ${STEPTRACE_BATCHES:-512 2048}; do
            for precision in ${STEPTRACE_PRECISIONS:-fp32}; do
                name=steptrace_${impl}_${batch}_$precision
                "$nsys" profile -t cuda --cuda-graph-trace=node -o "/tmp/$name" -f true "$mlp" --device gpu \
                    --impl $impl --batch $batch --precision $precision --epochs 2 --data "$data" --quiet \
                    >"$out/$name.log" 2>&1 || { echo "steptrace: nsys failed: $(tail -3 "$out/$name.log")"; continue; }
                "$nsys" stats -r cuda_gpu_trace --format csv "/tmp/$name.nsys-rep" >"$out/$name.csv" 2>&1
                echo "== $impl, batch $batch, $precision"
                python3 tools/tables/step_trace.py "$out/$name.csv" $((2 * (60000 + batch - 1) / batch)) |
                    tee "$out/$name.txt" | head -40
            done
        done
    done
}

stage_plans() { # the tiled GEMM's tile and split-K choices on the MLP's layer-1 products
    local status=0 plan shapes=()
    for batch in 16 64 512 2048; do
        shapes+=(--shape "$batch,256,784,NN" --shape "784,256,$batch,TN") # layer 1: forward, weight gradient
    done
    rm -f "$out"/plans_*.csv
    for plan in own 32:1 32:2 32:4 32:8 64:1 64:2 64:3 64:4 64:6 64:9 64x128:1 64x128:2 64x128:4 64x128:8 \
        128:1 128:2 128:4; do
        local forced=()
        [ $plan = own ] || forced=(--plan $plan)
        "$build/mlp_bench" gemm --device gpu --impl tiled "${shapes[@]}" "${forced[@]}" --quiet \
            --repeats 50 --csv "$out/plans_${plan/:/_}.csv" >/dev/null || { status=1; echo "plans: $plan failed"; }
    done
    python3 - "$out"/plans_*.csv <<'PY' | tee "$out/plans.md"
import csv, sys
times, plans = {}, []
for path in sys.argv[1:]:
    plan = path.rsplit("plans_", 1)[1][:-4].replace("_", ":")
    plans.append(plan)
    for row in csv.DictReader(open(path)):
        times.setdefault(row["shape"], {})[plan] = float(row["median_ms"]) * 1000 if row["median_ms"] else None
def plan_key(plan): # "64:2" is 64x64:2
    if plan == "own": return (0, [])
    tile, splits = plan.split(":")
    rows, cols = (tile.split("x") + [tile])[:2]
    return (1, [int(rows), int(cols), int(splits)])
plans.sort(key=plan_key)
print("µs a product (median of 50), tiled GEMM, each tile:splits forced (own: its choice)\n")
print("| shape | " + " | ".join(plans) + " | best |\n|---|" + "---:|" * (len(plans) + 1))
for shape, row in times.items():
    valid = {p: t for p, t in row.items() if t is not None}
    best = min(valid, key=valid.get)
    print(f"| {shape} | " + " | ".join(f"{row[p]:.1f}" if row.get(p) else "-" for p in plans) + f" | {best} |")
PY
    return $status
}

stage_ncu() {
    # which NVTX filter expressions select kernels (push/pop ranges: domain@outer/inner/)
    local i=0 expression
    for expression in "mlp_train@epoch/step/forward/" "mlp_train@run/epoch/step/forward/" \
        "mlp_train@step/forward/" "mlp_train@forward/"; do
        i=$((i + 1))
        ncu --clock-control none --nvtx --nvtx-include "$expression" -c 4 --section SpeedOfLight \
            "$mlp" --device gpu --impl tiled --batch 512 --epochs 1 --data "$data" --quiet \
            >"$out/ncu_$i.txt" 2>&1
        echo "ncu --nvtx-include '$expression': exit $?, $(grep -cE 'Context [0-9]+, Stream' "$out/ncu_$i.txt") kernels profiled"
    done
    grep -hE 'Context [0-9]+, Stream|Duration|Memory Throughput|Compute \(SM\) Throughput' "$out"/ncu_[1-4].txt |
        cut -c1-150 | head -20
}

stage_odd() {
    local status=0 shapes=() shape transposes impl
    for shape in 1,1,1 3,5,7 31,33,35 127,129,1 1,4096,1024 4097,3,129 1000,17,4099 2049,1025,513; do
        for transposes in NN NT TN TT; do shapes+=(--shape "$shape,$transposes"); done
    done
    "$build/mlp_bench" gemm --device gpu "${shapes[@]}" --warmup 0 --repeats 3 --quiet \
        --csv "$out/odd_gemm.csv" >"$out/odd_gemm.txt" 2>&1 || status=1
    echo "odd GEMM shapes: $(grep -c ',ok,' "$out/odd_gemm.csv") verified, $(grep -c FAILED "$out/odd_gemm.csv") failed"
    # fused runs the one-hidden-layer models whole (--fused-pass whole: --hidden 300, 4 units a
    # block, 32-row stages; 1000, 8 units a block) and says why it falls back on the others
    for impl in naive tiled blas fused; do
        for args in "--hidden 17,3 --batch 7 --epochs 1" "--hidden 1000,33 --batch 999 --epochs 2 --optimizer adam" \
            "--hidden 300 --batch 999 --epochs 2 --optimizer adam" "--hidden 1000 --batch 100 --epochs 1" \
            "--dataset fashion --data data/fashion --batch 333 --epochs 2"; do
            kernel=()
            [ $impl = fused ] && kernel=(--fused-pass whole)
            # shellcheck disable=SC2086
            "$mlp" --device gpu --impl $impl "${kernel[@]}" $args --json --quiet >"$out/odd_train.json" 2>"$out/odd_train.err" ||
                { status=1; echo "FAILED: $impl $args: $(cat "$out/odd_train.err")"; continue; }
            python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(f'{sys.argv[2]:<5} {sys.argv[3]:<60} {d[\"config\"].get(\"execution\", \"?\"):<9} test accuracy {100*d[\"test_accuracy\"]:.2f}%')" \
                "$out/odd_train.json" "$impl" "$args"
        done
    done
    compute-sanitizer --tool memcheck --error-exitcode 99 "$mlp" --device gpu --impl tiled --hidden 17,3 \
        --batch 999 --epochs 1 --data "$data" --quiet >"$out/odd_sanitize.log" 2>&1 || status=1
    echo "compute-sanitizer memcheck, --impl tiled --hidden 17,3 --batch 999: $(grep 'ERROR SUMMARY' "$out/odd_sanitize.log")"
    # the tiled GEMM's split-K sums its slices in a cluster's shared memory: a full cluster
    # (8 slices, of 64×64 and of 64×128 tiles), an odd one (3) and the MLP's own plans, under memcheck
    # and racecheck
    local tool plan
    for tool in memcheck racecheck; do
        for plan in 64:8 32:3 64x128:8 own; do
            local forced=()
            [ $plan = own ] || forced=(--plan $plan)
            compute-sanitizer --tool $tool --error-exitcode 99 "$build/mlp_bench" gemm --device gpu \
                --impl tiled --shape 512,256,784,NN --shape 784,256,512,TN --shape 1000,17,4099,NT \
                "${forced[@]}" --warmup 0 --repeats 1 --quiet >"$out/odd_cluster_$tool.log" 2>&1 || status=1
            echo "compute-sanitizer $tool, tiled GEMM, plan $plan: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/odd_cluster_$tool.log" | tail -1)"
        done
    done
    return $status
}

stage_example() {
    "$mlp" --impl tiled --batch 512 --epochs 3 --data "$data" 2>/dev/null | tee "$out/example.txt"
}

# compare.py on this build, its JSON, Markdown and progress as $out/NAME.{json,md,log}, stopped
# (SIGTERM) after COMPARE_LIMIT_S: NAME ARGS...
run_compare() {
    local name=$1
    shift
    timeout -s TERM "${COMPARE_LIMIT_S:-540}" python3 tools/peers/compare.py --mlp-train "$mlp" --data "$data" \
        "$@" --json "$out/$name.json" 2>"$out/$name.log" | tee "$out/$name.md"
    local s=${PIPESTATUS[0]}
    [ "$s" -eq 0 ] || tail -20 "$out/$name.log"
    return "$s"
}

stage_compare() {
    # Sized to stay under 10 minutes on an H100 or H200 (estimated from the figures in
    # docs/performance.md): 5 epochs of each contender per batch, with and without its training
    # sums, PyTorch eager at batch 16 the longest (~4 s an epoch), naive from batch 512 on; then
    # 3 whole 10-epoch runs at batch 512.
    # PyTorch compiled is the strongest stage's: its autotuning alone would take this one past 10 minutes.
    run_compare compare_gpu --device gpu --batch 16 64 512 2048 --peers torch-eager torch-graph jax-scan \
        --epochs 5 --naive-min-batch 512 --wall-runs 3
}

stage_strongest() {
    run_compare strongest --device gpu --batch ${STRONGEST_BATCHES:-512} --precisions ${STRONGEST_PRECISIONS:-fp32} \
        --impls tiled fused --graph on --peers torch-graph jax-scan torch-compile --sums ${STRONGEST_SUMS:-without} \
        --epochs 6 --wall-runs 0
}

stage_precision() {
    run_compare precision --device gpu --impls tiled blas fused --graph on --peers --sums with --batch 64 512 \
        --epochs 10 --wall-runs 0 --precisions fp32 tf32 bf16
}

stage_cpu() {
    run_compare compare_cpu --device cpu --batch 512 --threads 1 "$(nproc)" --epochs 2
}

stage_threads() {
    local threads=() t status=0 all
    all=$(nproc)
    for t in 1 2 4 8 16 32 64; do [ "$t" -lt "$all" ] && threads+=("$t"); done
    threads+=("$all")
    {
        lscpu | grep -E '^(Model name|Socket|Core|Thread|CPU\(s\)|L1d|L2|L3|NUMA node\(s\))'
        echo "OpenBLAS builds installed: $(ls -d /usr/lib/*-linux-gnu/openblas-*/ 2>/dev/null | xargs -n1 basename | tr '\n' ' ')"
        echo "mlp_train loads: $(ldd "$mlp" | grep -o 'libopenblas[^ ]* => [^ ]*')"
    } | tee "$out/threads_machine.txt"
    # the FMA units' own scaling: the ceiling for the GEMMs' (and the epochs') below
    "$build/cpu_fma_peak" | tee -a "$out/threads_machine.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    # what one GEMM reaches, alone: the ceiling for the epochs' scaling below
    for t in 1 "$all"; do
        "$build/mlp_bench" gemm --device cpu --threads "$t" --sizes 2048 --impl tiled,blas --quiet \
            --csv "$out/threads_gemm_2048_$t.csv" >"$out/threads_gemm_2048_$t.txt" 2>&1 || status=1
        "$build/mlp_bench" gemm --device cpu --threads "$t" --mlp-shapes --quiet \
            --csv "$out/threads_gemm_mlp_$t.csv" >"$out/threads_gemm_mlp_$t.txt" 2>&1 || status=1
        echo "== GEMM, $t thread(s)"
        grep -hE '2048x2048x2048|b512' "$out/threads_gemm_2048_$t.txt" "$out/threads_gemm_mlp_$t.txt"
    done
    # each operation of a tiled step in sequence and alone: what running between the others costs
    for t in 2 "$all"; do
        "$build/cpu_step_ops" --threads "$t" | tee "$out/threads_step_ops_$t.txt"
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    done
    # naive is the i-k-j loop: a few seconds an epoch on one thread, so it runs at every count
    python3 tools/peers/thread_scaling.py --mlp-train "$mlp" --data "$data" --threads "${threads[@]}" \
        --json "$out/threads.json" | tee "$out/threads.md"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    return $status
}

stage_bench() {
    local bench=$build/mlp_bench status=0 threads
    threads=$(nproc)
    run_bench() { # NAME ARGS...: one mlp_bench run, its table in NAME.txt and its rows in NAME.csv
        local name=$1
        shift
        "$bench" "$@" --quiet --csv "$out/$name.csv" >"$out/$name.txt" 2>&1 || status=1
        echo "== mlp_bench $*"
        cat "$out/$name.txt"
    }
    run_bench gemm_gpu gemm --device gpu --sizes 2:4096 --with-transfer
    run_bench gemm_gpu_mlp gemm --device gpu --mlp-shapes
    run_bench gemm_cpu_1 gemm --device cpu --threads 1 --sizes 16:2048 --naive-max 512
    run_bench gemm_cpu_all gemm --device cpu --threads "$threads" --sizes 16:4096 --naive-max 1024
    run_bench gemm_cpu_mlp gemm --device cpu --threads "$threads" --mlp-shapes
    run_bench dot dot --threads "$threads"
    run_bench maxpool maxpool --threads "$threads"
    python3 tools/tables/plot_bench.py --out "$out/plots" "$out"/gemm_gpu.csv "$out"/gemm_cpu_1.csv \
        "$out"/gemm_cpu_all.csv "$out"/dot.csv "$out"/maxpool.csv >"$out/plot.log" 2>&1 ||
        echo "plots: failed (see plot.log)"
    return $status
}

# Epoch ms (median of epochs 2..4) and test accuracy of the GPU implementations, graphs on and off.
stage_speed() {
    local batch impl graph status=0
    printf '| batch | impl | graph | execution | epoch ms | test acc |\n|---|---|---|---|---|---|\n' | tee "$out/speed.md"
    for batch in 16 64 512 2048; do
        for impl in tiled blas fused; do
            for graph in on off; do
                [ "$impl" = fused ] && [ "$graph" = off ] && continue
                kernel=() # fused: its kernel, also where the tiled step is faster
                [ "$impl" = fused ] && kernel=(--fused-pass whole)
                "$mlp" --device gpu --impl $impl "${kernel[@]}" --graph $graph --batch $batch --epochs 4 --data "$data" \
                    --json --quiet >"$out/speed_${impl}_${graph}_$batch.json" 2>"$out/speed.err" || {
                    echo "speed: $impl $batch failed: $(tail -2 "$out/speed.err")"; status=1; continue; }
                python3 - "$out/speed_${impl}_${graph}_$batch.json" $batch $impl $graph <<'PY' | tee -a "$out/speed.md"
import json, statistics, sys
r = json.load(open(sys.argv[1]))
t = statistics.median(e["time_s"] for e in r["epochs"][1:])
print(f"| {sys.argv[2]} | {sys.argv[3]} | {sys.argv[4]} | {r['config'].get('execution', '?')} | {1e3 * t:.2f} | {100 * r['test_accuracy']:.2f} |")
PY
            done
        done
    done
    return $status
}

# Whole-process wall time of 10 epochs at batch 512 against the floor, the whole-process time of
# cuda_floor (which creates a CUDA context and exits): STARTUP_ROUNDS rounds (default 5) of the
# floor and each GPU implementation one after the other, in an order that turns by one each
# round, so that each round's difference to the floor is of the same minute; the medians and
# the median of the rounds' differences. The timed runs are the user's command (no --profile);
# a run that fails is reported and left out, and fails the stage. Then one --profile run of each
# tells where the start-up went.
stage_startup() {
    local status=0 impl
    PYTHONPATH="$root/tools/peers" python3 - "${STARTUP_ROUNDS:-5}" "$build/cuda_floor" "$mlp" "$data" <<'PY' || status=1
import statistics, sys
from peer_common import last_line, turning_rounds
if not sys.argv[1].isdigit() or int(sys.argv[1]) < 1:
    sys.exit(f"startup: STARTUP_ROUNDS must be a positive number, not {sys.argv[1]!r}")
rounds, floor, mlp, data = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
commands = {"floor": [floor]} | {impl: [mlp, "--device", "gpu", "--impl", impl, "--batch", "512", "--epochs", "10",
                                        "--data", data, "--quiet"] for impl in ("tiled", "fused", "blas")}
names, walls, failed, context = list(commands), {name: {} for name in commands}, False, ""
for r, name, done, wall in turning_rounds(commands, rounds, 600):
    if done is None or done.returncode != 0:
        failed = True
        print(f"round {r + 1}: {name} failed: {'timeout' if done is None else last_line(done.stderr or done.stdout)}")
    else:
        walls[name][r] = round(1e3 * wall)
        context = last_line(done.stdout) if name == "floor" else context
for r in range(rounds):
    print(f"round {r + 1}: " + ", ".join(f"{name} {walls[name][r]} ms" if r in walls[name] else f"{name} failed"
                                         for name in names))
floors = walls["floor"]
print(f"median: cuda_floor {statistics.median(floors.values()) if floors else 'none'} ms (the last run: {context})")
for name in names[1:]:
    differences = [walls[name][r] - floors[r] for r in walls[name] if r in floors]
    if differences:
        print(f"median: {name} {statistics.median(walls[name].values())} ms; of the rounds' differences to the floor: "
              f"median {statistics.median(differences)} ms, {min(differences)} to {max(differences)}")
    else:
        print(f"median: {name}: no round with it and the floor")
sys.exit(1 if failed else 0)
PY
    for impl in tiled fused blas; do
        "$mlp" --device gpu --impl $impl --batch 512 --epochs 10 --data "$data" --profile \
            >"$out/startup_${impl}_profile.txt" 2>&1 || status=1
        printf '%s: %s; final test accuracy %s\n' $impl "$(grep -o 'start-up: .*' "$out/startup_${impl}_profile.txt")" \
            "$(grep -E '^ +10 ' "$out/startup_${impl}_profile.txt" | awk '{print $5}')"
    done
    return $status
}

stage_limits() {
    local status=0 args
    # 3 × 4.3e9 parameters (52 GB each for parameters, gradients, momentum); then activations of
    # 65536 × 65536 floats (17 GB per layer) on top: past the 141 GB of an H200 either way
    for args in "--hidden 65536,65536,65536,65536" "--batch 65536 --hidden 65536,65536,65536"; do
        timeout 600 "$mlp" --device gpu --impl blas --data "$data" --epochs 1 --quiet $args \
            >"$out/limits.log" 2>&1
        local s=$?
        echo "limits: --device gpu $args: exit $s: $(tail -n 1 "$out/limits.log")"
        [ $s -eq 1 ] || status=1
    done
    return $status
}

stage_ladder() {
    local status=0 tool shapes s
    for tool in memcheck racecheck; do
        shapes=$([ $tool = memcheck ] && echo small || echo tiny) # racecheck is slow
        MLP_TEST_SHAPES=$shapes compute-sanitizer --tool $tool --error-exitcode 99 \
            "$build/test_gpu_gemm_ladder" >"$out/ladder_$tool.log" 2>&1
        s=$?
        echo "compute-sanitizer $tool test_gpu_gemm_ladder ($shapes shapes): exit $s; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/ladder_$tool.log" | tail -1)"
        [ $s -eq 0 ] || { status=1; grep -m 20 -E '=========|FAIL' "$out/ladder_$tool.log"; }
    done
    "$build/test_gpu_gemm_ladder" >"$out/ladder_test.log" 2>&1 || { status=1; grep -m 20 FAIL "$out/ladder_test.log"; }
    tail -1 "$out/ladder_test.log"
    "$build/mlp_bench" gemm --device gpu --sizes 256:4096 --shape 4096,4096,4096,NT --mlp-shapes --quiet \
        --csv "$out/ladder.csv" \
        --impl warptiled,tiled,blas,tf32_mma,tf32_wgmma,tf32_wgmma_tma,tiled_tf32,tiled_tf32_fp16_a,blas_tf32,bf16_mma,bf16_wgmma,bf16_wgmma_tma,tiled_bf16,tiled_bf16_stored,blas_bf16 \
        >"$out/ladder.txt" 2>&1 || status=1
    grep FAILED "$out/ladder.txt" | head -10
    python3 tools/tables/bench_table.py "$out/ladder.csv" --shape-contains 1024x1024x1024 \
        --shape-contains 4096x4096x4096 | tee "$out/ladder.md"
    python3 tools/tables/bench_table.py "$out/ladder.csv" --shape-contains b512 --shape-contains b16 \
        --impl tiled,tiled_tf32,tiled_tf32_fp16_a,tiled_bf16,tiled_bf16_stored,blas >"$out/ladder_mlp.md"
    return $status
}

# mpirun as root (the GPU host runs commands as root) needs --allow-run-as-root
mpirun_command=(mpirun)
[ "$(id -u)" -ne 0 ] || mpirun_command+=(--allow-run-as-root)

# scaling_run NAME ARGS...: one training run (mpirun or not, per ARGS), JSON into NAME.json
scaling_run() {
    local name=$1
    shift
    "$@" --data "$data" --epochs "${EPOCHS:-2}" --json --quiet >"$out/$name.json" 2>"$out/$name.err" && return 0
    echo "FAILED: $*: $(grep -m 1 '^mlp_train: ' "$out/$name.err" || tail -1 "$out/$name.err")"
    rm -f "$out/$name.json"
    return 1
}

# scaling_table TITLE OUTPUT.md RUN.json...: the table of the runs that succeeded, if any
scaling_table() {
    local title=$1 output=$2
    shift 2
    local runs=() run
    for run in "$@"; do [ -s "$run" ] && runs+=("$run"); done
    [ ${#runs[@]} -gt 0 ] || { echo "($title: no run succeeded)"; return 1; }
    python3 tools/tables/scaling_table.py --title "$title" ${ACCURACY_WITHIN:+--accuracy-within "$ACCURACY_WITHIN"} \
        "${runs[@]}" | tee "$output"
    return "${PIPESTATUS[0]}"
}

stage_mpi() {
    command -v mpirun >/dev/null || { echo "mpi: no mpirun (apt-get install openmpi-bin libopenmpi-dev)"; return 1; }
    local status=0 cores impl threads ranks per_rank
    cores=$(nproc)
    rm -f "$out"/mpi_cpu_*.json "$out"/mpi_gpu_*.json "$out"/mpi_allreduce_*.json
    for impl in blas tiled; do
        for threads in 1 2 4 8 16 32 64 128; do # OpenMP's threads in one process
            [ "$threads" -le "$cores" ] || break
            scaling_run "mpi_cpu_${impl}_alone_$threads" "$mlp" --device cpu --impl $impl --batch 512 \
                --threads "$threads" || status=1
        done
        for ranks in 1 2 4 8 16 32 64 128; do # ranks, each bound to its own cores
            [ "$ranks" -le "$cores" ] || break
            for per_rank in $(printf '%s\n' 1 $((cores / ranks)) | sort -un); do
                scaling_run "mpi_cpu_${impl}_${ranks}x$per_rank" "${mpirun_command[@]}" -np "$ranks" \
                    --use-hwthread-cpus --map-by "slot:PE=$per_rank" "$mlp" --device cpu --impl $impl \
                    --batch 512 --threads "$per_rank" --profile || status=1
            done
        done
    done
    scaling_table "CPU, $cores cores: $(lscpu | sed -n 's/^Model name: *//p')" "$out/mpi_cpu.md" \
        "$out"/mpi_cpu_*.json || status=1
    # the all-reduce at the most ranks, with each of Open MPI's algorithms (0: its own choice)
    ranks=1
    while [ $((ranks * 2)) -le "$cores" ]; do ranks=$((ranks * 2)); done
    for algorithm in 0 1 2 3 4 5 6; do
        scaling_run "mpi_allreduce_$algorithm" "${mpirun_command[@]}" -np $ranks --use-hwthread-cpus \
            --map-by slot:PE=1 --mca coll_tuned_use_dynamic_rules 1 \
            --mca coll_tuned_allreduce_algorithm $algorithm "$mlp" --device cpu --impl blas --batch 512 \
            --threads 1 --profile || status=1
    done
    local names=("Open MPI's choice" "basic linear" nonoverlapping "recursive doubling" ring \
        "segmented ring" Rabenseifner) runs=()
    for algorithm in 0 1 2 3 4 5 6; do
        runs+=("$algorithm (${names[$algorithm]})=$out/mpi_allreduce_$algorithm.json")
    done
    python3 tools/tables/allreduce_table.py --title "blas, $ranks ranks x 1 thread: Open MPI's all-reduce algorithms" \
        --setting coll_tuned_allreduce_algorithm "${runs[@]}" >"$out/mpi_allreduce.md" || status=1
    tee -a "$out/mpi_cpu.md" <"$out/mpi_allreduce.md"
    # the single-GPU NCCL proof: test_distributed on one rank (the parameters of NCCL's path, in
    # queued and in recorded steps, are the bits of a lone backend's), then training with the
    # all-reduce in every step (one rank: a copy) against training without mpirun
    tests/mpi_test.sh parameters-gpu "$build/test_distributed" >"$out/mpi_gpu_parameters.log" 2>&1 || status=1
    tail -2 "$out/mpi_gpu_parameters.log"
    for impl in naive tiled blas fused; do
        kernel=() # fused alone: its kernel (as a rank it takes the tiled step whatever it is told)
        [ "$impl" = fused ] && kernel=(--fused-pass whole)
        scaling_run "mpi_gpu_${impl}_alone" "$mlp" --device gpu --impl $impl "${kernel[@]}" --batch 512 || status=1
        scaling_run "mpi_gpu_${impl}_mpirun" "${mpirun_command[@]}" -np 1 "$mlp" --device gpu \
            --impl $impl "${kernel[@]}" --batch 512 || status=1
        scaling_run "mpi_gpu_${impl}_mpirun_profile" "${mpirun_command[@]}" -np 1 "$mlp" --device gpu \
            --impl $impl "${kernel[@]}" --batch 512 --profile || status=1
    done
    cat "$out"/mpi_gpu_*_mpirun.json 2>/dev/null | grep -o '"all_reduce": [^,]*' | sort | uniq -c
    scaling_table "one GPU: without mpirun, and mpirun -np 1 (NCCL all-reduce in the step)" \
        "$out/mpi_gpu.md" "$out"/mpi_gpu_*.json || status=1
    return $status
}

stage_multigpu() { # 2 GPUs: the tests, then the measurements, then the all-reduce alone
    local status=0
    stage_multigputest || status=1
    stage_multigpuspeed || status=1
    stage_p2p || status=1
    return $status
}

two_gpus() {
    local gpus
    gpus=$(nvidia-smi -L | wc -l)
    [ "$gpus" -ge 2 ] || { echo "$1: $gpus GPU found; this stage needs 2"; return 1; }
    command -v mpirun >/dev/null || { echo "$1: no mpirun"; return 1; }
}

stage_multigputest() ( # a subshell: its environment stays its own
    local status=0 allreduce tool s
    two_gpus multigputest || return 1
    export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0,1
    # the parameters on 1 and 2 GPUs against one lone GPU's, queued and recorded steps, with each
    # all-reduce, whole and sharded; the all-reduces and their halves against each other; a rank
    # that stalls the p2p all-reduce
    tests/mpi_test.sh parameters-gpu "$build/test_distributed" >"$out/multigpu_parameters.log" 2>&1 || status=1
    grep -E '^2 ranks.*(one step|floats)|FAIL|passed|ends in' "$out/multigpu_parameters.log" | head -40
    # p2p and NCCL, whole and sharded, train the same bits; a killed rank ends a p2p job
    tests/mpi_test.sh training-gpu "$mlp" "$data" 2>&1 | tee "$out/multigpu_training.log" | tail -8
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    # API errors are not reported: NCCL's set-up asks for the attributes of kernels it has no
    # image for on this GPU and carries on (4 cudaErrorNoKernelImageForDevice a rank, inside
    # ncclCommInitRank); mlp_train checks every CUDA call it makes itself and stops on a failure.
    for allreduce in nccl p2p "p2p --sharded-update on"; do
        # shellcheck disable=SC2086
        "${mpirun_command[@]}" -np 2 -x NCCL_NVLS_ENABLE compute-sanitizer --tool memcheck --error-exitcode 99 \
            --report-api-errors no "$mlp" --device gpu --impl tiled --data "$data" --epochs 1 --batch 1000 \
            --quiet --allreduce $allreduce >"$out/multigpu_sanitize_${allreduce// /_}.log" 2>&1
        s=$?
        echo "compute-sanitizer memcheck, mpirun -np 2 --impl tiled --allreduce $allreduce: exit $s; $(grep 'ERROR SUMMARY' "$out/multigpu_sanitize_${allreduce// /_}.log" | sort | uniq -c | tr '\n' ' ')"
        [ $s -eq 0 ] || status=1
    done
    # the all-reduces and their halves alone (test_distributed allreduce: no training kernels,
    # which the sanitize stage covers), racecheck and memcheck; waits without a timeout
    # (sanitized kernels run far slower on one rank than on the other)
    for tool in racecheck memcheck; do
        "${mpirun_command[@]}" -np 2 -x NCCL_NVLS_ENABLE -x MLP_P2P_TIMEOUT_S=0 compute-sanitizer --tool $tool \
            --error-exitcode 99 --report-api-errors no "$build/test_distributed" allreduce \
            >"$out/multigpu_${tool}_allreduce.log" 2>&1
        s=$?
        echo "compute-sanitizer $tool, mpirun -np 2 test_distributed allreduce: exit $s; $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$out/multigpu_${tool}_allreduce.log" | sort | uniq -c | tr '\n' ' ')"
        [ $s -eq 0 ] || status=1
    done
    return $status
)

# multigpu_runs NAME ARGS...: one GPU at the batch and at half of it, then 2 ranks with each
# all-reduce, summed whole after the backward pass, overlapped with it (where OVERLAP is set: a
# model whose top layers reach the threshold) and sharded, and --profile runs for the
# all-reduce's time alone; ARGS end with --batch B
multigpu_runs() {
    local name=$1 batch=${*: -1} allreduce variant status=0
    shift
    local args=("${@:1:$#-1}")
    scaling_run "multigpu_${name}_alone" "$mlp" "${args[@]}" "$batch" || status=1
    scaling_run "multigpu_half_${name}" "$mlp" "${args[@]}" $((batch / 2)) || status=1
    for allreduce in nccl p2p; do
        for variant in whole ${OVERLAP:+overlapped} sharded; do
            local extra=(--allreduce-overlap off)
            [ "$variant" = overlapped ] && extra=(--allreduce-overlap on)
            [ "$variant" = sharded ] && extra=(--allreduce-overlap off --sharded-update on)
            scaling_run "multigpu_${name}_2_${allreduce}_$variant" "${mpirun_command[@]}" -np 2 -x NCCL_NVLS_ENABLE \
                "$mlp" "${args[@]}" "$batch" --allreduce $allreduce "${extra[@]}" || status=1
        done
        for variant in whole sharded; do
            [ "$allreduce/$variant" = nccl/sharded ] && continue
            local extra=()
            [ "$variant" = sharded ] && extra=(--sharded-update on)
            scaling_run "multigpu_profile_${name}_2_${allreduce}_$variant" "${mpirun_command[@]}" -np 2 \
                -x NCCL_NVLS_ENABLE "$mlp" "${args[@]}" "$batch" --allreduce $allreduce "${extra[@]}" --profile || status=1
        done
    done
    return $status
}

stage_multigpuspeed() ( # a subshell: its environment stays its own
    local status=0 impl batch
    two_gpus multigpuspeed || return 1
    export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0,1 EPOCHS=6
    rm -f "$out"/multigpu_*.json
    for batch in 512 2048 8192; do
        for impl in tiled blas; do
            multigpu_runs "${impl}_$batch" --device gpu --impl $impl --batch $batch || status=1
        done
        # 784-1024-1024-10, whose top layers' gradients (4.2 MB) can be summed beside layer 1's
        # backward pass
        OVERLAP=1 multigpu_runs "deep_$batch" --device gpu --impl tiled --hidden 1024,1024 --batch $batch || status=1
    done
    # shellcheck disable=SC2046
    python3 tools/tables/multigpu_table.py --accuracy-within 0.2 \
        --title "one GPU against two ($(head -1 "$out/gpu.txt" | cut -d, -f1)), median epoch of $EPOCHS" \
        --half $(ls "$out"/multigpu_half_*.json) -- \
        $(ls "$out"/multigpu_*.json | grep -v _half_) | tee "$out/multigpu.md"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    return $status
)

stage_p2p() ( # 2 GPUs: tiled on 2 ranks, the p2p all-reduce one-shot and two-shot against NCCL
    local status=0 batch variant runs=()
    export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0,1
    rm -f "$out"/p2p_*.json
    for batch in 512 2048 8192; do
        for variant in nccl one-shot two-shot; do
            local environment=(-x NCCL_NVLS_ENABLE) allreduce=p2p
            case $variant in
            nccl) allreduce=nccl ;;
            one-shot) environment+=(-x MLP_P2P_TWO_SHOT_FROM=1e15) ;;
            two-shot) environment+=(-x MLP_P2P_TWO_SHOT_FROM=0) ;;
            esac
            scaling_run "p2p_${variant}_$batch" "${mpirun_command[@]}" -np 2 "${environment[@]}" "$mlp" \
                --device gpu --impl tiled --batch $batch --allreduce $allreduce --profile || status=1
            runs+=("$variant=$out/p2p_${variant}_$batch.json")
        done
    done
    python3 tools/tables/allreduce_table.py --title "tiled, 2 GPUs: the all-reduce of the 814 KB gradient" \
        --setting all-reduce "${runs[@]}" >"$out/multigpu_p2p.md" || status=1
    cat "$out/multigpu_p2p.md"
    return $status
)

stage_nccl() ( # 2 GPUs: tiled on 2 ranks with each of NCCL's protocols, --profile for the all-reduce
    local status=0 batch protocol runs=()
    export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0,1
    rm -f "$out"/nccl_*.json
    for batch in 512 8192; do
        for protocol in default LL LL128 Simple; do
            local environment=(-x NCCL_NVLS_ENABLE)
            [ $protocol = default ] || environment+=(-x NCCL_PROTO=$protocol)
            scaling_run "nccl_${protocol}_$batch" "${mpirun_command[@]}" -np 2 "${environment[@]}" "$mlp" \
                --device gpu --impl tiled --batch $batch --profile || status=1
            runs+=("$protocol=$out/nccl_${protocol}_$batch.json")
        done
    done
    python3 tools/tables/allreduce_table.py --title "tiled, 2 GPUs: NCCL's protocols (NCCL_PROTO)" \
        --setting NCCL_PROTO "${runs[@]}" >"$out/multigpu_nccl.md" || status=1
    cat "$out/multigpu_nccl.md"
    return $status
)

stage_study() {
    tools/study.sh --out docs/study --mlp-train "$mlp" --mlp-bench "$build/mlp_bench" --data "$data" \
        2>&1 | tee "$out/study.log"
    local status=${PIPESTATUS[0]}
    rm -rf "$out/study" && cp -r docs/study "$out/study"
    sed -n '/^## 1\./,/^## 2\./p' docs/study/REPORT.md | grep '^|' # the implementations table
    grep -o '[^.]* is [0-9.]*x its 1-worker time[^.]*' docs/study/REPORT.md
    return $status
}

# This script's header, its usage, on stderr
usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" >&2; }

[ $# -gt 0 ] || { usage; exit 2; }
for stage in "$@"; do
    declare -F "stage_$stage" >/dev/null || { echo "device_run.sh: no stage '$stage'" >&2; usage; exit 2; }
done
mkdir -p "$out"
status=0
for stage in "$@"; do
    echo "######## $stage"
    start=$(date +%s)
    "stage_$stage" || status=1
    echo "######## $stage: $(( $(date +%s) - start )) s"
    [ -z "${OUT:-}" ] || tar -czf "$OUT/results.tar.gz" -C "$out" . # after each stage: a timeout keeps them
done
exit $status
