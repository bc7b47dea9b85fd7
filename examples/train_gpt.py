"""Trains a small character-level GPT (nanoGPT's design: token and position
embeddings, blocks of causal self-attention and a GELU MLP on layer norms) on
a few paragraphs written below, with the whole training step (forward,
backward, gradient clipping, AdamW's update) compiled by ``@fusegrad.jit``
and a one-cycle learning rate; then samples some text from it, and prints the
time per step eager and compiled.

    python examples/train_gpt.py [--steps 600] [--sample 200]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np

import fusegrad
import fusegrad.nn.functional as F
from fusegrad import nn, optim

TEXT = """\
The river starts as a thin cold thread high in the hills, where the snow lies
late into the spring. It runs over stones and under roots, and it gathers the
small streams that come down from either side, until by the time it reaches the
first village it is wide enough to need a bridge.

The people of the village say the river has a memory. In a dry summer it
shrinks back into the deep pools it knows, and waits there, and in the autumn
rains it comes back to every field it ever flooded. The old miller used to say
that the water never forgets a path, it only waits for the weight to follow it.

Below the village the valley opens and the river slows. It turns in long loops
through the meadows, and each loop leaves a bank of fine sand on the inside and
cuts a steep bank on the outside. Over many years the loops wander across the
valley floor, and the farmers move their fences to follow them.

At the end of its journey the river meets the sea. The fresh water spreads out
over the salt water in a wide brown fan, and the gulls follow the line where
the two meet, because the fish gather there. The sea takes the river in without
a sound, and the river becomes the sea, and one day it will be snow again.
"""

CONTEXT = 32  # characters the model sees
WIDTH = 64
HEADS = 4
LAYERS = 2
BATCH = 16


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)  # query, key and value at once
        self.proj = nn.Linear(WIDTH, WIDTH)
        # position t may attend to positions 0..t only
        mask = fusegrad.tril(fusegrad.ones(CONTEXT, CONTEXT)).view(1, 1, CONTEXT, CONTEXT)
        self.register_buffer("mask", mask)

    def forward(self, x):
        batch, steps, width = x.shape
        q, k, v = (
            t.view(batch, steps, HEADS, width // HEADS).transpose(1, 2)  # (B, heads, T, size)
            for t in self.qkv(x).split(width, dim=2)
        )
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :steps, :steps] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(batch, steps, width))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(WIDTH)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(WIDTH)
        self.mlp = nn.Sequential(
            nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH)
        )

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int):
        super().__init__()
        self.wte = nn.Embedding(vocab, WIDTH)
        self.wpe = nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, vocab, bias=False)

    def forward(self, idx):
        steps = idx.shape[1]
        x = self.wte(idx) + self.wpe(fusegrad.arange(steps))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def training(vocab: int, steps: int, compiled: bool):
    """A fresh model, its scheduler and one training step (compiled or not)."""
    fusegrad.manual_seed(0)
    model = GPT(vocab)
    optimizer = optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.01)
    # warm up over the first tenth of the steps, then anneal
    scheduler = optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=3e-3, total_steps=steps, pct_start=0.1, cycle_momentum=False
    )

    def step(x, y):
        optimizer.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, vocab), y.view(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss

    return model, scheduler, (fusegrad.jit(step) if compiled else step)


def batches(ids: np.ndarray, count: int, rng) -> list:
    """``count`` (inputs, next characters) pairs of BATCH random windows of the text."""
    starts = rng.integers(0, len(ids) - CONTEXT, (count, BATCH))
    windows = ids[starts[..., None] + np.arange(CONTEXT + 1)]
    return [
        (fusegrad.from_numpy(w[:, :-1].copy()), fusegrad.from_numpy(w[:, 1:].copy()))
        for w in windows
    ]


@fusegrad.no_grad()
def sample(model, start, length: int, temperature: float = 0.8):
    """``length`` characters drawn one at a time after ``start``'s, as ids."""
    idx = start
    for _ in range(length):
        logits = model(idx[:, -CONTEXT:])[:, -1, :]
        probabilities = F.softmax(logits / temperature, dim=-1)
        idx = fusegrad.cat([idx, fusegrad.multinomial(probabilities, 1)], dim=1)
    return idx[0, start.shape[1] :].tolist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--sample", type=int, default=200, help="characters to generate")
    args = parser.parse_args()
    chars = sorted(set(TEXT))
    ids = np.array([chars.index(c) for c in TEXT])
    data = batches(ids, args.steps, np.random.default_rng(0))
    print(f"{len(TEXT)} characters, {len(chars)} distinct; context {CONTEXT}, batch {BATCH}")

    model, scheduler, step = training(len(chars), args.steps, compiled=True)
    print(f"{sum(p.numel() for p in model.parameters())} parameters")
    times, losses = [], []
    for n, (x, y) in enumerate(data, 1):
        start = time.perf_counter()
        loss = step(x, y)
        times.append(time.perf_counter() - start)
        losses.append(float(loss))
        scheduler.step()  # the learning rate is an input of the compiled step
        if n % max(1, args.steps // 10) == 0 or n == 1:
            # the training loss averaged since the last line
            print(
                f"step {n:5d}/{args.steps}  loss {statistics.mean(losses):.4f}  "
                f"lr {scheduler.get_last_lr()[0]:.2e}"
            )
            losses = []

    fusegrad.manual_seed(1)
    prompt = "The river"
    start = fusegrad.tensor([[chars.index(c) for c in prompt]])
    generated = "".join(chars[i] for i in sample(model.eval(), start, args.sample))
    print(f"sample: {prompt}{generated}")

    _, _, eager_step = training(len(chars), args.steps, compiled=False)
    eager_times = []
    for x, y in data[: min(10, args.steps)]:
        start = time.perf_counter()
        eager_step(x, y)
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
