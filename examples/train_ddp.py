"""Trains train_mlp.py's MLP on the two spirals data-parallel: each process
takes its share of every global batch (DistributedSampler), and the whole
step (zero_grad, forward, backward with DistributedDataParallel's gradient
averaging, Adam's update) is one compiled program. Process 0 then trains the
same model in one process on the same global batches and prints the largest
differences, which are float rounding.

    mpiexec -n 2 python examples/train_ddp.py [--steps 200] [--batch 256]
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np
from train_mlp import two_spirals

import fusegrad
import fusegrad.distributed as dist
import fusegrad.nn.functional as F
from fusegrad import nn, optim
from fusegrad.nn.parallel import DistributedDataParallel
from fusegrad.utils.data import DataLoader, DistributedSampler, TensorDataset


def mlp() -> nn.Module:
    fusegrad.manual_seed(0)
    return nn.Sequential(
        nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2)
    )


def compiled_step(model: nn.Module, optimizer: optim.Optimizer, world: bool):
    """One training step; with ``world``, it returns the loss of the global
    batch (the mean of the processes' losses, whose batches are as large)."""

    @fusegrad.jit
    def step(points, labels):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(points), labels)
        loss.backward()
        optimizer.step()
        loss = loss.detach().clone()
        if world:
            dist.all_reduce(loss, op=dist.ReduceOp.AVG)
        return loss

    return step


def batches(dataset, sampler, batch_size: int, steps: int) -> list:
    """The first ``steps`` batches of ``sampler``'s share, epoch after epoch."""
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True)

    def epochs():
        for epoch in itertools.count():
            sampler.set_epoch(epoch)
            yield from loader

    return list(itertools.islice(epochs(), steps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=256, help="the global batch size")
    parser.add_argument("--points", type=int, default=2000)
    args = parser.parse_args()
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch % world:
        raise SystemExit(f"--batch {args.batch} must split evenly between {world} processes")
    local_batch = args.batch // world
    dataset = TensorDataset(*two_spirals(args.points, np.random.default_rng(0)))

    model = DistributedDataParallel(mlp())
    step = compiled_step(model, optim.Adam(model.parameters(), lr=0.01), world=True)
    share = DistributedSampler(dataset, seed=0, drop_last=True)
    losses = [float(step(x, y)) for x, y in batches(dataset, share, local_batch, args.steps)]
    if rank != 0:
        return

    # one process, the same global batches: at each step, every process's share
    reference = mlp()
    one_step = compiled_step(reference, optim.Adam(reference.parameters(), lr=0.01), world=False)
    shares = [
        batches(
            dataset,
            DistributedSampler(dataset, world, r, seed=0, drop_last=True),
            local_batch,
            args.steps,
        )
        for r in range(world)
    ]
    differences = []
    for n, (loss, parts) in enumerate(zip(losses, zip(*shares)), 1):
        points = fusegrad.cat([x for x, _ in parts])
        labels = fusegrad.cat([y for _, y in parts])
        expected = float(one_step(points, labels))
        differences.append(abs(loss - expected))
        if n == 1 or n % max(1, args.steps // 10) == 0:
            print(
                f"step {n:4d}/{args.steps}  loss {loss:.6f}  one process {expected:.6f}  "
                f"difference {differences[-1]:.1e}"
            )
    parameters = max(
        float((a - b).abs().max())
        for a, b in zip(model.module.parameters(), reference.parameters())
    )
    print(
        f"{world} processes, global batch {args.batch}: largest difference from one process: "
        f"loss {max(differences):.1e}, parameters {parameters:.1e}"
    )


if __name__ == "__main__":
    main()
