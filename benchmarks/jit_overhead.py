"""A 30-op function of size-16 vectors, value and gradient per call.

fusegrad eager (an autograd graph per call), fusegrad.jit (the compiled
program: today the reference interpreter, numpy one equation at a time, with
no autograd recording), and PyTorch eager when installed; interleaved in one
process, medians in microseconds. Also the cold compile (trace + adjoint +
passes) of the jit version.

    python benchmarks/jit_overhead.py [--repeat 7] [--number 500]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import fusegrad

from harness import measure, table

try:
    import torch
except ImportError:  # the comparison is optional
    torch = None


def thirty_ops(lib, x, y):
    """30 elementwise ops and a final sum: the shape of a small model's inner loop."""
    a = lib.tanh(x * y + 1.0)
    b = lib.sigmoid(a - x) * 0.5
    c = lib.exp(-(b * b)) + lib.log1p(x * x)
    d = lib.sin(c) * lib.cos(y) - a / (1.0 + b * b)
    e = lib.sqrt(d * d + 1.0) * lib.tanh(c + d)
    f = (e - a) * (e + b) + lib.exp(-(d * d)) * 0.25
    g = lib.maximum(f, a) + lib.minimum(e, b) * 2.0
    return (g * g + f).sum()


def value_and_grad_step(lib, fn, x, y):
    def step():
        x.grad = None
        loss = fn(lib, x, y) if fn is thirty_ops else fn(x, y)
        loss.backward()
        return loss

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=500)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    xs, ys = rng.standard_normal(16).astype(np.float32), rng.standard_normal(16).astype(np.float32)

    def fresh():
        return (fusegrad.tensor(xs, requires_grad=True), fusegrad.tensor(ys))

    start = time.perf_counter()
    compiled = fusegrad.jit(lambda x, y: thirty_ops(fusegrad, x, y))
    x, y = fresh()
    compiled(x, y).backward()
    cold = (time.perf_counter() - start) * 1e3
    program = compiled.lower(*fresh()).program

    row = {
        "fusegrad eager": value_and_grad_step(fusegrad, thirty_ops, *fresh()),
        "fusegrad jit": value_and_grad_step(fusegrad, compiled, *fresh()),
    }
    if torch is not None:
        torch.set_num_threads(1)
        tx, ty = torch.tensor(xs, requires_grad=True), torch.tensor(ys)
        row["torch eager"] = value_and_grad_step(torch, thirty_ops, tx, ty)
    medians = measure({"30 ops, value+grad": row}, args.repeat, args.number)
    print(table(medians, list(row), "fusegrad jit", "workload (16 floats)"))
    print(
        f"\ncompiled program: {len(program.forward.eqns)} forward and "
        f"{len(program.backward.eqns)} backward equations; cold compile (first call, "
        f"tracing included) {cold:.1f} ms"
    )


if __name__ == "__main__":
    main()
