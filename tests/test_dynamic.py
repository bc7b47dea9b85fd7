"""Dynamic sizes: a dimension that takes a second size is traced as a symbol,
and one trace serves every later size — matching eager, without compiling
machine code again; what Python needs as a plain int pins its size."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn
import fusegrad.nn.functional as F
from fusegrad import timing
from fusegrad.runtime import launch

BATCH_SIZES = [1, 200, *np.random.default_rng(0).choice(np.arange(2, 200), 44, replace=False)]


def _close(compiled, eager, rtol=2e-5, atol=1e-6):
    for c, e in zip(compiled, eager):
        np.testing.assert_allclose(c.detach().numpy(), e.detach().numpy(), rtol=rtol, atol=atol)


def _loss_and_grads(model, loss_of):
    def fn(*batch):
        loss = loss_of(model, *batch)
        return (loss, *fg.autograd.grad(loss, list(model.parameters())))

    return fn


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.fc = nn.Linear(4 * 5 * 5, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        return self.fc(x.view(x.size(0), -1))  # the batch size read as a size


class TinyGPT(nn.Module):
    """nanoGPT's attention on a causal mask buffer sliced to the sequence length."""

    def __init__(self, vocab=11, width=8, context=16):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.qkv, self.ln = nn.Linear(width, 3 * width), nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)
        self.register_buffer("mask", fg.tril(fg.ones(context, context)).view(1, context, context))

    def forward(self, idx):
        steps = idx.shape[1]
        x = self.wte(idx) + self.wpe(fg.arange(steps))
        q, k, v = self.qkv(self.ln(x)).split(x.shape[-1], dim=2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :steps, :steps] == 0, float("-inf"))
        return self.head(x + F.softmax(att, dim=-1) @ v)


class _ScaledSquare(fg.autograd.Function):
    """A custom Function: its backward is traced on stand-ins of its outputs."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x


class CustomMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.last = nn.Linear(20, 16), nn.Linear(16, 5)

    def forward(self, x):
        return self.last(_ScaledSquare.apply(self.first(x)))


def _gpt_loss(model, idx, targets):
    logits = model(idx)
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


WORKLOADS = {
    "mlp": (
        lambda: nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5)),
        lambda model, x, y: F.cross_entropy(model(x), y),
        lambda b: (fg.randn(b, 20), fg.randint(0, 5, (b,))),
        BATCH_SIZES,
    ),
    "custom function": (
        CustomMLP,
        lambda model, x, y: F.cross_entropy(model(x), y),
        lambda b: (fg.randn(b, 20), fg.randint(0, 5, (b,))),
        BATCH_SIZES[:12],
    ),
    "cnn": (
        SmallCNN,
        lambda model, x, y: F.cross_entropy(model(x), y),
        lambda b: (fg.randn(b, 1, 12, 12), fg.randint(0, 10, (b,))),
        BATCH_SIZES[:12],
    ),
    "gpt batch and length": (
        TinyGPT,
        _gpt_loss,
        lambda bt: (fg.randint(0, 11, bt), fg.randint(0, 11, bt)),
        [(4, 16), (3, 16), (5, 9), (2, 13), (6, 2), (3, 7)],
    ),
}


@pytest.mark.parametrize("name", WORKLOADS)
def test_one_trace_serves_every_size_and_matches_eager(name):
    """Compiles at most three times (the first size, then with the dimensions
    that changed symbolic; a size of 1 is a size of its own); no size after
    that compiles machine code."""
    make_model, loss_of, batch, sizes = WORKLOADS[name]
    fg.manual_seed(0)
    fn = _loss_and_grads(make_model(), loss_of)
    compiled = fg.jit(fn)
    for k, size in enumerate(sizes):
        args = batch(size)
        modules = timing.counts["modules compiled"] + timing.counts["modules from the disk cache"]
        _close(compiled(*args), fn(*args))
        if k >= 3 and 1 not in np.atleast_1d(size):
            now = timing.counts["modules compiled"] + timing.counts["modules from the disk cache"]
            assert now == modules, f"size {size} compiled machine code"
    assert compiled.cache_info().misses <= 3


def test_a_training_step_over_the_short_last_batches_of_epochs_compiles_once_more():
    """The first step (whose optimizer state is new), its second (with the
    state), then one trace with the batch dimension symbolic."""
    fg.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 1))
    twin = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 1))
    twin.load_state_dict(model.state_dict())
    steps = []
    for m in (model, twin):
        optimizer = fg.optim.Adam(m.parameters(), lr=0.01)

        def step(x, y, m=m, optimizer=optimizer):
            optimizer.zero_grad()
            loss = F.mse_loss(m(x), y)
            loss.backward()
            optimizer.step()
            return loss

        steps.append(step)
    compiled, eager = fg.jit(steps[0]), steps[1]
    for size in [16, 16, 7, 16, 16, 3, 16, 16, 11]:
        x, y = fg.randn(size, 6), fg.randn(size, 1)
        _close([compiled(x, y)], [eager(x, y)])
        # .grad as this step's backward wrote it (a program made for a new size
        # once wrote the grads the parameters held before the step)
        _close([p.grad for p in model.parameters()], [p.grad for p in twin.parameters()])
    assert compiled.cache_info().misses == 3
    _close(model.parameters(), twin.parameters())


@pytest.mark.parametrize(
    "fn,shapes",
    [
        (lambda x: x.mean() + x.var(0).sum(), [(3, 4), (5, 4), (9, 4)]),  # divisors are sizes
        (lambda x: F.avg_pool2d(x, 2).sum(), [(2, 1, 6, 6), (2, 1, 7, 7), (2, 1, 9, 9)]),
        (lambda x: x[: x.shape[0] - 1].exp().sum(), [(3, 2), (4, 2), (8, 2)]),
        (lambda x: (x * fg.arange(x.shape[0]).view(-1, 1)).sum(), [(3, 2), (4, 2), (6, 2)]),
        (lambda x: x.tril(1).sum() + x.max(1)[0].sum(), [(3, 4), (5, 6), (7, 7)]),
        (lambda x: (x + fg.zeros(x.shape[0], 1)).sum(), [(3, 4), (5, 4), (6, 4)]),
        (lambda x: sum(t.sum() for t in x.chunk(2)), [(4, 3), (5, 3), (7, 3)]),
        (lambda x: x.view(int(x.shape[0]), -1).sum(), [(3, 2), (4, 2), (5, 2)]),
    ],
    ids=["mean-var", "avg-pool", "slice", "arange", "tril-max", "zeros", "chunk", "int-pinned"],
)
def test_sizes_that_ops_compute_with_match_eager(fn, shapes):
    """Sizes reach ops as symbols where they can, and are pinned (a trace per
    size) where Python needs a plain int: the numbers match eager either way."""
    compiled = fg.jit(fn)
    for shape in shapes + shapes[:1]:
        x = fg.randn(*shape, requires_grad=True)
        twin = x.detach().clone().requires_grad_()
        out, expected = compiled(x), fn(twin)
        out.backward()
        expected.backward()
        _close([out, x.grad], [expected, twin.grad])


def test_a_size_no_polynomial_gives_is_pinned_in_the_shape_it_reaches(monkeypatch):
    """Max pooling by tiles of 4 rows: the pooled size, a size // 4, is no
    polynomial of the symbols, so this call's int, guarded. It once stayed a
    traced number inside a shape and reached a kernel driver's table
    (TypeError: cannot be converted to pointer; the fuzzer's find)."""
    monkeypatch.setattr(launch, "SMALL_WORK", 0)  # the kernels compiled, however small

    def fn(x):
        return F.max_pool2d(x, kernel_size=(4, 1)).std(dim=(-3, 0, -1), keepdim=True)

    compiled = fg.jit(fn, dynamic=True)
    for shape in ((1, 1, 4, 2), (1, 1, 5, 3), (1, 1, 8, 2), (1, 1, 4, 2)):
        x = fg.randn(*shape, requires_grad=True)
        twin = x.detach().clone().requires_grad_()
        out, expected = compiled(x), fn(twin)
        out.sum().backward()
        expected.sum().backward()
        _close([out, x.grad], [expected, twin.grad])


def test_a_backward_inside_computing_with_a_size_matches_eager_at_every_size():
    """log_softmax's gradient computes with its row's length; in a kernel's
    row equation that constant was inlined into machine code the next size
    shared (the fuzzer's find: the gradient at n=4 used n=3)."""

    def step(x):
        out = F.log_softmax(fg.stack([x, x])[fg.tensor([-2])], dim=-1)
        out.sum().backward()
        return out

    compiled = fg.jit(step, dynamic=True)
    for n in (3, 4, 5, 4):
        data = np.random.default_rng(n).standard_normal(n)
        x, twin = fg.tensor(data, requires_grad=True), fg.tensor(data, requires_grad=True)
        _close([compiled(x), x.grad], [step(twin), twin.grad])


def test_a_row_equation_reading_a_constant_array_compiles():
    """The gradient of rows picked by a constant index, added to a broadcast
    maximum's: a folded constant of the rows' counts reaches a kernel's row
    equation, which read only variables per row (the fuzzer's find: a
    ValueError while generating the kernel)."""

    def gradient(x):
        flat = x.reshape(-1)
        picked = x[fg.tensor([1, 0, 1])]
        widest = fg.maximum(x, flat)
        return fg.autograd.grad(picked.sum() + (widest * 2).sum(), [x])[0]

    compiled = fg.jit(gradient, dynamic=True)
    for n in (2, 3, 2):
        data = np.random.default_rng(n).standard_normal((n, 1))
        x, twin = fg.tensor(data, requires_grad=True), fg.tensor(data, requires_grad=True)
        _close([compiled(x)], [gradient(twin)])


def test_dynamic_true_traces_once_and_dynamic_false_per_shape():
    def fn(x):
        return (x * 2).sum(0)

    always, never = fg.jit(fn, dynamic=True), fg.jit(fn, dynamic=False)
    for rows in (3, 4, 5, 6):
        x = fg.randn(rows, 2)  # equal sizes (3 x 3) would share one symbol
        _close([always(x), never(x)], [fn(x), fn(x)])
    assert always.cache_info().misses == 1
    assert never.cache_info().misses == 4


def test_a_recompiling_argument_is_named_in_a_warning(capsys, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_LOG", "recompiles")

    @fg.jit
    def pinned(x):
        return x.view(int(x.shape[0]), -1).sum()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rows in range(2, 9):
            pinned(fg.randn(rows, 3))
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1, messages
    assert "recompiled 5 times because argument 'x' changed" in messages[0]
    assert "its sizes are static: Python needed their values: int() at" in messages[0]
    log = capsys.readouterr().err
    assert "argument 'x' has dynamic dimensions [0] from now on" in log
    assert "argument 'x' dimension 0: static from now on" in log


def test_a_size_guard_retraces_when_a_comparison_on_sizes_changes():
    def fn(x):
        return x.sum() if x.shape[0] < 5 else x.prod()

    compiled = fg.jit(fn)
    for rows in (2, 3, 4, 6, 7, 3):
        x = fg.rand(rows) + 0.5
        _close([compiled(x)], [fn(x)])
    assert compiled.cache_info().misses == 3  # 2; then symbolic (< 5); then >= 5


def test_lower_shows_the_trace_in_the_sizes_symbols():
    layer = nn.Linear(784, 10)
    compiled = fg.jit(lambda x: F.softmax(layer(x), -1).mean())
    compiled(fg.randn(32, 784))
    compiled(fg.randn(31, 784))
    lowered = compiled.lower(fg.randn(32, 784))
    assert "traced(%0: f32[s0,784]" in lowered.traced_ir
    assert "reshape[shape=(s0, 1)]" in lowered.traced_ir
    assert "dynamic sizes: s0 = argument 0 dimension 0" in str(lowered)
    assert "forward(%0: f32[32,784]" in lowered.forward_ir  # the program for these sizes
