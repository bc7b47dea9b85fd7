"""The eager-against-compiled training check the suites share.

The same model and optimizer twice, one stepped eagerly and one through
``fusegrad.jit``, compared after every call (calls 1, 2, 3 and on each take
another path: the trace, the first cached run, the plan): what the step
returned, the model's parameters and buffers, and the optimizer's state.
"""

from __future__ import annotations

import numpy as np

import fusegrad as fg


def minimizing(loss_of):
    """The usual step: zero_grad, the loss, backward, the optimizer's step;
    it returns the loss."""

    def make_step(model, optimizer):
        def step(*batch):
            optimizer.zero_grad()
            loss = loss_of(model, *batch)
            loss.backward()
            optimizer.step()
            return loss

        return step

    return make_step


def assert_trains_as_eagerly(
    make_model, make_optimizer, make_step, batches, rtol, atol=0.0, after_step=None
):
    """Trains eagerly and compiled from the same start over ``batches`` and
    asserts they agree after every call; ``after_step(optimizer)`` runs after
    each call on both sides (a scheduler's step). Returns the eager model,
    the compiled one and the compiled step."""
    fg.manual_seed(12)
    eager = make_model()
    jitted = make_model()
    jitted.load_state_dict(eager.state_dict())
    eager_opt, jit_opt = make_optimizer(eager.parameters()), make_optimizer(jitted.parameters())
    eager_step, compiled = make_step(eager, eager_opt), fg.jit(make_step(jitted, jit_opt))
    for call, batch in enumerate(batches, 1):
        want, got = eager_step(*batch), compiled(*batch)
        _assert_same(got, want, rtol, atol, f"call {call}: the step's result")
        _assert_same(jitted.state_dict(), eager.state_dict(), rtol, atol, f"call {call}: model")
        _assert_same(jit_opt.state_dict(), eager_opt.state_dict(), rtol, atol, f"call {call}: opt")
        if after_step is not None:
            after_step(eager_opt)
            after_step(jit_opt)
    assert compiled.cache_info().hits >= len(batches) - 2  # it did run compiled
    return eager, jitted, compiled


def _assert_same(got, want, rtol, atol, where):
    if isinstance(want, fg.Tensor):
        assert isinstance(got, fg.Tensor), f"{where}: {type(got).__name__}, eagerly a Tensor"
        np.testing.assert_allclose(
            got.detach().numpy(), want.detach().numpy(), rtol=rtol, atol=atol, err_msg=where
        )
    elif isinstance(want, dict):
        assert list(got) == list(want), f"{where}: keys {list(got)}, eagerly {list(want)}"
        for key in want:
            _assert_same(got[key], want[key], rtol, atol, f"{where}[{key!r}]")
    elif isinstance(want, (list, tuple)):
        assert type(got) is type(want) and len(got) == len(want), f"{where}: {got!r}"
        for k, (a, b) in enumerate(zip(got, want)):
            _assert_same(a, b, rtol, atol, f"{where}[{k}]")
    elif isinstance(want, float):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=where)
    else:
        assert got == want, f"{where}: {got!r}, eagerly {want!r}"
