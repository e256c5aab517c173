#!/usr/bin/env python3
"""A markdown table of one training job run with several settings of its all-reduce (Open MPI's
algorithms, NCCL's protocols): each run's median epoch and all-reduce milliseconds per step,
from `mlp_train --json --profile` output (tools/device_run.sh's mpi and nccl stages).

Usage: allreduce_table.py --title TEXT --setting NAME LABEL=RUN.json...
"""
import argparse
import os
import sys

from scaling_table import load


def row(label, path):
    if not os.path.exists(path):
        return f"| {label} | | (the run failed) | |"  # scaling_run removes a failed run's JSON
    run = load(path)
    return (f"| {label} | {run['batch']} | {1000 * run['epoch_s']:.1f} ms | "
            f"{run['allreduce_ms']:.3f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--title", required=True)
    parser.add_argument("--setting", required=True, help="the first column's heading")
    parser.add_argument("runs", nargs="+", metavar="LABEL=RUN.json")
    args = parser.parse_args()
    print(f"\n**{args.title}**\n")
    print(f"| {args.setting} | batch | epoch (median) | allreduce ms/step |\n|---|---:|---:|---:|")
    specs = [spec.split("=", 1) for spec in args.runs]
    print("\n".join(row(label, path) for label, path in specs))
    if not all(os.path.exists(path) for _, path in specs):
        sys.exit(1)


if __name__ == "__main__":
    main()
