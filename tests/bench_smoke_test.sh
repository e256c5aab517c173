#!/usr/bin/env bash
# mlp_bench end to end on small cases: every benchmark runs and verifies (exit 0), the CSV and
# JSON files hold one row per case and implementation with none FAILED, and usage errors exit 2.
# Usage: bench_smoke_test.sh MLP_BENCH [cpu|gpu]   (gpu: exits 77, skipped, without a GPU)
set -euo pipefail
bench=$1
device=${2:-cpu}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
quick=(--device "$device" --warmup 0 --repeats 3 --time-cap 0.02 --max-mib 64 --quiet)

fail() { echo "bench_smoke_test: $*" >&2; exit 1; }

if [ "$device" = gpu ]; then
    if ! out=$("$bench" dot "${quick[@]}" --sizes 1K 2>&1); then
        grep -q 'no GPU here' <<<"$out" && { echo "skipped: $out"; exit 77; }
        fail "$out"
    fi
fi

# run NAME ROWS ARGS...: one benchmark run that must pass, with ROWS rows in its CSV
run() {
    local name=$1 rows=$2
    shift 2
    "$bench" "$@" "${quick[@]}" --csv "$work/$name.csv" --json "$work/$name.json" >"$work/$name.txt" ||
        fail "$name: exit status $? (output: $(cat "$work/$name.txt"))"
    local got
    got=$(($(wc -l <"$work/$name.csv") - 1))
    [ "$got" -eq "$rows" ] || fail "$name: $got rows in the CSV, want $rows"
    ! grep -q ',FAILED,' "$work/$name.csv" || fail "$name: a row FAILED"
    grep -q '^device  *bench  *impl' "$work/$name.txt" || fail "$name: no table on stdout"
    json_checks+=("$work/$name.json" "$rows")
}
json_checks=()

if [ "$device" = cpu ]; then
    run gemm_squares 18 gemm --sizes 2:64                       # 6 sizes × naive, tiled, blas
    run gemm_mlp 20 gemm --mlp-shapes --impl tiled,blas         # sampled verification, transposes
    run gemm_shape 3 gemm --shape 33,17,65,TT
    run dot 24 dot --sizes 1K:64K,1000003                       # 8 lengths × loop, openmp, blas
    run maxpool 10 maxpool --image-sizes 4:64 --planes 3         # 5 sides × sequential, openmp
    run maxpool_window 6 maxpool --image-sizes 1,5,33 --kernel 3 --stride 2 --padding 1
else
    run gemm_squares 108 gemm --sizes 2:64 --with-transfer      # 6 sizes × 18 GPU GEMMs
    run gemm_mlp 180 gemm --mlp-shapes                          # 10 shapes × 18 GPU GEMMs
    run gemm_shape 18 gemm --shape 33,17,65,TT
    run dot 32 dot --sizes 1K:64K,1000003                       # 8 lengths × 4 GPU dots
    run maxpool 5 maxpool --image-sizes 4:64 --planes 3
    run maxpool_window 3 maxpool --image-sizes 1,5,33 --kernel 3 --stride 2 --padding 1
fi

# every JSON file parses and holds its rows (one Python for all: it is slow to start)
python3 - "${json_checks[@]}" <<'PYTHON' || fail "a JSON file is malformed or holds the wrong number of rows"
import json, sys
pairs = sys.argv[1:]
for path, rows in zip(pairs[::2], pairs[1::2]):
    assert len(json.load(open(path))["rows"]) == int(rows), path
PYTHON

if [ "$device" = gpu ]; then
    # the longest name comes out whole in the table, the CSV and the JSON
    for file in "$work/gemm_shape.txt" "$work/gemm_shape.csv" "$work/gemm_shape.json"; do
        grep -q 'tiled_bf16_stored' "$file" || fail "$file: the name tiled_bf16_stored is cut short"
    done
    # a forced plan, split-K included, is verified like the kernels' own
    "$bench" gemm "${quick[@]}" --impl blocked,tiled --sizes 17,100 --shape 64,40,300,TN --plan 64:3 \
        >/dev/null || fail "gemm --plan 64:3 failed"
    "$bench" gemm "${quick[@]}" --impl tiled --sizes 17,100 --shape 64,40,300,TN --plan 64x128:2 \
        >/dev/null || fail "gemm --plan 64x128:2 failed"
fi

# usage errors: exit status 2
for args in "gemm --impl nope" "maxpool --kernel 2 --padding 2" "dot --planes 3" "gemm --sizes 0" "nope" \
    "gemm --plan 48:2" "gemm --plan 64:0" "dot --plan 64:2" "gemm --plan 64x48:2" "gemm --plan 64x128"; do
    status=0
    # shellcheck disable=SC2086
    "$bench" $args >/dev/null 2>&1 || status=$?
    [ $status -eq 2 ] || fail "'mlp_bench $args' exited $status, want 2"
done
"$bench" --help >"$work/help.txt" || fail "--help exits with $?"
# (from a file: grep -q stops at its match, and under pipefail the writer's SIGPIPE would fail)
grep -q -- '--corrupt IMPL' "$work/help.txt" || fail "--help does not document --corrupt"
grep -q -- '--plan TILE:SPLITS' "$work/help.txt" || fail "--help does not document --plan"
echo "bench_smoke_test ($device): ok"
