"""Activation checkpointing (fusegrad.utils.checkpoint): the gradients are
the un-checkpointed ones exactly, random draws included, eagerly; under jit
the same numbers, with less saved for the backward."""

import contextlib
import subprocess
import sys
import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn
from fusegrad.utils.checkpoint import CheckpointError, checkpoint, checkpoint_sequential

fg.manual_seed(0)
NET = nn.Sequential(
    nn.Linear(6, 8), nn.Tanh(), nn.Dropout(0.3), nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 4)
)
W = fg.randn(4, 6, requires_grad=True)
X = fg.randn(5, 6, requires_grad=True)
LEAVES = [X, W, *NET.parameters()]


def _call(fn, *args, checkpointed, reentrant=False, **kwargs):
    if checkpointed:
        return checkpoint(fn, *args, use_reentrant=reentrant, **kwargs)
    return fn(*args, **kwargs)


def _scaled(x, w, *, scale, activation):
    return getattr(fg, activation)(x @ w.t()) * scale


def _pieces(x):
    h = NET[:3](x)
    return h[:, :4], h[:, 4:] @ W[:, :4], 3


def _nested(x, c):
    inner = lambda h: NET[3:](_call(NET[:3], h, checkpointed=c))  # noqa: E731
    return _call(inner, x, checkpointed=c)


def _sequential(x, c):
    return checkpoint_sequential(NET, 3, x, use_reentrant=False) if c else NET(x)


# name -> the loss, given the input and whether to checkpoint
CASES = {
    "module": lambda x, c: _call(NET, x, checkpointed=c).sum(),
    "kwargs_and_non_tensor_arguments": lambda x, c: _call(
        _scaled, x, W, checkpointed=c, scale=2.0, activation="tanh"
    ).sum(),
    "tuple_output": lambda x, c: (lambda a, b, n: (a * b).sum() * n)(
        *_call(_pieces, x, checkpointed=c)
    ),
    "nested": lambda x, c: _nested(x, c).sum(),
    "sequential": lambda x, c: _sequential(x, c).sum(),
    "reentrant": lambda x, c: _call(NET, x, checkpointed=c, reentrant=True).sum(),
    "input_not_requiring_grad": lambda x, c: _call(NET, x.detach(), checkpointed=c).sum(),
}


def _gradients(loss_of, seed=1):
    """(loss, each leaf's gradient) of one forward and backward from ``seed``."""
    for t in LEAVES:
        t.grad = None
    fg.manual_seed(seed)
    loss = loss_of(X)
    loss.backward()
    return loss.item(), [None if t.grad is None else t.grad.numpy().copy() for t in LEAVES]


def _assert_same(got, expected, exactly=True):
    """Equal losses and gradients; compiled (not ``exactly``): close, and a
    leaf no gradient reaches may get zeros (a compiled call's backward
    gives every input that requires grad one)."""
    if exactly:
        assert got[0] == expected[0]
    else:
        np.testing.assert_allclose(got[0], expected[0], rtol=1e-5)
    for g, e in zip(got[1], expected[1]):
        if exactly:
            assert (g is None) == (e is None)
            assert g is None or np.array_equal(g, e)
        elif g is not None:
            want = np.zeros_like(g) if e is None else e
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", CASES)
def test_gradients_are_the_plain_ones_exactly(case):
    expected = _gradients(lambda x: CASES[case](x, False))
    _assert_same(_gradients(lambda x: CASES[case](x, True)), expected)


@pytest.mark.parametrize("case", CASES)
def test_compiled_gradients_match_eager(case):
    expected = _gradients(lambda x: CASES[case](x, False))
    compiled = fg.jit(lambda x: CASES[case](x, True))
    for _ in range(3):  # the trace, then the program
        _assert_same(_gradients(compiled), expected, exactly=False)


def test_a_compiled_checkpoint_saves_less_and_recomputes_in_the_backward():
    def block(h):
        return fg.tanh(NET[3](fg.relu(NET[0](h))))

    def plain(x):
        return NET[5](block(x) * 2).sum()

    def checkpointed(x):
        return NET[5](checkpoint(block, x, use_reentrant=False) * 2).sum()

    plain_program = fg.jit(plain).lower(X)
    program = fg.jit(checkpointed).lower(X)
    assert program.saved_bytes < plain_program.saved_bytes
    # the block's two products, computed again
    assert program.backward_ir.count("matmul") == plain_program.backward_ir.count("matmul") + 2
    expected = _gradients(plain)
    compiled = fg.jit(checkpointed)
    for _ in range(3):
        _assert_same(_gradients(compiled), expected, exactly=False)


def test_a_compiled_training_step_with_checkpoints_matches_eager():
    def step(x):
        for t in LEAVES:
            t.grad = None
        loss = CASES["nested"](x, True)
        loss.backward()
        return loss, [p.grad for p in NET.parameters()]

    fg.manual_seed(2)
    want_loss, want = step(X)
    want = [g.numpy().copy() for g in want]
    compiled = fg.jit(step)
    for _ in range(2):
        fg.manual_seed(2)
        loss, got = compiled(X)
        np.testing.assert_allclose(loss.item(), want_loss.item(), rtol=1e-5)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-6)


def test_the_random_stream_moves_as_without_checkpointing():
    _gradients(lambda x: CASES["module"](x, False))
    plain = fg.get_rng_state()
    _gradients(lambda x: CASES["module"](x, True))
    assert fg.get_rng_state().tolist() == plain.tolist()


def test_without_preserving_the_random_state_the_recomputation_draws_anew():
    expected = _gradients(lambda x: CASES["module"](x, False))
    got = _gradients(
        lambda x: checkpoint(NET, x, use_reentrant=False, preserve_rng_state=False).sum()
    )
    assert got[0] == expected[0] and not np.array_equal(got[1][0], expected[1][0])


def test_backward_twice_with_retain_graph():
    expected = _gradients(lambda x: CASES["module"](x, False))
    X.grad = None
    fg.manual_seed(1)
    loss = CASES["module"](X, True)
    loss.backward(retain_graph=True)
    loss.backward()
    np.testing.assert_array_equal(X.grad.numpy(), 2 * expected[1][0])
    X.grad = None
    loss = CASES["module"](X, True)
    loss.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        loss.backward()


def test_autograd_grad_and_second_derivatives_through_a_checkpoint():
    def loss(x, checkpointed):
        return _call(lambda h: fg.sin(h @ W.t()) ** 2, x, checkpointed=checkpointed).sum()

    results = []
    X.grad = W.grad = None
    for checkpointed in (False, True):
        first = fg.autograd.grad(loss(X, checkpointed), [X, W], create_graph=True)
        assert X.grad is None and W.grad is None
        second = fg.autograd.grad(sum(g.sum() for g in first), [X, W])
        results.append([g.detach().numpy() for g in (*first, *second)])
    for got, want in zip(results[1], results[0]):
        np.testing.assert_array_equal(got, want)


def test_under_no_grad_it_just_runs_the_function():
    with fg.no_grad():
        fg.manual_seed(1)
        out = checkpoint(NET, X, use_reentrant=False)
    fg.manual_seed(1)
    assert not out.requires_grad and np.array_equal(out.numpy(), NET(X).detach().numpy())


def test_what_needs_no_gradient_passes_through():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    assert checkpoint(lambda x: x, x, use_reentrant=False) is x
    y, index, n = checkpoint(lambda x: (x * 2, x.argmax(), 3), x, use_reentrant=False)
    assert y.requires_grad and not index.requires_grad and n == 3


def test_an_input_changed_in_place_before_the_backward_is_an_error():
    h = X * 1
    out = checkpoint(NET, h, use_reentrant=False)
    h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_the_recomputation_runs_in_the_forwards_autocast_state():
    layer = NET[0]

    def loss(checkpointed):
        layer.zero_grad()
        with fg.autocast("cpu", dtype=fg.bfloat16):
            out = _call(layer, X.detach(), checkpointed=checkpointed)
        out.float().sum().backward()
        return layer.weight.grad.numpy().copy()

    np.testing.assert_array_equal(loss(True), loss(False))


def test_context_fn_wraps_the_forward_and_the_recomputation():
    entered = []

    @contextlib.contextmanager
    def noting(what):
        entered.append(what)
        yield

    def context_fn():
        return noting("forward"), noting("recompute")

    x = fg.tensor([1.0], requires_grad=True)
    checkpoint(lambda x: x * x, x, use_reentrant=False, context_fn=context_fn).backward()
    assert entered == ["forward", "recompute"] and x.grad.item() == 2.0


def test_a_recomputation_that_differs_is_an_error():
    calls = []

    def grows(x):
        calls.append(1)
        return x.repeat(len(calls))

    x = fg.tensor([1.0, 2.0], requires_grad=True)
    out = checkpoint(grows, x, use_reentrant=False)
    with pytest.raises(CheckpointError, match="Recomputed values for the following tensors"):
        out.sum().backward()


def test_pytorchs_warnings_and_errors():
    x = fg.tensor([1.0], requires_grad=True)
    with pytest.warns(UserWarning, match="the use_reentrant parameter should be passed"):
        checkpoint(lambda x: x * 2, x)
    with pytest.warns(UserWarning, match="checkpoint_sequential: the use_reentrant parameter"):
        checkpoint_sequential([nn.ReLU()], 1, x)
    with pytest.raises(ValueError, match=r"^Unexpected keyword arguments: foo,bar$"):
        checkpoint(lambda x, **k: x, x, use_reentrant=True, foo=1, bar=2)
    with pytest.raises(ValueError, match="Passing `context_fn` or `debug` is only supported"):
        checkpoint(lambda x: x, x, use_reentrant=True, debug=True)
    with pytest.raises(ValueError, match=r"should be one of \['default', 'none'\], but got bad"):
        checkpoint(lambda x: x, x, use_reentrant=False, determinism_check="bad")
    with pytest.raises(ValueError, match=r"^Unexpected keyword arguments: foo$"):
        checkpoint_sequential([nn.ReLU()], 1, x, use_reentrant=False, foo=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = checkpoint(lambda y: y * W.sum(), fg.ones(1), use_reentrant=True)
    assert "None of the inputs have requires_grad=True" in str(caught[0].message)
    assert not out.requires_grad


def test_torch_utils_checkpoint_is_there_after_import_fusegrad():
    # as torch.utils.checkpoint is after `import torch`: programs call it without importing it
    code = "import fusegrad; print(fusegrad.utils.checkpoint.checkpoint_sequential.__name__)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "checkpoint_sequential", done.stderr
