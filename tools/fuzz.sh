#!/usr/bin/env bash
# Fuzzes the IDX reader and the checkpoint loader with libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer: builds tests/fuzz/ with clang into build-fuzz/, then runs each
# harness for SECONDS (default 60), both at once, starting from the seed corpus in
# tests/fuzz/corpus/ (new inputs are kept in build-fuzz/corpus/, never in the tree).
# Fails on any crash, sanitizer report, leak, timeout (10 s for one input) or memory blow-up
# (2 GB), and leaves the input that did it in build-fuzz/artifacts/. Prints each harness's
# executions. Exits 77 (skipped) when clang or its libFuzzer runtime is missing:
# tools/setup.sh installs them.
# Usage: tools/fuzz.sh [SECONDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
build=$root/build-fuzz
harnesses=(idx checkpoint)

if ! command -v clang >/dev/null; then
    echo "fuzz: skipped: clang is not installed (tools/setup.sh installs it)" >&2
    exit 77
fi
mkdir -p "$build"
if ! cmake -S "$root/tests/fuzz" -B "$build" -DCMAKE_C_COMPILER=clang >"$build/configure.log" 2>&1; then
    echo "fuzz: skipped: $(grep -A3 'CMake Error' "$build/configure.log" | tail -n 3 | tr -s ' \n' ' ')" >&2
    exit 77
fi
cmake --build "$build" -j "$(nproc)" >/dev/null

# run NAME: one harness for $seconds; its output goes to build-fuzz/NAME.log
run() {
    local name=$1
    mkdir -p "$build/corpus/$name" "$build/artifacts"
    "$build/fuzz_$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$build/artifacts/$name-" \
        "$build/corpus/$name" "$root/tests/fuzz/corpus/$name" >"$build/$name.log" 2>&1
}

echo "fuzz: ${harnesses[*]}, ${seconds} s each (clang $(clang -dumpversion), libFuzzer + ASan + UBSan)"
pids=()
for name in "${harnesses[@]}"; do
    run "$name" &
    pids+=($!)
done
failed=0
for i in "${!harnesses[@]}"; do
    name=${harnesses[$i]}
    if wait "${pids[$i]}"; then
        runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/$name.log" | grep -o '[0-9]*$')
        coverage=$(grep -o 'cov: [0-9]*' "$build/$name.log" | tail -n 1 | grep -o '[0-9]*')
        echo "fuzz_$name: $runs executions, $coverage coverage points, 0 crashes" \
             "(corpus: $(ls "$build/corpus/$name" | wc -l) inputs)"
    else
        failed=1
        echo "FAIL fuzz_$name (whole log: $build/$name.log):" >&2
        grep -E -A10 'ERROR: |runtime error|fuzz property broken|ALARM|out-of-memory' \
            "$build/$name.log" | head -n 30 >&2
        grep 'Test unit written' "$build/$name.log" >&2
    fi
done
exit $failed
