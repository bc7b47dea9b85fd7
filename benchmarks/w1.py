"""W1: value and gradient of sum(tanh(x)*sigmoid(x) + exp(-x*x)*0.5 + log1p(x*x)),
x float32 of 4,000,000 elements.

Implementations, interleaved in one process after each gradient is checked
against numpy's: numpy by hand (the gradient written out), fusegrad eager,
fusegrad.jit of value_and_grad (forward and adjoint fused into one loop),
fusegrad.jit with backward() called outside the compiled function, and
PyTorch eager when installed. The memory-bandwidth limit is the time of a
numpy copy of the bytes the ideal kernel moves (read x, write the gradient).

    python benchmarks/w1.py [--size 4000000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import fusegrad as fg

try:
    import torch
except ImportError:  # the comparison is optional
    torch = None


def numpy_by_hand(x):
    t = np.tanh(x)
    s = 1 / (1 + np.exp(-x))
    e = np.exp(-x * x)
    loss = (t * s + e * 0.5 + np.log1p(x * x)).sum()
    grad = (1 - t * t) * s + t * s * (1 - s) - x * e + 2 * x / (1 + x * x)
    return loss, grad


def w1(lib, x):
    return (lib.tanh(x) * lib.sigmoid(x) + lib.exp(-x * x) * 0.5 + lib.log1p(x * x)).sum()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    xs = np.random.default_rng(0).standard_normal(args.size).astype(np.float32)

    value_and_grad = fg.jit(fg.value_and_grad(lambda x: w1(fg, x)))
    forward = fg.jit(lambda x: w1(fg, x))

    def jit_outside():
        x = fg.from_numpy(xs).requires_grad_()
        loss = forward(x)
        loss.backward()
        return loss, x.grad

    def eager():
        x = fg.from_numpy(xs).requires_grad_()
        loss = w1(fg, x)
        loss.backward()
        return loss, x.grad

    runs = {
        "numpy by hand": lambda: numpy_by_hand(xs),
        "fusegrad eager": eager,
        "fusegrad jit(value_and_grad)": lambda: value_and_grad(fg.from_numpy(xs)),
        "fusegrad jit, backward outside": jit_outside,
    }
    if torch is not None:
        torch.set_num_threads(1)

        def torch_eager():
            x = torch.from_numpy(xs).requires_grad_()
            loss = w1(torch, x)
            loss.backward()
            return loss, x.grad

        runs["torch eager (1 thread)"] = torch_eager

    _, reference = numpy_by_hand(xs.astype(np.float64))
    for name, run in runs.items():  # check (and warm up: traces, compiles)
        for _ in range(2):
            _, grad = run()
        grad = grad.detach().numpy() if hasattr(grad, "detach") else np.asarray(grad)
        error = np.max(np.abs(grad - reference) / (np.abs(reference) + 1e-3))
        assert error < 1e-2, f"{name}: gradient off by {error:.2e}"

    times = {name: [] for name in runs}
    for _ in range(args.repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    copy = [0.0] * args.repeat
    moved = np.empty(2 * args.size, np.float32)
    for k in range(args.repeat):
        start = time.perf_counter()
        moved.copy()
        copy[k] = time.perf_counter() - start
    limit = statistics.median(copy) * 1e3
    baseline = statistics.median(times["numpy by hand"]) * 1e3
    print(f"W1, {args.size} float32, value + gradient (medians of {args.repeat})")
    for name, samples in times.items():
        ms = statistics.median(samples) * 1e3
        print(f"  {name:<32}{ms:9.1f} ms   {baseline / ms:6.2f}x numpy   {ms / limit:5.1f}x limit")
    print(f"  {'bandwidth limit (copy 8 B/elem)':<32}{limit:9.1f} ms")


if __name__ == "__main__":
    main()
