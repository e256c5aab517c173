#!/usr/bin/env python3
"""Turns mlp_bench's CSV output into a Markdown table, the way docs/kernels.md's tables are made.

One row per case and implementation: shape, median time, throughput, ratio to the library on the
same device (vs_library: above 1 is faster than the library), the throughput counting the
host<->device copies (gemm --with-transfer), share of the measured copy bandwidth (dot, maxpool)
and the verification error. Rows that were skipped, and columns empty in every row, are left out.

Usage: tools/tables/bench_table.py RESULTS.csv [--impl naive,tiled] [--shape-contains 4096x]
Example: build/mlp_bench gemm --device gpu --csv gemm.csv && tools/tables/bench_table.py gemm.csv
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

    columns = [  # (title, cell), a column only where some row has a value for it
        ("device", lambda r: r["device"]),
        ("impl", lambda r: r["impl"]),
        ("shape", lambda r: r["shape"]),
        ("median ms", lambda r: number(r["median_ms"])),
        ("rate", lambda r: f"{number(r['rate'])} {r['unit']}"),
        ("vs library", lambda r: number(r["vs_library"], 2)),
        ("with copies", lambda r: f"{number(r['rate_with_transfer'])} {r['unit']}" if r["rate_with_transfer"] else ""),
        ("of copy bw", lambda r: percent(r["of_copy_bw"])),
        ("error", lambda r: number(r["error"], 2)),
        ("status", lambda r: r["status"]),
    ]
    columns = [(title, cell) for title, cell in columns if any(cell(r) for r in rows)]
    print("| " + " | ".join(title for title, _ in columns) + " |")
    print("|" + "---|" * len(columns))
    for r in rows:
        print("| " + " | ".join(cell(r) for _, cell in columns) + " |")


if __name__ == "__main__":
    main()
