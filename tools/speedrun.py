#!/usr/bin/env python3
"""Time to accuracy over seeds: a recipe of mlp_train, run with N seeds (10 by default), as mean
± standard deviation of the final test accuracy, the training time (the epochs' time_s) and the
whole process's wall time; and the same recipe in JAX (tools/peers/jax_mlp.py, lax.scan, the
fastest unroll of 1, 2, 4 and 8) and PyTorch (tools/peers/pytorch_mlp.py, the faster of eager and, on
the GPU, its CUDA graph), each seed once, in the same run. The peers run at their strongest:
without the training-metric sums that mlp_train computes.

A peer's training time is its median epoch (its first epoch compiles and is not timed) times the
recipe's epochs, which leaves out what its first epoch costs beyond the others; its process time
is not comparable (Python and the framework's start-up) and is not shown. A peer configuration
runs every seed in one process (import and data to the device once). The ratio is the
peer's mean training time over mlp_train's, for the same recipe, with both accuracies shown
beside it: the time to the same accuracy where the accuracies agree.

Recipes live in a file (tools/speedrun_recipes.txt), one a line: NAME: mlp_train's options. A
recipe a peer cannot run (options it lacks, such as --validation or --optimizer adam) runs
without that peer.

Usage: tools/speedrun.py [--recipes FILE] [--recipe NAME...] [--seeds N] [--peers jax pytorch]
                         [--mlp-train PATH] [--data DIR] [--device gpu|cpu] [--json OUT]
                         [--timeout S]
"""
import argparse
import json
import os
import shlex
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools" / "peers"))
from peer_common import last_line, run_process  # noqa: E402
PEER_OPTIONS = {"--batch", "--epochs", "--lr", "--hidden", "--momentum", "--schedule", "--warmup",
                "--weight-decay", "--label-smoothing"}
OURS_ONLY = {"--impl", "--graph"}  # how mlp_train runs, not what it computes: not for peers


def read_recipes(path):
    recipes = {}
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, options = line.partition(":")
        if not sep or not name.strip():
            sys.exit(f"speedrun.py: {path}:{number}: wants NAME: OPTIONS, not '{line}'")
        recipes[name.strip()] = shlex.split(options)
    return recipes


def option_value(options, name, default=None):
    return options[options.index(name) + 1] if name in options else default


def peer_options(options):
    """The recipe's options as a peer takes them (without OURS_ONLY's, with mlp_train's default
    of 10 epochs), or None where it has one a peer lacks."""
    kept = []
    for i, option in enumerate(options):
        if option in OURS_ONLY or (i > 0 and options[i - 1] in OURS_ONLY):
            continue
        if option.startswith("--") and option not in PEER_OPTIONS:
            return None
        kept.append(option)
    return kept if "--epochs" in kept else kept + ["--epochs", "10"]


def mean_std(values):
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def run_ours(args, options, seed):
    command = [args.mlp_train, "--device", args.device, "--data", args.data, "--json", "--quiet",
               "--seed", str(seed)] + options
    done, wall = run_process(command, args.timeout)
    if done is None or done.returncode != 0:
        why = f"ran past {args.timeout} s" if done is None else done.stderr.strip()[-400:]
        sys.exit(f"speedrun.py: {shlex.join(command)} failed: {why}")
    result = json.loads(done.stdout)
    return {"accuracy": result["test_accuracy"], "train_s": result["train_time_s"], "wall_s": wall,
            "fell_back": args.device == "gpu" and "--impl" in options and
            option_value(options, "--impl") == "fused" and result["config"]["execution"] != "whole"}


def run_peer(args, peer, options, seeds):
    """The runs (one a seed) of the peer's configuration that trains fastest on this recipe, or
    None where no configuration ran every seed."""
    script = ROOT / "tools" / "peers" / f"{peer}_mlp.py"
    epochs = option_value(options, "--epochs")
    device = "cuda" if peer == "pytorch" and args.device == "gpu" else args.device  # its name for it
    base = [sys.executable, str(script), "--device", device, "--data", args.data, "--seed",
            *map(str, seeds), "--no-train-metrics"] + options
    if peer == "jax":
        variants = [["--unroll", u] for u in ("1", "2", "4", "8")]
    else:
        variants = [["--modes", "eager"]] + ([["--modes", "graph"]] if args.device == "gpu" else [])
    best = None
    for variant in variants:
        done, _ = run_process(base + variant, args.timeout)
        if done is None or done.returncode != 0:
            why = f"ran past {args.timeout} s" if done is None else last_line(done.stderr)[:300] or "no message"
            print(f"speedrun.py: {peer} {' '.join(variant)}: {why}", file=sys.stderr)
            continue
        results = json.loads(done.stdout)["results"]
        if any("error" in r for r in results) or len(results) != len(seeds):
            print(f"speedrun.py: {peer} {' '.join(variant)}: a seed failed", file=sys.stderr)
            continue
        runs = [{"accuracy": r["test_accuracy"], "train_s": r["epoch_s"] * int(epochs),
                 "how": " ".join(variant)} for r in results]
        mean = statistics.mean(r["train_s"] for r in runs)
        print(f"speedrun.py: {peer} {' '.join(variant)}: {1e3 * mean:.1f} ms", file=sys.stderr)
        if best is None or mean < statistics.mean(r["train_s"] for r in best):
            best = runs
    return best


def summary(name, runs):
    acc, acc_sd = mean_std([r["accuracy"] for r in runs])
    train, train_sd = mean_std([r["train_s"] for r in runs])
    line = {"who": name, "seeds": len(runs), "accuracy_mean": acc, "accuracy_std": acc_sd,
            "accuracy_min": min(r["accuracy"] for r in runs), "accuracy_max": max(r["accuracy"] for r in runs),
            "train_s_mean": train, "train_s_std": train_sd}
    if "wall_s" in runs[0]:
        line["wall_s_mean"], line["wall_s_std"] = mean_std([r["wall_s"] for r in runs])
    return line


def table(recipe, options, rows):
    ours = rows[0]["train_s_mean"]
    print(f"\n**{recipe}**: `mlp_train {shlex.join(options)}`, {rows[0]['seeds']} seeds\n")
    print("| who | test accuracy, mean ± sd (min, max) | training ms, mean ± sd | process s | peer time / ours |")
    print("|---|---|---:|---:|---:|")
    for row in rows:
        wall = f"{row['wall_s_mean']:.3f} ± {row['wall_s_std']:.3f}" if "wall_s_mean" in row else ""
        ratio = "" if row is rows[0] else f"{row['train_s_mean'] / ours:.2f}x"
        print(f"| {row['who']} | {100 * row['accuracy_mean']:.2f}% ± {100 * row['accuracy_std']:.2f} "
              f"({100 * row['accuracy_min']:.2f}, {100 * row['accuracy_max']:.2f}) | "
              f"{1e3 * row['train_s_mean']:.1f} ± {1e3 * row['train_s_std']:.1f} | {wall} | {ratio} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipes", default=ROOT / "tools" / "speedrun_recipes.txt", type=Path)
    parser.add_argument("--recipe", nargs="+", help="recipes to run (default: all)")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--peers", nargs="*", default=["jax", "pytorch"], choices=["jax", "pytorch"])
    parser.add_argument("--mlp-train", default=str(ROOT / "build" / "mlp_train"))
    parser.add_argument("--data", default=str(ROOT / "data" / "mnist"))
    parser.add_argument("--device", default="gpu", choices=["gpu", "cpu"])
    parser.add_argument("--json", type=Path, help="write every run and summary here")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds a process (mlp_train, or a peer's configuration) may run")
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    if not os.access(args.mlp_train, os.X_OK):
        parser.error(f"no mlp_train at {args.mlp_train} (build it, or give --mlp-train)")
    recipes = read_recipes(args.recipes)
    names = args.recipe or list(recipes)
    unknown = [n for n in names if n not in recipes]
    if unknown:
        parser.error(f"no recipe {', '.join(unknown)} in {args.recipes} (it has {', '.join(recipes)})")
    report = {}
    for name in names:
        options = recipes[name]
        seeds = range(1, args.seeds + 1)
        ours = []
        for seed in seeds:
            ours.append(run_ours(args, options, seed))
            print(f"speedrun.py: {name} seed {seed}: {100 * ours[-1]['accuracy']:.2f}%", file=sys.stderr)
        stepped = any(r["fell_back"] for r in ours)
        rows = [summary("mlp_train" + (" (the tiled step, not fused's kernel)" if stepped else ""), ours)]
        peers = {}
        for peer in args.peers:
            if peer_options(options) is None:
                print(f"speedrun.py: {name}: {peer} does not take every option; not run", file=sys.stderr)
                continue
            runs = run_peer(args, peer, peer_options(options), list(seeds))
            if runs is None:
                print(f"speedrun.py: {name}: {peer} failed; not shown", file=sys.stderr)
                continue
            peers[peer] = runs
            rows.append(summary(f"{peer} ({runs[0]['how']})", runs))
        table(name, options, rows)
        report[name] = {"options": options, "summary": rows, "mlp_train": ours, "peers": peers}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
