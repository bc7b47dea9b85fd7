"""Trains a LeNet-style CNN to read digits drawn procedurally (a 5x7 font, at two
sizes, anywhere in a 28x28 image, under noise), with the whole training step
compiled by ``@fusegrad.jit``; at the end, the time per step eager and compiled.

    python examples/train_cnn.py [--steps 800] [--batch 64]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import fusegrad
import fusegrad.nn.functional as F
from fusegrad import nn, optim

# each digit as 7 rows of 5 pixels
FONT = [
    ".###. #...# #..## #.#.# ##..# #...# .###.",
    "..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.",
    ".###. #...# ....# ...#. ..#.. .#... #####",
    "####. ....# ....# .###. ....# ....# ####.",
    "...#. ..##. .#.#. #..#. ##### ...#. ...#.",
    "##### #.... ####. ....# ....# #...# .###.",
    "..##. .#... #.... ####. #...# #...# .###.",
    "##### ....# ...#. ..#.. .#... .#... .#...",
    ".###. #...# #...# .###. #...# #...# .###.",
    ".###. #...# #...# .#### ....# ...#. .##..",
]
GLYPHS = np.array([[[c == "#" for c in row] for row in digit.split()] for digit in FONT])
SIZE = 28


def draw_digits(count: int, rng) -> tuple:
    """``count`` images (N, 1, 28, 28) of random digits, and the digits."""
    labels = rng.integers(0, 10, count)
    images = rng.normal(0, 0.3, (count, 1, SIZE, SIZE)).astype(np.float32)
    for image, label in zip(images, labels):
        scale = rng.integers(2, 4)  # 10x14 or 15x21 pixels
        glyph = np.kron(GLYPHS[label], np.ones((scale, scale)))
        height, width = glyph.shape
        top, left = rng.integers(0, SIZE - height + 1), rng.integers(0, SIZE - width + 1)
        image[0, top : top + height, left : left + width] += glyph * rng.uniform(0.6, 1.0)
    return fusegrad.from_numpy(images), fusegrad.from_numpy(labels)


def training(seed: int, compiled: bool):
    """A fresh LeNet-5, its optimizer and one training step (compiled or not)."""
    fusegrad.manual_seed(seed)
    model = nn.Sequential(
        nn.Conv2d(1, 6, kernel_size=5, padding=2), nn.ReLU(), nn.MaxPool2d(2),  # 6x14x14
        nn.Conv2d(6, 16, kernel_size=5), nn.ReLU(), nn.MaxPool2d(2),  # 16x5x5
        nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10),
    )  # fmt: skip
    optimizer = optim.Adam(model.parameters(), lr=2e-3)

    def step(images, labels):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    return model, (fusegrad.jit(step) if compiled else step)


def accuracy(model, images, labels) -> float:
    with fusegrad.no_grad():
        predicted = model(images).argmax(1)
    return float((predicted == labels).float().mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    train_images, train_labels = draw_digits(4096, rng)
    test_images, test_labels = draw_digits(512, rng)
    batches = [
        (train_images[i : i + args.batch], train_labels[i : i + args.batch])
        for i in range(0, len(train_labels) - args.batch + 1, args.batch)
    ]

    model, step = training(seed=0, compiled=True)
    times, losses = [], []
    for n in range(1, args.steps + 1):
        images, labels = batches[(n - 1) % len(batches)]
        start = time.perf_counter()
        loss = step(images, labels)
        times.append(time.perf_counter() - start)
        losses.append(float(loss))
        if n % max(1, args.steps // 10) == 0 or n == 1:
            # the training loss averaged since the last line; the accuracy on unseen digits
            print(
                f"step {n:5d}/{args.steps}  loss {statistics.mean(losses):.4f}  "
                f"test accuracy {accuracy(model, test_images, test_labels):6.1%}"
            )
            losses = []

    _, eager_step = training(seed=0, compiled=False)
    eager_times = []
    for images, labels in batches[: min(30, args.steps)]:
        start = time.perf_counter()
        eager_step(images, labels)
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
