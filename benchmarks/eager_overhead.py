"""Per-op overhead of eager ops with grad recording, on small tensors.

Each op runs in fusegrad (recording a graph: the inputs require grad), numpy
by hand, and PyTorch eager when installed (also recording), interleaved in one
process; the table shows medians per op in microseconds and fusegrad's ratio
to each peer. A last row times forward + backward of a small expression.

    python benchmarks/eager_overhead.py [--repeat 7] [--number 2000]
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

import fusegrad

from harness import measure, table

try:
    import torch
except ImportError:  # the comparison is optional
    torch = None

SHAPE = (16, 16)


def _ops(lib, a, b, v):
    return {
        "add": lambda: a + b,
        "mul": lambda: a * b,
        "mul scalar": lambda: a * 2.0,
        "exp": lambda: lib.exp(a),
        "tanh": lambda: lib.tanh(a),
        "sum": lambda: a.sum(),
        "sum(dim=1)": lambda: a.sum(1),
        "matmul": lambda: a @ b,
        "reshape": lambda: a.reshape(256),
        "transpose": lambda: a.T,
        "index [1:3]": lambda: a[1:3],
        "relu": lambda: lib.relu(a) if lib is not np else np.maximum(a, 0),
        "dot": lambda: lib.dot(v, v),
    }


def _forward_backward(a, b):
    def step():
        ((a * b).tanh() + a).sum().backward()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=2000)
    args = parser.parse_args()

    base = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    libs = {
        "fusegrad": (fusegrad, lambda: fusegrad.tensor(base, requires_grad=True)),
        "numpy": (np, lambda: base.copy()),
    }
    if torch is not None:
        torch.set_num_threads(1)
        libs["torch"] = (torch, lambda: torch.tensor(base, requires_grad=True))
    rows: dict = {}
    for name, (lib, make) in libs.items():
        a, b = make(), make()
        for row, fn in _ops(lib, a, b, make()[0]).items():
            rows.setdefault(row, {})[name] = fn
        if name != "numpy":
            rows.setdefault("fwd+bwd (5 ops)", {})[name] = _forward_backward(make(), make())
    medians = measure(rows, args.repeat, args.number)
    print(table(medians, list(libs), "fusegrad", "op (16x16 float32)"))
    per_op = [values["fusegrad"] for row, values in medians.items() if "fwd" not in row]
    print(f"\nfusegrad median over the ops: {statistics.median(per_op):.2f} us per op")


if __name__ == "__main__":
    main()
