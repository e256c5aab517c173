"""What the peer programs (tools/peers/pytorch_mlp.py, tools/peers/jax_mlp.py) share, so that
they train exactly mlp_train's job: MNIST as NumPy arrays (read by tools/idx_files.py),
mlp_train's normalization, its default learning rate, its weight initialization scheme, the
command-line options and the JSON they print.

Imported by the peer scripts (they run from tools/peers/, so it is on their path) and by the
tools that run them, tools/peers/compare.py, tools/speedrun.py and tools/device_run.sh's
startup stage (default_learning_rate, run_process, turning_rounds, last_line: none needs
NumPy). NumPy is imported lazily: those tools run without it.
"""
import copy
import json
import math
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tools/, for idx_files
import idx_files  # noqa: E402

# A peer script that cannot run here because its framework (or its GPU backend) is missing exits
# with this status, after one line on stderr; tools/peers/compare.py reports it as absent, not
# failed.
EXIT_ABSENT = 3


def last_line(text):
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def run_process(command, timeout):
    """(CompletedProcess or None on timeout, wall seconds)."""
    start = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - start
    except OSError as error:  # no such program
        return subprocess.CompletedProcess(command, 127, "", str(error)), time.monotonic() - start
    return done, time.monotonic() - start


def turning_rounds(commands, rounds, timeout):
    """Runs each command (name -> argv) once a round, `rounds` times, the order turned by one each
    round so that no program always runs first or last and each round's runs are of the same
    minute; yields (round, name, CompletedProcess or None on timeout, wall seconds)."""
    names = list(commands)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            done, wall = run_process(commands[name], timeout)
            yield r, name, done, wall


def absent(program, why):
    """Exit with EXIT_ABSENT: the framework this peer needs is not here."""
    print(f"{program}: absent: {why}", file=sys.stderr)
    sys.exit(EXIT_ABSENT)


def default_learning_rate(batch):
    """mlp_train's default SGD rate (app/cli.c default_learning_rate): 0.02 at batch 64, scaled
    linearly above 64 and by the square root below, at most 0.2; rounded to float as it does."""
    ratio = batch / 64.0
    scale = ratio if ratio >= 1.0 else math.sqrt(ratio)
    return float_round(min(0.02 * scale, 0.2))


def float_round(x):
    """x rounded to the nearest IEEE single, as C's (float) cast does, printed shortest."""
    import struct
    return struct.unpack("f", struct.pack("f", x))[0]


def parse_hidden(text):
    """--hidden as mlp_train takes it: '256', '512,256', or 'none' for no hidden layer."""
    if text == "none":
        return []
    widths = [int(w) for w in text.split(",")]
    if any(w < 1 for w in widths):
        raise ValueError(f"--hidden: bad width in '{text}'")
    return widths


def read_array(directory, name):
    """The IDX file name[.gz] in directory as a NumPy uint8 array of its shape; exits with the
    reason where it is missing or not an IDX file."""
    import numpy as np
    try:
        shape, elements = idx_files.read_idx(idx_files.find_idx(directory, name))
    except idx_files.IdxError as error:
        raise SystemExit(str(error)) from None
    return np.frombuffer(elements, dtype=np.uint8).reshape(shape)


def load_mnist(directory):
    """(x_train, y_train, x_test, y_test) as NumPy arrays: images float32 [n, 784], labels int32.

    Normalized as mlp_train does (core/dataset.c dataset_normalization): x = pixel * scale + shift
    in single precision, with scale = 1 / (255 std) and shift = -mean / std, mean and std (the
    population one) of pixel/255 over every pixel of the training set."""
    import numpy as np
    directory = Path(directory)
    train_pixels = read_array(directory, "train-images-idx3-ubyte")
    test_pixels = read_array(directory, "t10k-images-idx3-ubyte")
    histogram = np.bincount(train_pixels.ravel(), minlength=256).astype(np.float64)
    values = np.arange(256, dtype=np.float64)
    count = histogram.sum()
    pixel_mean = (histogram * values).sum() / count
    std = math.sqrt((histogram * (values - pixel_mean) ** 2).sum() / count) / 255.0
    std = std if std > 0 else 1.0
    scale, shift = np.float32(1.0 / (255.0 * std)), np.float32(-(pixel_mean / 255.0) / std)

    def images(pixels):
        return pixels.reshape(len(pixels), -1).astype(np.float32) * scale + shift

    def labels(name):
        return read_array(directory, name).astype(np.int32)

    return (images(train_pixels), labels("train-labels-idx1-ubyte"),
            images(test_pixels), labels("t10k-labels-idx1-ubyte"))


def init_parameters(widths, seed):
    """[(W [fan_in, fan_out], b [fan_out]), ...] as float32 NumPy arrays, drawn as mlp_train
    draws them (core/model.c mlp_init_parameters): He-uniform weights, U(-sqrt(6/fan_in),
    +sqrt(6/fan_in)), zero biases. Same distribution, not the same numbers (a different
    generator); the same seed gives the PyTorch and JAX programs the same weights."""
    import numpy as np
    generator = np.random.default_rng(seed)
    parameters = []
    for fan_in, fan_out in zip(widths[:-1], widths[1:]):
        bound = math.sqrt(6.0 / fan_in)
        weights = generator.uniform(-bound, bound, size=(fan_in, fan_out)).astype(np.float32)
        parameters.append((weights, np.zeros(fan_out, dtype=np.float32)))
    return parameters


SCHEDULES = ["constant", "step", "cosine", "onecycle"]


def schedule_span(args, count, batch):
    """(warm-up updates, all updates) of a run of args.epochs epochs, as mlp_train plans them."""
    total = args.epochs * -(-count // batch)
    warmup = args.warmup if args.warmup is not None else (total * 3 // 10 if args.schedule == "onecycle" else 0)
    return warmup, total


def schedule_lr(kind, lr, warmup, total, t, cos=math.cos, where=None):
    """mlp_train's core/lr_schedule.h: the rate of update t (0 first). With where (jnp.where) and
    cos (jnp.cos), t may be a traced JAX integer."""
    pick = where or (lambda condition, a, b: a if condition else b)
    rest = max(total - warmup, 1)
    p = (t - warmup) / rest
    p = pick(p > 1.0, 1.0, p)
    after = {"constant": lr + 0.0 * p,
             "step": pick(p >= 0.75, lr * 0.01, pick(p >= 0.5, lr * 0.1, lr)),
             "cosine": lr * 0.5 * (1.0 + cos(math.pi * p)),
             "onecycle": lr * (1.0 - p)}[kind]
    return pick(t < warmup, lr * (t + 1) / max(warmup, 1), after)


def add_common_arguments(parser, devices, modes, default_modes=None):
    """The options both peer programs take, with the same names as mlp_train's; --modes is
    default_modes (all of modes if None) unless given."""
    parser.add_argument("--data", default="data/mnist", type=Path, help="directory of the four IDX files")
    parser.add_argument("--device", default=devices[0], choices=devices)
    parser.add_argument("--batch", type=int, nargs="+", default=[64], help="one or more batch sizes")
    parser.add_argument("--modes", nargs="+", default=default_modes or modes, choices=modes)
    parser.add_argument("--hidden", default="256", help="hidden widths, as mlp_train: 256, 512,256 or none")
    parser.add_argument("--epochs", type=int, default=5,
                        help="epochs per measurement; the first (warm-up, compilation) is not timed")
    parser.add_argument("--lr", type=float, help="learning rate (default: mlp_train's for the batch)")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--schedule", default="constant", choices=SCHEDULES,
                        help="the rate of each update, as mlp_train's --schedule")
    parser.add_argument("--warmup", type=int, help="warm-up updates, as mlp_train's --warmup")
    parser.add_argument("--weight-decay", type=float, default=0.0,
                        help="decoupled weight decay of the weights, as mlp_train's --weight-decay")
    parser.add_argument("--label-smoothing", type=float, default=0.0,
                        help="label smoothing of the training loss, as mlp_train's --label-smoothing")
    parser.add_argument("--seed", type=int, nargs="+", default=[42],
                        help="one or more seeds, each a run of its own in this process")
    parser.add_argument("--no-train-metrics", action="store_true",
                        help="do not sum the training loss and accuracy on the device (mlp_train does)")


def check_arguments(parser, args):
    if args.epochs < 2:
        parser.error("--epochs must be at least 2 (the first is not timed)")
    if any(b < 1 for b in args.batch):
        parser.error("--batch must be positive")
    if args.weight_decay < 0 or not 0 <= args.label_smoothing < 1:
        parser.error("--weight-decay must be 0 or more, --label-smoothing in [0, 1)")
    try:
        args.widths = [784] + parse_hidden(args.hidden) + [10]
    except ValueError as error:
        parser.error(str(error))


def with_seed(args, seed):
    """args for one run: its seed in args.seed."""
    one = copy.copy(args)
    one.seed = seed
    return one


def result_record(mode, device, batch, threads, lr, times, test_accuracy, train_loss, train_accuracy, **extra):
    """One measurement as the peers print it: epoch_s is the median over the epochs after the first."""
    import statistics
    return {"mode": mode, "device": device, "batch": batch, "threads": threads, "lr": lr,
            "epoch_s": statistics.median(times[1:]), "epoch_times_s": times, "epochs_timed": len(times) - 1,
            "test_accuracy": test_accuracy, "train_loss": train_loss, "train_accuracy": train_accuracy, **extra}


def print_json(framework, version, device_name, results, **extra):
    """The one JSON object a peer prints on stdout."""
    print(json.dumps({"framework": framework, "version": version, framework: version, "device": device_name,
                      **extra, "results": results}))
