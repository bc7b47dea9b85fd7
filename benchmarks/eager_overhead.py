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
import timeit

import numpy as np

import fusegrad

try:
    import torch
except ImportError:  # the comparison is optional
    torch = None

SHAPE = (16, 16)


def _workloads(lib, make):
    a, b = make(), make()
    v = make()[0]
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
        "transpose": lambda: a.t(),
        "index [1:3]": lambda: a[1:3],
        "relu": lambda: lib.relu(a),
        "dot": lambda: lib.dot(v, v),
    }


def _backward_pass(lib, make):
    a, b = make(), make()

    def step():
        ((a * b).tanh() + a).sum().backward()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=2000)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    base = rng.standard_normal(SHAPE).astype(np.float32)
    peers = {
        "fusegrad": _workloads(fusegrad, lambda: fusegrad.tensor(base, requires_grad=True)),
        "numpy": _workloads(np, lambda: base.copy()),
    }
    peers["numpy"]["relu"] = lambda a=base: np.maximum(a, 0)
    peers["numpy"]["transpose"] = lambda a=base: a.T
    peers["numpy"]["dot"] = lambda v=base[0]: np.dot(v, v)
    backward = {
        "fusegrad": _backward_pass(fusegrad, lambda: fusegrad.tensor(base, requires_grad=True))
    }
    if torch is not None:
        torch.set_num_threads(1)
        peers["torch"] = _workloads(torch, lambda: torch.tensor(base, requires_grad=True))
        backward["torch"] = _backward_pass(torch, lambda: torch.tensor(base, requires_grad=True))

    names = list(peers["fusegrad"])
    results = {peer: {name: [] for name in names + ["fwd+bwd (5 ops)"]} for peer in peers}
    for _ in range(args.repeat):  # interleaved: every peer sees the same machine state
        for name in names:
            for peer, work in peers.items():
                seconds = timeit.timeit(work[name], number=args.number)
                results[peer][name].append(seconds / args.number * 1e6)
        for peer, step in backward.items():
            seconds = timeit.timeit(step, number=args.number // 4)
            results[peer]["fwd+bwd (5 ops)"].append(seconds / (args.number // 4) * 1e6)

    header = f"{'op (16x16 float32)':<18}" + "".join(f"{p + ' us':>13}" for p in peers)
    header += "".join(f"{'vs ' + p:>11}" for p in peers if p != "fusegrad")
    print(header)
    print("-" * len(header))
    for name in names + ["fwd+bwd (5 ops)"]:
        medians = {p: statistics.median(results[p][name]) for p in peers if results[p][name]}
        row = f"{name:<18}" + "".join(
            f"{medians[p]:>13.2f}" if p in medians else f"{'-':>13}" for p in peers
        )
        row += "".join(
            f"{medians['fusegrad'] / medians[p]:>10.2f}x" if p in medians else f"{'-':>11}"
            for p in peers
            if p != "fusegrad"
        )
        print(row)
    ops = [statistics.median(results["fusegrad"][n]) for n in names]
    print(f"\nfusegrad median over the ops: {statistics.median(ops):.2f} us per op")


if __name__ == "__main__":
    main()
