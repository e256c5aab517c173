"""Measurement for tools/study/study.py, standard library only: runs mlp_train, mlp_bench, mpirun
and the peer scripts (tools/peers/pytorch_mlp.py, tools/peers/jax_mlp.py) as subprocesses, one at
a time, and returns their figures; detects what the machine has (GPU, MPI, PyTorch, JAX) and
names it; writes the MNIST subset of --quick (with tools/idx_files.py, the tools' IDX reader).

Every run is a fresh process. mlp_train's figures come from its --json output: each epoch's
"time_s" (the training pass on the monotonic clock), test accuracy and --profile phases; the
process's own wall time is measured here around the subprocess.
"""
import datetime
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

TOOLS = Path(__file__).resolve().parent.parent
ROOT = TOOLS.parent
PEER_DIR = TOOLS / "peers"  # the peer scripts
sys.path.insert(0, str(TOOLS))  # for idx_files
import idx_files  # noqa: E402

RUN_TIMEOUT_S = 900  # one subprocess; a hang must not stall the study forever
# Open MPI: let root run it (the GPU host's user), and as many ranks as logical CPUs (its slots
# count physical cores); other MPIs ignore these variables
MPI_ENVIRONMENT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                   "OMPI_MCA_rmaps_base_oversubscribe": "1", "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe"}


class MeasureError(Exception):
    """A program the study ran failed; the message names the command and its error, .detail
    holds the error alone (the last lines of its stderr)."""

    def __init__(self, message, detail=None):
        super().__init__(message)
        self.detail = detail or message


def log(message):
    print(f"study: {message}", file=sys.stderr, flush=True)


def shown(argument):
    """A command-line argument as the report shows it: an absolute path inside the repository
    (alone or as --option=PATH) relative to the repository's root, anything else as it is."""
    text = str(argument)
    option, equals, value = text.partition("=") if text.startswith("--") else ("", "", text)
    path = Path(value)
    if not path.is_absolute():
        return text
    try:
        return option + equals + str((path.parent.resolve() / path.name).relative_to(ROOT))
    except ValueError:
        return text


def run_command(command, env=None, timeout=RUN_TIMEOUT_S):
    """(stdout, wall seconds) of a command that must succeed; MeasureError otherwise, naming the
    command with the repository's paths relative (shown)."""
    start = time.monotonic()
    try:
        done = subprocess.run([str(c) for c in command], capture_output=True, text=True, env=env,
                              timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise MeasureError(f"{' '.join(map(shown, command))}: {error}") from None
    wall = time.monotonic() - start
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-3:])
        raise MeasureError(f"{' '.join(map(shown, command))}: exit {done.returncode}: {tail}", tail)
    return done.stdout, wall


def first_json_object(text):
    """The first JSON object in text (MPI ranks or libraries may print around it)."""
    start = text.find("{")
    while start >= 0:
        try:
            return json.JSONDecoder().raw_decode(text, start)[0]
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
    raise MeasureError(f"no JSON object in the output: {text[:200]!r}")


def cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def worker_counts(maximum):
    """1, 2, 4, ... up to maximum, and maximum itself."""
    counts, p = [], 1
    while p < maximum:
        counts.append(p)
        p *= 2
    return counts + [maximum]


# ---------------------------------------------------------------- mlp_train and mlp_bench runs

class Programs:
    """Paths and fixed arguments of the programs the study runs."""

    def __init__(self, mlp_train, mlp_bench, data, peer_python, mpirun=None):
        self.mlp_train, self.mlp_bench, self.data = Path(mlp_train), Path(mlp_bench), Path(data)
        self.peer_python, self.mpirun = peer_python, mpirun

    def train(self, device, impl, batch, epochs, threads=None, extra=(), ranks=None):
        """One mlp_train run: {"epoch_times", "test_accuracy", "wall_s", "config", "epochs"}."""
        command = [self.mlp_train, "--device", device, "--impl", impl, "--batch", batch, "--epochs", epochs,
                   "--data", self.data, "--json", "--quiet", *extra]
        if threads:
            command += ["--threads", threads]
        environment = None
        if ranks:
            command = [self.mpirun, "-np", ranks] + command
            environment = dict(os.environ, **MPI_ENVIRONMENT)
        stdout, wall = run_command(command, env=environment)
        result = first_json_object(stdout)
        return {"epoch_times": [e["time_s"] for e in result["epochs"]],
                "test_accuracy": result["test_accuracy"], "wall_s": wall, "config": result["config"],
                "epochs": result["epochs"]}

    def bench_gemm(self, csv_path, device, sizes, extra=()):
        """mlp_bench gemm rows (dicts of its CSV columns) for square sizes on one device."""
        import csv
        command = [self.mlp_bench, "gemm", "--device", device, "--sizes", sizes, "--quiet", "--csv", csv_path,
                   *extra]
        run_command(command)
        with open(csv_path, newline="") as f:
            return list(csv.DictReader(f))

    def peer(self, script, device, batch, epochs, lr, threads):
        """One run of a peer script (pytorch_mlp.py's interface): its parsed JSON object."""
        command = [self.peer_python, script, "--data", self.data, "--device", "cuda" if device == "gpu" else "cpu",
                   "--batch", batch, "--epochs", epochs, "--lr", lr]
        if device == "cpu":
            command += ["--threads", threads]
        stdout, wall = run_command(command)
        result = first_json_object(stdout)
        result["wall_s"] = wall
        return result


# ---------------------------------------------------------------- what the machine has

def read_text(command):
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def describe_cpu():
    fields = {}
    for line in read_text(["lscpu"]).splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    model = fields.get("Model name") or platform.processor() or "unknown CPU"
    if model == "unknown CPU" and os.path.exists("/proc/cpuinfo"):
        found = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        model = found.group(1).strip() if found else model
    return {"model": model, "cores_usable": cpu_count(), "sockets": fields.get("Socket(s)"),
            "cores_per_socket": fields.get("Core(s) per socket"),
            "threads_per_core": fields.get("Thread(s) per core")}


def describe_memory():
    try:
        found = re.search(r"MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text())
        return f"{int(found.group(1)) / 2**20:.0f} GiB" if found else None
    except OSError:
        return None


def describe_gpus():
    text = read_text(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"])
    return [line.strip() for line in text.splitlines() if line.strip()]


def git_revision():
    revision = read_text(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]).strip()
    dirty = read_text(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"]).strip()
    return (revision + ("+changes" if dirty else "")) if revision else None


def load_average():
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def describe_machine(programs):
    return {"load_at_start": load_average(), "cpu": describe_cpu(), "memory": describe_memory(), "gpus": describe_gpus(),
            "os": f"{platform.system()} {platform.release()}",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "mlp_train": read_text([programs.mlp_train, "--version"]).strip(), "git": git_revision()}


def probe_gpu(programs):
    """{"ok": True, "description"} where mlp_train --device gpu trains, else {"ok": False, "why"}."""
    try:
        run = programs.train("gpu", "tiled", 1000, 1)
        return {"ok": True, "description": run["config"].get("device_description", "GPU")}
    except MeasureError as error:
        return {"ok": False, "why": error.detail}


def probe_mpi(programs):
    """{"ok": True} where mpirun runs mlp_train as 2 data-parallel ranks (its JSON config says
    "ranks": 2), else {"ok": False, "why"}."""
    if not programs.mpirun:
        return {"ok": False, "why": "no mpirun on the PATH"}
    usage = read_text([programs.mlp_train, "--help"]) + read_text([programs.mlp_train, "--version"])
    if not re.search(r"\bMPI\b|mpirun", usage):
        return {"ok": False, "why": "mlp_train was built without MPI (its --help and --version do not mention it)"}
    try:
        run = programs.train("cpu", "tiled", 1000, 1, threads=1, ranks=2)
    except MeasureError as error:
        return {"ok": False, "why": f"mpirun -np 2 mlp_train failed: {error.detail}"}
    if run["config"].get("ranks") != 2:
        return {"ok": False, "why": "under mpirun -np 2, mlp_train's JSON config does not report 2 ranks"}
    return {"ok": True, "mpirun": read_text([programs.mpirun, "--version"]).splitlines()[0:1]}


def probe_peer(python, script, module):
    """{"ok": True, "version"} where the script exists and its framework imports, else the why."""
    if not Path(script).exists():
        return {"ok": False, "why": f"{Path(script).relative_to(ROOT)} is not in this tree"}
    probe = subprocess.run([python, "-c", f"import {module}; print({module}.__version__)"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return {"ok": False, "why": f"{module} is not installed for {python}"}
    return {"ok": True, "version": probe.stdout.strip()}


# ---------------------------------------------------------------- a subset of MNIST (quick mode)

def write_subset(source, target, train_count, test_count):
    """Writes the first train_count / test_count images and labels of the IDX files in source
    into target (gzipped IDX files mlp_train and the peers read with --data)."""
    target.mkdir(parents=True, exist_ok=True)
    for prefix, count in (("train", train_count), ("t10k", test_count)):
        for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"):
            name = f"{prefix}-{kind}"
            try:
                shape, elements = idx_files.read_idx(idx_files.find_idx(source, name))
            except idx_files.IdxError as error:
                raise MeasureError(str(error)) from None
            keep = min(count, shape[0])
            idx_files.write_idx(target / (name + ".gz"), (keep, *shape[1:]), elements[:keep * math.prod(shape[1:])])
    return target


def which_mpirun():
    return shutil.which("mpirun") or shutil.which("mpiexec")
