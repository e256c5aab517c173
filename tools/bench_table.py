#!/usr/bin/env python3
"""Turns mlp_bench's CSV output into a Markdown table, the way docs/kernels.md's tables are made.

One row per case and implementation: shape, median time, throughput, ratio to the library on the
same device (vs_library: above 1 is faster than the library), share of the measured copy
bandwidth (dot, maxpool) and the verification error. Rows that were skipped are left out.

Usage: tools/bench_table.py RESULTS.csv [--impl naive,tiled] [--shape-contains 4096x]
Example: build/mlp_bench gemm --device gpu --csv gemm.csv && tools/bench_table.py gemm.csv
"""
import argparse
import csv
import sys


def number(text, digits=3):
    """A figure with `digits` significant digits (whole numbers from 1000 on), or an empty cell."""
    if not text:
        return ""
    value = float(text)
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.{digits}g}"


def percent(text):
    return f"{100 * float(text):.0f}%" if text else ""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", nargs="+", help="files written by mlp_bench --csv")
    parser.add_argument("--impl", help="only these implementations (comma-separated)")
    parser.add_argument("--shape-contains", action="append", default=[],
                        help="only shapes containing this text (repeatable: any of them)")
    args = parser.parse_args()
    impls = set(args.impl.split(",")) if args.impl else None

    rows = []
    for path in args.csv:
        try:
            with open(path, newline="") as f:
                rows += list(csv.DictReader(f))
        except OSError as error:
            sys.exit(f"bench_table.py: {error}")
    rows = [r for r in rows if r["status"] != "skipped" and (impls is None or r["impl"] in impls)
            and (not args.shape_contains or any(s in r["shape"] for s in args.shape_contains))]
    if not rows:
        sys.exit("bench_table.py: no rows match")

    with_bandwidth = any(r["of_copy_bw"] for r in rows)
    header = ["device", "impl", "shape", "median ms", "rate", "vs library"]
    header += ["of copy bw"] if with_bandwidth else []
    header += ["error", "status"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        cells = [r["device"], r["impl"], r["shape"], number(r["median_ms"]),
                 f"{number(r['rate'])} {r['unit']}", number(r["vs_library"], 2)]
        cells += [percent(r["of_copy_bw"])] if with_bandwidth else []
        cells += [number(r["error"], 2), r["status"]]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
