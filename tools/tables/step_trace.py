#!/usr/bin/env python3
"""What one training step is made of on the GPU: from `nsys stats -r cuda_gpu_trace --format csv`
of a run traced with --cuda-graph-trace=node, every kernel of the steady state (the second half
of the trace's kernels), grouped by name: launches, mean duration and median idle gap before it;
then the GPU's busy share of that span, and one step's kernels in order.
Usage: tools/tables/step_trace.py TRACE.csv STEPS_IN_TRACE"""
import csv
import statistics
import sys
from collections import defaultdict


def kernels(path):
    rows = []
    with open(path) as f:
        lines = [l for l in f if l.count(",") > 5]
    for r in csv.DictReader(lines):
        name = r.get("Name", "")
        if "memcpy" in name.lower() or "memset" in name.lower():
            continue
        start = float(r["Start (ns)"])
        rows.append((start, start + float(r["Duration (ns)"]), name))
    rows.sort()
    return rows


def short(name):
    return name.split("(")[0][:70]


def main():
    if len(sys.argv) != 3 or not sys.argv[2].isdigit():
        sys.exit(__doc__.splitlines()[-1])
    rows = kernels(sys.argv[1])
    steps = int(sys.argv[2])
    steady = rows[len(rows) // 2:]
    by_name = defaultdict(lambda: [0, [], []])
    for prev, cur in zip(steady, steady[1:]):
        entry = by_name[short(cur[2])]
        entry[0] += 1
        entry[1].append(cur[1] - cur[0])
        entry[2].append(cur[0] - prev[1])
    span = steady[-1][1] - steady[0][0]
    busy = sum(e - s for s, e, _ in steady)
    per_step = len(rows) / steps
    print(f"{len(rows)} kernels over {steps} steps ({per_step:.1f} a step); steady half: span "
          f"{span / 1e3:.0f} us, busy {100 * busy / span:.0f}%")
    print(f"{'kernel':70} {'n':>6} {'mean us':>8} {'gap us':>7}")
    for name, (n, d, g) in sorted(by_name.items(), key=lambda kv: -sum(kv[1][1])):
        print(f"{name:70} {n:6} {statistics.mean(d) / 1e3:8.2f} {statistics.median(g) / 1e3:7.2f}")
    mid = len(rows) * 3 // 4
    print("one stretch of the steady state, in order (start us, duration us):")
    t0 = rows[mid][0]
    for s, e, name in rows[mid:mid + int(per_step + 0.5) + 2]:
        print(f"  {(s - t0) / 1e3:8.2f} {(e - s) / 1e3:7.2f}  {short(name)}")


if __name__ == "__main__":
    main()
