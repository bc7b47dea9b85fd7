"""torch.compile and torch.compiler, answered by fusegrad.jit."""

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.compiler import OptimizedModule
from fusegrad.tracer.jit import JitFunction


def square_sum(x):
    return (x * x).sum()


@pytest.mark.parametrize(
    "make",
    [
        lambda: fg.compile(square_sum),
        lambda: fg.compile()(square_sum),
        lambda: fg.compile(mode="max-autotune", dynamic=True)(square_sum),
        lambda: fg.compile(square_sum, backend="eager"),
        lambda: fg.compiler.compile(square_sum, fullgraph=True, options={"trace.enabled": False}),
    ],
)
def test_a_function_compiles_to_a_jit_function(make):
    compiled = make()
    assert isinstance(compiled, JitFunction)
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    compiled(x).backward()
    assert compiled(x).item() == 5.0 and x.grad.tolist() == [2.0, 4.0]


def test_disabled_compilation_returns_the_input():
    assert fg.compile(square_sum, disable=True) is square_sum
    model = fg.nn.Linear(2, 2)
    assert fg.compile(model, disable=True) is model
    kept = fg.compiler.disable(square_sum)
    assert fg.compile(kept) is kept and kept.__name__ == "square_sum"
    assert fg.compile(fg.compiler.disable()(square_sum))(fg.ones(2)).item() == 2.0


def test_a_module_compiles_to_an_optimized_module():
    fg.manual_seed(0)
    model = fg.nn.Sequential(fg.nn.Linear(3, 4), fg.nn.Dropout(0.5), fg.nn.Linear(4, 1))
    compiled = fg.compile(model)
    assert isinstance(compiled, OptimizedModule) and compiled._orig_mod is model
    assert getattr(compiled, "0") is model[0] and len(list(compiled.parameters())) == 4
    assert list(compiled.state_dict()) == ["_orig_mod." + k for k in model.state_dict()]
    compiled.eval()
    assert not model.training and not compiled.training
    x = fg.randn(5, 3)
    np.testing.assert_allclose(compiled(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
    compiled(x).sum().backward()
    assert model[0].weight.grad is not None
    compiled.note = "kept"  # attributes are the original's
    assert model.note == "kept" and "note" in dir(compiled)
    assert repr(compiled).startswith("OptimizedModule(\n  (_orig_mod): Sequential(")


def test_is_compiling_inside_a_trace_only():
    seen = []

    @fg.compile
    def f(x):
        seen.append(fg.compiler.is_compiling())
        return x + 1

    f(fg.ones(2))
    assert seen == [True] and not fg.compiler.is_compiling()
    assert not fg.compiler.is_dynamo_compiling()


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: fg.compile(square_sum, mode="fast"), RuntimeError, "Unrecognized mode=fast"),
        (
            lambda: fg.compile(square_sum, mode="default", options={}),
            RuntimeError,
            "Either mode or options can be specified",
        ),
        (lambda: fg.compile(square_sum, backend="nope"), RuntimeError, "Invalid backend: 'nope'"),
        (lambda: fg.compile(square_sum, backend=print), NotImplementedError, "custom backend"),
        (lambda: fg.compile()(None), RuntimeError, "Model can't be None"),
        (lambda: fg.compile(3), AssertionError, "A callable function is expected"),
    ],
)
def test_bad_settings_raise_pytorchs_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()
