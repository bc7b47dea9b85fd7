"""Trains a small MLP to separate two interleaved spirals, with the whole
training step (zero_grad, forward, backward, Adam's update) compiled by
``@fusegrad.jit``; at the end, the time per step eager and compiled.

    python examples/train_mlp.py [--steps 1500] [--points 2000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import fusegrad
import fusegrad.nn.functional as F
from fusegrad import nn, optim


def two_spirals(points: int, rng) -> tuple:
    """Points on two spiral arms, one the other turned half a circle, with noise."""
    angle = np.sqrt(rng.uniform(0, 1, points)) * 3 * np.pi
    arm = rng.integers(0, 2, points)
    turn = np.where(arm == 0, 1.0, -1.0)[:, None]
    xy = np.stack([angle * np.cos(angle), angle * np.sin(angle)], 1) * turn
    xy += rng.normal(0, 0.4, xy.shape)
    return fusegrad.tensor((xy / 10).astype(np.float32)), fusegrad.tensor(arm)


def training(seed: int, compiled: bool):
    """A fresh model, its optimizer and one training step (compiled or not)."""
    fusegrad.manual_seed(seed)
    model = nn.Sequential(
        nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2)
    )
    optimizer = optim.Adam(model.parameters(), lr=0.01)

    def step(points, labels):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(points), labels)
        loss.backward()
        optimizer.step()
        return loss

    return model, (fusegrad.jit(step) if compiled else step)


def accuracy(model, points, labels) -> float:
    with fusegrad.no_grad():
        predicted = model(points).argmax(1)
    return float((predicted == labels).float().mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--points", type=int, default=2000)
    args = parser.parse_args()
    points, labels = two_spirals(args.points, np.random.default_rng(0))

    model, step = training(seed=0, compiled=True)
    times = []
    for n in range(1, args.steps + 1):
        start = time.perf_counter()
        loss = step(points, labels)
        times.append(time.perf_counter() - start)
        if n % max(1, args.steps // 10) == 0 or n == 1:
            print(
                f"step {n:5d}/{args.steps}  loss {float(loss):.4f}  "
                f"accuracy {accuracy(model, points, labels):6.1%}"
            )

    _, eager_step = training(seed=0, compiled=False)
    eager_times = []
    for _ in range(min(50, args.steps)):
        start = time.perf_counter()
        eager_step(points, labels)
        eager_times.append(time.perf_counter() - start)
    jit_ms = statistics.median(times[1:] or times) * 1e3
    eager_ms = statistics.median(eager_times) * 1e3
    print(
        f"time per step: eager {eager_ms:.2f} ms, jit {jit_ms:.2f} ms "
        f"({eager_ms / jit_ms:.1f}x faster; first jit step, tracing and compiling: "
        f"{times[0] * 1e3:.0f} ms)"
    )


if __name__ == "__main__":
    main()
