"""Data-parallel training steps per second for 1 and 2 MPI processes on this
machine (one thread each), the bytes each step communicates, and what that
predicts across machines.

The step is W3's (an MLP 784-512-512-10, cross-entropy, Adam) on a global
batch of 256 split between the processes, compiled by ``fusegrad.jit`` with
DistributedDataParallel's gradient averaging inside the program. Run without
arguments, the script starts itself under ``mpiexec -n 1`` and ``-n 2``:

    python benchmarks/ddp.py [--steps 60] [--batch 256]

Across machines, each step's allreduce moves about ``2 (p - 1) / p`` times
the gradients' bytes in and out of every process (a ring); the prediction
divides that by the link's bandwidth and adds it to the measured time of one
process's step on its share of the batch (the optimizer's update does not
shrink with the share), without counting on overlap: an upper bound on the
step's time, as DDP overlaps the allreduce of early buckets with the backward.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ONE_THREAD = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "FUSEGRAD_NUM_THREADS": "1",
}


def worker(steps: int, batch: int) -> None:
    """Times the step on ``batch`` examples per process."""
    import fusegrad
    import fusegrad.distributed as dist
    import fusegrad.nn.functional as F
    from fusegrad import nn, optim
    from fusegrad.nn.parallel import DistributedDataParallel

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    fusegrad.manual_seed(0)
    model = DistributedDataParallel(
        nn.Sequential(
            nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
        )
    )
    optimizer = optim.Adam(model.parameters(), lr=1e-3)

    @fusegrad.jit
    def step(x, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    rng = np.random.default_rng(rank)
    x = fusegrad.from_numpy(rng.standard_normal((batch, 784)).astype(np.float32))
    y = fusegrad.from_numpy(rng.integers(0, 10, batch))
    for _ in range(5):  # trace, compile, plan
        step(x, y)
    times = []
    for _ in range(steps):
        dist.barrier()
        start = time.perf_counter()
        step(x, y)
        times.append(time.perf_counter() - start)
    gradient_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    if rank == 0:
        print(f"RESULT {world} {statistics.median(times)} {gradient_bytes}", flush=True)
    dist.destroy_process_group()


def measure(processes: int, steps: int, batch: int) -> tuple:
    command = ["mpiexec", "-n", str(processes), sys.executable, __file__, "--worker"]
    command += ["--steps", str(steps), "--batch", str(batch)]
    output = subprocess.run(
        command, env={**os.environ, **ONE_THREAD}, capture_output=True, text=True, check=True
    ).stdout
    (line,) = [line for line in output.splitlines() if line.startswith("RESULT")]
    _, _, seconds, gradient_bytes = line.split()
    return float(seconds), int(gradient_bytes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch", type=int, default=256, help="the global batch")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.steps, args.batch)
        return
    one, gradient_bytes = measure(1, args.steps, args.batch)
    two, _ = measure(2, args.steps, args.batch // 2)
    print(f"MLP 784-512-512-10 + Adam, global batch {args.batch}, one thread per process")
    print(f"  1 process:   {one * 1e3:7.2f} ms per step, {1 / one:6.1f} steps/s")
    print(
        f"  2 processes: {two * 1e3:7.2f} ms per step, {1 / two:6.1f} steps/s "
        f"({one / two:.2f}x one process)"
    )
    print(f"  gradients averaged per step: {gradient_bytes / 1e6:.2f} MB")
    for machines in (2, 8):
        shared, _ = measure(1, args.steps, args.batch // machines)  # a machine's share
        moved = 2 * (machines - 1) / machines * gradient_bytes
        for gbit in (10, 100):
            seconds = shared + moved * 8 / (gbit * 1e9)
            print(
                f"  predicted on {machines} machines at {gbit:3d} Gbit/s: "
                f"{seconds * 1e3:6.2f} ms per step ({one / seconds:.2f}x one process)"
            )


if __name__ == "__main__":
    main()
