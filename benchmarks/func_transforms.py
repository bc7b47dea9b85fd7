"""torch.func's transforms: fusegrad against its peers, in one process.

1. Per-sample gradients of an MLP (784-128-10, tanh, cross-entropy), batch
   256: a Python loop of backward() per sample, ``vmap(grad(loss))`` eagerly
   and under jit, against PyTorch (the loop, torch.func eager,
   torch.compile of it) and ``jax.jit(jax.vmap(jax.grad(loss)))``. Every
   implementation's gradients are checked against fusegrad's loop first;
   all run interleaved (each round runs every implementation after the
   previous one's threads went idle); medians are printed with the ratio
   to the best peer.
2. Activation checkpointing of a GPT-mini training step: the peak of
   memory numpy allocates during one step (tracemalloc sees numpy's
   allocations) and what the compiled forward saves for the backward
   (``lower().saved_bytes``), with every block checkpointed and without.

    python benchmarks/func_transforms.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
import tracemalloc

import numpy as np

import fusegrad as fg
from fusegrad.func import functional_call, grad, vmap

try:
    import torch
except ImportError:  # the comparisons are optional
    torch = None
try:
    import jax
    import jax.numpy as jnp
except ImportError:
    jax = None

BATCH, IN, HIDDEN, OUT = 256, 784, 128, 10
SETTLE_SECONDS = 0.3  # other libraries' worker threads spin a while after a call


def _time(runs: dict, repeat: int) -> dict:
    """{name: median milliseconds}, the implementations interleaved."""
    samples = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            time.sleep(SETTLE_SECONDS)
            run()  # untimed: the cores wake up
            calls, start = 0, time.perf_counter()
            while calls < 3 or time.perf_counter() - start < 0.2:
                run()
                calls += 1
            samples[name].append((time.perf_counter() - start) / calls)
    return {name: statistics.median(s) * 1e3 for name, s in samples.items()}


def _print_table(title: str, medians: dict, peers: list) -> None:
    present = [p for p in peers if p in medians]
    best = min((medians[p] for p in present), default=None)
    print(f"\n{title}")
    print(f"{'implementation':<34}{'ms':>10}" + (f"{'vs best peer':>16}" if best else ""))
    for name, ms in medians.items():
        ratio = f"{ms / best:>15.2f}x" if best else ""
        print(f"{name:<34}{ms:>10.3f}{ratio}")


# ------------------------------------------------------- per-sample gradients


def _mlp_arrays(rng):
    x = rng.standard_normal((BATCH, IN)).astype(np.float32)
    y = rng.integers(0, OUT, BATCH)
    w1 = (rng.standard_normal((HIDDEN, IN)) / math.sqrt(IN)).astype(np.float32)
    w2 = (rng.standard_normal((OUT, HIDDEN)) / math.sqrt(HIDDEN)).astype(np.float32)
    b1, b2 = np.zeros(HIDDEN, np.float32), np.zeros(OUT, np.float32)
    return x, y, {"0.weight": w1, "0.bias": b1, "2.weight": w2, "2.bias": b2}


def _fusegrad_per_sample(x, y, params):
    model = fg.nn.Sequential(fg.nn.Linear(IN, HIDDEN), fg.nn.Tanh(), fg.nn.Linear(HIDDEN, OUT))
    params = {k: fg.from_numpy(v) for k, v in params.items()}
    for name, p in model.named_parameters():
        p.data = params[name].clone()
    xs, ys = fg.from_numpy(x), fg.from_numpy(y)

    def loss(p, sample, target):
        out = functional_call(model, p, (sample.unsqueeze(0),))
        return fg.nn.functional.cross_entropy(out, target.unsqueeze(0))

    per_sample = vmap(grad(loss), in_dims=(None, 0, 0))
    compiled = fg.jit(per_sample)

    def loop():
        grads = {k: [] for k in params}
        for k in range(BATCH):
            model.zero_grad()
            fg.nn.functional.cross_entropy(model(xs[k : k + 1]), ys[k : k + 1]).backward()
            for name, p in model.named_parameters():
                grads[name].append(p.grad.clone())
        return {k: fg.stack(v) for k, v in grads.items()}

    return {
        "fusegrad loop of backward()": loop,
        "fusegrad vmap(grad) eager": lambda: per_sample(params, xs, ys),
        "fusegrad jit(vmap(grad))": lambda: compiled(params, xs, ys),
    }


def _torch_per_sample(x, y, params):
    from torch.func import functional_call as torch_call
    from torch.func import grad as torch_grad
    from torch.func import vmap as torch_vmap

    model = torch.nn.Sequential(
        torch.nn.Linear(IN, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, OUT)
    )
    params = {k: torch.from_numpy(v) for k, v in params.items()}
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(params[name])
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)

    def loss(p, sample, target):
        out = torch_call(model, p, (sample.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(out, target.unsqueeze(0))

    per_sample = torch_vmap(torch_grad(loss), in_dims=(None, 0, 0))
    compiled = torch.compile(per_sample)

    def loop():
        grads = {k: [] for k in params}
        for k in range(BATCH):
            model.zero_grad()
            torch.nn.functional.cross_entropy(model(xs[k : k + 1]), ys[k : k + 1]).backward()
            for name, p in model.named_parameters():
                grads[name].append(p.grad.clone())
        return {k: torch.stack(v) for k, v in grads.items()}

    return {
        "PyTorch loop of backward()": loop,
        "torch.func vmap(grad)": lambda: per_sample(params, xs, ys),
        "torch.compile(vmap(grad))": lambda: compiled(params, xs, ys),
    }


def _jax_per_sample(x, y, params):
    def loss(p, sample, target):
        hidden = jnp.tanh(p["0.weight"] @ sample + p["0.bias"])
        logits = p["2.weight"] @ hidden + p["2.bias"]
        return jax.nn.logsumexp(logits) - logits[target]

    compiled = jax.jit(jax.vmap(jax.grad(loss), in_axes=(None, 0, 0)))
    device = {k: jnp.asarray(v) for k, v in params.items()}
    xs, ys = jnp.asarray(x), jnp.asarray(y)
    return {"JAX jit(vmap(grad))": lambda: jax.block_until_ready(compiled(device, xs, ys))}


def _as_numpy(value) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach()
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value, np.float64)


def per_sample_gradients(repeat: int) -> None:
    x, y, params = _mlp_arrays(np.random.default_rng(0))
    runs = _fusegrad_per_sample(x, y, params)
    if torch is not None:
        runs.update(_torch_per_sample(x, y, params))
    if jax is not None:
        runs.update(_jax_per_sample(x, y, params))
    expected = {k: _as_numpy(v) for k, v in runs["fusegrad loop of backward()"]().items()}
    for name, run in runs.items():
        got = run()
        for k, want in expected.items():
            error = np.max(np.abs(_as_numpy(got[k]) - want)) / np.max(np.abs(want))
            assert error < 1e-4, f"{name}: {k} off by {error:.1e}"
    peers = ["torch.func vmap(grad)", "torch.compile(vmap(grad))", "JAX jit(vmap(grad))"]
    _print_table(
        f"Per-sample gradients, MLP {IN}-{HIDDEN}-{OUT}, batch {BATCH}, float32",
        _time(runs, repeat),
        peers,
    )


# ------------------------------------------------------------ checkpointing

VOCAB, CONTEXT, WIDTH, HEADS, BLOCKS, SEQUENCES = 64, 64, 128, 4, 4, 16


class Block(fg.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = fg.nn.LayerNorm(WIDTH), fg.nn.LayerNorm(WIDTH)
        self.attention = fg.nn.MultiheadAttention(WIDTH, HEADS, batch_first=True)
        self.mlp = fg.nn.Sequential(
            fg.nn.Linear(WIDTH, 4 * WIDTH), fg.nn.GELU(), fg.nn.Linear(4 * WIDTH, WIDTH)
        )

    def forward(self, x, mask):
        h = self.norm1(x)
        x = x + self.attention(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class GPTMini(fg.nn.Module):
    def __init__(self, checkpointed: bool):
        super().__init__()
        self.checkpointed = checkpointed
        self.tokens = fg.nn.Embedding(VOCAB, WIDTH)
        self.positions = fg.nn.Embedding(CONTEXT, WIDTH)
        self.blocks = fg.nn.ModuleList(Block() for _ in range(BLOCKS))
        self.head = fg.nn.Linear(WIDTH, VOCAB)

    def forward(self, ids):
        mask = fg.triu(fg.full((CONTEXT, CONTEXT), float("-inf")), diagonal=1)
        x = self.tokens(ids) + self.positions(fg.arange(CONTEXT))
        for block in self.blocks:
            if self.checkpointed:
                x = fg.utils.checkpoint.checkpoint(block, x, mask, use_reentrant=False)
            else:
                x = block(x, mask)
        return self.head(x)


def _gpt_step(checkpointed: bool):
    fg.manual_seed(0)
    model = GPTMini(checkpointed)
    ids = fg.randint(0, VOCAB, (SEQUENCES, CONTEXT))
    targets = fg.randint(0, VOCAB, (SEQUENCES, CONTEXT))

    def step(ids, targets):
        model.zero_grad()
        logits = model(ids)
        loss = fg.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
        loss.backward()
        return loss

    def forward(ids, targets):
        logits = model(ids)
        return fg.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))

    return step, forward, ids, targets


def _peak_bytes(fn) -> int:
    fn()  # compiled on this call, measured on the next
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def _memory_figures(checkpointed: bool) -> tuple:
    """(peak bytes eagerly, of the compiled step, of the compiled forward with
    backward() outside, what the compiled forward saves; the loss)."""
    step, forward, ids, targets = _gpt_step(checkpointed)
    compiled_step, compiled_forward = fg.jit(step), fg.jit(forward)

    def backward_outside():
        compiled_forward(ids, targets).backward()

    figures = (
        _peak_bytes(lambda: step(ids, targets)),
        _peak_bytes(lambda: compiled_step(ids, targets)),
        _peak_bytes(backward_outside),
        compiled_forward.lower(ids, targets).saved_bytes,
    )
    return figures, float(step(ids, targets))


def checkpoint_memory() -> None:
    print(
        f"\nGPT-mini step ({BLOCKS} blocks, width {WIDTH}, {SEQUENCES}x{CONTEXT} tokens), "
        "peak bytes numpy holds during one step, and what the compiled forward saves"
    )
    columns = ("eager", "jit step", "jit forward, backward()", "saved by jit forward")
    print(f"{'MB':<22}" + "".join(f"{c:>26}" for c in columns))
    losses = []
    for checkpointed in (False, True):
        figures, loss = _memory_figures(checkpointed)
        losses.append(loss)
        name = "checkpointed blocks" if checkpointed else "plain"
        print(f"{name:<22}" + "".join(f"{b / 2**20:>26.1f}" for b in figures))
    assert abs(losses[0] - losses[1]) < 1e-5 * abs(losses[0]), losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--only", default="per_sample,checkpoint")
    args = parser.parse_args()
    if "per_sample" in args.only:
        per_sample_gradients(args.repeat)
    if "checkpoint" in args.only:
        checkpoint_memory()


if __name__ == "__main__":
    main()
