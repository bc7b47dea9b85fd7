"""W3's first call (trace, adjoint and passes, LLVM, first run) in new
processes: cold (an empty disk cache) and warm (the cache the cold process
filled), each process printing FUSEGRAD_LOG=compile's breakdown. Medians
over repeats, in milliseconds.

    python benchmarks/compile_time.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

FIRST_CALL = """
import time
import numpy as np
from peers import workloads
import fusegrad as fg
from fusegrad import nn
spec = workloads(np.random.default_rng(0))["W3"]
inputs = [fg.from_numpy(a) for a in spec["arrays"]]
function = fg.jit(fg.value_and_grad(lambda *t: spec["workload"](fg, nn.functional, *t),
                                    argnums=tuple(spec["wrt"])))
start = time.perf_counter()
function(*inputs)
print(f"{(time.perf_counter() - start) * 1e3:.1f}")
"""


def first_call(cache: str) -> tuple:
    """(milliseconds, the compile log) of W3's first call in a new process."""
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=cache, FUSEGRAD_LOG="compile")
    done = subprocess.run(
        [sys.executable, "-c", FIRST_CALL],
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
    args = parser.parse_args()
    cold, warm = [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as cache:
            milliseconds, cold_log = first_call(cache)
            cold.append(milliseconds)
            milliseconds, warm_log = first_call(cache)
            warm.append(milliseconds)
    print(f"W3 first call, cold disk cache: {statistics.median(cold):7.1f} ms (target 500 ms)")
    print(f"W3 first call, warm disk cache: {statistics.median(warm):7.1f} ms (target 50 ms)")
    print(f"last cold process: {cold_log}\nlast warm process: {warm_log}")


if __name__ == "__main__":
    main()
