"""An optimizer's step on a 784-128-128-10 MLP's parameters (118k floats,
gradients given): fusegrad eager, fusegrad ``fused=True`` (the update
compiled), numpy by hand (an update per term, as eager runs it) and PyTorch
with its default and its fused kernels when installed (one thread, as numpy),
interleaved in one process; medians per step in microseconds.

    python benchmarks/optimizers.py [--repeat 15] [--number 50]
"""

from __future__ import annotations

import argparse

import numpy as np

import fusegrad

from harness import measure, table

try:
    import torch
except ImportError:  # the comparison is optional
    torch = None

SHAPES = [(784, 128), (128,), (128, 128), (128,), (128, 10), (10,)]
OPTIONS = {"SGD": dict(lr=1e-3, momentum=0.9), "Adam": dict(lr=1e-3), "AdamW": dict(lr=1e-3)}


def _step(lib, name, arrays, **extra):
    params = [lib.nn.Parameter(lib.tensor(a.copy())) for a in arrays]
    for p in params:
        p.grad = lib.tensor(np.full(tuple(p.shape), 0.01, np.float32))
    return getattr(lib.optim, name)(params, **OPTIONS[name], **extra).step


def _numpy_step(name, arrays):
    """The update written with numpy, a fresh array per term."""
    params = [a.copy() for a in arrays]
    grads = [np.full_like(a, 0.01) for a in arrays]
    first = [np.zeros_like(a) for a in arrays]
    second = [np.zeros_like(a) for a in arrays]
    count = [0]

    def step():
        count[0] += 1
        for p, g, m, v in zip(params, grads, first, second):
            if name == "SGD":
                m[...] = 0.9 * m + g
                p -= 1e-3 * m
                continue
            if name == "AdamW":
                p *= 1 - 1e-3 * 1e-2
            m[...] = 0.9 * m + 0.1 * g
            v[...] = 0.999 * v + 0.001 * g * g
            corrected = np.sqrt(v) / np.sqrt(1 - 0.999 ** count[0]) + 1e-8
            p -= 1e-3 / (1 - 0.9 ** count[0]) * m / corrected

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--number", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    columns = ["fusegrad", "fusegrad fused", "numpy"]
    if torch is not None:
        torch.set_num_threads(1)
        columns += ["torch", "torch fused"]
    rows = {}
    for name in OPTIONS:
        rows[name] = {
            "fusegrad": _step(fusegrad, name, arrays),
            "fusegrad fused": _step(fusegrad, name, arrays, fused=True),
            "numpy": _numpy_step(name, arrays),
        }
        if torch is not None:
            rows[name]["torch"] = _step(torch, name, arrays)
            rows[name]["torch fused"] = _step(torch, name, arrays, fused=True)
        for step in rows[name].values():
            for _ in range(3):  # state made, programs compiled
                step()
    medians = measure(rows, args.repeat, args.number)
    print(table(medians, columns, "fusegrad fused", "step (118k float32 parameters)"))


if __name__ == "__main__":
    main()
