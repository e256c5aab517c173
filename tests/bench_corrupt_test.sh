#!/usr/bin/env bash
# Proves that mlp_bench exits nonzero on a wrong result: with --corrupt IMPL (one output element
# of IMPL deliberately perturbed after it ran, before verification) each benchmark must exit 1
# and name IMPL as FAILED, while the same run without --corrupt exits 0.
# Usage: bench_corrupt_test.sh MLP_BENCH [cpu|gpu]   (gpu: exits 77, skipped, without a GPU)
set -uo pipefail
bench=$1
device=${2:-cpu}
quick=(--device "$device" --warmup 0 --repeats 3 --time-cap 0.02 --quiet)

fail() { echo "bench_corrupt_test: $*" >&2; exit 1; }

# expect BENCHMARK IMPL ARGS...
expect_caught() {
    local benchmark=$1 impl=$2
    shift 2
    local out status
    out=$("$bench" "$benchmark" "$@" "${quick[@]}" --impl "$impl" --corrupt "$impl" 2>&1)
    status=$?
    if [ "$device" = gpu ] && grep -q 'no GPU here' <<<"$out"; then
        echo "skipped: $out"
        exit 77
    fi
    [ $status -eq 1 ] || fail "$benchmark --corrupt $impl exited $status, want 1: $out"
    grep -q "verification FAILED: $device $benchmark $impl " <<<"$out" ||
        fail "$benchmark --corrupt $impl: no failure naming $impl in: $out"
    "$bench" "$benchmark" "$@" "${quick[@]}" --impl "$impl" >/dev/null 2>&1 ||
        fail "$benchmark $impl without --corrupt exited $?, want 0"
    echo "$device $benchmark $impl: a corrupted result exits 1 and is named"
}

if [ "$device" = cpu ]; then
    expect_caught gemm tiled --sizes 64      # every element compared
    expect_caught gemm blas --sizes 512      # a sample compared (element 0 always in it)
    expect_caught dot openmp --sizes 1M
    expect_caught maxpool openmp --image-sizes 17
else
    expect_caught gemm tiled --sizes 64
    expect_caught gemm naive --sizes 512
    expect_caught gemm blocked --sizes 64
    expect_caught gemm tf32_mma --sizes 512
    expect_caught gemm bf16_mma --sizes 1024 # a sample, and the loosest bound
    expect_caught gemm blas_bf16 --sizes 64
    expect_caught dot shuffle --sizes 1M
    expect_caught maxpool cuda --image-sizes 17
fi
