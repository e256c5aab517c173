#!/usr/bin/env python3
"""mlp_train's training job in PyTorch, timed the way mlp_train times it: one of the peers that
tools/peers/compare.py puts next to mlp_train's implementations.

The job: an MLP 784-256-10 (--hidden as mlp_train's), ReLU, softmax cross-entropy (mean over
the batch), SGD with momentum 0.9 in PyTorch's convention (v = m v + g; p -= lr v, which is
mlp_train's), mlp_train's default learning rate for the batch unless --lr, mlp_train's weight
initialization scheme (He-uniform weights, zero biases; tools/peers/peer_common.py), MNIST
normalized as mlp_train does, FP32 with TF32 off unless --matmul-precision says otherwise
(tensorfloat32: torch.set_float32_matmul_precision("high"), TF32 products of FP32 tensors, as
mlp_train's --precision tf32; bfloat16: the forward pass and loss under torch.autocast to BF16,
which keeps the weights, their gradients and the update in FP32 but also the activations in BF16,
less memory than mlp_train's --precision bf16 moves, whose activations stay FP32). The data set
is resident on the device; each epoch draws a permutation on the device (before the clock
starts, as mlp_train uploads its order before its clock starts), and each step gathers its batch
there. The last partial batch is trained on, as mlp_train does. The training loss and accuracy are summed on the device during the epoch and
read back at its end, as mlp_train does (--no-train-metrics leaves them out).

Modes (eager and graph unless --modes says otherwise):
  eager  the usual loop: index, forward, loss, zero_grad, backward, optimizer step (SGD with
         PyTorch's default implementation for the device: foreach on CUDA)
  graph  CUDA only: the whole step (batch gather from a device-side cursor into the epoch's
         order, forward, loss, backward, fused SGD step, cursor advance, metric sums) captured
         once with torch.cuda.graph and replayed; a second graph for the last partial batch.
         The per-step host work is one graph.replay(). Warm-up steps before capture (as PyTorch
         advises) are undone afterwards: the weights are restored and the momentum zeroed. On a
         --schedule the rate is a device tensor the step computes from its update count.
  compile  CUDA only: graph's step, compiled first by torch.compile in mode
         "max-autotune-no-cudagraphs" with static shapes (Inductor's fused kernels, each GEMM
         autotuned among its Triton templates and cuBLAS; one compilation per step shape, minutes
         in all), then captured whole as one CUDA graph as graph mode does. Inductor's own CUDA
         graphs (mode "max-autotune") would record each compiled region apart, the backward pass
         and the update beside the forward pass, and its outputs are overwritten by the next
         replay while the SGD step still holds them; one graph around the whole step is the
         stronger configuration, and the one that runs.

Timing: an epoch runs from its first step to the read-back of its loss and accuracy (which
synchronizes the device); the first epoch is a warm-up; the figure is the median of the others.
Test accuracy is measured once, after the last epoch.

Prints one JSON object on stdout (tools/peers/peer_common.py print_json):
  {"framework": "torch", "version", "torch", "device", "tf32", "matmul_precision",
   "results": [{"mode", "device",
   "batch", "threads", "lr", "epoch_s", "epoch_times_s", "epochs_timed", "test_accuracy",
   "train_loss", "train_accuracy", "optimizer", "seed"}...]}, one result a batch, mode and seed
   (--seed takes several)
A result for a mode that fails (a capture error, say) is {"mode", "device", "batch", "seed",
"error"}; the others still run.
Exits 3 (after a line on stderr) when PyTorch, or CUDA for --device cuda, is not there.

Example: tools/peers/pytorch_mlp.py --device cuda --batch 16 512 --modes eager graph --epochs 5
"""
import argparse
import contextlib
import sys
import time

import peer_common as common

PROGRAM = "pytorch_mlp.py"


def make_model(torch, widths, seed, device):
    """nn.Sequential of Linear and ReLU, with mlp_train's initialization scheme."""
    layers = []
    for i, (weights, bias) in enumerate(common.init_parameters(widths, seed)):
        linear = torch.nn.Linear(weights.shape[0], weights.shape[1])
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(weights.T.copy()))  # Linear stores [out, in]
            linear.bias.copy_(torch.from_numpy(bias))
        layers.append(linear)
        if i < len(widths) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).to(device)


def make_optimizer(torch, model, lr, momentum, fused):
    """SGD with momentum; fused=True asks for the fused CUDA kernel (PyTorch 2.4 on), falling
    back to the foreach implementation where this PyTorch has none. Returns (optimizer, name)."""
    if fused:
        try:
            return torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, fused=True), "SGD fused"
        except (TypeError, RuntimeError, ValueError) as error:
            print(f"{PROGRAM}: fused SGD unavailable ({error}); using foreach", file=sys.stderr)
            return torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, foreach=True), "SGD foreach"
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum), "SGD default"


def reduced_precision(torch, args):
    """The context the forward pass and the loss run in: autocast to BF16 for --matmul-precision
    bfloat16 (no weight cache: the cast is captured in the CUDA graph), else none."""
    if args.matmul_precision == "bfloat16":
        return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)
    return contextlib.nullcontext()


def synchronize(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def test_accuracy(torch, model, x_test, y_test, args):
    with torch.no_grad(), reduced_precision(torch, args):
        return (model(x_test).argmax(1) == y_test).float().mean().item()


def epoch_order(torch, generator, count, device):
    return torch.randperm(count, generator=generator, device=device)


def decay_weights(torch, model, rate, weight_decay):
    """mlp_train's decoupled weight decay before an update: weights (not biases) times 1 - rate·wd."""
    if weight_decay:
        with torch.no_grad():
            for layer in model:
                if isinstance(layer, torch.nn.Linear):
                    layer.weight.mul_(1.0 - rate * weight_decay)


def eager_run(torch, data, device, batch, lr, args):
    """The usual PyTorch loop. Returns (epoch times, train loss, train accuracy, model, optimizer name)."""
    x_train, y_train, _, _ = data
    count = len(x_train)
    model = make_model(torch, args.widths, args.seed, device)
    optimizer, name = make_optimizer(torch, model, lr, args.momentum, fused=False)
    generator = torch.Generator(device=device)
    generator.manual_seed(args.seed)
    times, train_loss, train_accuracy = [], float("nan"), float("nan")
    warmup, total = common.schedule_span(args, count, batch)
    scheduled, update = args.schedule != "constant" or warmup > 0, 0
    for _ in range(args.epochs):
        order = epoch_order(torch, generator, count, device)
        loss_sum = torch.zeros((), device=device)
        correct = torch.zeros((), dtype=torch.long, device=device)
        synchronize(torch, device)
        start = time.perf_counter()
        for first in range(0, count, batch):
            index = order[first:first + batch]
            x, y = x_train.index_select(0, index), y_train.index_select(0, index)
            with reduced_precision(torch, args):
                logits = model(x)
                loss = torch.nn.functional.cross_entropy(logits, y, label_smoothing=args.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            rate = lr
            if scheduled:  # the rate of this update, as mlp_train's --schedule
                rate = common.schedule_lr(args.schedule, lr, warmup, total, update)
                for group in optimizer.param_groups:
                    group["lr"] = rate
                update += 1
            decay_weights(torch, model, rate, args.weight_decay)
            optimizer.step()
            if not args.no_train_metrics:
                loss_sum += loss.detach() * len(index)
                correct += (logits.detach().argmax(1) == y).sum()
        train_loss, train_accuracy = loss_sum.item() / count, correct.item() / count  # synchronizes
        synchronize(torch, device)
        times.append(time.perf_counter() - start)
    return times, train_loss, train_accuracy, model, name


def capture_steps(torch, step, shapes, cursor):
    """Warms step(rows) up for each shape on a side stream (lazy initialization: cuBLAS, the
    momentum buffers, the gradients), as PyTorch advises, then captures each as a CUDA graph
    (capturing runs nothing). Returns {rows: the graph's replay}."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for rows in shapes:
            for _ in range(3):
                cursor.zero_()
                step(rows)
    torch.cuda.current_stream().wait_stream(side)
    graphs = {}
    for rows in shapes:
        graphs[rows] = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graphs[rows]):
            step(rows)
    return {rows: graph.replay for rows, graph in graphs.items()}


def compiled(torch, step):
    """step through torch.compile at its strongest for a step replayed from a CUDA graph (the
    compile mode in the header)."""
    return torch.compile(step, mode="max-autotune-no-cudagraphs", dynamic=False)


def graph_run(torch, data, device, batch, lr, args, compile_step=False):
    """The whole step as a CUDA graph (and a second one for the last partial batch), compiled
    first where compile_step. On a --schedule the rate is a device tensor that the step computes
    from its update count, as mlp_train's kernels do (fused SGD takes a tensor rate)."""
    x_train, y_train, _, _ = data
    count = len(x_train)
    full_steps, rest = divmod(count, batch)
    warmup, total = common.schedule_span(args, count, batch)
    scheduled = args.schedule != "constant" or warmup > 0
    update = torch.zeros((), device=device)  # updates made, for the schedule
    rate = torch.tensor(lr, device=device) if scheduled else lr
    model = make_model(torch, args.widths, args.seed, device)
    optimizer, name = make_optimizer(torch, model, rate, args.momentum, fused=True)
    generator = torch.Generator(device=device)
    generator.manual_seed(args.seed)

    # The state the graphs read and write, at fixed addresses: the epoch's order, the cursor into
    # it, the metric sums; and one row-offset vector per step shape.
    order = torch.arange(count, device=device)  # each epoch's permutation is copied in
    cursor = torch.zeros((), dtype=torch.long, device=device)
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), dtype=torch.long, device=device)
    shapes = [rows for rows in (batch if full_steps else 0, rest) if rows]
    offsets = {rows: torch.arange(rows, device=device) for rows in shapes}

    def step(rows):
        index = order.index_select(0, cursor + offsets[rows])
        x, y = x_train.index_select(0, index), y_train.index_select(0, index)
        with reduced_precision(torch, args):
            logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits, y, label_smoothing=args.label_smoothing)
        optimizer.zero_grad(set_to_none=False)  # in place: the gradients keep their addresses
        loss.backward()
        if scheduled:
            rate.copy_(common.schedule_lr(args.schedule, lr, warmup, total, update, cos=torch.cos,
                                          where=torch.where))
            update.add_(1)
        decay_weights(torch, model, rate, args.weight_decay)
        optimizer.step()
        cursor.add_(rows)
        if not args.no_train_metrics:
            loss_sum.add_(loss.detach() * rows)
            correct.add_((logits.detach().argmax(1) == y).sum())

    saved = [p.detach().clone() for p in model.parameters()]
    replays = capture_steps(torch, compiled(torch, step) if compile_step else step, shapes, cursor)
    # Undo the warm-up: the run starts from the initial weights with zero momentum, as eager does
    # (with v = 0, the first v = m v + g is g, which is PyTorch's first step too).
    with torch.no_grad():
        for parameter, value in zip(model.parameters(), saved):
            parameter.copy_(value)
        for state in optimizer.state.values():
            if "momentum_buffer" in state and state["momentum_buffer"] is not None:
                state["momentum_buffer"].zero_()
        update.zero_()

    times, train_loss, train_accuracy = [], float("nan"), float("nan")
    for _ in range(args.epochs):
        order.copy_(epoch_order(torch, generator, count, device))
        cursor.zero_()
        loss_sum.zero_()
        correct.zero_()
        synchronize(torch, device)
        start = time.perf_counter()
        for _ in range(full_steps):
            replays[batch]()
        if rest:
            replays[rest]()
        train_loss, train_accuracy = loss_sum.item() / count, correct.item() / count  # synchronizes
        synchronize(torch, device)
        times.append(time.perf_counter() - start)
    compiled_name = "torch.compile max-autotune-no-cudagraphs, " if compile_step else ""
    return times, train_loss, train_accuracy, model, compiled_name + name + " in a CUDA graph"


def compile_run(torch, data, device, batch, lr, args):
    """graph_run with the step compiled. Each run's step is a new closure of the same code, whose
    compilations Dynamo keeps and counts together: forgotten first, so that several batches or
    seeds in one process never reach its recompilation limit (past it, the step would run
    uncompiled under the compiled name)."""
    torch._dynamo.reset()
    return graph_run(torch, data, device, batch, lr, args, compile_step=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_common_arguments(parser, devices=["cuda", "cpu"], modes=["eager", "graph", "compile"],
                                default_modes=["eager", "graph"])
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: PyTorch's default)")
    parser.add_argument("--matmul-precision", default="highest", choices=["highest", "tensorfloat32", "bfloat16"],
                        help="FP32 products (highest, the default), TF32, or autocast to BF16 (CUDA)")
    args = parser.parse_args()
    common.check_arguments(parser, args)
    if args.matmul_precision == "bfloat16" and args.device != "cuda":
        parser.error("--matmul-precision bfloat16 autocasts on CUDA only")

    try:
        import torch
    except ImportError as error:
        common.absent(PROGRAM, f"PyTorch is not installed ({error})")
    if args.device == "cuda" and not torch.cuda.is_available():
        common.absent(PROGRAM, "PyTorch has no CUDA device here")
    # FP32 products, as mlp_train's default, unless TF32 is asked for (BF16: autocast, in the step)
    torch.set_float32_matmul_precision("high" if args.matmul_precision == "tensorfloat32" else "highest")
    torch.backends.cudnn.allow_tf32 = False
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    x_train, y_train, x_test, y_test = common.load_mnist(args.data)
    data = [torch.from_numpy(x_train).to(device), torch.from_numpy(y_train).long().to(device),
            torch.from_numpy(x_test).to(device), torch.from_numpy(y_test).long().to(device)]
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"

    results = []
    for batch in args.batch:
        lr = args.lr if args.lr is not None else common.default_learning_rate(batch)
        for mode in args.modes:
            if mode != "eager" and device.type != "cuda":
                print(f"{PROGRAM}: {mode} mode needs CUDA; skipped", file=sys.stderr)
                continue
            run = {"eager": eager_run, "graph": graph_run, "compile": compile_run}[mode]
            for seed in args.seed:
                try:
                    times, loss, accuracy, model, optimizer_name = run(torch, data, device, batch, lr,
                                                                       common.with_seed(args, seed))
                except Exception as error:  # noqa: BLE001: one mode failing (a capture error) is reported, not fatal
                    print(f"{PROGRAM}: {mode} batch {batch} failed: {error!r}", file=sys.stderr)
                    results.append({"mode": mode, "device": args.device, "batch": batch, "seed": seed,
                                    "error": repr(error)[:500]})
                    continue
                results.append(common.result_record(
                    mode, args.device, batch, torch.get_num_threads(), lr, times,
                    test_accuracy(torch, model, data[2], data[3], args), loss, accuracy, optimizer=optimizer_name,
                    seed=seed))
                print(f"{PROGRAM}: {mode} batch {batch} seed {seed}: {1e3 * results[-1]['epoch_s']:.2f} ms per "
                      f"epoch, test accuracy {100 * results[-1]['test_accuracy']:.2f}%", file=sys.stderr)
                del model
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    common.print_json("torch", torch.__version__, name, results,
                      tf32=torch.backends.cuda.matmul.allow_tf32, matmul_precision=args.matmul_precision)


if __name__ == "__main__":
    main()
