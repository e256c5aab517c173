#!/usr/bin/env python3
"""Markdown tables of how training scales with processes, threads and GPUs, from the JSON that
`mlp_train --json` prints (one file per run; tools/device_run.sh's mpi and multigpu stages).

Runs are grouped by device, model, implementation and batch size. In each group the baseline is the
run without mpirun on the fewest cores (CPU: ranks x threads) or GPUs; every run's speedup is
the baseline's median epoch time over its own, and its efficiency the speedup per core (CPU) or
per GPU. Where the run was profiled (--profile), the all-reduce's milliseconds per step and its
share of the epoch are shown; test accuracy is given as a difference from the baseline's.

With --accuracy-within POINTS it also checks that every run's test accuracy is within POINTS
percentage points of its baseline's (the ranks must train the same model), names the runs that
are not, and exits 1.

Usage: scaling_table.py [--title TEXT] [--accuracy-within POINTS] RUN.json...
"""
import argparse
import json
import math
import statistics
import sys


def load(path):
    with open(path) as f:
        run = json.load(f)
    config = run["config"]
    epochs = run["epochs"]
    times = [e["time_s"] for e in epochs]
    median = statistics.median(times)
    steps = math.ceil(config["train_images"] / config["batch"])
    allreduce = None
    if "phases" in epochs[0]:
        per_epoch = [e["phases"]["allreduce"]["ms"] for e in epochs]
        allreduce = statistics.median(per_epoch) / steps
    ranks = config.get("ranks", 1)
    return {
        "device": config["device"],
        "impl": config["impl"],
        "model": "-".join(str(width) for width in config["layers"]),
        "batch": config["batch"],
        "ranks": ranks,
        "threads": config["threads"],
        "launched": config.get("all_reduce") is not None,
        "all_reduce": config.get("all_reduce"),
        "overlap": config.get("all_reduce_overlap", False),
        "sharded": config.get("sharded_update", False),
        "execution": config["execution"],
        "epoch_s": median,
        "images_per_s": config["train_images"] / median,
        "allreduce_ms": allreduce,
        "steps": steps,
        "accuracy": run["test_accuracy"],
    }


def resources(run):
    """Cores on the CPU (ranks x threads), GPUs on the GPU."""
    return run["ranks"] if run["device"] == "gpu" else run["ranks"] * run["threads"]


def label(run):
    if not run["launched"]:
        return "alone"
    how = run["all_reduce"].replace(" all-reduce", "").replace(" (CUDA IPC)", "")
    overlap = ", overlapped" if run["overlap"] else ""
    sharded = ", sharded update" if run["sharded"] else ""
    return f"mpirun -np {run['ranks']}, {how}{overlap}{sharded}"


def groups_of(runs):
    """Runs grouped by device, implementation and batch; each group's baseline first."""
    groups = {}
    for run in runs:
        groups.setdefault((run["device"], run["model"], run["impl"], run["batch"]), []).append(run)
    return [sorted(groups[key], key=lambda r: (resources(r), r["launched"], r["ranks"],
                                               r["all_reduce"] or "", r["overlap"], r["sharded"]))
            for key in sorted(groups)]


def accuracy_outliers(runs, points):
    """Lines naming the runs whose test accuracy is more than points from their baseline's."""
    lines = []
    for group in groups_of(runs):
        base = group[0]
        for run in group[1:]:
            delta = 100 * (run["accuracy"] - base["accuracy"])
            if abs(delta) > points:
                lines.append(f"{run['model']} {run['impl']} batch {run['batch']} {label(run)}: test accuracy "
                             f"{delta:+.2f} points from {label(base)}'s (bound {points})")
    return lines


def table(runs, title):
    lines = []
    if title:
        lines += [f"**{title}**", ""]
    gpu = runs[0]["device"] == "gpu"
    unit = "GPUs" if gpu else "ranks x threads"
    lines.append(f"| model | impl | batch | run | {unit} | execution | epoch (median) | images/s | "
                 f"speedup | efficiency | allreduce ms/step | test acc (vs baseline) |")
    lines.append("|---|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for group in groups_of(runs):
        base = group[0]
        for run in group:
            speedup = base["epoch_s"] / run["epoch_s"]
            efficiency = speedup * resources(base) / resources(run)
            shape = str(run["ranks"]) if gpu else f"{run['ranks']} x {run['threads']}"
            allreduce = ""
            if run["allreduce_ms"] is not None:
                share = run["allreduce_ms"] * run["steps"] / (1000 * run["epoch_s"])
                allreduce = f"{run['allreduce_ms']:.3f} ({100 * share:.0f}%)"
            accuracy = 100 * run["accuracy"]
            delta = 100 * (run["accuracy"] - base["accuracy"])
            lines.append(
                f"| {run['model']} | {run['impl']} | {run['batch']} | {label(run)} | {shape} | {run['execution']} | "
                f"{1000 * run['epoch_s']:.1f} ms | {run['images_per_s']:,.0f} | {speedup:.2f}x | "
                f"{100 * efficiency:.0f}% | {allreduce} | {accuracy:.2f}% ({delta:+.2f}) |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--title", default="")
    parser.add_argument("--accuracy-within", type=float, metavar="POINTS")
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()
    runs = [load(path) for path in args.runs]
    by_device = {}
    for run in runs:
        by_device.setdefault(run["device"], []).append(run)
    print("\n\n".join(table(group, args.title) for group in by_device.values()))
    if args.accuracy_within is not None:
        outliers = accuracy_outliers(runs, args.accuracy_within)
        for line in outliers:
            print(f"scaling_table.py: {line}", file=sys.stderr)
        if outliers:
            sys.exit(1)


if __name__ == "__main__":
    main()
