#!/usr/bin/env python3
"""mlp_train's training job in JAX, the whole epoch one jitted lax.scan: one of the peers that
tools/peers/compare.py puts next to mlp_train's implementations.

The job is tools/peers/pytorch_mlp.py's: an MLP 784-256-10 (--hidden as mlp_train's), ReLU,
softmax cross-entropy (mean over the batch), SGD with momentum 0.9 in PyTorch's convention
(v = m v + g; p -= lr v, which is mlp_train's), mlp_train's default learning rate for the batch
unless --lr, mlp_train's initialization scheme (He-uniform weights, zero biases;
tools/peers/peer_common.py; the same seed gives the same weights as pytorch_mlp.py), MNIST
normalized as mlp_train does, FP32: jax_default_matmul_precision is "highest" (no TF32 on the
GPU) unless --matmul-precision says otherwise.

Mode "scan": the data set is resident on the device. Each epoch's order is a permutation drawn
on the device (jax.random.permutation of a key folded with the epoch) before the clock starts,
as mlp_train uploads its order before its clock starts. One jitted function trains the epoch:
a lax.scan over the full batches (each step gathers its rows by the order, on the device), then
one more step on the last partial batch (its shape is known when tracing, so it is part of the
same compiled program), as mlp_train does; the training loss and accuracy are summed in the
scan's carry and read back at the end, as mlp_train does (--no-train-metrics leaves them out).
The parameters and momentum are donated to the call on GPUs (updated in place). --unroll N puts
N steps in each iteration of the compiled loop (lax.scan's unroll; default 1).

Timing: an epoch runs from the call to the read-back of its loss and accuracy, after
block_until_ready on everything it returns; the first epoch includes the compilation and is not
counted; the figure is the median of the others. Test accuracy is measured once, at the end.

Prints one JSON object on stdout, as pytorch_mlp.py does (tools/peers/peer_common.py print_json):
  {"framework": "jax", "version", "jax", "jaxlib", "device", "backend", "matmul_precision",
   "results": [{"mode": "scan", "device", "batch", "threads", "lr", "epoch_s", "epoch_times_s",
   "epochs_timed", "test_accuracy", "train_loss", "train_accuracy", "compile_epoch_s", "unroll",
   "seed"}...]}, one result a batch and seed (--seed takes several); compile_epoch_s is null for
   a seed whose programs an earlier seed compiled.
A result that fails is {"mode", "device", "batch", "seed", "error"}; the others still run.
Exits 3 (after a line on stderr) when JAX, or a GPU backend for --device gpu, is not there.

Example: tools/peers/jax_mlp.py --device gpu --batch 16 512 --epochs 5
"""
import argparse
import os
import sys
import time

import peer_common as common

PROGRAM = "jax_mlp.py"
COMPILED = {}  # (batch, and the options that shape the program) -> build_epoch's pair


def build_epoch(jax, batch, count, lr, momentum, metrics, donate, unroll=1, rate=None,
                weight_decay=0.0, label_smoothing=0.0):
    """The jitted epoch: (params, velocity, order, x, y, first_step) -> (params, velocity,
    loss_sum, correct). rate: the rate of update t (a traced integer), for --schedule; None: lr,
    and first_step is not used. weight_decay and label_smoothing as mlp_train's (each left out of
    the program where 0).

    params and velocity are lists of (W, b); order is the epoch's permutation of the rows; x and
    y the whole training set, on the device (arguments, not closure constants, so they are not
    baked into the program)."""
    jnp, lax = jax.numpy, jax.lax
    full_steps, rest = divmod(count, batch)

    def forward(params, x):
        for weights, bias in params[:-1]:
            x = jax.nn.relu(x @ weights + bias)
        weights, bias = params[-1]
        return x @ weights + bias

    def loss_fn(params, x, y):
        logits = forward(params, x)
        log_probabilities = jax.nn.log_softmax(logits)
        if label_smoothing:
            classes = logits.shape[1]
            target = jax.nn.one_hot(y, classes) * (1.0 - label_smoothing) + label_smoothing / classes
            return -jnp.mean(jnp.sum(target * log_probabilities, axis=1)), logits
        loss = -jnp.mean(jnp.take_along_axis(log_probabilities, y[:, None], axis=1))
        return loss, logits

    gradient = jax.value_and_grad(loss_fn, has_aux=True)

    def step(carry, index, x_all, y_all):
        params, velocity, loss_sum, correct, t = carry
        x, y = x_all[index], y_all[index]  # the gather, on the device
        (loss, logits), grads = gradient(params, x, y)
        velocity = jax.tree_util.tree_map(lambda v, g: momentum * v + g, velocity, grads)
        rate_now = lr if rate is None else rate(t)
        if weight_decay:  # decoupled, of the weights only
            params = [(w * (1.0 - rate_now * weight_decay) - rate_now * vw, b - rate_now * vb)
                      for (w, b), (vw, vb) in zip(params, velocity)]
        else:
            params = jax.tree_util.tree_map(lambda p, v: p - rate_now * v, params, velocity)
        if metrics:
            loss_sum = loss_sum + loss * index.shape[0]
            correct = correct + jnp.sum(jnp.argmax(logits, axis=1) == y).astype(jnp.int32)
        return params, velocity, loss_sum, correct, t if rate is None else t + 1

    def epoch(params, velocity, order, x_all, y_all, first_step):
        carry = (params, velocity, jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32), first_step)
        if full_steps:
            steps = order[:full_steps * batch].reshape(full_steps, batch)
            carry, _ = lax.scan(lambda c, index: (step(c, index, x_all, y_all), None), carry, steps,
                                unroll=unroll)
        if rest:
            carry = step(carry, order[full_steps * batch:], x_all, y_all)
        return carry[:4]

    return jax.jit(epoch, donate_argnums=(0, 1) if donate else ()), jax.jit(forward)


def block_until_ready(jax, tree):
    """Waits for every array in tree (jax.block_until_ready, where this JAX lacks it)."""
    for leaf in jax.tree_util.tree_leaves(tree):
        leaf.block_until_ready()


def scan_run(jax, data, device, batch, lr, args):
    """Returns (epoch times, train loss, train accuracy, test accuracy, whether the first epoch
    compiled the programs: only a configuration's first seed does)."""
    jnp = jax.numpy
    x_train, y_train, x_test, y_test = data
    count = x_train.shape[0]
    configuration = (batch, lr, args.schedule, args.warmup, args.epochs, args.momentum, args.unroll,
                     args.no_train_metrics, args.weight_decay, args.label_smoothing)
    compiles = configuration not in COMPILED  # every seed of a configuration runs the same programs
    if compiles:
        rate = None
        if args.schedule != "constant" or args.warmup:
            warmup, total = common.schedule_span(args, count, batch)
            rate = lambda t: common.schedule_lr(args.schedule, lr, warmup, total, t.astype(jnp.float32),
                                                cos=jnp.cos, where=jnp.where)  # noqa: E731
        COMPILED[configuration] = build_epoch(jax, batch, count, lr, args.momentum, not args.no_train_metrics,
                                              donate=device.platform != "cpu", unroll=args.unroll, rate=rate,
                                              weight_decay=args.weight_decay,
                                              label_smoothing=args.label_smoothing)
    epoch, forward = COMPILED[configuration]
    steps_per_epoch = -(-count // batch)
    params = [(jax.device_put(w, device), jax.device_put(b, device))
              for w, b in common.init_parameters(args.widths, args.seed)]
    velocity = jax.tree_util.tree_map(jnp.zeros_like, params)
    key = jax.random.PRNGKey(args.seed)
    times, train_loss, train_accuracy = [], float("nan"), float("nan")
    for number in range(args.epochs):
        order = jax.random.permutation(jax.random.fold_in(key, number), count).astype(jnp.int32)
        order = jax.device_put(order, device).block_until_ready()
        start = time.perf_counter()
        first_step = jnp.asarray(number * steps_per_epoch, jnp.int32)
        params, velocity, loss_sum, correct = epoch(params, velocity, order, x_train, y_train, first_step)
        block_until_ready(jax, (params, velocity, loss_sum, correct))
        train_loss, train_accuracy = float(loss_sum) / count, int(correct) / count
        times.append(time.perf_counter() - start)
    logits = forward(params, x_test)
    test_accuracy = float(jnp.mean(jnp.argmax(logits, axis=1) == y_test))
    return times, train_loss, train_accuracy, test_accuracy, compiles


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_common_arguments(parser, devices=["gpu", "cuda", "cpu"], modes=["scan"])
    parser.add_argument("--threads", type=int, default=0,
                        help="CPU: 1 makes XLA's CPU backend single-threaded; 0 (default) leaves it alone")
    parser.add_argument("--unroll", type=int, default=1, help="lax.scan's unroll: steps per loop iteration")
    parser.add_argument("--matmul-precision", default="highest", choices=["highest", "tensorfloat32", "bfloat16"],
                        help="jax_default_matmul_precision: FP32 products (highest, the default), TF32 or BF16")
    args = parser.parse_args()
    common.check_arguments(parser, args)
    platform = "cpu" if args.device == "cpu" else "gpu"

    # Before JAX is imported: the platform, and XLA's CPU threads where asked for.
    if platform == "cpu":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        if args.threads == 1:
            os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                       " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as error:
        common.absent(PROGRAM, f"JAX is not installed ({error})")
    jax.config.update("jax_default_matmul_precision", args.matmul_precision)  # highest: FP32, no TF32
    device, problems = None, []
    for backend in ("cuda", "gpu") if platform == "gpu" else ("cpu",):  # "gpu" is the older name
        try:
            device = jax.devices(backend)[0]
            break
        except Exception as error:  # noqa: BLE001: RuntimeError mostly; any means no such backend
            problems.append(str(error).splitlines()[0] if str(error) else repr(error))
    if device is None:
        common.absent(PROGRAM, f"JAX has no {platform} backend here ({'; '.join(problems)})")

    x_train, y_train, x_test, y_test = common.load_mnist(args.data)
    data = [jax.device_put(jnp.asarray(a), device) for a in (x_train, y_train, x_test, y_test)]
    name = device.device_kind if platform == "gpu" else "cpu"

    results = []
    for batch in args.batch:
        lr = args.lr if args.lr is not None else common.default_learning_rate(batch)
        for seed in args.seed:
            try:
                times, loss, accuracy, test, compiled = scan_run(jax, data, device, batch, lr,
                                                                 common.with_seed(args, seed))
            except Exception as error:  # noqa: BLE001: reported per batch, not fatal
                print(f"{PROGRAM}: scan batch {batch} failed: {error!r}", file=sys.stderr)
                results.append({"mode": "scan", "device": args.device, "batch": batch, "seed": seed,
                                "error": repr(error)[:500]})
                continue
            results.append(common.result_record("scan", args.device, batch, args.threads, lr, times, test, loss,
                                                accuracy, compile_epoch_s=times[0] if compiled else None,
                                                unroll=args.unroll, seed=seed))
            print(f"{PROGRAM}: scan batch {batch} seed {seed}: {1e3 * results[-1]['epoch_s']:.2f} ms per epoch, "
                  f"test accuracy {100 * test:.2f}%", file=sys.stderr)
    try:
        import jaxlib
        jaxlib_version = jaxlib.__version__
    except (ImportError, AttributeError):
        jaxlib_version = None
    common.print_json("jax", jax.__version__, name, results, jaxlib=jaxlib_version, backend=device.platform,
                      matmul_precision=args.matmul_precision)


if __name__ == "__main__":
    main()
