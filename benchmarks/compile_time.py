"""The first call of W3 (an MLP step) and W7 (a GPT-mini step): trace,
adjoint and passes, LLVM, first run, in new processes: cold (an empty disk
cache) and warm (the cache the cold process filled), each process printing
FUSEGRAD_LOG=compile's breakdown. Medians over repeats, in milliseconds.

    python benchmarks/compile_time.py [--repeat 5] [--workload W3 W7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

FIRST_CALL = """
import sys
import time
import numpy as np
from peers import workloads
import fusegrad as fg
from fusegrad import nn
spec = workloads(np.random.default_rng(0))[sys.argv[1]]
inputs = [fg.from_numpy(a) for a in spec["arrays"]]
function = fg.jit(fg.value_and_grad(lambda *t: spec["workload"](fg, nn.functional, *t),
                                    argnums=tuple(spec["wrt"])))
start = time.perf_counter()
function(*inputs)
print(f"{(time.perf_counter() - start) * 1e3:.1f}")
"""


# (cold, warm) targets in milliseconds
TARGETS = {"W3": (500, 50), "W7": (1500, 100)}


def first_call(workload: str, cache: str) -> tuple:
    """(milliseconds, the compile log) of the workload's first call in a new process."""
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=cache, FUSEGRAD_LOG="compile")
    done = subprocess.run(
        [sys.executable, "-c", FIRST_CALL, workload],
        env=env,
        cwd=os.path.dirname(os.path.abspath(__file__)),
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.split()[-1]), done.stderr.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workload", nargs="+", choices=sorted(TARGETS), default=sorted(TARGETS))
    args = parser.parse_args()
    for workload in args.workload:
        cold, warm = [], []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as cache:
                milliseconds, cold_log = first_call(workload, cache)
                cold.append(milliseconds)
                milliseconds, warm_log = first_call(workload, cache)
                warm.append(milliseconds)
        cold_target, warm_target = TARGETS[workload]
        print(
            f"{workload} first call, cold disk cache: {statistics.median(cold):7.1f} ms "
            f"(target {cold_target} ms)"
        )
        print(
            f"{workload} first call, warm disk cache: {statistics.median(warm):7.1f} ms "
            f"(target {warm_target} ms)"
        )
        print(f"last cold process: {cold_log}\nlast warm process: {warm_log}\n")


if __name__ == "__main__":
    main()
