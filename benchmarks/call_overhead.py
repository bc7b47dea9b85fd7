"""Where a compiled call's time goes, layer by layer, on W4 (a 30-op function
of 16-float vectors, value and gradient): the whole call, which for a call
like the last takes the plan as one function of the tensors (checks of the
tensors, the plan's statements, outputs wrapped); then the checked path a
call with other arguments takes: the compiled program (guards, write-backs,
wrapping outputs), its executor (finding the plan for this input layout),
the plan (straight-line Python: fresh arrays, a workspace, one driver call)
and the driver's native call alone (the kernel's loop included). Minimums
over interleaved repeats, in microseconds.

    python benchmarks/call_overhead.py [--number 2000] [--repeat 30]
"""

from __future__ import annotations

import argparse
import timeit

import numpy as np
from peers import thirty_ops

import fusegrad as fg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x, y = (fg.from_numpy(rng.standard_normal(16).astype(np.float32)) for _ in range(2))
    f = fg.jit(fg.value_and_grad(lambda x, y: thirty_ops(fg, x, y)))
    for _ in range(3):  # a trace, then two hits: the plan as one function from now on
        f(x, y)
    direct = f._direct.run
    program = f.lower(x, y).program
    executor = program.forward_executor
    arrays = [x._data, y._data]
    executor.run(arrays)  # plans
    (plan,) = executor.plans.values()
    ((segment, *_),) = plan.items
    fresh = [np.empty(shape, dtype) for shape, dtype in segment.fresh_arrays]
    driver_arrays = tuple(arrays + [np.empty(segment.workspace_bytes, np.uint8)] + fresh)
    layers = {
        "jit call": lambda: f(x, y),
        "plan of tensors": lambda: direct((x, y)),
        "compiled program": lambda: program.run([x, y]),
        "executor": lambda: executor.run(arrays),
        "plan": lambda: plan.run(arrays, {}),  # {}: what collectives communicated
        "native call": lambda: segment.driver(segment.table_address, driver_arrays),
    }
    best = dict.fromkeys(layers, float("inf"))
    for _ in range(args.repeat):  # interleaved: the machine's speed drifts
        for name, call in layers.items():
            best[name] = min(best[name], timeit.timeit(call, number=args.number) / args.number)
    for name, seconds in best.items():
        print(f"{name:<18}{seconds * 1e6:8.2f} us")


if __name__ == "__main__":
    main()
