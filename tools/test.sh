#!/usr/bin/env bash
# The test command of the README (and of CI): set up and build, run every test (GPU tests skip
# where there is no GPU), then build the CPU product alone with AddressSanitizer and
# UndefinedBehaviorSanitizer and run the CPU tests again under them (but the long end-to-end
# runs), then build it without MPI (mpirun's data parallelism is optional), run the command-line
# test on that and check that it refuses to run under mpirun, then fuzz the IDX reader and the
# checkpoint loader for FUZZ_SECONDS each (default 60; tools/fuzz.sh).
# Usage: tools/test.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)

"$root/tools/setup.sh"
echo "== tests (build/)"
ctest --test-dir "$root/build" --output-on-failure -j "$jobs"

echo "== CPU-only build with sanitizers (build-sanitize/)"
# Under the sanitizers: the unit tests, the command line on real data (cli), the benchmark and
# the MPI parameters; not the long end-to-end runs, which repeat the same code for minutes (they
# ran above), nor the package's installation, nor the comparison tool's test (a Python tool's)
unsanitized='^(determinism_.*|study_quick|mpi_training|mnist_cpu_blas|install|schedule_cpu|compare_tool)$'
cmake -S "$root" -B "$root/build-sanitize" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMLP_CUDA=OFF \
    -DMLP_SANITIZE=ON >/dev/null
cmake --build "$root/build-sanitize" -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$root/build-sanitize" --output-on-failure -j "$jobs" -L cpu -E "$unsanitized"

echo "== CPU-only build without MPI (build-no-mpi/)"
cmake -S "$root" -B "$root/build-no-mpi" -DCMAKE_BUILD_TYPE=Release -DMLP_CUDA=OFF -DMLP_MPI=OFF \
    >/dev/null
cmake --build "$root/build-no-mpi" -j "$jobs" --target mlp_train
"$root/tests/cli_test.sh" "$root/build-no-mpi/mlp_train" "$root/data/mnist"
"$root/tests/mpi_test.sh" refusal "$root/build-no-mpi/mlp_train" "$root/data/mnist"

echo "== fuzzing (build-fuzz/)"
status=0
"$root/tools/fuzz.sh" "${FUZZ_SECONDS:-60}" || status=$?
if [ $status -eq 77 ]; then
    echo "FAIL: fuzzing could not run (clang with libFuzzer is missing after tools/setup.sh)" >&2
    exit 1
fi
[ $status -eq 0 ] || exit $status
echo "== all tests passed"
