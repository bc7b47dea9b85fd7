"""W2 and W3 of the performance issues, fusegrad against numpy by hand.

W2: sum(gelu(layer_norm(x) * g + b)), gradients wrt x, g, b; x float32 4096x1024.
W3: an MLP 784-512-512-10 with tanh and softmax cross-entropy, batch 256:
loss and the gradients of all six parameters; its reference is the time of
the five matrix products alone in numpy (the target is 1.1x that).

Every implementation's gradients are checked against the numpy ones before
timing; all run interleaved in one process; PyTorch eager (one thread) runs
when installed. The W2 limit is a numpy copy of the bytes an ideal kernel
moves (read x, write its gradient).

    python benchmarks/w2_w3.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np

import fusegrad as fg
import fusegrad.nn.functional as F

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # the comparison is optional
    torch = None

# ---------------------------------------------------------------------- W2


def _erf(x):
    """Abramowitz and Stegun 7.1.26 (error below 1.5e-7): numpy has no erf."""
    t = 1 / (1 + 0.3275911 * np.abs(x))
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return np.sign(x) * (1 - poly * np.exp(-x * x))


def w2_numpy(x, g, b, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    centered = x - mean
    rstd = 1 / np.sqrt((centered * centered).mean(-1, keepdims=True) + eps)
    normed = centered * rstd
    y = normed * g + b
    cdf = 0.5 * (1 + _erf(y / math.sqrt(2)))
    loss = (y * cdf).sum()
    gy = cdf + y * np.exp(-0.5 * y * y) / math.sqrt(2 * math.pi)
    g_normed = gy * g
    gx = rstd * (
        g_normed
        - g_normed.mean(-1, keepdims=True)
        - normed * (g_normed * normed).mean(-1, keepdims=True)
    )
    return loss, gx, (gy * normed).sum(0), gy.sum(0)


def w2(lib, functional, x, g, b):
    return functional.gelu(functional.layer_norm(x, (x.shape[-1],)) * g + b).sum()


# ---------------------------------------------------------------------- W3


def w3_numpy(x, labels, w1, b1, w2_, b2, w3, b3):
    h1 = np.tanh(x @ w1 + b1)
    h2 = np.tanh(h1 @ w2_ + b2)
    logits = h2 @ w3 + b3
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    rows = np.arange(len(labels))
    loss = -log_probs[rows, labels].mean()
    g_logits = np.exp(log_probs)
    g_logits[rows, labels] -= 1
    g_logits /= len(labels)
    g_h2 = (g_logits @ w3.T) * (1 - h2 * h2)
    g_h1 = (g_h2 @ w2_.T) * (1 - h1 * h1)
    grads = (x.T @ g_h1, g_h1.sum(0), h1.T @ g_h2, g_h2.sum(0), h2.T @ g_logits, g_logits.sum(0))
    return loss, *grads


def w3_matmuls(x, w1, w2_, w3, h1, h2, g_logits):
    """The products W3 cannot avoid: three forward, five backward."""
    x @ w1
    h1 @ w2_
    h2 @ w3
    g = g_logits @ w3.T
    h2.T @ g_logits
    g = g @ w2_.T
    h1.T @ g
    x.T @ g


def w3(lib, functional, x, labels, *params):
    w1, b1, w2_, b2, w3_, b3 = params
    h = lib.tanh(x @ w1 + b1)
    h = lib.tanh(h @ w2_ + b2)
    return functional.cross_entropy(h @ w3_ + b3, labels)


# ------------------------------------------------------------------ harness


def _implementations(workload, arrays, grad_positions):
    """{name: run} where run() returns (loss, gradients as numpy arrays)."""

    def leaves(lib):
        tensors = [lib.from_numpy(a) for a in arrays]
        for i in grad_positions:
            tensors[i].requires_grad_()
        return tensors

    def eager(lib, functional):
        def run():
            tensors = leaves(lib)
            loss = workload(lib, functional, *tensors)
            loss.backward()
            return loss, [tensors[i].grad.numpy() for i in grad_positions]

        return run

    def compiled(*tensors):
        loss = workload(fg, F, *tensors)
        return (loss, *fg.autograd.grad(loss, [tensors[i] for i in grad_positions]))

    jitted = fg.jit(compiled)

    def fusegrad_jit():
        loss, *grads = jitted(*leaves(fg))
        return loss, [g.numpy() for g in grads]

    runs = {"fusegrad eager": eager(fg, F), "fusegrad jit": fusegrad_jit}
    if torch is not None:
        runs["torch eager (1 thread)"] = eager(torch, TF)
    return runs


def _check(name, grads, reference):
    for got, want in zip(grads, reference):
        error = np.max(np.abs(got - want) / (np.abs(want).max() + 1e-6))
        assert error < 1e-3, f"{name}: gradient off by {error:.2e}"


def _time(runs: dict, repeat: int) -> dict:
    times = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(samples) * 1e3 for name, samples in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    if torch is not None:
        torch.set_num_threads(1)

    x = rng.standard_normal((4096, 1024)).astype(np.float32)
    g = (1 + 0.1 * rng.standard_normal(1024)).astype(np.float32)
    b = (0.1 * rng.standard_normal(1024)).astype(np.float32)
    w2_runs = {"numpy by hand": lambda: (None, w2_numpy(x, g, b)[1:])}
    w2_runs.update(_implementations(w2, [x, g, b], [0, 1, 2]))

    batch = rng.standard_normal((256, 784)).astype(np.float32)
    labels = rng.integers(0, 10, 256)
    shapes = [(784, 512), (512,), (512, 512), (512,), (512, 10), (10,)]
    params = [(rng.standard_normal(s) * 0.05).astype(np.float32) for s in shapes]
    h1, h2 = np.tanh(batch @ params[0]), np.tanh(np.tanh(batch @ params[0]) @ params[2])
    g_logits = rng.standard_normal((256, 10)).astype(np.float32)
    w3_runs = {
        "numpy matmuls alone": lambda: w3_matmuls(
            batch, params[0], params[2], params[4], h1, h2, g_logits
        ),
        "numpy by hand": lambda: (None, w3_numpy(batch, labels, *params)[1:]),
    }
    w3_runs.update(_implementations(w3, [batch, labels, *params], [2, 3, 4, 5, 6, 7]))

    for workload, runs, reference in (
        ("W2", w2_runs, w2_numpy(x.astype(np.float64), g, b)[1:]),
        ("W3", w3_runs, w3_numpy(batch.astype(np.float64), labels, *params)[1:]),
    ):
        for name, run in runs.items():  # check, and warm up (traces, compiles)
            if name == "numpy matmuls alone":
                continue
            start = time.perf_counter()
            _check(name, run()[1], reference)
            if name == "fusegrad jit":
                seconds = time.perf_counter() - start
                print(f"{workload} fusegrad jit, first call (trace + compile): {seconds:.2f} s")
            run()

    copy = np.empty(2 * x.size, np.float32)
    w2_times = _time({**w2_runs, "bandwidth limit (copy 8 B/elem)": copy.copy}, args.repeat)
    w3_times = _time(w3_runs, args.repeat)
    for title, times, reference in (
        ("W2, 4096x1024 float32, loss + 3 gradients", w2_times, "numpy by hand"),
        ("W3, MLP 784-512-512-10, batch 256, loss + 6 gradients", w3_times, "numpy matmuls alone"),
    ):
        print(f"{title} (medians of {args.repeat})")
        for name, ms in times.items():
            print(
                f"  {name:<34}{ms:9.2f} ms   {ms / times[reference]:6.2f}x the time of {reference}"
            )


if __name__ == "__main__":
    main()
