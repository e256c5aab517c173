#!/usr/bin/env bash
# Build, prove and measure mlp_train on a machine with a GPU, in stages, so one call of a
# time-limited GPU host does several of them. Logs and results go to out/ (or $RESULTS); when
# $OUT is set (the device tool's return folder, which takes few files) they are also packed
# into $OUT/results.tar.gz. Each stage ends by printing a short summary.
# Usage: tools/device_run.sh STAGE...
#   build     configure and build build-device/ (Release, native CPU code, CUDA for this GPU)
#   test      every CTest test (CPU and GPU)
#   sanitize  compute-sanitizer memcheck, racecheck and initcheck on the GPU test programs
#   ncu       Nsight Compute on the first steps' kernels, selected by NVTX range
#   train     10 epochs of each GPU implementation at batch 64 and 512
#   profile   --profile tables: data resident, host pageable, host pinned, host overlapped
#   nsys      an Nsight Systems trace of --impl tiled --batch 512 and its summary tables
#   compare   epoch times next to PyTorch (eager and CUDA graph), batch 16 and 512
#   odd       shapes the tests do not use: GEMMs of odd sizes (all transposes, every GPU GEMM),
#             training with odd widths and batches on each GPU implementation, Fashion-MNIST
#   example   the README's line: mlp_train --impl tiled --batch 512 (3 epochs)
#   cpu       CPU implementations with 1 and all threads next to PyTorch on the CPU
#   bench     mlp_bench: GEMM sweeps (GPU; CPU at 1 and all threads), the MLP's shapes, dot
#             product and max pooling, as CSV and tables, then the plots if matplotlib is there
#   limits    models too large for the GPU's memory (a huge --hidden, a huge --batch on top):
#             each must end with exit 1 and a message, not a crash
#   ladder    the GEMM ladder (docs/kernels.md): its test under compute-sanitizer memcheck (small
#             shapes) and racecheck (tiny shapes) and in full, then mlp_bench on every rung and cuBLAS in
#             each precision (256..4096 and the MLP's shapes) into ladder.csv, and its table
#   study     tools/study.sh, the parallel-computing study, on this build: docs/study (REPORT.md,
#             PNGs, results.json) regenerated here and copied into out/study
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${RESULTS:-$root/out}
build=$root/build-device
data=$root/data/mnist
mlp=$build/mlp_train
mkdir -p "$out"
cd "$root" || exit 1

stage_build() {
    nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader | tee "$out/gpu.txt"
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >"$out/cmake.log" 2>&1 || { tail -20 "$out/cmake.log"; return 1; }
    cmake --build "$build" -j "$(nproc)" >"$out/build.log" 2>&1 || { grep -E 'error|Error' "$out/build.log" | head -30; return 1; }
    grep -iE 'warning' "$out/build.log" | head -10
    echo "build: ok"
}

stage_test() {
    ctest --test-dir "$build" --output-on-failure -j 4 >"$out/ctest.log" 2>&1
    local status=$?
    grep -E 'Test +#|tests passed|FAIL|Skipped|Not Run' "$out/ctest.log" | sed 's/  */ /g'
    [ $status -eq 0 ] || grep -B2 -A12 -E 'FAIL|\*\*\*Failed' "$out/ctest.log" | head -80
    return $status
}

stage_sanitize() {
    local status=0
    for tool in memcheck racecheck initcheck; do
        for test in test_gpu_ops test_gpu_training test_gpu_kernels; do
            [ "$tool" = racecheck ] && [ "$test" = test_gpu_training ] && continue # same kernels, slow
            [ "$tool" = initcheck ] && [ "$test" = test_gpu_kernels ] && continue # inputs all uploaded
            MLP_TEST_SHAPES=small compute-sanitizer --tool $tool --error-exitcode 99 "$build/$test" \
                >"$out/sanitize_${tool}_$test.log" 2>&1
            local s=$?
            echo "compute-sanitizer $tool $test: exit $s; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize_${tool}_$test.log" | tail -1)"
            [ $s -eq 0 ] || { status=1; grep -m 20 -E '=========' "$out/sanitize_${tool}_$test.log"; }
        done
    done
    compute-sanitizer --tool memcheck --error-exitcode 99 "$mlp" --device gpu --impl tiled --data host --overlap \
        --data "$data" --epochs 1 --batch 1000 --quiet >"$out/sanitize_mlp_train.log" 2>&1
    local s=$?
    echo "compute-sanitizer memcheck mlp_train --impl tiled --data host --overlap: exit $s; $(grep 'ERROR SUMMARY' "$out/sanitize_mlp_train.log")"
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

stage_nsys() {
    [ -x .device/nsys.sh ] || { echo "nsys: .device/nsys.sh missing (run ../shared/gpu-host/stage.sh, carry .device)"; return 1; }
    local impl
    for impl in tiled blas; do
        .device/nsys.sh profile -t cuda,nvtx -o "/tmp/mlp_train_$impl" -f true "$mlp" --device gpu --impl $impl \
            --batch 512 --epochs 2 --data "$data" --quiet >"$out/nsys_profile_$impl.log" 2>&1
        .device/nsys.sh stats -r nvtx_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum "/tmp/mlp_train_$impl.nsys-rep" \
            >"$out/nsys_stats_$impl.txt" 2>&1
        echo "== nsys, --impl $impl --batch 512: kernels"
        grep -A12 'cuda_gpu_kern_sum' "$out/nsys_stats_$impl.txt" | cut -c1-200
    done
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
    for impl in naive tiled blas; do
        for args in "--hidden 17,3 --batch 7 --epochs 1" "--hidden 1000,33 --batch 999 --epochs 2 --optimizer adam" \
            "--dataset fashion --data data/fashion --batch 333 --epochs 2"; do
            # shellcheck disable=SC2086
            "$mlp" --device gpu --impl $impl $args --json --quiet >"$out/odd_train.json" 2>"$out/odd_train.err" ||
                { status=1; echo "FAILED: $impl $args: $(cat "$out/odd_train.err")"; continue; }
            python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(f'{sys.argv[2]:<5} {sys.argv[3]:<60} test accuracy {100*d[\"test_accuracy\"]:.2f}%')" \
                "$out/odd_train.json" "$impl" "$args"
        done
    done
    compute-sanitizer --tool memcheck --error-exitcode 99 "$mlp" --device gpu --impl tiled --hidden 17,3 \
        --batch 999 --epochs 1 --data "$data" --quiet >"$out/odd_sanitize.log" 2>&1 || status=1
    echo "compute-sanitizer memcheck, --impl tiled --hidden 17,3 --batch 999: $(grep 'ERROR SUMMARY' "$out/odd_sanitize.log")"
    return $status
}

stage_example() {
    "$mlp" --impl tiled --batch 512 --epochs 3 --data "$data" 2>/dev/null | tee "$out/example.txt"
}

stage_compare() {
    python3 tools/compare_pytorch.py --mlp-train "$mlp" --data "$data" --device gpu --batch 16 512 \
        --json "$out/compare_gpu.json" | tee "$out/compare_gpu.md"
}

stage_cpu() {
    python3 tools/compare_pytorch.py --mlp-train "$mlp" --data "$data" --device cpu --batch 512 \
        --threads 1 "$(nproc)" --epochs 2 --json "$out/compare_cpu.json" | tee "$out/compare_cpu.md"
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
    python3 tools/plot_bench.py --out "$out/plots" "$out"/gemm_gpu.csv "$out"/gemm_cpu_1.csv \
        "$out"/gemm_cpu_all.csv "$out"/dot.csv "$out"/maxpool.csv >"$out/plot.log" 2>&1 ||
        echo "plots: failed (see plot.log)"
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
        --impl tiled,warptiled,pipelined,blas,tf32_mma,tf32_wgmma,blas_tf32,bf16_mma,bf16_wgmma,blas_bf16 \
        >"$out/ladder.txt" 2>&1 || status=1
    grep FAILED "$out/ladder.txt" | head -10
    python3 tools/bench_table.py "$out/ladder.csv" --shape-contains 1024x1024x1024 \
        --shape-contains 4096x4096x4096 | tee "$out/ladder.md"
    python3 tools/bench_table.py "$out/ladder.csv" --shape-contains b512 --shape-contains b16 \
        --impl tiled,pipelined,blas >"$out/ladder_mlp.md"
    return $status
}

stage_study() {
    tools/study.sh --mlp-train "$mlp" --mlp-bench "$build/mlp_bench" --data "$data" 2>&1 | tee "$out/study.log"
    local status=${PIPESTATUS[0]}
    rm -rf "$out/study" && cp -r docs/study "$out/study"
    sed -n '/^## 1\./,/^## 2\./p' docs/study/REPORT.md | grep '^|' # the implementations table
    grep -o '[^.]* is [0-9.]*x its 1-worker time[^.]*' docs/study/REPORT.md
    return $status
}

status=0
for stage in "$@"; do
    echo "######## $stage"
    start=$(date +%s)
    "stage_$stage" || status=1
    echo "######## $stage: $(( $(date +%s) - start )) s"
    [ -z "${OUT:-}" ] || tar -czf "$OUT/results.tar.gz" -C "$out" . # after each stage: a timeout keeps them
done
exit $status
