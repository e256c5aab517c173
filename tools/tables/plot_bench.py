#!/usr/bin/env python3
"""Plots mlp_bench's CSV output: one PNG per (benchmark, device), throughput (GFLOP/s or GB/s,
log scale) against size (log2 scale), one line per implementation. GEMM shapes other than
squares (--mlp-shapes, --shape) are drawn as unconnected markers; GPU GEMM rows measured with
--with-transfer get a dashed line including the copies; dot and maxpool plots show the device's
measured copy bandwidth as a grey line.

Needs matplotlib. If this Python lacks it, the script runs itself under Debian's /usr/bin/python3
when that one has it, and otherwise installs the Debian package python3-matplotlib with apt-get
(through sudo when not root) and tries again.

Usage: tools/tables/plot_bench.py RESULTS.csv [MORE.csv ...] --out DIR
Example: build/mlp_bench dot --csv dot.csv && tools/tables/plot_bench.py dot.csv --out plots
"""
import argparse
import csv
import importlib
import os
import shutil
import subprocess
import sys
from collections import defaultdict

SYSTEM_PYTHON = "/usr/bin/python3"
REEXEC_MARK = "PLOT_BENCH_REEXEC"  # set when this script re-ran itself, so it does so only once

X_LABELS = {
    "gemm": "size: cube root of M·N·K",
    "dot": "n (elements per vector)",
    "maxpool": "image side (pixels)",
}


def import_pyplot():
    """matplotlib.pyplot with the file-only Agg backend, or None if it cannot be imported."""
    importlib.invalidate_caches()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as pyplot

        return pyplot
    except ImportError:
        return None


def system_python_has_matplotlib():
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return False
    if os.path.realpath(SYSTEM_PYTHON) == os.path.realpath(sys.executable):
        return False
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import matplotlib"], capture_output=True)
    return probe.returncode == 0


def rerun_under_system_python():
    """Replaces this process by the same script under /usr/bin/python3 (never returns)."""
    print(f"plot_bench: using {SYSTEM_PYTHON}, which has matplotlib", file=sys.stderr)
    environment = dict(os.environ, **{REEXEC_MARK: "1"})
    os.execve(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(__file__)] + sys.argv[1:], environment)


def apt_install_matplotlib():
    """apt-get install python3-matplotlib (Debian's, for /usr/bin/python3); False if impossible."""
    if not shutil.which("apt-get"):
        return False
    prefix = [] if os.geteuid() == 0 else ["sudo"]
    if prefix and not shutil.which("sudo"):
        return False
    print("plot_bench: installing python3-matplotlib with apt-get", file=sys.stderr)
    environment = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    commands = (["apt-get", "update", "-qq"],
                ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "python3-matplotlib"])
    for command in commands:  # their output to stderr: stdout lists the PNG files
        if subprocess.run(prefix + command, env=environment, stdout=sys.stderr).returncode != 0:
            return False
    return True


def pyplot_or_exit():
    """matplotlib.pyplot, found, or switched to, or installed: else exit with the reason."""
    pyplot = import_pyplot()
    if pyplot:
        return pyplot
    rerun_allowed = REEXEC_MARK not in os.environ
    if rerun_allowed and system_python_has_matplotlib():
        rerun_under_system_python()
    if apt_install_matplotlib():
        pyplot = import_pyplot()  # this Python may be Debian's own
        if pyplot:
            return pyplot
        if rerun_allowed and system_python_has_matplotlib():
            rerun_under_system_python()
    sys.exit(
        "plot_bench: needs matplotlib, which this Python (%s) cannot import, and installing the "
        "Debian package python3-matplotlib did not provide it. Install it (apt-get install "
        "python3-matplotlib, or pip install matplotlib) and run again." % sys.executable
    )


def number(text):
    return float(text) if text not in ("", None) else None


def read_rows(paths):
    """The timed rows (status ok) of every CSV file."""
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                if row["status"] == "ok" and number(row["rate"]):
                    rows.append(row)
    return rows


def is_square(row):
    """A GEMM shape from --sizes: 'NxNxN NN' with no label."""
    fields = row["shape"].split(" ")
    dimensions = fields[0].split("x")
    return len(fields) == 2 and fields[1] == "NN" and len(set(dimensions)) == 1


def copy_bandwidth(rows):
    """The device's copy bandwidth, recovered from rate / of_copy_bw; None if not measured."""
    for row in rows:
        fraction = number(row["of_copy_bw"])
        if fraction:
            return number(row["rate"]) / fraction
    return None


def plot_one(pyplot, benchmark, device, rows, directory):
    figure, axes = pyplot.subplots(figsize=(8, 5.5))
    by_impl = defaultdict(list)
    for row in rows:
        by_impl[row["impl"]].append(row)
    for impl, impl_rows in by_impl.items():
        lines = [r for r in impl_rows if benchmark != "gemm" or is_square(r)]
        others = [r for r in impl_rows if r not in lines]
        lines.sort(key=lambda r: number(r["size"]))
        color = None
        if lines:
            sizes = [number(r["size"]) for r in lines]
            (drawn,) = axes.plot(sizes, [number(r["rate"]) for r in lines], marker="o", label=impl)
            color = drawn.get_color()
            with_transfer = [(s, number(r["rate_with_transfer"])) for s, r in zip(sizes, lines)
                             if number(r["rate_with_transfer"])]
            if with_transfer:
                axes.plot(*zip(*with_transfer), linestyle="--", color=color, label=impl + " + copies")
        if others:
            axes.scatter([number(r["size"]) for r in others], [number(r["rate"]) for r in others],
                         marker="x", color=color, label=impl + " (other shapes)")
    bandwidth = copy_bandwidth(rows)
    if bandwidth:
        axes.axhline(bandwidth, color="grey", linestyle=":", label="copy bandwidth (%.0f GB/s)" % bandwidth)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel(X_LABELS.get(benchmark, "size"))
    axes.set_ylabel(rows[0]["unit"])
    axes.set_title("mlp_bench %s on the %s" % (benchmark, device.upper()))
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path = os.path.join(directory, "%s_%s.png" % (benchmark, device))
    figure.savefig(path, dpi=120)
    pyplot.close(figure)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", nargs="+", help="CSV files written by mlp_bench --csv")
    parser.add_argument("--out", required=True, help="directory for the PNG files (created if needed)")
    arguments = parser.parse_args()
    rows = read_rows(arguments.csv)
    if not rows:
        sys.exit("plot_bench: no timed rows (status ok) in %s" % ", ".join(arguments.csv))
    pyplot = pyplot_or_exit()
    os.makedirs(arguments.out, exist_ok=True)
    groups = defaultdict(list)
    for row in rows:
        groups[(row["benchmark"], row["device"])].append(row)
    for (benchmark, device), group in sorted(groups.items()):
        print(plot_one(pyplot, benchmark, device, group, arguments.out))


if __name__ == "__main__":
    main()
