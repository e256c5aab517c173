#!/usr/bin/env python3
"""tools/peers/compare.py end to end on the CPU, with a stand-in for the peers.

The stand-in (given to compare.py as --python) answers as jax_mlp.py would, with made-up epoch
times that depend on the configuration: the sums cost 0.5 s, unroll 2 is the fastest, unroll 8
fails. The checks: compare.py runs mlp_train and every configuration, keeps the fastest of each
sums setting (by_sums) and judges each pairing with it, keeps every configuration's figure
('configurations'), and a peer whose every run fails in the first setting is reported failed;
interrupted by SIGTERM while the stand-in answers as JAX (it sleeps) after answering as PyTorch,
compare.py writes what ran, marks the rest 'not run', shows the lead over PyTorch without JAX
named and exits 1.

Usage: compare_test.py MLP_TRAIN MNIST_DIR   (exit 1 with every failed check named)
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPARE = ROOT / "tools" / "peers" / "compare.py"

# Epoch seconds by unroll (None: the run fails), and what the training sums add.
EPOCH_S = {"1": 3.0, "2": 2.0, "4": 2.5, "8": None}
SUMS_S = 0.5

# Answers as jax_mlp.py does (for any peer script: its path comes first), for the modes asked,
# with the times that STAND_IN_TIMES (JSON: epoch_s by unroll, sums_s, fail_with_sums; sleep_s
# before answering where the script's name has sleep_in) gives the configuration in its arguments.
STAND_IN = r"""#!/usr/bin/env python3
import json, os, sys, time
times = json.loads(os.environ["STAND_IN_TIMES"])
if times.get("sleep_in", "-") in sys.argv[1]:
    time.sleep(times["sleep_s"])
argv = sys.argv[1:]
def value(flag, default=None):
    return argv[argv.index(flag) + 1] if flag in argv else default
modes = []
for arg in argv[argv.index("--modes") + 1:]:
    if arg.startswith("--"):
        break
    modes.append(arg)
unroll, sums = value("--unroll", "1"), "--no-train-metrics" not in argv
epoch = None if sums and times["fail_with_sums"] else times["epoch_s"][unroll]
results = []
for mode in modes:
    run = {"mode": mode, "device": "cpu", "batch": int(value("--batch")), "seed": 42}
    if epoch is None:
        run["error"] = "stand-in failure"
    else:
        epoch_s = epoch + (times["sums_s"] if sums else 0.0)
        run.update(threads=1, lr=float(value("--lr")), epoch_s=epoch_s, epoch_times_s=[epoch_s] * 2,
                   epochs_timed=1, test_accuracy=0.9, train_loss=None, train_accuracy=None,
                   unroll=int(unroll))
    results.append(run)
print(json.dumps({"framework": "jax", "version": "stand-in", "jax": "stand-in", "device": "cpu",
                  "results": results}))
"""

failures = 0


def check(condition, message):
    global failures
    if not condition:
        print(f"FAIL: {message}", file=sys.stderr)
        failures += 1


def compare_command(mlp_train, data, work, out, peers=("jax-scan",)):
    stand_in = work / "stand_in.py"
    stand_in.write_text(STAND_IN)
    stand_in.chmod(0o755)
    return [sys.executable, str(COMPARE), "--mlp-train", mlp_train, "--data", data,
            "--device", "cpu", "--batch", "64", "--threads", "1", "--impls", "tiled",
            "--peers", *peers, "--jax-unroll", "1", "2", "4", "8",
            "--sums", "with", "without", "--epochs", "2", "--python", str(stand_in), "--json", str(out)]


def stand_in_environment(**times):
    return {**os.environ, "STAND_IN_TIMES": json.dumps({"epoch_s": EPOCH_S, "sums_s": SUMS_S, **times})}


def run_compare(mlp_train, data, work, fail_with_sums):
    out = work / f"compare_{fail_with_sums}.json"
    done = subprocess.run(compare_command(mlp_train, data, work, out), capture_output=True, text=True,
                          env=stand_in_environment(fail_with_sums=fail_with_sums))
    report = json.loads(out.read_text()) if out.exists() else {"results": []}
    return done, report


def peer_outcome(report):
    return next((r for r in report["results"] if r["contender"] == "jax-scan"), None)


def check_fastest_kept(mlp_train, data, work):
    done, report = run_compare(mlp_train, data, work, fail_with_sums=False)
    check(done.returncode == 0, f"compare.py exited {done.returncode}: {done.stderr[-500:]}")
    ours = next((r for r in report["results"] if r["contender"] == "tiled"), None)
    check(ours is not None and ours["status"] == "ok", f"mlp_train's run: {ours}")
    peer = peer_outcome(report)
    if peer is None:
        check(False, "no JAX outcome in the JSON")
        return
    check(peer["status"] == "ok" and peer["epoch_s"] == 2.0 + SUMS_S,
          f"the outcome is the fastest in the first setting (with sums, unroll 2): {peer}")
    check(peer["by_sums"] == {"with": {"epoch_s": 2.0 + SUMS_S, "configuration": "sums, unroll 2"},
                              "without": {"epoch_s": 2.0, "configuration": "no sums, unroll 2"}},
          f"the fastest of each setting: {peer['by_sums']}")
    tried = {(c["configuration"], c["status"]) for c in peer.get("configurations", [])}
    wanted = {(f"{sums}, unroll {u}", "ok" if EPOCH_S[u] else "failed")
              for sums in ("sums", "no sums") for u in EPOCH_S}
    check(tried == wanted, f"every configuration kept: {sorted(tried)}")
    check("JAX scan (no sums, unroll 2)" in done.stdout, "the tables name the fastest configuration")
    lead = [line for line in done.stdout.splitlines() if line.startswith("| 64 | fp32 | no sums |")]
    check(len(lead) == 1 and "| JAX scan (no sums, unroll 2) | 2000 |" in lead[0],
          f"the pairing without sums judged on the peer's 2000 ms: {lead}")


def check_failed_peer(mlp_train, data, work):
    done, report = run_compare(mlp_train, data, work, fail_with_sums=True)
    check(done.returncode == 1, f"a failed peer makes compare.py exit 1, not {done.returncode}")
    peer = peer_outcome(report)
    check(peer is not None and peer["status"] == "failed",
          f"a peer whose every run with sums failed is reported failed: {peer}")


def check_interrupted(mlp_train, data, work):
    """SIGTERM once mlp_train and PyTorch (the stand-in, first of the peers) have run, while JAX
    (the stand-in) sleeps: the report has their outcomes, JAX 'not run', the lead over PyTorch
    shown without JAX named, and the run exits 1 at once."""
    out = work / "compare_interrupted.json"
    process = subprocess.Popen(compare_command(mlp_train, data, work, out, ("jax-scan", "torch-eager")),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=stand_in_environment(fail_with_sums=False, sleep_in="jax_mlp", sleep_s=60))
    for line in process.stderr:  # the progress: mlp_train's outcome, then PyTorch's, then JAX's
        if ": PyTorch eager" in line:
            break
    time.sleep(0.5)  # the stand-in has started
    process.send_signal(signal.SIGTERM)
    try:
        stdout, stderr = process.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        check(False, "compare.py did not stop within 20 s of SIGTERM")
        return
    check(process.returncode == 1, f"an interrupted compare.py exits 1, not {process.returncode}")
    report = json.loads(out.read_text()) if out.exists() else {"results": []}
    status = {r["contender"]: r["status"] for r in report["results"]}
    check(report.get("interrupted") is True, "the JSON says the run was interrupted")
    check(status == {"tiled": "ok", "torch-eager": "ok", "jax-scan": "not run"},
          f"what ran kept, the rest marked not run: {status}")
    check("Interrupted: 1 run did not run" in stdout, f"the Markdown says so: {stdout[-300:]}")
    missing = [s.get("peers_without_figure") for s in report.get("summary", [])]
    check(missing == [["JAX scan"]], f"the summary names the peer without a figure: {missing}")
    lead = [line for line in stdout.splitlines() if line.startswith("| 64 | fp32 | no sums |")]
    check(len(lead) == 1 and lead[0].endswith("(without JAX scan) |"),
          f"the lead over PyTorch is shown without JAX named: {lead}")


def check_goal_not_judged():
    """The GPU's goal rows (not reached on the CPU): a lead of 3× over the peers that ran, while
    one gave no figure, is not judged met."""
    sys.path.insert(0, str(COMPARE.parent))
    import compare
    args = argparse.Namespace(sums=["without"], peer_precisions=["fp32"], wall_epochs=10, wall_batch=512)
    pairs = {"without": {"ours": "tiled graph", "ours_epoch_s": 1.0, "peer": "PyTorch graph (no sums)",
                         "peer_epoch_s": 3.0, "ratio": 3.0}}
    summary = [{"threads": 0, "batch": 512, "fastest_mlp_train": {"contender": "tiled graph", "epoch_s": 1.0},
                "best_peer": {"contender": "PyTorch graph", "epoch_s": 3.0}, "pairings": pairs,
                "ratio_peer_over_ours": 3.0, "peers_without_figure": ["JAX scan"]}]
    row = next(r for r in compare.goals(args, summary, None) if r["goal"].startswith("batch 512:"))
    check(row["status"] == "–" and "JAX scan" in row["measured"],
          f"a goal judged without JAX's figure: {row}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    mlp_train, data = sys.argv[1:]
    with tempfile.TemporaryDirectory() as work:
        check_fastest_kept(mlp_train, data, Path(work))
        check_failed_peer(mlp_train, data, Path(work))
        check_interrupted(mlp_train, data, Path(work))
    check_goal_not_judged()
    if failures:
        sys.exit(1)
    print("compare_test: all checks passed")


if __name__ == "__main__":
    main()
