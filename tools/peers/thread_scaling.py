#!/usr/bin/env python3
"""The CPU implementations' epoch time against the thread count, next to PyTorch on the CPU,
measured in one run on one machine; prints a Markdown table and the Amdahl's-law fits.

  tools/peers/thread_scaling.py --threads 1 2 4 8 16       # on the 16-core GPU host
  tools/peers/thread_scaling.py --threads 1 2 --no-pytorch  # where PyTorch is not installed

For each implementation and thread count, mlp_train trains --epochs epochs at --batch with
--profile; the figure is the median epoch time after the first epoch (PyTorch's is measured the
same way by tools/peers/pytorch_mlp.py, in eager mode; of an even count of epochs, the lower
middle one, so that its split below adds up). Columns:
  speed-up    T(1) / T(p), efficiency speed-up / p
  serial (KF) the Karp-Flatt serial fraction (1/S - 1/p) / (1 - 1/p): constant in p for a
              program that obeys Amdahl's law; growing with p where overheads grow with threads
  gemm, other ops, between: the training pass split by --profile: inside GEMMs, inside the other
              operations (gather, softmax, sums, optimizer), and host code between operations
The Amdahl fit is T(p) = T(1) * (s + (1 - s) / p) fitted to the epoch times over the measured p,
least squares in T(1) and s with s kept in [0, 1]: the study's fit (tools/study/study_fit.py).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

PEER_DIR = Path(__file__).resolve().parent
ROOT = PEER_DIR.parent.parent
PYTORCH_MLP = PEER_DIR / "pytorch_mlp.py"
sys.path.insert(0, str(PEER_DIR.parent / "study"))  # for study_fit
from study_fit import fit_points  # noqa: E402
NO_PEER_EXIT = 3  # pytorch_mlp.py's exit status when PyTorch is not installed


def pass_split(epoch):
    """(gemm_ms, other_operations_ms, between_ms) of an epoch's training pass."""
    phases = {name: p for name, p in epoch["phases"].items() if name != "eval"}
    gemm = sum(p.get("gemm_ms", 0.0) for p in phases.values())
    other = sum(p.get("other_operations_ms", 0.0) for p in phases.values())
    return gemm, other, 1e3 * epoch["time_s"] - gemm - other


def run_mlp_train(args, impl, threads):
    command = [str(args.mlp_train), "--device", "cpu", "--impl", impl, "--threads", str(threads),
               "--data", str(args.data), "--batch", str(args.batch), "--epochs", str(args.epochs),
               "--lr", str(args.lr), "--profile", "--json", "--quiet"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"thread_scaling.py: {' '.join(command)} failed:\n{done.stderr}")
    result = json.loads(done.stdout)
    timed = result["epochs"][1:] or result["epochs"]
    times = [1e3 * e["time_s"] for e in timed]
    median = statistics.median_low(times)  # an epoch that ran, so that its split adds up
    gemm, other, between = pass_split(timed[times.index(median)])
    return {"impl": impl, "threads": threads, "epoch_ms": median, "epoch_ms_all": times,
            "gemm_ms": gemm, "other_operations_ms": other, "between_ms": between,
            "description": result["config"]["device_description"]}


def run_pytorch(args, threads):
    """PyTorch eager's epoch ms on the CPU at this many threads (pytorch_mlp.py), or None
    where PyTorch is not installed."""
    command = [sys.executable, str(PYTORCH_MLP), "--device", "cpu", "--modes", "eager", "--threads",
               str(threads), "--data", str(args.data), "--batch", str(args.batch), "--epochs",
               str(args.epochs), "--lr", str(args.lr)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode == NO_PEER_EXIT:
        print(f"thread_scaling.py: going on without PyTorch: {done.stderr.strip()}", file=sys.stderr)
        return None
    if done.returncode != 0:
        sys.exit(f"thread_scaling.py: {' '.join(command)} failed:\n{done.stderr}")
    report = json.loads(done.stdout)
    eager = [r for r in report["results"] if r["mode"] == "eager" and "epoch_s" in r]
    if not eager:
        sys.exit(f"thread_scaling.py: PyTorch at {threads} threads gave no epoch time:\n{done.stdout}")
    return report["version"], 1e3 * eager[0]["epoch_s"]


def amdahl_line(impl, fit):
    """One line for an implementation's Amdahl fit (study_fit.AmdahlFit)."""
    bound = f"{1 / fit.serial:.1f}" if fit.serial > 0 else "unbounded"
    held = "; the fit is held at the bound of [0, 1]" if fit.at_bound else ""
    return f"Amdahl fit, {impl}: serial fraction s = {fit.serial:.4f} (speed-up bound 1/s = {bound}{held})"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mlp-train", default=ROOT / "build" / "mlp_train", type=Path)
    parser.add_argument("--data", default=ROOT / "data" / "mnist", type=Path)
    parser.add_argument("--impls", nargs="+", default=["naive", "tiled", "blas"])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=4, help="per run; the first is not timed")
    parser.add_argument("--lr", type=float, default=0.05, help="for mlp_train and PyTorch alike")
    parser.add_argument("--no-pytorch", action="store_true", help="skip PyTorch (not installed)")
    parser.add_argument("--pytorch-threads", type=int, nargs="+",
                        help="thread counts for PyTorch (default: the least and the most of --threads)")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args()
    threads = sorted(set(args.threads))
    if threads[0] != 1:
        sys.exit("thread_scaling.py: --threads must include 1 (speed-ups are relative to it)")

    torch = {}
    if not args.no_pytorch:
        torch_threads = args.pytorch_threads or sorted({threads[0], threads[-1]})
        for t in torch_threads:
            measured = run_pytorch(args, t)
            if measured is None:
                break
            version, torch[t] = measured
        if torch:
            print(f"PyTorch {version} on the CPU, eager: " +
                  ", ".join(f"{t} threads {ms:.2f} ms" for t, ms in sorted(torch.items())) + "\n")

    rows = [run_mlp_train(args, impl, t) for impl in args.impls for t in threads]
    print(f"batch {args.batch}; epoch: the median of {args.epochs - 1} epochs after the first; "
          f"{os.cpu_count()} logical CPUs\n")
    header = ("| impl | threads | epoch (ms) | speed-up | efficiency | serial (KF) | gemm (ms) | "
              "other ops (ms) | between (ms) | PyTorch (ms) | PyTorch / mlp_train |")
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    fits = {}
    for impl in args.impls:
        mine = {r["threads"]: r for r in rows if r["impl"] == impl}
        t1 = mine[1]["epoch_ms"]
        for p, r in sorted(mine.items()):
            speedup = t1 / r["epoch_ms"]
            r.update(speedup=speedup, efficiency=speedup / p)
            karp_flatt = f"{(1 / speedup - 1 / p) / (1 - 1 / p):.3f}" if p > 1 else ""
            versus = [f"{torch[p]:.2f}", f"{torch[p] / r['epoch_ms']:.2f}"] if p in torch else ["", ""]
            cells = [impl, str(p), f"{r['epoch_ms']:.2f}", f"{speedup:.2f}", f"{100 * r['efficiency']:.0f}%",
                     karp_flatt, f"{r['gemm_ms']:.1f}", f"{r['other_operations_ms']:.1f}",
                     f"{r['between_ms']:.1f}"] + versus
            print("| " + " | ".join(cells) + " |")
        fits[impl] = fit_points([(p, r["epoch_ms"]) for p, r in mine.items()])
    print()
    for impl, fit in fits.items():
        if fit is not None:
            print(amdahl_line(impl, fit))
    if len(torch) > 1:
        lo, hi = min(torch), max(torch)
        speedup = torch[lo] / torch[hi]
        print(f"PyTorch: speed-up {speedup:.2f} from {lo} to {hi} threads "
              f"(efficiency {100 * speedup / (hi / lo):.0f}%)")
    print()
    for impl in args.impls:
        print(f"mlp_train --impl {impl}: {next(r['description'] for r in rows if r['impl'] == impl)}")
    if args.json:
        serial = {impl: fit.serial if fit else None for impl, fit in fits.items()}
        args.json.write_text(json.dumps({"rows": rows, "pytorch_ms": torch, "amdahl_s": serial}, indent=1))


if __name__ == "__main__":
    main()
