#!/usr/bin/env bash
# tools/study.sh end to end, in its --quick mode: it must exit 0 and write a report whose six
# sections are there, with a row per implementation measured, numbers that parse and make sense
# (efficiencies in (0, 1.5], serial fractions in [0, 1] inside their interval, accuracies of at
# least 40%, where a trainer that learns nothing gets 10%), the PNGs it links where matplotlib is installed, and a results.json that
# --replot turns into the same report; the report names the repository's paths relative to its
# root. Also: the fit recovers a known serial fraction, and the study refuses to replace a
# folder that does not hold a previous study.
# Usage: study_test.sh STUDY_SH MLP_TRAIN MLP_BENCH DATA_DIR
set -euo pipefail
study=$1 mlp_train=$2 mlp_bench=$3 data=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "study_test: $*" >&2; exit 1; }

python3 "$(dirname "$study")/study/study_fit.py" || fail "the Amdahl fit's self-check failed"

start=$(date +%s)
status=0
"$study" --quick --out "$work/study" --mlp-train "$mlp_train" --mlp-bench "$mlp_bench" --data "$data" \
    2>"$work/study.log" || status=$?
[ $status -eq 0 ] || { tail -20 "$work/study.log" >&2; fail "tools/study.sh --quick exited $status"; }
echo "study_test: tools/study.sh --quick took $(( $(date +%s) - start )) s"

python3 - "$work/study" <<'PYTHON' || fail "the report is incomplete or holds figures that do not parse"
import json, re, sys
from pathlib import Path

folder = Path(sys.argv[1])
report = (folder / "REPORT.md").read_text()
results = json.loads((folder / "results.json").read_text())
assert not results["errors"], results["errors"]
sections = re.split(r"^## ", report, flags=re.M)[1:]
assert [s[:2] for s in sections] == ["1.", "2.", "3.", "4.", "5.", "6."], [s[:30] for s in sections]


def rows(text):
    """The body rows of the Markdown tables in text, as lists of cells."""
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("|") and not line.startswith("|---") and not line.startswith("| implementation")
            and not re.match(r"\| (threads|ranks|device|batch|kernel) \|", line)]


ACCURACY_FLOOR = 40  # percent, for every accuracy in the report


def number(cell):
    return float(cell.replace("≈", "").replace(",", "").rstrip("x%").strip())


# 1: a row per implementation, the baseline at 1x
implementations, threads, processes, batch, transfers, ladder = sections
table = {(r[0], r[1]): r for r in rows(implementations)}
gpu = results["capabilities"]["gpu"]["ok"]
wanted = ["CPU tiled (baseline)", "CPU naive", "CPU blas"] + (["CPU tiled"] if results["cores"] > 1 else [])
wanted += ["GPU naive", "GPU tiled", "GPU blas", "GPU fused, whole-epoch kernel"] if gpu else []
labels = [label for label, _ in table]
for label in wanted:
    assert label in labels, f"section 1 has no row {label!r}: {labels}"
for (label, workers), row in table.items():
    total, epoch, accuracy, speedup = number(row[3]), number(row[4]), number(row[6]), number(row[7])
    # a trainer that learns nothing guesses one class in ten: 10%; the quick run reaches ~60%
    assert total > 0 and epoch > 0 and ACCURACY_FLOOR <= accuracy <= 100 and speedup > 0, row
    if "(baseline)" in label:
        assert speedup == 1, row

# 2: efficiencies and the fit
efficiencies = [number(r[3]) / 100 for r in rows(threads) if len(r) == 5]
impls = results["settings"]["scaling_impls"]
assert len(efficiencies) >= len(impls) * min(results["cores"], 2), f"section 2 lacks its tables: {efficiencies}"
assert all(0 < e <= 1.5 for e in efficiencies), efficiencies
fits = re.findall(r"serial fraction s = ([0-9.]+)(?: ± [0-9.e-]+ \(95% bootstrap interval ([0-9.]+)–([0-9.]+))?",
                  threads)
assert len(fits) == (len(impls) if results["cores"] > 1 else 0), fits
for serial, low, high in fits:
    assert 0 <= float(serial) <= 1, serial
    assert not low or float(low) <= float(serial) <= float(high), (low, serial, high)

# 3 and 5: measured where the machine can, said so where it cannot
assert results["capabilities"]["mpi"]["ok"] or processes.count("Not measured: MPI not built") == 1, processes
assert gpu or "Not measured: no usable GPU" in transfers, transfers

# 4: each batch size of the quick sweep on the CPU, with its accuracy
sweep = [r for r in rows(batch) if r[0] == "CPU"]
assert [int(r[1]) for r in sweep] == results["settings"]["sweep_batches"], sweep
assert all(number(r[3]) > 0 and number(r[4]) > 0 and ACCURACY_FLOOR <= number(r[5]) <= 100
           and int(r[6]) == results["settings"]["repeats"]
           for r in sweep), sweep

# 6: each CPU kernel, with GFLOP/s that parse
kernels = {r[0]: r for r in rows(ladder)}
assert {"naive", "tiled", "blas"} <= set(kernels), kernels
assert all(number(cell) > 0 for cell in kernels["blas"][1:-1]), kernels["blas"]

# the PNGs the report links exist and are PNGs
linked = re.findall(r"!\[[^]]*\]\(([^)]+)\)", report)
assert bool(linked) == results["capabilities"]["matplotlib"]["ok"], linked
for name in linked:
    assert (folder / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
print(f"study_test: report ok: {len(table)} implementations, efficiencies {efficiencies}, fits {fits}, "
      f"{len(linked)} figures")
PYTHON

# the report names the repository's paths relative to its root (ctest passes absolute ones)
root=$(cd "$(dirname "$study")/.." && pwd -P)
if grep -qF "$root/" "$work/study/REPORT.md" "$work/study/results.json"; then
    fail "the report names paths inside the repository ($root/...) by their absolute paths"
fi

# --replot: the same report from results.json alone (nothing measured), moved over the old one
cp "$work/study/results.json" "$work/results.json"
cp "$work/study/REPORT.md" "$work/first.md"
"$study" --replot "$work/results.json" --out "$work/study" >/dev/null || fail "--replot exited $?"
cmp -s "$work/first.md" "$work/study/REPORT.md" || fail "--replot wrote another report from the same results"
[ -z "$(find "$work" -maxdepth 1 -name '.study.*')" ] || fail "a staging folder was left behind"

# a folder that does not hold a study is left alone
mkdir "$work/other" && echo keep >"$work/other/notes.txt"
if "$study" --replot "$work/results.json" --out "$work/other" >/dev/null 2>&1; then
    fail "--out replaced a folder that holds no study"
fi
[ "$(cat "$work/other/notes.txt")" = keep ] || fail "--out touched a folder that holds no study"
echo "study_test: ok"
