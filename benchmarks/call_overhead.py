"""Where a compiled call's time goes, layer by layer, on W4 (a 30-op function
of 16-float vectors, value and gradient): the whole call, the compiled
program (guards, write-backs, wrapping outputs), its executor, the kernel's
Python launch (layout lookup, allocation, addresses) and the native call
alone. Minimums over repeats, in microseconds.

    python benchmarks/call_overhead.py [--number 20000]
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np
from peers import thirty_ops

import fusegrad as fg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x, y = (fg.from_numpy(rng.standard_normal(16).astype(np.float32)) for _ in range(2))
    f = fg.jit(fg.value_and_grad(lambda x, y: thirty_ops(fg, x, y)))
    f(x, y)
    program = f.lower(x, y).program
    (kernel,) = program.forward_executor.kernels
    arrays = [x._data if v is program.forward.inputs[0] else y._data for v in kernel.args]
    kernel(arrays)
    function, head, chunks, _ = next(iter(kernel.launches.values()))
    _, _, _, addresses = kernel._allocate()
    pointers = [a.ctypes.data for a in arrays] + addresses
    layers = {
        "jit call": lambda: f(x, y),
        "compiled program": lambda: program.run([x, y]),
        "executor": lambda: program.forward_executor.run([x._data, y._data]),
        "kernel launch": lambda: kernel(arrays),
        "native call": lambda: function(*head, *chunks[0], *pointers),
    }
    for name, call in layers.items():
        seconds = min(timeit.repeat(call, number=args.number, repeat=5)) / args.number
        print(f"{name:<18}{seconds * 1e6:8.2f} us")


if __name__ == "__main__":
    main()
