#!/usr/bin/env python3
"""The same training job in PyTorch, timed the way mlp_train times it: the reference that
tools/compare_pytorch.py puts next to mlp_train's epochs.

Model 784-256-10 (ReLU, softmax cross-entropy), SGD with momentum 0.9, FP32 (TF32 off), MNIST
normalized as mlp_train does, the data set resident on the device, each batch gathered there
from a shuffled index. Modes:
  eager  the usual loop: zero_grad, forward, backward, step
  graph  the whole step (gather, forward, backward, step) captured once as a CUDA graph and
         replayed; full batches only (the last partial batch would need a second graph)
An epoch's time runs from the first step to a device synchronization after the last one; the
first epoch is a warm-up; the figure is the median of the timed epochs.

Prints one JSON object: {"torch": version, "device": name, "results": [{"mode", "device",
"batch", "threads", "epoch_s", "epochs_timed", "test_accuracy"}...]}.
"""
import argparse
import gzip
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch


def read_idx(path):
    with gzip.open(path, "rb") if str(path).endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def find(directory, name):
    for candidate in (directory / name, directory / (name + ".gz")):
        if candidate.exists():
            return candidate
    raise SystemExit(f"pytorch_mlp.py: {directory}: no {name}[.gz]")


def load_mnist(directory, device):
    def images(name):
        return torch.from_numpy(read_idx(find(directory, name)).reshape(-1, 784).astype(np.float32) / 255.0)

    def labels(name):
        return torch.from_numpy(read_idx(find(directory, name)).astype(np.int64))

    x_train, y_train = images("train-images-idx3-ubyte"), labels("train-labels-idx1-ubyte")
    x_test, y_test = images("t10k-images-idx3-ubyte"), labels("t10k-labels-idx1-ubyte")
    mean, std = x_train.mean(), x_train.std()
    return [t.to(device) for t in ((x_train - mean) / std, y_train, (x_test - mean) / std, y_test)]


def make_model(device, seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(device)


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def test_accuracy(model, x_test, y_test):
    with torch.no_grad():
        return (model(x_test).argmax(1) == y_test).float().mean().item()


def eager_epochs(data, device, batch, lr, epochs, seed):
    x_train, y_train, x_test, y_test = data
    model = make_model(device, seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    times = []
    for _ in range(epochs):
        order = torch.randperm(len(x_train), device=device)
        synchronize(device)
        start = time.perf_counter()
        for i in range(0, len(x_train), batch):
            index = order[i:i + batch]
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x_train[index]), y_train[index])
            loss.backward()
            optimizer.step()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return times, test_accuracy(model, x_test, y_test)


def graph_epochs(data, device, batch, lr, epochs, seed):
    x_train, y_train, x_test, y_test = data
    model = make_model(device, seed)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    steps = len(x_train) // batch
    index = torch.zeros(batch, dtype=torch.long, device=device)

    def step():
        optimizer.zero_grad(set_to_none=False)
        loss = loss_fn(model(x_train[index]), y_train[index])
        loss.backward()
        optimizer.step()

    side = torch.cuda.Stream()  # warm up on a side stream before capture, as PyTorch advises
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    times = []
    for _ in range(epochs):
        order = torch.randperm(len(x_train), device=device)
        synchronize(device)
        start = time.perf_counter()
        for i in range(steps):
            index.copy_(order[i * batch:(i + 1) * batch])
            graph.replay()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return times, test_accuracy(model, x_test, y_test)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="data/mnist", type=Path)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--batch", type=int, nargs="+", default=[16, 512])
    parser.add_argument("--modes", nargs="+", default=["eager", "graph"], choices=["eager", "graph"])
    parser.add_argument("--threads", type=int, nargs="+", default=[0], help="CPU threads (0: PyTorch's default)")
    parser.add_argument("--epochs", type=int, default=4, help="epochs per measurement; the first is a warm-up")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device(args.device)
    data = load_mnist(args.data, device)
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    results = []
    for threads in args.threads:
        if threads:
            torch.set_num_threads(threads)
        for batch in args.batch:
            for mode in args.modes:
                if mode == "graph" and device.type != "cuda":
                    continue
                run = graph_epochs if mode == "graph" else eager_epochs
                times, accuracy = run(data, device, batch, args.lr, args.epochs, args.seed)
                results.append({"mode": mode, "device": args.device, "batch": batch,
                                "threads": torch.get_num_threads(), "epoch_s": statistics.median(times[1:]),
                                "epochs_timed": len(times) - 1, "test_accuracy": accuracy})
    print(json.dumps({"torch": torch.__version__, "device": name, "results": results}))


if __name__ == "__main__":
    main()
