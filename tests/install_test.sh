#!/usr/bin/env bash
# The installed tool works from where it is installed, without the build tree:
#  - `cmake --install BUILD --prefix TMP` puts mlp_train and mlp_bench in TMP/bin, their manual
#    pages in TMP/share/man/man1 and README.md, LICENSE and docs/ in TMP/share/doc/mlp_train;
#    the installed programs' RUNPATH names no build folder and ldd finds every library; from
#    another folder, the installed mlp_train's --help, --version (--json: one JSON object, with
#    --json before or after) and one epoch on the CPU exit 0.
#  - as root where dpkg is (CI): `cpack` makes a .deb whose Depends name OpenBLAS, libgomp1,
#    zlib1g (and Open MPI in an MPI build); `dpkg -i` installs it, /usr/bin/mlp_train --help and
#    --version and /usr/bin/mlp_bench --help exit 0, man finds the page, `dpkg -r` removes it.
#    Skipped (with a line saying so) where the package or /usr/bin/mlp_train is already there, or
#    with MLP_TEST_DPKG=0.
# Usage: install_test.sh CMAKE CPACK BUILD_DIR DATA_DIR
set -u
cmake=$1 cpack=$2 build=$3 data=$4
source "$(dirname "$0")/script_checks.sh" # $work, fail, $failures
source_dir=$(cd "$(dirname "$0")/.." && pwd)
package=mlp-train
installed_deb=0
cleanup() {
    [ $installed_deb -eq 0 ] || dpkg -r $package >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

# run WHAT COMMAND...: the command exits 0, else a failure with the end of its output
run() {
    local what=$1
    shift
    "$@" >"$work/out" 2>&1 || { fail "$what: exit $?: $*"; sed 's/^/    /' "$work/out" | tail -5 >&2; return 1; }
}

# ---- cmake --install into a scratch prefix ----
prefix=$work/prefix
run "cmake --install" "$cmake" --install "$build" --prefix "$prefix" || exit 1
for file in bin/mlp_train bin/mlp_bench share/man/man1/mlp_train.1 share/man/man1/mlp_bench.1 \
    share/doc/mlp_train/README.md share/doc/mlp_train/LICENSE; do
    [ -f "$prefix/$file" ] || fail "not installed: $file"
done
diff -rq "$source_dir/docs" "$prefix/share/doc/mlp_train/docs" >"$work/out" 2>&1 ||
    fail "the installed docs/ differ from the source's: $(head -3 "$work/out")"
if command -v man >/dev/null; then
    [ "$(man -M "$prefix/share/man" -w mlp_train 2>/dev/null)" = "$prefix/share/man/man1/mlp_train.1" ] ||
        fail "man -M $prefix/share/man does not find mlp_train(1)"
fi
for program in mlp_train mlp_bench; do
    runpath=$(readelf -d "$prefix/bin/$program" | grep -E 'R(UN)?PATH' || true)
    case $runpath in *"$build"*) fail "$program's RUNPATH names the build folder: $runpath" ;; esac
    ldd "$prefix/bin/$program" | grep 'not found' && fail "the installed $program lacks a library"
done

cd "$work" # nothing relative to the source or build tree
run "installed mlp_train --help" "$prefix/bin/mlp_train" --help &&
    { grep -q '^Usage: mlp_train' "$work/out" || fail "installed mlp_train --help: no usage"; }
run "installed mlp_train --version" "$prefix/bin/mlp_train" --version &&
    { grep -Eq '^mlp_train [0-9]+\.[0-9]+\.[0-9]+$' "$work/out" || fail "installed --version: $(head -1 "$work/out")"; }
run "installed mlp_train --version --json" "$prefix/bin/mlp_train" --version --json && cp "$work/out" "$work/version.json"
run "installed mlp_train --json --version" "$prefix/bin/mlp_train" --json --version &&
    { cmp -s "$work/out" "$work/version.json" || fail "--json --version and --version --json differ"; }
if command -v python3 >/dev/null; then
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert {"version", "commit", "c_compiler", "cuda", "cuda_architectures", "mpi", "nccl"} <= d.keys()
assert {"description", "core", "library"} <= d["openblas"].keys()' "$work/version.json" ||
        fail "--version --json is not one JSON object with the build's facts: $(cat "$work/version.json")"
fi
run "installed mlp_bench --help" "$prefix/bin/mlp_bench" --help
run "installed mlp_train, one epoch on the CPU" "$prefix/bin/mlp_train" --device cpu --impl tiled \
    --epochs 1 --batch 2048 --data "$data" --quiet &&
    { grep -Eq '^ +1 +[0-9.]+ ' "$work/out" || fail "the one-epoch run printed no epoch: $(tail -2 "$work/out")"; }
echo "install_test: cmake --install to a scratch prefix: installed and ran"

# ---- the Debian package: cpack, dpkg -i, run, dpkg -r ----
if [ "$(id -u)" -ne 0 ] || ! command -v dpkg >/dev/null || [ "${MLP_TEST_DPKG:-1}" = 0 ]; then
    echo "install_test: the .deb is not tried (it needs root and dpkg; MLP_TEST_DPKG=0 turns it off)"
elif dpkg-query -W -f '${Status}' $package 2>/dev/null | grep -q 'installed' || [ -e /usr/bin/mlp_train ]; then
    echo "install_test: the .deb is not tried: $package or /usr/bin/mlp_train is installed already"
else
    run "cpack" "$cpack" --config "$build/CPackConfig.cmake" -B "$work/package" || exit 1
    deb=$(ls "$work"/package/${package}_*.deb 2>/dev/null | head -1)
    [ -n "$deb" ] || { fail "cpack made no $package .deb: $(tail -3 "$work/out")"; exit 1; }
    depends=$(dpkg-deb -f "$deb" Depends)
    echo "install_test: $(basename "$deb"): Depends: $depends"
    wanted="libopenblas0 libgomp1 zlib1g"
    "$prefix/bin/mlp_train" --version --json | grep -q '"mpi": true' && wanted="$wanted libopenmpi"
    for name in $wanted; do
        [[ $depends == *"$name"* ]] || fail "the .deb's Depends lack $name: $depends"
    done
    for file in ./usr/bin/mlp_train ./usr/bin/mlp_bench ./usr/share/man/man1/mlp_train.1 \
        ./usr/share/doc/mlp_train/README.md; do
        dpkg-deb -c "$deb" | grep -q " $file\$" || fail "the .deb lacks $file"
    done
    if run "dpkg -i" dpkg -i "$deb"; then
        installed_deb=1
        run "/usr/bin/mlp_train --help" /usr/bin/mlp_train --help
        run "/usr/bin/mlp_train --version" /usr/bin/mlp_train --version &&
            { grep -Eq '^mlp_train [0-9]+\.[0-9]+\.[0-9]+$' "$work/out" || fail "/usr/bin/mlp_train --version: $(head -1 "$work/out")"; }
        run "/usr/bin/mlp_bench --help" /usr/bin/mlp_bench --help
        if command -v man >/dev/null; then
            man -w mlp_train >/dev/null 2>&1 || fail "man -w mlp_train finds no page after dpkg -i"
        fi
        run "dpkg -r" dpkg -r $package && installed_deb=0
        [ ! -e /usr/bin/mlp_train ] || fail "dpkg -r left /usr/bin/mlp_train"
        echo "install_test: dpkg -i, ran /usr/bin/mlp_train --help and --version, dpkg -r"
    fi
fi

if [ $failures -ne 0 ]; then
    echo "install_test: $failures checks failed" >&2
    exit 1
fi
echo "install_test: passed"
