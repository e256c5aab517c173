#!/usr/bin/env python3
"""Times mlp_train's implementations against its peers, in one run on one machine, and prints the
Markdown tables that docs/performance.md shows: epoch times, the fastest mlp_train against the
best peer, test accuracies, and where the project's goals stand.

Contenders (GPU, --device gpu):
  mlp_train  each GPU implementation: --impl naive, tiled, blas, each with --graph on (the step
             replayed from a CUDA graph) and --graph off (each kernel queued), and --impl fused
             (one persistent kernel per epoch; --graph does not apply)
  PyTorch eager  tools/peers/pytorch_mlp.py --modes eager: the usual loop
  PyTorch graph  tools/peers/pytorch_mlp.py --modes graph: the whole step captured as a CUDA graph,
                 fused SGD
  JAX scan   tools/peers/jax_mlp.py: the whole epoch one jitted lax.scan, matmul precision "highest"
  PyTorch compiled  tools/peers/pytorch_mlp.py --modes compile: the same step through torch.compile
                 (max-autotune-no-cudagraphs, static shapes), then captured as one CUDA graph; last,
                 in a process of its own (Inductor's compile workers stay behind), and minutes of
                 autotuning a run
  At --precisions tf32 and bf16, every GPU peer runs at --matmul-precision "tensorfloat32" and
  "bfloat16" (PyTorch's bfloat16 is autocast: its activations are BF16 too).
  Every contender runs with and without its training-loss and accuracy sums (--sums; mlp_train's
  --no-train-metrics), JAX at each lax.scan unroll (--jax-unroll 1 2 4 8). A ratio is taken in
  each pairing, sums on both sides and sums on neither, each side at its fastest configuration
  in that pairing (named in the notes; every configuration's epoch is in the JSON), at the same
  precision; a lead counts only as far as it holds in both: the ratio shown and judged is the
  smaller.
  --precisions fp32 tf32 bf16: each of tiled, blas and fused also with --precision tf32 and bf16
             (the GEMMs' products on tensor cores): rows of their own, not counted as the fastest
             FP32 mlp_train, and a table of each against its FP32 run: epoch ms and test accuracy,
             the difference in points, and the goal (within 0.3 points). mlp_train always runs
             in FP32 too, for that table; the peers run only at the precisions asked for.
CPU (--device cpu): --impl naive, tiled, blas at each --threads count, against PyTorch eager
on the CPU at the same thread count (add jax-scan to --peers for JAX on the CPU).

Every contender trains the same job: 784-256-10 (--hidden), ReLU, softmax cross-entropy, SGD
with momentum 0.9, mlp_train's default learning rate for the batch (passed to every contender
as --lr), He-uniform initial weights, MNIST normalized as mlp_train does, FP32, the data set
resident on the device, batches gathered there in a fresh shuffled order each epoch, the last
partial batch trained on, and (in the pairing with sums) the training loss and accuracy summed
on the device and read back at the end of the epoch.

Epoch time: each contender's own clock around its training pass (mlp_train's per-epoch "time_s";
the peers measure the same span, see their headers), the median over epochs 2..N (--epochs N,
default 5): the first epoch (warm-up, graph capture, JIT compilation) is not counted. The ratio
column is the best peer's time over the fastest mlp_train's in each pairing, and the smaller of
the two: above 1 means mlp_train is faster.
Test accuracy: after the last epoch.

On the GPU the tool also times whole processes: --wall-runs (3) rounds of
`mlp_train --impl FASTEST --batch 512 --epochs 10` (FASTEST: the fastest variant at batch 512
in the table) beside the floor, `cuda_floor` (tools/probes/cuda_floor.cu: a CUDA context made and
torn down; --cuda-floor, by default beside mlp_train), in an order that turns each round; each
timed with time.monotonic() around the subprocess (start-up, data loading, training, every
epoch's test pass, exit). Reported: the medians, and the median of each round's difference to its
own floor, which the goal is about, with the test accuracy.

A peer that cannot run (PyTorch or JAX not installed, no GPU backend) is reported as absent; one
that fails or runs past --timeout is reported as such; neither stops the others.

  GPU: tools/peers/compare.py --device gpu --batch 16 64 512 2048 --json compare_gpu.json > compare_gpu.md
  CPU: tools/peers/compare.py --device cpu --batch 512 --threads 1 16 --epochs 2
  Precision: tools/peers/compare.py --impls tiled blas fused --graph on --peers --batch 64 512 \
                 --epochs 10 --wall-runs 0 --precisions fp32 tf32 bf16

Progress goes to stderr, the Markdown to stdout, everything measured to --json. Interrupted
(Ctrl-C, or SIGTERM from timeout or a batch system), it stops measuring and still prints and
writes what ran, the rest marked 'not run'. Exit status: 0, or 1 when a contender or a
whole-process run failed or timed out, or the run was interrupted (after printing everything);
absent peers are not failures.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
from pathlib import Path

import peer_common  # needs no NumPy (this folder is on the path)
from peer_common import last_line, run_process, turning_rounds

PEER_DIR = Path(__file__).resolve().parent  # the peer scripts, beside this one
ROOT = PEER_DIR.parent.parent

PROGRAM = "compare.py"
GOAL_RATIO = 2.0                                 # fastest mlp_train vs best peer, per batch
GOAL_BATCHES = (16, 64, 512, 2048)
MOONSHOTS = ((512, 2e-3), (16, 40e-3))           # (batch, epoch time in seconds)
WALL_GOAL_S, WALL_GOAL_ACCURACY = 0.06, 0.978    # 10 epochs at batch 512 (the defaults): above the floor
PRECISION_GOAL_POINTS = 0.3                      # TF32 and BF16 test accuracy against FP32's

# peer key -> (column label, script, mode inside the script)
PEERS = {
    "torch-eager": ("PyTorch eager", "pytorch_mlp.py", "eager"),
    "torch-graph": ("PyTorch graph", "pytorch_mlp.py", "graph"),
    "jax-scan": ("JAX scan", "jax_mlp.py", "scan"),
    "torch-compile": ("PyTorch compiled", "pytorch_mlp.py", "compile"),  # last: minutes of autotuning
}
FRAMEWORK = {"pytorch_mlp.py": "torch", "jax_mlp.py": "jax"}
CUDA_ONLY = ("torch-graph", "torch-compile")


def log(message):
    print(f"{PROGRAM}: {message}", file=sys.stderr, flush=True)


def log_outcome(where, o):
    if o["status"] == "ok":
        log(f"{where}: {o['label']}: {milliseconds(o['epoch_s'])} ms per epoch, "
            f"test accuracy {100 * o['test_accuracy']:.2f}%")
    else:
        log(f"{where}: {o['label']}: {o['status']} {o['note']}")


# ---------------------------------------------------------------------------------------------
# The contenders

def our_contenders(args):
    """mlp_train's variants: dicts with key, label, impl, graph (None: not passed), precision."""
    contenders = []
    for precision in args.precisions:
        suffix = "" if precision == "fp32" else f"-{precision}"
        for impl in args.impls:
            if precision != "fp32" and impl == "naive":  # FP32 only
                continue
            if args.device == "cpu" or impl == "fused":  # --graph: GPU only, and fused ignores it
                contenders.append({"key": impl + suffix, "label": impl + suffix.replace("-", " "), "kind": "mlp_train",
                                   "impl": impl, "graph": None, "precision": precision})
                continue
            for graph in args.graph:
                key = (impl if graph == "on" else f"{impl}-nograph") + suffix
                label = (f"{impl} graph" if graph == "on" else f"{impl} no graph") + suffix.replace("-", " ")
                contenders.append({"key": key, "label": label, "kind": "mlp_train", "impl": impl, "graph": graph,
                                   "precision": precision})
    return contenders


MATMUL_PRECISION = {"fp32": "highest", "tf32": "tensorfloat32", "bf16": "bfloat16"}


def peer_contenders(args):
    """The peers in each of --precisions (their --matmul-precision; PyTorch's CPU in FP32 only)."""
    contenders = []
    for key in (k for k in PEERS if k in args.peers):  # PEERS' order: torch.compile last
        label, script, mode = PEERS[key]
        gpu_or_jax = script == "jax_mlp.py" or args.device == "gpu"
        for precision in args.peer_precisions if gpu_or_jax else ["fp32"]:
            suffix = "" if precision == "fp32" else f"-{precision}"
            contenders.append({"key": key + suffix, "label": label + suffix.replace("-", " "), "kind": "peer",
                               "script": script, "mode": mode, "precision": precision})
    return contenders


SUMS_NAMES = {"with": "sums", "without": "no sums"}
SUMS_SETTING_WORDS = {"with": "with the training sums", "without": "without the training sums"}


def sums_arguments(setting):
    """The arguments of a --sums setting, mlp_train's and every peer's: 'with' or 'without'."""
    return [] if setting == "with" else ["--no-train-metrics"]


def sums_setting(extra):
    """The --sums setting of a configuration's arguments."""
    return "without" if "--no-train-metrics" in extra else "with"


def peer_configurations(args, script, precision):
    """Every configuration a peer runs in, as extra arguments: in each --sums setting, at its
    matmul precision, and for JAX each lax.scan unroll (--jax-unroll). The fastest in each setting
    is the peer's figure there: peers are compared at their strongest."""
    sums = [sums_arguments(setting) for setting in args.sums]
    precision_args = ["--matmul-precision", MATMUL_PRECISION[precision]]
    if script != "jax_mlp.py":
        return [s + precision_args for s in sums]
    return [s + ["--unroll", str(u)] + precision_args for s in sums for u in args.jax_unroll]


def configuration_name(extra):
    """'no sums, unroll 4' for the extra arguments of a configuration."""
    words = [SUMS_NAMES[sums_setting(extra)]]
    if "--unroll" in extra:
        words.append("unroll " + extra[extra.index("--unroll") + 1])
    return ", ".join(words)


def peer_process(contender):
    """Which peers share a process: one script at one precision, torch.compile's apart."""
    return contender["script"], contender["precision"], contender["mode"] == "compile"


def run_peer_strongest(args, script, group, batch, threads, absent_frameworks, runs):
    """The group's contenders (one script, one precision) in every configuration. Each keeps, in
    'by_sums', its fastest run in each --sums setting (epoch_s and configuration), in
    'configurations' every run (configuration, status, epoch_s where it ran), and as its outcome
    the fastest in the first setting (as mlp_train's, run_ours), named in its note, or, where
    nothing in that setting ran, its failure."""
    first, by_sums, tried = {}, {}, {}
    for extra in peer_configurations(args, script, group[0]["precision"]):
        setting = sums_setting(extra)
        for o in run_peer_script(args, script, group, batch, threads, absent_frameworks, runs, extra):
            o["configuration"] = configuration_name(extra)
            tried.setdefault(o["contender"], []).append(
                {"configuration": o["configuration"], "status": o["status"], "epoch_s": o.get("epoch_s")})
            fastest_in = by_sums.setdefault(o["contender"], {})
            if o["status"] == "ok" and (setting not in fastest_in or o["epoch_s"] < fastest_in[setting]["epoch_s"]):
                fastest_in[setting] = {"epoch_s": o["epoch_s"], "configuration": o["configuration"]}
            kept = first.get(o["contender"])
            if setting == args.sums[0] and (kept is None or kept["status"] != "ok" or
                                            (o["status"] == "ok" and o["epoch_s"] < kept["epoch_s"])):
                first[o["contender"]] = o
    for key, o in first.items():
        o["by_sums"] = by_sums[key]
        o["configurations"] = tried[key]
        if o["status"] == "ok":
            o["note"] = o["configuration"]
    return list(first.values())


def learning_rate(args, batch):
    return args.lr if args.lr is not None else peer_common.default_learning_rate(batch)


def outcome(contender, batch, threads, status, note="", **figures):
    """One cell of the tables: status is ok, absent, failed, timeout, skipped or not run."""
    return {"contender": contender["key"], "label": contender["label"], "kind": contender["kind"],
            "precision": contender.get("precision", "fp32"), "batch": batch, "threads": threads,
            "status": status, "note": note, **figures}


def mlp_train_command(args, impl, batch, epochs, threads, graph, lr, precision="fp32"):
    command = [str(args.mlp_train), "--device", args.device, "--impl", impl, "--data", str(args.data),
               "--batch", str(batch), "--epochs", str(epochs), "--hidden", args.hidden,
               "--seed", str(args.seed), "--json", "--quiet"]
    if lr is not None:
        command += ["--lr", repr(lr)]
    if graph:
        command += ["--graph", graph]
    if precision != "fp32":
        command += ["--precision", precision]
    if threads:
        command += ["--threads", str(threads)]
    return command


def run_ours(args, contender, batch, threads):
    """The contender in each --sums setting: its outcome is the run in the first setting, or a
    failure in another; 'by_sums' has each setting's epoch time where it ran as asked."""
    if contender["impl"] == "naive" and batch < args.naive_min_batch:
        return outcome(contender, batch, threads, "skipped", f"naive runs from batch {args.naive_min_batch} on")
    if contender["impl"] == "fused" and args.device == "cpu":
        return outcome(contender, batch, threads, "skipped", "--impl fused is GPU only")
    first, by_sums = None, {}
    for setting in args.sums:
        o = run_ours_once(args, contender, batch, threads, setting)
        if o["status"] == "ok" and o["as_asked"]:
            by_sums[setting] = {"epoch_s": o["epoch_s"], "configuration": SUMS_NAMES[setting]}
        if first is None:
            first = o
        elif o["status"] != "ok" and first["status"] == "ok":
            first = o  # a failure in either setting is the contender's
    first["by_sums"] = by_sums
    return first


def run_ours_once(args, contender, batch, threads, setting):
    command = mlp_train_command(args, contender["impl"], batch, args.epochs, threads, contender["graph"],
                                learning_rate(args, batch), contender["precision"]) + sums_arguments(setting)
    done, wall = run_process(command, args.timeout)
    if done is None:
        return outcome(contender, batch, threads, "timeout", f"past {args.timeout} s", command=command)
    if done.returncode != 0:
        return outcome(contender, batch, threads, "failed", f"exit {done.returncode}: {last_line(done.stderr)}",
                       command=command)
    try:
        result = json.loads(done.stdout)
        times = [e["time_s"] for e in result["epochs"]]
        config = result["config"]
    except (ValueError, KeyError, TypeError) as error:
        return outcome(contender, batch, threads, "failed", f"unreadable JSON ({error})", command=command)
    # fused runs whole epochs, --graph on replays recorded steps, --graph off queues them: a run
    # that did not is marked, and never counted as the fastest under a name that is not what ran
    # (fused takes the tiled step where its kernel is slower, on more hidden layers, in TF32 and
    # BF16 and under mpirun)
    asked = "whole" if contender["impl"] == "fused" else "recorded" if contender["graph"] == "on" else "direct"
    ran = config.get("execution")
    note = ("" if ran == asked else f"the tiled step ('{ran}')" if contender["impl"] == "fused"
            else f"fell back: asked for '{asked}', ran '{ran}'")
    return outcome(contender, batch, threads, "ok", note, as_asked=ran == asked,
                   precision=config.get("precision", "fp32"),
                   epoch_s=statistics.median(times[1:]),
                   epoch_times_s=times, test_accuracy=result["test_accuracy"],
                   train_accuracy=result["epochs"][-1].get("train_accuracy"), lr=config.get("lr"),
                   execution=config.get("execution"), description=config.get("device_description"),
                   version=result.get("version"), process_wall_s=wall, command=command)


def run_peer_script(args, script, contenders, batch, threads, absent_frameworks, runs, extra=()):
    """One process of a peer script for the given contenders (its modes) at one batch. Returns
    outcomes; records the script's JSON (versions, device) in runs."""
    framework = FRAMEWORK[script]
    if framework in absent_frameworks:
        return [outcome(c, batch, threads, "absent", absent_frameworks[framework]) for c in contenders]
    device = ("cuda" if framework == "torch" else "gpu") if args.device == "gpu" else "cpu"
    command = [args.python, str(PEER_DIR / script), "--data", str(args.data), "--device", device,
               "--batch", str(batch), "--epochs", str(args.epochs), "--hidden", args.hidden,
               "--seed", str(args.seed), "--lr", repr(learning_rate(args, batch)),
               "--modes"] + [c["mode"] for c in contenders] + list(extra)
    if threads:
        command += ["--threads", str(threads)]
    done, wall = run_process(command, args.timeout)
    if done is None:
        return [outcome(c, batch, threads, "timeout", f"past {args.timeout} s", command=command) for c in contenders]
    if done.returncode == peer_common.EXIT_ABSENT:
        absent_frameworks[framework] = last_line(done.stderr)
        return [outcome(c, batch, threads, "absent", absent_frameworks[framework]) for c in contenders]
    if done.returncode != 0:
        return [outcome(c, batch, threads, "failed", f"exit {done.returncode}: {last_line(done.stderr)}",
                        command=command) for c in contenders]
    try:
        report = json.loads(done.stdout)
        by_mode = {r["mode"]: r for r in report["results"]}
    except (ValueError, KeyError, TypeError) as error:
        return [outcome(c, batch, threads, "failed", f"unreadable JSON ({error})", command=command)
                for c in contenders]
    runs.append({key: value for key, value in report.items() if key != "results"})
    outcomes = []
    for c in contenders:
        r = by_mode.get(c["mode"])
        if r is None:
            outcomes.append(outcome(c, batch, threads, "skipped", f"{script} did not run mode {c['mode']}"))
            continue
        if r.get("error"):
            outcomes.append(outcome(c, batch, threads, "failed", r["error"], command=command))
            continue
        figures = {k: v for k, v in r.items() if k not in ("mode", "batch", "threads", "device")}
        outcomes.append(outcome(c, batch, threads, "ok", r.get("optimizer", ""), peer_threads=r.get("threads"),
                                process_wall_s=wall, command=command, precision=c["precision"], **figures))
    return outcomes


# ---------------------------------------------------------------------------------------------
# Tables

def milliseconds(seconds):
    ms = 1e3 * seconds
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}" if ms < 1000 else f"{ms:.0f}"


def cell(o, figure):
    if o is None:
        return ""
    if o["status"] != "ok":
        return {"skipped": "–"}.get(o["status"], o["status"])
    return figure(o) + ("" if o.get("as_asked", True) else f" ({o['note']})")


def fastest(outcomes, kind):
    """The fastest FP32 run of a kind, of mlp_train's only runs that ran as asked (a fused run that
    fell back is the tiled step under another name); precision_leads compares the others."""
    ok = [o for o in outcomes if o["kind"] == kind and o["status"] == "ok" and o.get("precision", "fp32") == "fp32"
          and o.get("as_asked", True)]
    return min(ok, key=lambda o: o["epoch_s"]) if ok else None


def pairing_words(args):
    """The pairings --sums asks for, in words."""
    if len(args.sums) == 2:
        return "sums on both sides and on neither"
    return "sums on both sides" if args.sums[0] == "with" else "sums on neither side"


def pairings(args, outcomes, precision):
    """For each --sums setting: the fastest mlp_train run in it (as asked) against the fastest peer
    configuration in it, at `precision`, and their ratio (peer over ours)."""
    found = {}
    for setting in args.sums:
        def best(kind):
            ok = [o for o in outcomes if o["kind"] == kind and o.get("precision", "fp32") == precision
                  and setting in o.get("by_sums", {})]
            return min(ok, key=lambda o: o["by_sums"][setting]["epoch_s"], default=None)
        ours, peer = best("mlp_train"), best("peer")
        if ours and peer:
            ours_s, peer_s = ours["by_sums"][setting]["epoch_s"], peer["by_sums"][setting]["epoch_s"]
            found[setting] = {"ours": ours["label"], "ours_epoch_s": ours_s,
                              "peer": f"{peer['label']} ({peer['by_sums'][setting]['configuration']})",
                              "peer_epoch_s": peer_s, "ratio": peer_s / ours_s}
    return found


def peers_without_figure(outcomes, precision):
    """The peers at `precision` that should have run but gave no figure (failed, timed out, or not
    run after an interruption): a lead over the rest may be over the slower peers only, so it is
    shown with their names and no goal is judged on it. (An absent framework is the machine's.)"""
    return sorted(o["label"] for o in outcomes if o["kind"] == "peer" and o["precision"] == precision
                  and o["status"] in ("failed", "timeout", "not run"))


def judged_ratio(args, pairs):
    """The lead that holds in every pairing: the smallest ratio, or None unless every --sums
    setting has its pairing."""
    if not pairs or any(s not in pairs for s in args.sums):
        return None
    return min(p["ratio"] for p in pairs.values())


def without_text(peers):
    """' (without JAX scan)' for the peers that gave no figure, or ''."""
    return f" (without {', '.join(peers)})" if peers else ""


def ratio_text(pairs, ratio, peers_missing=()):
    """'1.94× (sums 2.71×, no sums 1.94×)'."""
    if ratio is None:
        return "–"
    return (f"{ratio:.2f}× (" + ", ".join(f"{SUMS_NAMES[s]} {p['ratio']:.2f}×" for s, p in pairs.items()) + ")"
            + without_text(peers_missing))


def summarize(args, rows):
    """Per (threads, batch): the fastest mlp_train, the best peer, the FP32 pairings and the ratio
    judged (the smaller of the pairings')."""
    summary = []
    for (threads, batch), outcomes in rows.items():
        ours, peer = fastest(outcomes.values(), "mlp_train"), fastest(outcomes.values(), "peer")
        pairs = pairings(args, list(outcomes.values()), "fp32")
        summary.append({"threads": threads, "batch": batch,
                        "peers_without_figure": peers_without_figure(outcomes.values(), "fp32"),
                        "fastest_mlp_train": ours and {"contender": ours["label"], "epoch_s": ours["epoch_s"],
                                                       "test_accuracy": ours["test_accuracy"]},
                        "best_peer": peer and {"contender": peer["label"], "epoch_s": peer["epoch_s"],
                                               "test_accuracy": peer["test_accuracy"]},
                        "pairings": pairs, "ratio_peer_over_ours": judged_ratio(args, pairs)})
    return summary


def markdown_tables(args, contenders, rows, summary):
    lines = []
    lead = ["threads", "batch"] if args.device == "cpu" else ["batch"]

    def row_lead(threads, batch):
        return [str(threads or "default"), str(batch)] if args.device == "cpu" else [str(batch)]

    # epoch times, every contender in the first --sums setting; the ratio is the judged one
    lines += [f"Epoch ms {SUMS_SETTING_WORDS[args.sums[0]]}; the ratio is the fastest FP32 peer's over the "
              f"fastest FP32 mlp_train's, " + ("the smaller of the two pairings':" if len(args.sums) == 2
                                               else f"{pairing_words(args)}:"), ""]
    header = lead + [f"{c['label']} (ms)" for c in contenders] + ["fastest mlp_train", "best peer",
                                                                   "ratio (peer/ours)"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for s, ((threads, batch), outcomes) in zip(summary, rows.items()):
        cells = [cell(outcomes.get(c["key"]), lambda o: milliseconds(o["epoch_s"])) for c in contenders]
        ours, peer, ratio = s["fastest_mlp_train"], s["best_peer"], s["ratio_peer_over_ours"]
        cells += [f"{milliseconds(ours['epoch_s'])} ms ({ours['contender']})" if ours else "–",
                  f"{milliseconds(peer['epoch_s'])} ms ({peer['contender']})" if peer else "–",
                  ratio_text(s["pairings"], ratio, s["peers_without_figure"])]
        lines.append("| " + " | ".join(row_lead(threads, batch) + cells) + " |")

    # test accuracy
    lines += ["", f"Test accuracy after {args.epochs} epochs:", ""]
    header = lead + [c["label"] for c in contenders]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (threads, batch), outcomes in rows.items():
        cells = [cell(outcomes.get(c["key"]), lambda o: f"{100 * o['test_accuracy']:.2f}%") for c in contenders]
        lines.append("| " + " | ".join(row_lead(threads, batch) + cells) + " |")
    return lines


def precision_leads(args, rows):
    """Per batch, precision and --sums setting: the fastest mlp_train run (as asked) against the
    fastest peer configuration, both in that setting; and the ratio judged, the smallest."""
    leads = []
    for (threads, batch), outcomes in rows.items():
        for precision in args.precisions:
            pairs = pairings(args, list(outcomes.values()), precision)
            if pairs:
                leads.append({"batch": batch, "threads": threads, "precision": precision, "pairings": pairs,
                              "ratio": judged_ratio(args, pairs),
                              "peers_without_figure": peers_without_figure(outcomes.values(), precision)})
    return leads


def lead_lines(args, leads):
    lines = ["", f"Against the fastest peer configuration at the same precision, {pairing_words(args)}"
             + ("; a lead holds as far as the smaller ratio:" if len(args.sums) == 2 else ":"), "",
             "| batch | precision | sums | fastest mlp_train | ms | fastest peer | ms | ratio (peer/ours) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in leads:
        for setting, p in r["pairings"].items():
            lines.append(f"| {r['batch']} | {r['precision']} | {SUMS_NAMES[setting]} | {p['ours']} | "
                         f"{milliseconds(p['ours_epoch_s'])} | {p['peer']} | {milliseconds(p['peer_epoch_s'])} | "
                         f"{p['ratio']:.2f}×{without_text(r['peers_without_figure'])} |")
    return lines


def precision_rows(args, contenders, rows):
    """Each TF32 and BF16 run against the FP32 run of the same implementation and --graph, at the
    same batch: dicts for the JSON, the table and the goal."""
    fp32 = {(c["impl"], c["graph"]): c["key"] for c in contenders if c.get("precision") == "fp32"}
    found = []
    for (threads, batch), outcomes in rows.items():
        for c in contenders:
            if c.get("precision", "fp32") == "fp32" or (c["impl"], c["graph"]) not in fp32:
                continue
            o, base = outcomes.get(c["key"]), outcomes.get(fp32[(c["impl"], c["graph"])])
            if not o or not base or o["status"] != "ok" or base["status"] != "ok":
                found.append({"batch": batch, "contender": c["label"], "status": "not measured"})
                continue
            found.append({"batch": batch, "contender": c["label"], "impl": c["impl"], "precision": c["precision"],
                          "status": "ok", "epoch_s": o["epoch_s"], "fp32_epoch_s": base["epoch_s"],
                          "test_accuracy": o["test_accuracy"], "fp32_test_accuracy": base["test_accuracy"],
                          "points": 100 * (o["test_accuracy"] - base["test_accuracy"]),
                          "execution": o.get("execution")})
    return found


def precision_lines(args, found):
    """The precision table and its goal: within PRECISION_GOAL_POINTS of FP32's test accuracy."""
    lines = ["", f"Reduced precision against FP32 (same implementation, batch and seed; {args.epochs} epochs):", "",
             "| batch | run | epoch ms | FP32 epoch ms | speed-up | test acc | FP32 test acc | difference (points) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in found:
        if r["status"] != "ok":
            lines.append(f"| {r['batch']} | {r['contender']} | {r['status']} | | | | | |")
            continue
        run = r["contender"] + (f" (steps: {r['execution']})" if r["impl"] == "fused" else "")  # the fallback
        lines.append(f"| {r['batch']} | {run} | {milliseconds(r['epoch_s'])} | "
                     f"{milliseconds(r['fp32_epoch_s'])} | {r['fp32_epoch_s'] / r['epoch_s']:.2f}× | "
                     f"{100 * r['test_accuracy']:.2f}% | {100 * r['fp32_test_accuracy']:.2f}% | {r['points']:+.2f} |")
    measured = [r for r in found if r["status"] == "ok"]
    worst = max(measured, key=lambda r: abs(r["points"]), default=None)
    goal = f"TF32 and BF16: test accuracy within {PRECISION_GOAL_POINTS:g} points of FP32"
    if not worst or len(measured) < len(found):
        status, value = "not measured" if not worst else "not yet (runs missing)", "–"
    else:
        status = "met" if abs(worst["points"]) <= PRECISION_GOAL_POINTS else "not yet"
        value = f"worst {worst['points']:+.2f} points ({worst['contender']}, batch {worst['batch']})"
    lines += ["", "| goal | measured | status |", "|---|---|---|", f"| {goal} | {value} | {status} |"]
    return lines, {"goal": goal, "measured": value, "status": status}


def goals(args, summary, wall):
    """The goals (issues 8 and 33) as rows (goal, measured, status)."""
    by_batch = {s["batch"]: s for s in summary if not s["threads"]}
    rows = []
    for batch in GOAL_BATCHES:
        s = by_batch.get(batch)
        goal = f"batch {batch}: fastest mlp_train ≥ {GOAL_RATIO:g}× faster than the best peer, {pairing_words(args)}"
        if not s or not s["ratio_peer_over_ours"]:
            why = ("not measured" if not s else "no mlp_train variant ran" if not s["fastest_mlp_train"]
                   else "no FP32 peer asked for (--precisions)" if "fp32" not in args.peer_precisions
                   else "no FP32 peer ran" if not s["best_peer"]
                   else "not every pairing ran: " + ", ".join(SUMS_NAMES[x] for x in args.sums
                                                              if x not in s["pairings"]) + " missing")
            rows.append({"goal": goal, "measured": why, "status": "–"})
            continue
        if s["peers_without_figure"]:
            rows.append({"goal": goal, "status": "–", "measured": "not judged: no figure from "
                         + ", ".join(s["peers_without_figure"])})
            continue
        ratio = s["ratio_peer_over_ours"]
        measured = "; ".join(f"{SUMS_NAMES[setting]}: {p['ratio']:.2f}× ({p['ours']} {milliseconds(p['ours_epoch_s'])} "
                             f"ms, {p['peer']} {milliseconds(p['peer_epoch_s'])} ms)"
                             for setting, p in s["pairings"].items())
        rows.append({"goal": goal, "value": ratio, "status": "met" if ratio >= GOAL_RATIO else "not yet",
                     "measured": f"{ratio:.2f}×, the smaller of {measured}"})
    for batch, limit in MOONSHOTS:
        s = by_batch.get(batch)
        goal = f"moonshot: batch {batch} epoch under {1e3 * limit:g} ms"
        ours = s and s["fastest_mlp_train"]
        if not ours:
            rows.append({"goal": goal, "measured": "not measured", "status": "–"})
            continue
        rows.append({"goal": goal, "value": ours["epoch_s"], "status": "met" if ours["epoch_s"] < limit else "not yet",
                     "measured": f"{milliseconds(ours['epoch_s'])} ms ({ours['contender']})"})
    goal = (f"{args.wall_epochs} epochs at batch {args.wall_batch}: whole process ≤ an empty CUDA process "
            f"+ {1e3 * WALL_GOAL_S:g} ms, test accuracy ≥ {100 * WALL_GOAL_ACCURACY:.1f}%")
    if wall and wall.get("median_above_floor_s") is not None:
        above = wall["median_above_floor_s"]
        met = above <= WALL_GOAL_S and wall["min_test_accuracy"] >= WALL_GOAL_ACCURACY
        rows.append({"goal": goal, "value": above, "status": "met" if met else "not yet",
                     "measured": f"{1e3 * above:.0f} ms above the floor (median of the rounds' differences), "
                                 f"{100 * wall['min_test_accuracy']:.2f}% ({wall['variant']})"})
    else:
        why = (wall or {}).get("note") or ("no floor: " + wall["floor_note"] if wall and wall.get("floor_note")
                                           else "not measured")
        rows.append({"goal": goal, "measured": why, "status": "–"})
    return rows


# ---------------------------------------------------------------------------------------------
# The whole-process check

def failure(done):
    """Why a process failed: a timeout (done is None), or its exit status and last line."""
    return "timeout" if done is None else f"exit {done.returncode}: {last_line(done.stderr)}"


def wall_check(args, contenders, rows):
    """Times whole mlp_train processes (10 epochs at batch 512 by default) with the fastest
    variant at that batch (or --wall-impl), each round beside a cuda_floor process
    (turning_rounds). Returns a dict for the JSON and the goals."""
    by_key = {c["key"]: c for c in contenders}
    if args.wall_impl:
        impl, _, graph = args.wall_impl.partition(":")
        variant = {"impl": impl, "graph": graph or None, "label": args.wall_impl}
    else:
        best = fastest(rows.get((0, args.wall_batch), {}).values(), "mlp_train")
        if not best:
            return {"note": f"no mlp_train variant measured at batch {args.wall_batch}"}
        c = by_key[best["contender"]]
        variant = {"impl": c["impl"], "graph": c["graph"] if c["graph"] == "off" else None, "label": c["label"]}
    # mlp_train's defaults (learning rate included), as a user would run it
    command = mlp_train_command(args, variant["impl"], args.wall_batch, args.wall_epochs, 0, variant["graph"], None)
    commands = {"floor": [str(args.cuda_floor)]} if os.access(args.cuda_floor, os.X_OK) else {}
    floor_note = None if commands else f"{args.cuda_floor}: no such program"
    commands["mlp_train"] = command
    floors, walls, accuracies, notes = {}, {}, {}, []
    for run, name, done, wall in turning_rounds(commands, args.wall_runs, args.timeout):
        if done is None or done.returncode != 0:
            notes.append(("cuda_floor: " if name == "floor" else "") + failure(done))
            floor_note = notes[-1] if name == "floor" else floor_note
        elif name == "floor":
            floors[run] = wall
        else:
            try:
                accuracies[run] = json.loads(done.stdout)["test_accuracy"]
                walls[run] = wall
            except (ValueError, KeyError):
                notes.append("unreadable JSON")
    for run in walls:
        log(f"wall check {run + 1}/{args.wall_runs}: {walls[run]:.3f} s"
            + (f" (floor {floors[run]:.3f} s)" if run in floors else "")
            + f", test accuracy {100 * accuracies[run]:.2f}%")
    if not walls:
        return {"variant": variant["label"], "command": command, "note": "; ".join(notes) or "no run",
                "failures": notes}
    above = [walls[run] - floors[run] for run in walls if run in floors]
    return {"variant": variant["label"], "command": command, "walls_s": list(walls.values()),
            "median_s": statistics.median(walls.values()), "floor_walls_s": list(floors.values()),
            "floor_note": floor_note,
            "median_above_floor_s": statistics.median(above) if above and not floor_note else None,
            "test_accuracies": list(accuracies.values()), "min_test_accuracy": min(accuracies.values()),
            "failures": notes}


def wall_line(wall):
    """The whole-process runs in a sentence."""
    command = " ".join([Path(wall["command"][0]).name] + wall["command"][1:])
    runs = len(wall["walls_s"])
    floors = wall.get("floor_walls_s") or []
    floor = (f"; cuda_floor beside each: " + ", ".join(f"{w:.3f} s" for w in floors)
             + f" (median {statistics.median(floors):.3f} s)" if floors else "")
    return (f"Whole process: `{command}`, {runs} run{'s' if runs > 1 else ''}: "
            + ", ".join(f"{w:.3f} s" for w in wall["walls_s"]) + f" (median {wall['median_s']:.3f} s)" + floor
            + "; test accuracy " + ", ".join(f"{100 * a:.2f}%" for a in wall["test_accuracies"]) + ".")


# ---------------------------------------------------------------------------------------------
# Where it ran

def machine_info():
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"hostname": platform.node(), "os": platform.platform(), "cpu": cpu, "cpus": os.cpu_count(),
            "python": platform.python_version()}


def gpu_info():
    """nvidia-smi's view of GPU 0, or None."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        text = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,clocks.max.sm,driver_version",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    fields = [f.strip() for f in text.splitlines()[0].split(",")] if text.strip() else []
    return dict(zip(["name", "memory", "max_sm_clock", "driver"], fields)) if len(fields) == 4 else None


def mlp_train_build(args):
    """What `mlp_train --version --json` says of the build measured (commit, CUDA, OpenBLAS...)."""
    try:
        done = subprocess.run([str(args.mlp_train), "--version", "--json"], capture_output=True, text=True,
                              timeout=60)
        return json.loads(done.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired) as error:
        return {"error": repr(error)}


def versions(outcomes, runs, absent_frameworks):
    found = {"mlp_train": next((o.get("version") for o in outcomes if o.get("version")), None)}
    for framework in ("torch", "jax"):
        run = next((r for r in runs if r.get("framework") == framework), None)
        found[framework] = run["version"] if run else ("absent" if framework in absent_frameworks else None)
        found[f"{framework}_device"] = run["device"] if run else None
        if run and run.get("jaxlib"):
            found["jaxlib"] = run["jaxlib"]
    return found


# ---------------------------------------------------------------------------------------------

def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mlp-train", default=ROOT / "build" / "mlp_train", type=Path)
    parser.add_argument("--data", default=ROOT / "data" / "mnist", type=Path)
    parser.add_argument("--device", default="gpu", choices=["gpu", "cpu"])
    parser.add_argument("--batch", type=int, nargs="+", default=[16, 64, 512, 2048])
    parser.add_argument("--impls", nargs="+", choices=["naive", "tiled", "blas", "fused"],
                        help="mlp_train implementations (default: naive tiled blas, and fused on the GPU)")
    parser.add_argument("--graph", nargs="+", default=["on", "off"], choices=["on", "off"],
                        help="GPU: --graph settings for naive, tiled and blas (default: both)")
    parser.add_argument("--precisions", nargs="+", default=["fp32"], choices=["fp32", "tf32", "bf16"],
                        help="GPU: --precision of the GEMMs for tiled, blas and fused, and the peers' matmul "
                             "precisions (default: fp32); mlp_train also runs in FP32 for the table "
                             "against it and the accuracy goal")
    parser.add_argument("--naive-min-batch", type=int, default=0,
                        help="run --impl naive only from this batch size on (it is slow at small batches)")
    parser.add_argument("--peers", nargs="*", choices=list(PEERS),
                        help="default: every peer on the GPU, torch-eager on the CPU")
    parser.add_argument("--sums", nargs="+", default=["with", "without"],
                        choices=["with", "without"],
                        help="run every contender with and/or without its training-loss and accuracy sums "
                             "(mlp_train's --no-train-metrics); each setting is a pairing, and a ratio holds as "
                             "far as the smaller pairing's (default: both)")
    parser.add_argument("--jax-unroll", type=int, nargs="+", default=[1, 2, 4, 8],
                        help="lax.scan unroll factors JAX runs with; the fastest counts (default: 1 2 4 8)")
    parser.add_argument("--threads", type=int, nargs="+", default=[], help="CPU thread counts (cpu only)")
    parser.add_argument("--epochs", type=int, default=5, help="per measurement; epochs 2..N are timed")
    parser.add_argument("--hidden", default="256", help="hidden widths, as mlp_train's --hidden")
    parser.add_argument("--lr", type=float, help="one learning rate for all (default: mlp_train's for each batch)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--python", default=sys.executable, help="the Python that runs the peers")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per process before it counts as hung")
    parser.add_argument("--wall-runs", type=int, help="whole-process runs for the wall-clock check "
                        "(default: 3 on the GPU, 0 (none) on the CPU)")
    parser.add_argument("--wall-batch", type=int, default=512)
    parser.add_argument("--cuda-floor", type=Path, help="the empty CUDA process the whole-process check "
                        "is measured against (default: cuda_floor beside --mlp-train)")
    parser.add_argument("--wall-epochs", type=int, default=10)
    parser.add_argument("--wall-impl", help="IMPL or IMPL:off for the wall-clock check "
                        "(default: the fastest variant at --wall-batch)")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args()
    if args.epochs < 2:
        parser.error("--epochs must be at least 2 (the first is not timed)")
    if args.impls is None:
        args.impls = ["naive", "tiled", "blas"] + (["fused"] if args.device == "gpu" else [])
    if args.peers is None:
        args.peers = list(PEERS) if args.device == "gpu" else ["torch-eager"]
    for key in CUDA_ONLY:
        if args.device == "cpu" and key in args.peers:
            log(f"{key} needs CUDA: left out on the CPU")
            args.peers.remove(key)
    if args.wall_runs is None:
        args.wall_runs = 3 if args.device == "gpu" else 0
    if args.cuda_floor is None:
        args.cuda_floor = args.mlp_train.parent / "cuda_floor"
    if args.device != "cpu":
        args.threads = []
    elif args.precisions != ["fp32"]:
        parser.error("--precisions: the CPU multiplies in FP32 only")
    args.peer_precisions = list(args.precisions)  # the peers run at the precisions asked for
    if "fp32" not in args.precisions:
        args.precisions.insert(0, "fp32")  # mlp_train's runs the others are compared with
    return args


def measure(args, ours, peers, rows, runs, absent_frameworks):
    """Every contender at every batch (and thread count) into rows, then the whole-process check
    (returned)."""
    for threads in args.threads or [0]:
        for batch in args.batch:
            row = rows.setdefault((threads, batch), {})
            where = f"batch {batch}" + (f", {threads} threads" if threads else "")
            for contender in ours:
                o = run_ours(args, contender, batch, threads)
                row[contender["key"]] = o
                log_outcome(where, o)
            for process in dict.fromkeys(peer_process(p) for p in peers):
                group = [p for p in peers if peer_process(p) == process]
                script = group[0]["script"]
                for o in run_peer_strongest(args, script, group, batch, threads, absent_frameworks, runs):
                    row[o["contender"]] = o
                    log_outcome(where, o)
    return wall_check(args, ours, rows) if args.wall_runs > 0 else None


def stop_measuring(signum, frame):
    """SIGTERM stops the measurements as Ctrl-C does (the process running is killed)."""
    raise KeyboardInterrupt


def mark_not_run(args, contenders, rows):
    """After an interruption: every contender without an outcome gets 'not run'; returns how many."""
    missing = 0
    for threads in args.threads or [0]:
        for batch in args.batch:
            row = rows.setdefault((threads, batch), {})
            for c in contenders:
                if c["key"] not in row:
                    row[c["key"]] = outcome(c, batch, threads, "not run", "interrupted before it ran")
                    missing += 1
    return missing


def main():
    args = parse_arguments()
    if not os.access(args.mlp_train, os.X_OK):
        sys.exit(f"{PROGRAM}: {args.mlp_train}: no mlp_train there (build it, or give --mlp-train)")
    started = datetime.datetime.now(datetime.timezone.utc)
    ours, peers = our_contenders(args), peer_contenders(args)
    contenders = ours + peers
    rows = {}  # (threads, batch) -> {contender key: outcome}
    runs, absent_frameworks = [], {}

    signal.signal(signal.SIGTERM, stop_measuring)
    wall, not_run = None, None
    try:
        wall = measure(args, ours, peers, rows, runs, absent_frameworks)
    except KeyboardInterrupt:
        not_run = mark_not_run(args, contenders, rows)
        log(f"interrupted: reporting what ran ({not_run} not run" +
            (", nor the whole-process check)" if args.wall_runs > 0 else ")"))
    for stop in (signal.SIGINT, signal.SIGTERM):  # the report is written whole
        signal.signal(stop, signal.SIG_IGN)

    summary = summarize(args, rows)
    outcomes = [o for row in rows.values() for o in row.values()]
    found = versions(outcomes, runs, absent_frameworks)
    machine, gpu = machine_info(), gpu_info() if args.device == "gpu" else None
    description = next((o.get("description") for o in outcomes if o.get("description")), "")

    # The Markdown: where, the tables, the goals, then notes on whatever did not run as asked
    where = (gpu or {}).get("name") or found.get("torch_device") or description.split(",")[0] or "?"
    lines = [f"{'GPU: ' + where if args.device == 'gpu' else 'CPU: ' + machine['cpu']}; "
             f"host {machine['hostname']} ({machine['cpus']} CPUs); mlp_train {found['mlp_train'] or '?'}; "
             f"PyTorch {found['torch'] or 'not run'}; JAX {found['jax'] or 'not run'}; "
             f"{started:%Y-%m-%d %H:%M} UTC.",
             ("Epoch times: epoch 2 (the first is a warm-up)" if args.epochs == 2 else
              f"Epoch times: medians of epochs 2–{args.epochs} (the first is a warm-up)") + "; learning rate "
             + (f"{args.lr:g}" if args.lr is not None else "mlp_train's default for each batch: " +
                ", ".join(f"{learning_rate(args, b):.4g} at {b}" for b in args.batch)) + ".", ""]
    lines += markdown_tables(args, contenders, rows, summary)
    goal_rows = []
    if args.device == "gpu":
        goal_rows = goals(args, summary, wall)
        lines += ["", "| goal | measured | status |", "|---|---|---|"]
        lines += [f"| {g['goal']} | {g['measured']} | {g['status']} |" for g in goal_rows]
    if wall and wall.get("walls_s"):
        lines += ["", wall_line(wall)]
    leads = precision_leads(args, rows)
    lines += lead_lines(args, leads)
    precision, precision_goal = [], None
    if len(args.precisions) > 1:
        precision = precision_rows(args, ours, rows)
        precision_table, precision_goal = precision_lines(args, precision)
        lines += precision_table
    notes = sorted({f"{o['label']}: {o['status']}: {o['note']}" for o in outcomes
                    if o["status"] not in ("ok", "not run") and o["note"]} |
                   {f"{o['label']}, batch {o['batch']}: {o['note']}" for o in outcomes
                    if o["status"] == "ok" and o["kind"] == "mlp_train" and o["note"]})
    if not_run is not None:
        notes.insert(0, f"Interrupted: {not_run} run{'' if not_run == 1 else 's'} did not run (their cells "
                     "read 'not run')"
                     + (", nor did the whole-process check." if args.wall_runs > 0 else "."))
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    markdown = "\n".join(lines)
    print(markdown)

    if args.json:
        args.json.write_text(json.dumps({
            "tool": "tools/peers/compare.py", "command": sys.argv, "date": started.isoformat(), "device": args.device,
            "machine": machine, "gpu": gpu, "versions": found, "mlp_train_build": mlp_train_build(args),
            "peer_runs": runs,
            "settings": {"epochs": args.epochs, "batches": args.batch, "threads": args.threads, "hidden": args.hidden,
                         "seed": args.seed, "lr": {b: learning_rate(args, b) for b in args.batch},
                         "naive_min_batch": args.naive_min_batch, "precisions": args.precisions,
                         "peer_precisions": args.peer_precisions, "sums": args.sums},
            "contenders": contenders, "results": outcomes, "summary": summary, "goals": goal_rows,
            "precision": precision, "precision_goal": precision_goal, "leads": leads,
            "wall_check": wall, "interrupted": not_run is not None, "markdown": markdown}, indent=1) + "\n")
    failures = [o for o in outcomes if o["status"] in ("failed", "timeout")]
    if failures or (wall and wall.get("failures")) or not_run is not None:
        sys.exit(1)


if __name__ == "__main__":
    main()
