#!/usr/bin/env python3
"""Regenerates the parallel-computing study of mlp_train on the machine at hand: runs every
measurement, then writes REPORT.md, PNG plots (where matplotlib is installed) and results.json
(every raw figure) into one folder: out/study by default (out/study-quick with --quick), so that a
run on another machine never replaces the published report; --out docs/study writes that one.

Sections, each measured only where the machine has what it needs:
  1. every implementation (CPU naive/tiled/blas, MPI, GPU naive/tiled/blas/fused) and the peers
     present (PyTorch, JAX) for 10 epochs: total time, test accuracy, speedup over the
     sequential baseline (CPU tiled on 1 thread)
  2. OpenMP thread scaling 1, 2, 4, ... cores: time, speedup, efficiency, Amdahl's law fitted
  3. process scaling under MPI (mpirun -np N mlp_train), beside thread scaling
  4. batch size 16 ... 2048 on each device: epoch time, images/s, 10-epoch accuracy
  5. GPU batch feeding: data resident, per-batch copies from pageable, pinned and overlapped
     host memory; h2d / compute / d2h per batch
  6. the GEMM kernel ladder against the library on each device (mlp_bench)

How: every program is a fresh subprocess, one at a time; each figure is the median of the
repeats (--repeats, taken in rounds so that slow drifts of the machine touch every case alike),
on the wall clock: mlp_train's per-epoch training-pass time (monotonic clock), mlp_bench's
median kernel time. --quick is a smoke run (a 10% subset of MNIST, few epochs, small sizes) for
the test suite. The output folder is written elsewhere first and moved into place whole.

Usage: tools/study.sh [--quick] [--out DIR] [--repeats N] [--only 1,2,...] [--replot results.json]
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import study_measure as measure
import study_plots
import study_report
from study_fit import median
from study_measure import PEER_DIR, ROOT, MeasureError, log

SECTIONS = ("implementations", "threads", "processes", "batch", "transfers", "ladder")
PLACEMENTS = {"resident": ["--data", "device"], "pageable": ["--data", "host"],
              "pinned": ["--data", "host", "--pinned"], "overlapped": ["--data", "host", "--overlap"]}
GPU_IMPLS = ("naive", "tiled", "blas", "fused")
# fused runs its whole-epoch kernel, also at a batch where --impl fused by default takes the tiled
# step instead: the row says so (label, extra arguments)
GPU_CASES = {"fused": ("GPU fused, whole-epoch kernel", ["--fused-pass", "whole"])}
CPU_IMPLS = ("naive", "tiled", "blas")


@dataclass
class Settings:
    """What is measured, and how much: the full study, or --quick's smoke run."""
    quick: bool = False
    repeats: int = 3
    batch: int = 512                       # sections 1-3
    epochs: int = 10                       # section 1
    naive_epochs: int = 1                  # CPU naive in section 1 (its 10-epoch time is scaled)
    scaling_epochs: int = 4                # sections 2-3: the first is a warm-up
    scaling_impls: list = field(default_factory=lambda: ["tiled", "blas"])
    mpi_impl: str = "tiled"
    sweep_batches: list = field(default_factory=lambda: [16, 32, 64, 128, 256, 512, 1024, 2048])
    sweep_epochs: int = 10                 # section 4: the first round's runs (time and accuracy)
    sweep_timing_epochs: int = 3           # section 4: the other rounds' runs (time only)
    sweep_impl: str = "tiled"
    transfer_batches: list = field(default_factory=lambda: [16, 32, 512])
    transfer_epochs: int = 3
    transfer_impl: str = "tiled"
    ladder_cpu_sizes: str = "16:2048"
    ladder_gpu_sizes: str = "64:4096"
    ladder_naive_max: int = 512
    ladder_extra: list = field(default_factory=list)
    subset: list = None                    # [train images, test images], or the whole data set

    @classmethod
    def quick_mode(cls):
        return cls(quick=True, repeats=2, epochs=2, scaling_epochs=2, sweep_batches=[64, 512, 2048],
                   sweep_epochs=2, sweep_timing_epochs=2, transfer_epochs=2, ladder_cpu_sizes="16:256", ladder_gpu_sizes="64:1024",
                   ladder_naive_max=128, ladder_extra=["--repeats", "3", "--time-cap", "0.05"],
                   subset=[600, 200])


class Study:
    """Runs the sections and collects their raw figures in self.results."""

    def __init__(self, settings, programs, only):
        self.settings, self.programs, self.only = settings, programs, only
        self.cores = measure.cpu_count()
        self.results = {"settings": asdict(settings), "cores": self.cores, "errors": [], "durations": {}}

    def attempt(self, what, function, *args, **kwargs):
        """function(*args, **kwargs), or None with the error recorded (the study goes on)."""
        try:
            return function(*args, **kwargs)
        except MeasureError as error:
            log(f"FAILED: {what}: {error}")
            self.results["errors"].append(f"{what}: {error}")
            return None

    def run(self):
        started = time.monotonic()
        log("probing the machine")
        self.results["machine"] = measure.describe_machine(self.programs)
        self.results["capabilities"] = self.capabilities()
        for name in SECTIONS:
            if name in self.only:
                section_start = time.monotonic()
                log(f"section {name}")
                self.results[name] = getattr(self, f"measure_{name}")()
                self.results["durations"][name] = time.monotonic() - section_start
        self.results["durations"]["total"] = time.monotonic() - started
        self.results["machine"]["load_at_end"] = measure.load_average()
        return self.results

    def capabilities(self):
        python = self.programs.peer_python
        return {"gpu": measure.probe_gpu(self.programs), "mpi": measure.probe_mpi(self.programs),
                "pytorch": measure.probe_peer(python, PEER_DIR / "pytorch_mlp.py", "torch"),
                "jax": measure.probe_peer(python, PEER_DIR / "jax_mlp.py", "jax"),
                "matplotlib": study_plots.matplotlib_version()}

    def has(self, capability):
        return self.results["capabilities"][capability]["ok"]

    # ---------------------------------------------------------------- 1. implementations

    def implementation_cases(self):
        s, cores = self.settings, self.cores
        cases = []
        if cores > 1:
            cases.append({"label": "CPU tiled", "device": "cpu", "impl": "tiled", "threads": 1,
                          "epochs": s.epochs, "baseline": True})
        for impl in CPU_IMPLS:
            cases.append({"label": f"CPU {impl}", "device": "cpu", "impl": impl, "threads": cores,
                          "epochs": s.naive_epochs if impl == "naive" else s.epochs,
                          "baseline": cores == 1 and impl == "tiled"})
        if self.has("mpi"):
            ranks = max(p for p in range(1, cores + 1) if s.batch % p == 0)  # ranks share every batch
            cases.append({"label": f"MPI {s.mpi_impl}", "device": "cpu", "impl": s.mpi_impl, "threads": 1,
                          "ranks": ranks, "epochs": s.epochs})
        if self.has("gpu"):
            for impl in GPU_IMPLS:
                label, extra = GPU_CASES.get(impl, (f"GPU {impl}", []))
                cases.append({"label": label, "device": "gpu", "impl": impl, "epochs": s.epochs,
                              "extra": extra})
        return cases

    def measure_implementations(self):
        cases = self.implementation_cases()
        for case in cases:
            case.update(target_epochs=self.settings.epochs, batch=self.settings.batch, runs=[])
        peers = []
        for round_index in range(self.settings.repeats):
            log(f"  round {round_index + 1}/{self.settings.repeats}")
            for case in cases:
                run = self.attempt(case["label"], self.programs.train, case["device"], case["impl"],
                                   case["batch"], case["epochs"], threads=case.get("threads"),
                                   ranks=case.get("ranks"), extra=case.get("extra", ()))
                if run:
                    case["runs"].append(slim_run(run))
            peers += self.measure_peers(lr=self.default_lr(cases))
        return {"cases": cases, "peers": peers}

    def default_lr(self, cases):
        """mlp_train's default learning rate at the study's batch, for the peers to use too."""
        for case in cases:
            for run in case["runs"]:
                return run["lr"]
        return 0.16

    def measure_peers(self, lr):
        """One run of each peer present on each device: a list of result rows (one per mode)."""
        rows = []
        devices = ["cpu"] + (["gpu"] if self.has("gpu") else [])
        for name, script in (("pytorch", "pytorch_mlp.py"), ("jax", "jax_mlp.py")):
            if not self.has(name):
                continue
            for device in devices:
                result = self.attempt(f"{name} on {device}", self.programs.peer, PEER_DIR / script, device,
                                      self.settings.batch, self.settings.epochs, lr, self.cores)
                if result:
                    rows += self.attempt(f"{name} on {device}: its output", peer_rows, name, device, lr, result) or []
        return rows

    # ---------------------------------------------------------------- 2. and 3. scaling

    def scaling_series(self, label, kind, impl, counts, train):
        """{"label", "kind", "impl", "times": {workers: [median epoch of each repeat]}}."""
        times = {p: [] for p in counts}
        for round_index in range(self.settings.repeats):
            for p in counts:
                run = self.attempt(f"{label}, {p} {kind}", train, p)
                if run:
                    times[p].append(median(run["epoch_times"][1:] or run["epoch_times"]))
        return {"label": label, "kind": kind, "impl": impl, "times": times}

    def measure_threads(self):
        s = self.settings
        counts = measure.worker_counts(self.cores)
        return {"batch": s.batch, "epochs": s.scaling_epochs, "series": [
            self.scaling_series(f"{impl} (threads)", "threads", impl, counts,
                                lambda p, impl=impl: self.programs.train("cpu", impl, s.batch, s.scaling_epochs,
                                                                         threads=p))
            for impl in s.scaling_impls]}

    def measure_processes(self):
        if not self.has("mpi"):
            return {"skipped": self.results["capabilities"]["mpi"]["why"]}
        s = self.settings
        # mlp_train refuses a batch the ranks do not divide (each takes an equal share)
        counts = [p for p in measure.worker_counts(self.cores) if s.batch % p == 0]
        series = self.scaling_series(f"{s.mpi_impl} (MPI ranks, 1 thread each)", "ranks", s.mpi_impl, counts,
                                     lambda p: self.programs.train("cpu", s.mpi_impl, s.batch, s.scaling_epochs,
                                                                   threads=1, ranks=p))
        return {"batch": s.batch, "epochs": s.scaling_epochs, "series": [series]}

    # ---------------------------------------------------------------- 4. batch size

    def measure_batch(self):
        """Each (device, batch) runs once per round: sweep_epochs in the first round (its accuracy
        is the figure), sweep_timing_epochs in the others (their times join the median)."""
        s = self.settings
        devices = ["cpu"] + (["gpu"] if self.has("gpu") else [])
        points = [{"device": device, "batch": batch, "runs": []} for device in devices for batch in s.sweep_batches]
        for round_index in range(s.repeats):
            epochs = s.sweep_epochs if round_index == 0 else s.sweep_timing_epochs
            for point in points:
                device, batch = point["device"], point["batch"]
                run = self.attempt(f"batch {batch} on {device}", self.programs.train, device, s.sweep_impl, batch,
                                   epochs, threads=self.cores if device == "cpu" else None)
                if run:
                    point["runs"].append({**slim_run(run), "images_per_s": [e["images_per_s"] for e in run["epochs"]]})
        return {"impl": s.sweep_impl, "epochs": s.sweep_epochs, "timing_epochs": s.sweep_timing_epochs,
                "threads": self.cores, "points": points}

    # ---------------------------------------------------------------- 5. transfers

    def measure_transfers(self):
        if not self.has("gpu"):
            return {"skipped": "no usable GPU: " + self.results["capabilities"]["gpu"]["why"]}
        s = self.settings
        cases = [{"batch": b, "placement": name, "runs": []} for b in s.transfer_batches for name in PLACEMENTS]
        for _ in range(s.repeats):
            for case in cases:
                extra = ["--graph", "off", "--profile", *PLACEMENTS[case["placement"]]]
                run = self.attempt(f"transfers batch {case['batch']} {case['placement']}", self.programs.train,
                                   "gpu", s.transfer_impl, case["batch"], s.transfer_epochs, extra=extra)
                if run:
                    case["runs"].append({"epoch_times": run["epoch_times"],
                                         "phases": [e.get("phases", {}) for e in run["epochs"]]})
        return {"impl": s.transfer_impl, "epochs": s.transfer_epochs, "cases": cases}

    # ---------------------------------------------------------------- 6. the GEMM ladder

    def measure_ladder(self):
        s = self.settings
        result = {}
        with tempfile.TemporaryDirectory() as scratch:
            cpu_extra = ["--threads", self.cores, "--naive-max", s.ladder_naive_max, *s.ladder_extra]
            result["cpu"] = self.attempt("mlp_bench gemm on the CPU", self.programs.bench_gemm,
                                         Path(scratch) / "cpu.csv", "cpu", s.ladder_cpu_sizes, cpu_extra)
            result["cpu_threads"] = self.cores
            if self.has("gpu"):
                result["gpu"] = self.attempt("mlp_bench gemm on the GPU", self.programs.bench_gemm,
                                             Path(scratch) / "gpu.csv", "gpu", s.ladder_gpu_sizes, s.ladder_extra)
            else:
                result["gpu_skipped"] = "no usable GPU"
        return result


def peer_rows(name, device, lr, result):
    """The rows of a peer script's JSON output ({"results": [{"mode", "epoch_s", ...}]})."""
    try:
        version = result.get(name if name != "pytorch" else "torch") or result.get("version") or ""
        return [{"peer": name, "device": device, "mode": row.get("mode", ""), "epoch_s": float(row["epoch_s"]),
                 "test_accuracy": row.get("test_accuracy"), "epochs_timed": int(row["epochs_timed"]), "lr": lr,
                 "version": version} for row in result["results"]]
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise MeasureError(f"unexpected output ({error!r}): {json.dumps(result)[:200]}") from None


def slim_run(run):
    """The figures of one mlp_train run that the report uses."""
    config = run["config"]
    return {"epoch_times": run["epoch_times"], "test_accuracy": run["test_accuracy"], "wall_s": run["wall_s"],
            "lr": config.get("lr"), "description": config.get("device_description"),
            "threads": config.get("threads"), "ranks": config.get("ranks")}


# ---------------------------------------------------------------- output, written whole

def write_outputs(results, out):
    """Writes REPORT.md, the PNGs and results.json into a fresh folder beside out, then puts it in
    out's place (an old out is replaced only if it holds a previous study)."""
    out = out.resolve()
    if out.exists() and any(out.iterdir()) and not (out / "results.json").exists():
        sys.exit(f"study: {out} exists and does not hold a previous study; not replacing it")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
    try:
        (staging / "results.json").write_text(json.dumps(results, indent=1) + "\n")
        figures = study_plots.draw_all(results, staging)
        (staging / "REPORT.md").write_text(study_report.render(results, figures))
        os.chmod(staging, 0o755)
        retired = None
        if out.exists():
            retired = out.parent / f".{out.name}.old-{os.getpid()}"
            out.rename(retired)
        staging.rename(out)
        if retired:
            shutil.rmtree(retired)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def user_arguments(arguments):
    """The command line less the --peer-python that tools/study.sh adds, with the paths inside
    the repository relative to its root, as anyone's checkout has them."""
    kept, skip = [], False
    for argument in arguments:
        if skip or argument == "--peer-python":
            skip = not skip
            continue
        kept.append(measure.shown(argument))
    return kept


def positive(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a positive whole number: {text}")
    return int(text)


def section_names(text):
    """'1,2,6' -> the names of sections 1, 2 and 6."""
    names = set()
    for item in text.split(","):
        if not item.strip().isdigit() or not 1 <= int(item) <= len(SECTIONS):
            raise argparse.ArgumentTypeError(f"sections are 1 to {len(SECTIONS)}: {text}")
        names.add(SECTIONS[int(item) - 1])
    return names


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: 10%% of MNIST, few epochs (< 2 min)")
    parser.add_argument("--out", type=Path,
                        help="the report's folder (default: out/study, or out/study-quick with --quick; "
                             "the published report is docs/study, written only when named)")
    parser.add_argument("--repeats", type=positive, help="repeats of each measurement (default 3, quick 2)")
    parser.add_argument("--only", type=section_names, default=set(SECTIONS),
                        help="sections to measure, e.g. 1,2,6 (default: all)")
    parser.add_argument("--mlp-train", type=Path, default=ROOT / "build" / "mlp_train")
    parser.add_argument("--mlp-bench", type=Path, default=ROOT / "build" / "mlp_bench")
    parser.add_argument("--data", type=Path, default=ROOT / "data" / "mnist")
    parser.add_argument("--peer-python", default=sys.executable, help="the Python that runs the peer scripts")
    parser.add_argument("--replot", type=Path, help="measure nothing: redraw the report from a results.json")
    return parser.parse_args()


def main():
    args = parse_arguments()
    if args.out is None:
        args.out = ROOT / "out" / ("study-quick" if args.quick else "study")
    if args.replot:
        results = json.loads(args.replot.read_text())
        results["capabilities"]["matplotlib"] = study_plots.matplotlib_version()  # this Python's
        print(write_outputs(results, args.out) / "REPORT.md")
        return 0
    settings = Settings.quick_mode() if args.quick else Settings()
    if args.repeats:
        settings.repeats = args.repeats
    for program in (args.mlp_train, args.mlp_bench):
        if not os.access(program, os.X_OK):
            sys.exit(f"study: {program} is missing: build first (cmake -S . -B build && cmake --build build)")
    with tempfile.TemporaryDirectory() as scratch:
        data = args.data
        if settings.subset:
            try:
                data = measure.write_subset(args.data, Path(scratch) / "subset", *settings.subset)
            except MeasureError as error:
                sys.exit(f"study: {error}")
        programs = measure.Programs(args.mlp_train, args.mlp_bench, data, args.peer_python, measure.which_mpirun())
        results = Study(settings, programs, args.only).run()
    results["command"] = " ".join(["tools/study.sh"] + user_arguments(sys.argv[1:]))
    report = write_outputs(results, args.out) / "REPORT.md"
    log(f"wrote {report} in {results['durations']['total']:.0f} s"
        + (f"; {len(results['errors'])} measurement(s) FAILED" if results["errors"] else ""))
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
