#!/usr/bin/env python3
"""One Markdown table of one GPU against two, from `mlp_train --json` runs (tools/device_run.sh's
multigpu stage).

A row per implementation, model and global batch. Its cells are median epoch times: one GPU
alone; 2 ranks with NCCL's all-reduce and with the p2p one, each summing the whole gradient
after the backward pass, summing the top layers' beside it (overlapped: --allreduce-overlap on,
where a model's top layers reach its threshold), and sharding the update (--sharded-update on).
Each 2-rank cell gives its speed-up over one GPU. Then:
  - bound: one GPU at half the batch (a rank's steps), half its epoch: what 2 GPUs would take
    with an all-reduce that cost nothing, as a speed-up over one GPU;
  - all-reduce µs/step: from the --profile runs (the step recorded in parts, so the all-reduce
    is timed alone, the wait for the other rank included), NCCL / p2p / p2p sharded;
  - the fastest 2-GPU cell's speed-up.
Every 2-rank run's test accuracy, --profile runs included, must be within --accuracy-within
points of one GPU's (exit 1 and the runs named if not).

Usage: multigpu_table.py [--title TEXT] [--accuracy-within POINTS] --half HALF.json...
                         -- RUN.json...
"""
import argparse
import sys

import scaling_table


def load(path):
    """scaling_table.py's reading of a run, with what this table groups and names it by."""
    run = scaling_table.load(path)
    name = run["all_reduce"] or ""
    run.update({
        "path": path,
        "key": (run["impl"], run["model"], run["batch"]),
        "sum": "p2p" if name.startswith("p2p") else "nccl" if name.startswith("NCCL") else "",
        "profiled": run["allreduce_ms"] is not None,
        "allreduce_us": None if run["allreduce_ms"] is None else 1000 * run["allreduce_ms"],
        "epoch_ms": 1000 * run["epoch_s"],
    })
    return run


def column(run):
    """The table's column of a 2-rank run, or None for one GPU."""
    if run["ranks"] == 1:
        return None
    kind = "sharded" if run["sharded"] else "overlapped" if run["overlap"] else "whole"
    return f"{run['sum']} {kind}"


COLUMNS = [("nccl whole", "NCCL"), ("nccl overlapped", "NCCL, overlapped"),
           ("nccl sharded", "NCCL, sharded"), ("p2p whole", "p2p"),
           ("p2p overlapped", "p2p, overlapped"), ("p2p sharded", "p2p, sharded")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--title", default="")
    parser.add_argument("--accuracy-within", type=float, default=None)
    parser.add_argument("--half", nargs="*", default=[], help="one GPU at half the batch")
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()

    rows, halves, failures = {}, {}, []
    for path in args.half:
        run = load(path)
        impl, model, batch = run["key"]
        halves[(impl, model, 2 * batch)] = run
    for path in args.runs:
        run = load(path)
        row = rows.setdefault(run["key"], {"cells": {}, "profiled": {}})
        if run["profiled"]:
            row["profiled"][column(run)] = run
        elif column(run) is None:
            row["alone"] = run
        else:
            row["cells"][column(run)] = run

    shown = [(key, label) for key, label in COLUMNS if any(key in r["cells"] for r in rows.values())]
    if args.title:
        print(f"**{args.title}**\n")
    print("| impl | model | global batch | 1 GPU | " + " | ".join(label for _, label in shown) +
          " | bound (half the batch) | all-reduce µs/step: NCCL / p2p / p2p sharded | fastest |")
    print("|---|---|---:|---:|" + "---:|" * len(shown) + "---:|---|---:|")
    for key in sorted(rows):
        row, (impl, model, batch) = rows[key], key
        alone = row.get("alone")
        if alone is None:
            failures.append(f"{impl} {model} {batch}: no run on one GPU")
            continue
        for run in list(row["cells"].values()) + list(row["profiled"].values()):
            points = 100 * (run["accuracy"] - alone["accuracy"])
            if args.accuracy_within is not None and abs(points) > args.accuracy_within:
                failures.append(f"{run['path']}: test accuracy {points:+.2f} points from one GPU's")
        cells, best = [], None
        for name, _ in shown:
            run = row["cells"].get(name)
            if run is None:
                cells.append("")
                continue
            speedup = alone["epoch_ms"] / run["epoch_ms"]
            best = speedup if best is None or speedup > best else best
            cells.append(f"{run['epoch_ms']:.2f} ms ({speedup:.2f}x)")
        half = halves.get(key)
        bound = f"{alone['epoch_ms'] / (half['epoch_ms'] / 2):.2f}x" if half else ""
        profiled = [row["profiled"].get(name) for name in ("nccl whole", "p2p whole", "p2p sharded")]
        microseconds = " / ".join(f"{r['allreduce_us']:.1f}" if r else "-" for r in profiled)
        fastest = f"{best:.2f}x" if best is not None else ""
        print(f"| {impl} | {model} | {batch} | {alone['epoch_ms']:.2f} ms | " + " | ".join(cells) +
              f" | {bound} | {microseconds} | {fastest} |")
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
