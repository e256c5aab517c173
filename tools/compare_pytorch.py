#!/usr/bin/env python3
"""Times mlp_train's implementations next to the same job in PyTorch, in one run on one machine,
and prints a Markdown table of epoch times and ratios (PyTorch's time / mlp_train's time, so
above 1 means mlp_train is faster).

  GPU: tools/compare_pytorch.py --device gpu --batch 16 512
  CPU: tools/compare_pytorch.py --device cpu --batch 512 --threads 1 16

Epoch time: the median over the epochs after the first (a warm-up), for both programs. mlp_train's
figure is its per-epoch "time_s" (training pass, metrics read back), PyTorch's is measured the
same way by tools/pytorch_mlp.py. Needs PyTorch (present on the GPU host).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_mlp_train(binary, data, device, impl, batch, epochs, threads, extra):
    command = [str(binary), "--device", device, "--impl", impl, "--data", str(data), "--batch", str(batch),
               "--epochs", str(epochs), "--json", "--quiet"] + extra
    if threads:
        command += ["--threads", str(threads)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"compare_pytorch.py: {' '.join(command)} failed:\n{done.stderr}")
    result = json.loads(done.stdout)
    times = [e["time_s"] for e in result["epochs"]]
    return {"epoch_s": statistics.median(times[1:]), "test_accuracy": result["test_accuracy"],
            "description": result["config"]["device_description"]}


def run_pytorch(data, device, batches, threads, epochs, lr):
    command = [sys.executable, str(ROOT / "tools" / "pytorch_mlp.py"), "--data", str(data), "--device",
               "cuda" if device == "gpu" else "cpu", "--epochs", str(epochs), "--lr", str(lr),
               "--batch"] + [str(b) for b in batches]
    if threads:
        command += ["--threads"] + [str(t) for t in threads]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"compare_pytorch.py: PyTorch reference failed:\n{done.stderr}")
    return json.loads(done.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mlp-train", default=ROOT / "build" / "mlp_train", type=Path)
    parser.add_argument("--data", default=ROOT / "data" / "mnist", type=Path)
    parser.add_argument("--device", default="gpu", choices=["gpu", "cpu"])
    parser.add_argument("--impls", nargs="+", default=["naive", "tiled", "blas"])
    parser.add_argument("--batch", type=int, nargs="+", default=[16, 512])
    parser.add_argument("--threads", type=int, nargs="+", default=[], help="CPU thread counts (cpu only)")
    parser.add_argument("--epochs", type=int, default=4, help="per measurement; the first is a warm-up")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args()

    thread_counts = args.threads if args.device == "cpu" and args.threads else [0]
    torch = run_pytorch(args.data, args.device, args.batch, [t for t in thread_counts if t], args.epochs, args.lr)
    rows = []
    for threads in thread_counts:
        for batch in args.batch:
            ref = {r["mode"]: r for r in torch["results"]
                   if r["batch"] == batch and (not threads or r["threads"] == threads)}
            for impl in args.impls:
                extra = ["--lr", str(args.lr)]
                ours = run_mlp_train(args.mlp_train, args.data, args.device, impl, batch, args.epochs, threads, extra)
                row = {"impl": impl, "batch": batch, "threads": threads, **ours}
                for mode, r in ref.items():
                    row[f"torch_{mode}_s"] = r["epoch_s"]
                    row[f"ratio_vs_{mode}"] = r["epoch_s"] / ours["epoch_s"]
                rows.append(row)

    modes = sorted({k[len("torch_"):-2] for row in rows for k in row if k.startswith("torch_")})
    print(f"{args.device.upper()}: {torch['device']}; PyTorch {torch['torch']}; "
          f"epoch times are medians of {args.epochs - 1} epochs after a warm-up epoch\n")
    header = "| impl | batch |" + (" threads |" if args.device == "cpu" else "") + " mlp_train epoch (ms) |"
    header += "".join(f" PyTorch {m} (ms) | PyTorch {m} / mlp_train |" for m in modes)
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for row in rows:
        line = f"| {row['impl']} | {row['batch']} |" + (f" {row['threads']} |" if args.device == "cpu" else "")
        line += f" {1e3 * row['epoch_s']:.2f} |"
        for m in modes:
            line += f" {1e3 * row[f'torch_{m}_s']:.2f} | {row[f'ratio_vs_{m}']:.2f} |" if f"torch_{m}_s" in row else " | |"
        print(line)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "pytorch": torch}, indent=1))


if __name__ == "__main__":
    main()
