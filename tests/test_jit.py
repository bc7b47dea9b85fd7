"""fusegrad.jit: the op table through compiled programs, caching, guards,
closed-over tensors, higher-order gradients, training steps, inspection."""

from __future__ import annotations

import functools
import re
import threading
import time
import warnings

import numpy as np
import pytest
from training import assert_trains_as_eagerly, minimizing

import fusegrad as fg
import fusegrad.nn as nn
import fusegrad.nn.functional as F
from fusegrad.ir.graph import verify
from fusegrad.tracer import jit as jit_module

from test_autograd import NUMPY_OPERANDS
from test_ops import JIT_CASES, _tensors


def _jitted(op, sample):
    def fn(*args):
        return op.op(*args, **sample.kwargs)

    return fg.jit(fn)


def _values(t):
    return t.detach().float().numpy() if t.dtype.reduced else t.detach().numpy()


@pytest.mark.parametrize(
    "dtype",
    [fg.float32, fg.float64, fg.float16, fg.bfloat16],
    ids=["f32", "f64", "f16", "bf16"],
)
@pytest.mark.parametrize("op,sample", JIT_CASES)
def test_compiled_values_and_gradients_agree_with_eager(op, sample, dtype):
    """Exact operations agree bit for bit; the kernels' transcendental
    approximations (a few ulps, see test_mathfns.py) within a tolerance; in
    float16 and bfloat16, where such an ulp may round the other way, and
    fused sums add in another order, within a few units of the type."""
    compiled = _jitted(op, sample)
    if dtype.reduced:
        rtol = atol = 4 * fg.finfo(dtype).eps
        grad_rtol, grad_atol = rtol, atol
    else:
        rtol, atol = (1e-5, 1e-6) if dtype is fg.float32 else (1e-12, 1e-14)
        grad_rtol, grad_atol = (1e-6 if dtype is fg.float64 else 1e-5), 1e-6
    for call in range(3):  # the trace, then the compiled program twice
        args = _tensors(op, sample, dtype, requires_grad=op.differentiable)
        eager_args = _tensors(op, sample, dtype, requires_grad=op.differentiable)
        out = compiled(*args)
        expected = op.op(*eager_args, **sample.kwargs)
        np.testing.assert_allclose(_values(out), _values(expected), rtol=rtol, atol=atol)
        assert out.dtype is expected.dtype and out.requires_grad == expected.requires_grad
        if call and op.differentiable:
            assert out.grad_fn.name() == "CompiledFunctionBackward"
        if out.requires_grad:
            seed = fg.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape), dtype=dtype)
            leaves = [a for a in args if isinstance(a, fg.Tensor) and a.requires_grad]
            eager_leaves = [a for a in eager_args if isinstance(a, fg.Tensor) and a.requires_grad]
            got = fg.autograd.grad(out, leaves, seed)
            want = fg.autograd.grad(expected, eager_leaves, seed)
            for g, w in zip(got, want):
                # an element summed from terms that cancel is off by their rounding:
                # absolutely, on the scale of the gradient's largest elements
                scale = max(1.0, float(np.abs(_values(w)).max(initial=0.0)))
                np.testing.assert_allclose(
                    _values(g), _values(w), rtol=grad_rtol, atol=grad_atol * scale
                )
    assert compiled.cache_info().misses == 1 and compiled.cache_info().hits == 2


SECOND = [c for c in JIT_CASES if c.values[0].differentiable]


@pytest.mark.parametrize("op,sample", SECOND)
def test_second_derivatives_through_a_compiled_node_equal_eager(op, sample):
    compiled = _jitted(op, sample)
    results = []
    for fn in (compiled, compiled, lambda *a: op.op(*a, **sample.kwargs)):
        args = _tensors(op, sample, fg.float64, requires_grad=True)
        out = fn(*args)
        leaves = [a for a in args if isinstance(a, fg.Tensor) and a.requires_grad]
        firsts = fg.autograd.grad(out.sum(), leaves, create_graph=True, allow_unused=True)
        total = sum((g * g).sum() for g in firsts if g is not None and g.requires_grad)
        if not isinstance(total, fg.Tensor):
            return  # linear op: no second derivative to compare
        seconds = fg.autograd.grad(total, leaves, allow_unused=True)
        results.append([None if g is None else g.numpy() for g in seconds])
    for got in results[:2]:
        for g, w in zip(got, results[2]):
            if w is None:
                assert g is None or not np.any(g)
            else:
                np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)


def test_boolean_mask_indexing_under_jit_is_a_clear_error_naming_the_line():
    @fg.jit
    def f(x):
        return x[x > 0]

    with pytest.raises(fg.TracingError, match=r"boolean-mask indexing .*test_jit.py:\d+"):
        f(fg.ones(3))


def test_printed_ir_golden():
    @fg.jit
    def f(x, w):
        return fg.tanh(x @ w).sum()

    lowered = f.lower(fg.ones(2, 3), fg.ones(3, 4, requires_grad=True))
    assert (
        lowered.forward_ir
        == """\
forward(%0: f32[2,3], %1: f32[3,4]):
  %2: f32[2,4] = matmul %0 %1
  %3: f32[2,4] = tanh %2
  %4: f32[] = reduce_sum[axes=(0, 1)] %3
  return %4, %2, %0"""
    )
    # tanh is computed again in the backward program: the forward saves the
    # matrix product, which it had to write anyway
    assert (
        lowered.backward_ir
        == """\
backward(%0: f32[2,4], %1: f32[2,3], %2: f32[]):
  %3: f32[2,4] = tanh %0
  %4: f32[2,4] = broadcast_to[shape=(2, 4)] %2
  %5: f32[2,4] = mul %3 %3
  %6: f32[2,4] = sub 1.0:f32 %5
  %7: f32[2,4] = mul %4 %6
  %8: f32[3,2] = transpose[perm=(1, 0)] %1
  %9: f32[3,4] = matmul %8 %7
  return %9"""
    )
    assert str(lowered).startswith(lowered.forward_ir + "\n\n" + lowered.backward_ir)
    verify(lowered.program.forward)


def test_cache_hits_misses_and_the_recompile_log(capsys, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_LOG", "recompiles")

    @fg.jit
    def f(x):
        return x * 2

    f(fg.ones(3))
    f(fg.ones(3))
    f(fg.ones(4))
    f(fg.ones(4, dtype=fg.float64))
    info = f.cache_info()
    assert (info.hits, info.misses, info.entries) == (1, 3, 3)
    assert info.compile_seconds > 0
    log = capsys.readouterr().err
    assert "argument 'x': float32[3] -> float32[4]" in log
    assert "argument 'x' has dynamic dimensions [0] from now on" in log
    assert "argument 'x': float32[dynamic] -> float64[dynamic]" in log


def test_closed_over_tensors_are_inputs_read_on_every_call():
    w = fg.ones(3)

    @fg.jit
    def f(x):
        return x * w

    f(fg.ones(3))
    w.mul_(5)
    assert f(fg.ones(3)).tolist() == [5.0, 5.0, 5.0]
    w[0] = 2.0
    assert f(fg.ones(3)).tolist() == [2.0, 5.0, 5.0]
    assert f.cache_info().misses == 1


def test_module_parameters_are_captured_and_get_gradients():
    fg.manual_seed(0)
    model = nn.Linear(3, 2)
    compiled = fg.jit(lambda x: model(x).sum())
    x = fg.randn(4, 3)
    for _ in range(3):
        model.zero_grad()
        compiled(x).backward()
    got = model.weight.grad.numpy().copy()
    model.zero_grad()
    model(x).sum().backward()
    np.testing.assert_allclose(got, model.weight.grad.numpy(), rtol=1e-6)


def _piecewise(a):
    b = a * 2
    while b.norm() < 1000:
        b = b * 2
    if b.sum() > 0:
        c = b
    else:
        c = 100 * b
    return c


def test_guards_retrace_for_inputs_that_take_other_paths():
    compiled = fg.jit(_piecewise)
    for value in (0.3, 0.31, -1.7, 0.3, 5.0, -1.7, 0.0004):
        a = fg.tensor(value, requires_grad=True)
        d = compiled(a)
        d.backward()
        a_eager = fg.tensor(value, requires_grad=True)
        d_eager = _piecewise(a_eager)
        d_eager.backward()
        assert d.item() == d_eager.item()
        assert a.grad.item() == a_eager.grad.item()
        assert bool(a.grad == d / a)
    # 0.3 and 0.31 take the same path (same loop count, same sign): 4 paths in all
    assert compiled.cache_info().entries == 4


def test_the_while_norm_loop_with_a_vector_gradient():
    def f(x):
        y = x * 2
        while y.data.norm() < 1000:
            y = y * 2
        return y

    compiled = fg.jit(f)
    for values in ([1.0359, 0.1405, 0.2498], [1.0, 0.1, 0.2], [100.0, 3.0, 1.0]):
        x = fg.tensor(values, requires_grad=True)
        compiled(x).backward(fg.tensor([0.1, 1.0, 0.0001]))
        x_eager = fg.tensor(values, requires_grad=True)
        f(x_eager).backward(fg.tensor([0.1, 1.0, 0.0001]))
        np.testing.assert_array_equal(x.grad.numpy(), x_eager.grad.numpy())


def test_too_many_paths_fall_back_to_eager_with_a_warning_naming_the_line():
    @fg.jit
    def f(x):
        return x * int(x.item())

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        values = [f(fg.tensor(k)).item() for k in range(12)]
    assert values == [k * k for k in range(12)]
    assert any("test_jit.py" in str(w.message) and "item()" in str(w.message) for w in caught)
    assert sum("different paths" in str(w.message) for w in caught) == 1  # then eager, quietly
    assert f.cache_info().entries == 0  # the programs of the eager signature are dropped


def test_reading_a_float_tensors_value_runs_eagerly_with_a_warning_naming_the_line():
    """A program specialized to a float computed from data would be made
    again on nearly every call: the function runs eagerly at once."""

    @fg.jit
    def f(x):
        return x * int(x.item())

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        values = [f(fg.tensor(float(k))).item() for k in range(4)]
    assert values == [float(k * k) for k in range(4)]
    messages = [str(w.message) for w in caught if "runs eagerly" in str(w.message)]
    assert len(messages) == 1 and "test_jit.py" in messages[0] and "int()" in messages[0]
    assert f.cache_info().entries == 0


def test_double_and_triple_backward_through_a_compiled_function():
    compiled = fg.jit(lambda x: (x**4).sum())
    for _ in range(2):
        x = fg.tensor([1.0, 2.0], dtype=fg.float64, requires_grad=True)
        (g,) = fg.autograd.grad(compiled(x), x, create_graph=True)
        (h,) = fg.autograd.grad(g.sum(), x, create_graph=True)
        (k,) = fg.autograd.grad(h.sum(), x)
        assert g.tolist() == [4.0, 32.0] and h.tolist() == [12.0, 48.0]
        assert k.tolist() == [24.0, 48.0]


def test_grad_of_grad_composes_with_jit():
    def f(x):
        return (fg.sin(x) * x).sum()

    second = fg.grad(lambda x: fg.grad(f)(x).sum())
    x = fg.tensor([0.5, 1.0], dtype=fg.float64)
    expected = 2 * np.cos([0.5, 1.0]) - np.array([0.5, 1.0]) * np.sin([0.5, 1.0])
    for fn in (second, fg.jit(second), fg.grad(lambda x: fg.grad(fg.jit(f))(x).sum())):
        for _ in range(2):
            np.testing.assert_allclose(fn(x).numpy(), expected, rtol=1e-12)


def test_value_and_grad_with_argnums_and_aux():
    def f(x, y):
        return (x * y).sum(), x + y

    (value, aux), (gx, gy) = fg.value_and_grad(f, argnums=(0, 1), has_aux=True)(
        fg.tensor([1.0, 2.0]), fg.tensor([3.0, 4.0])
    )
    assert value.item() == 11.0 and aux.tolist() == [4.0, 6.0]
    assert gx.tolist() == [3.0, 4.0] and gy.tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match="single-element"):
        fg.grad(lambda x: x * 2)(fg.ones(2))


@pytest.mark.parametrize(
    "make_optimizer",
    [
        lambda p: fg.optim.SGD(p, lr=0.1),
        lambda p: fg.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01, dampening=0.1),
        lambda p: fg.optim.Adam(p, lr=0.05),
        lambda p: fg.optim.Adam(p, lr=0.05, amsgrad=True),
    ],
    ids=["sgd", "sgd-momentum", "adam", "amsgrad"],
)
def test_a_whole_training_step_compiles_and_matches_eager(make_optimizer):
    x, y = (
        fg.tensor(np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32)),
        fg.tensor(np.arange(16) % 3),
    )
    assert_trains_as_eagerly(
        lambda: nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)),
        make_optimizer,
        minimizing(lambda model, x, y: F.cross_entropy(model(x), y)),
        [(x, y)] * 6,
        rtol=1e-5,
        atol=1e-6,
    )


def test_lower_leaves_no_side_effects():
    w = fg.ones(2, requires_grad=True)

    @fg.jit
    def step():
        loss = (w * w).sum()
        loss.backward()
        with fg.no_grad():
            w.sub_(w.grad)
        return loss

    lowered = step.lower()
    assert w.tolist() == [1.0, 1.0] and w.grad is None
    assert "sub" in lowered.forward_ir


def test_lower_inside_a_traced_function_is_a_clear_error_and_the_trace_survives():
    inner = fg.jit(lambda x: x * 2)

    @fg.jit
    def outer(x):
        try:
            inner.lower(x)
        except RuntimeError as error:
            assert "inside a traced function" in str(error)
        return inner(x) + 1

    x = fg.ones(3)
    for _ in range(3):
        assert outer(x).tolist() == [3.0, 3.0, 3.0]


def test_disable_jit_and_eager_run_the_python_function(monkeypatch, capsys):
    def f(x):
        print("running", x.shape)
        return x + 1

    fg.jit(f, eager=True)(fg.ones(2))
    fg.jit(f, eager=True)(fg.ones(2))
    monkeypatch.setenv("FUSEGRAD_DISABLE_JIT", "1")
    compiled = fg.jit(f)
    compiled(fg.ones(2))
    compiled(fg.ones(2))
    assert capsys.readouterr().out.count("running") == 4
    assert compiled.cache_info().misses == 0


def test_dump_writes_the_ir_of_every_compilation(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_DUMP", str(tmp_path))
    f = fg.jit(lambda x: fg.exp(x * 3).sum())
    f(fg.ones(20000, requires_grad=True))
    f(fg.ones(50000, requires_grad=True))
    texts = sorted(p.read_text() for p in tmp_path.glob("*.txt"))
    assert len(texts) == 2 and all("forward(" in t and "backward(" in t for t in texts)
    assert len(list(tmp_path.glob("*.dot"))) == 2  # the pictures beside them
    assert all(
        "kernels:" in t and "; LLVM IR of fused_" in t and "# assembly of" in t for t in texts
    )


def test_the_printed_program_is_for_people_and_its_code_on_demand():
    @fg.jit
    def loss(x, w):
        return (fg.tanh(x @ w) * 3).mean()

    lowered = loss.lower(fg.ones(2, 3), fg.full((3, 4), 0.1, requires_grad=True))
    text = str(lowered)
    assert len(text.splitlines()) < 50 and "LLVM IR" not in text
    kernels = text[text.index("kernels:") :].splitlines()[1:]
    assert any(line.endswith("numpy (too little work for a native call)") for line in kernels)
    native = [line for line in kernels if line.endswith("native (1 compiled layout)")]
    verbose = lowered.describe(verbose=True)
    assert native and verbose.count("; LLVM IR of") == verbose.count("# assembly of") == len(native)


def test_static_arguments_and_bad_arguments():
    def scale(x, k):
        return x * k

    f = fg.jit(scale, static_argnums=1)
    assert f(fg.ones(2), 3).tolist() == [3.0, 3.0]
    assert f(fg.ones(2), 3).tolist() == [3.0, 3.0]
    assert f(fg.ones(2), 4).tolist() == [4.0, 4.0]
    assert f.cache_info()[:2] == (1, 2)
    with pytest.raises(TypeError, match=r"static argument 1 .* must be hashable"):
        f(fg.ones(2), [1])
    with pytest.raises(TypeError, match="cannot be traced"):
        fg.jit(lambda x, obj: x)(fg.ones(2), object())


def test_dtype_device_and_memory_format_arguments_choose_a_program_each():
    """As torch.compile guards on them: a program per value, computing what
    eager mode computes for it (a DType argument was refused)."""

    def cast(x, dtype, device, memory_format):
        return x.to(dtype, memory_format=memory_format).to(device) * 3

    f = fg.jit(cast)
    x = fg.randn(2, 3, 4, 5)
    for dtype, layout in [(fg.float64, fg.preserve_format), (fg.bfloat16, fg.channels_last)]:
        for _ in range(2):
            got, want = f(x, dtype, fg.device("cpu"), layout), cast(x, dtype, "cpu", layout)
            assert got.dtype is want.dtype and got.stride() == want.stride()
            np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    assert f.cache_info()[:2] == (2, 2)


def test_objects_as_arguments_compile_once_and_are_read_on_every_call():
    """A generator, a module, a loss function: the trace reads them through the
    argument (not as the first call's objects), so one program serves each."""

    def noisy(x, gen):
        return x + fg.rand(3, generator=gen)

    f = fg.jit(noisy)
    for seed in (1, 2, 1):
        got = f(fg.zeros(3), fg.Generator().manual_seed(seed))
        assert got.tolist() == fg.rand(3, generator=fg.Generator().manual_seed(seed)).tolist()
    assert f.cache_info()[:2] == (2, 1)

    def loss(model, x, criterion):
        return criterion(model(x), fg.zeros(4, 2))

    f = fg.jit(loss)
    for model in (fg.nn.Linear(3, 2), fg.nn.Linear(3, 2)):
        x = fg.randn(4, 3)
        assert f(model, x, fg.nn.functional.mse_loss).item() == pytest.approx(
            loss(model, x, fg.nn.functional.mse_loss).item()
        )
    assert f.cache_info()[:2] == (1, 1)


def test_a_numpy_array_argument_is_guarded_by_its_values():
    """Refilled in place (a reused batch buffer, larger than the size the
    state walk samples), it is traced again: its values were constants."""
    buffer = np.zeros(2048, np.float32)
    f = fg.jit(lambda x, a: x * fg.from_numpy(a[:2]))
    assert f(fg.ones(2), buffer).tolist() == [0.0, 0.0]
    buffer[:2] = 5.0
    assert f(fg.ones(2), buffer).tolist() == [5.0, 5.0]
    assert f(fg.ones(2), buffer).tolist() == [5.0, 5.0]
    assert f.cache_info()[:2] == (1, 2)


@pytest.mark.parametrize(
    "with_numpy", [pytest.param(case.values[0], id=case.id) for case in NUMPY_OPERANDS]
)
def test_numpy_operands_compile_to_what_they_compute_eagerly(with_numpy):
    compiled = fg.jit(with_numpy)
    for _call in range(3):
        x = fg.tensor([0.5, 1.0, 2.0], requires_grad=True)
        eager_x = fg.tensor([0.5, 1.0, 2.0], requires_grad=True)
        got, want = compiled(x), with_numpy(eager_x)
        assert got.dtype is want.dtype
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
        got.sum().backward()
        want.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), eager_x.grad.numpy(), rtol=1e-6)
    assert compiled.cache_info().misses == 1 and compiled.cache_info().hits == 2


def test_numpy_scalar_arguments_are_numbers_of_their_type():
    f = fg.jit(lambda x, k: x * k)
    x = fg.ones(2, dtype=fg.int64)
    for k, dtype in [
        (np.float32(2.5), fg.float32),
        (np.float64(2.5), fg.float32),
        (np.int64(3), fg.int64),
        (np.bool_(True), fg.int64),
        (True, fg.int64),
    ]:
        for _call in range(2):
            out = f(x, k)
            assert out.dtype is dtype and out.tolist() == [k * 1] * 2
    # numpy floats are float inputs of one program; ints another; bools by value
    assert f.cache_info().entries == 4


@pytest.mark.parametrize(
    "apply",
    [
        lambda value: fg.jit(value),
        lambda value: fg.jit(static_argnums=0)(value),
        lambda value: fg.jit(value, eager=True),
    ],
    ids=["call", "decorator", "eager"],
)
@pytest.mark.parametrize("value", [3, "f", [len]], ids=repr)
def test_jit_of_a_non_callable_is_a_type_error_at_once(apply, value):
    with pytest.raises(TypeError, match=re.escape(f"expected a callable value, got {value!r}")):
        apply(value)


class _DecidingLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 2)

    def forward(self, x):
        y = self.linear(x)
        return y * 2 if float(y.sum()) > 0 else y


@pytest.mark.parametrize(
    "make", [_DecidingLayer, lambda: functools.partial(_DecidingLayer())], ids=["module", "partial"]
)
def test_a_module_or_partial_compiled_is_named_by_its_type_in_messages(make):
    """They have no __name__: a message naming the function raised AttributeError."""
    layer = make()
    compiled = fg.jit(layer)
    x = fg.randn(3, 2)
    with pytest.warns(UserWarning, match=f"{type(layer).__name__} runs eagerly"):
        out = compiled(x)
    np.testing.assert_array_equal(out.detach().numpy(), layer(x).detach().numpy())


def test_machinery_an_object_holds_is_not_guarded():
    """A jit function, an autograd node and a hook handle an object holds change
    as they run; a compiled function reading that object guards none of them
    (once moving the jit into tracer/ made every call compile again)."""
    inner = fg.jit(lambda x: x + 1)
    leaf = fg.ones(2, requires_grad=True)

    class Holder:
        pass

    holder = Holder()
    holder.scale, holder.inner = 2.0, inner
    holder.node = (leaf * 3).grad_fn
    holder.handle = leaf.register_hook(lambda g: g)

    @fg.jit
    def scaled(x):
        return x * holder.scale

    for _ in range(4):
        inner(fg.ones(2))
        scaled(fg.ones(2))
    assert scaled.cache_info().misses == 1


def test_outputs_keep_their_structure():
    from collections import namedtuple

    Pair = namedtuple("Pair", "first second")
    f = fg.jit(lambda x: {"a": (x, x * 2), "b": [x.sum()], "n": 3, "p": Pair(x, [x * 3])})
    flat = fg.jit(lambda x: (x, x + 1))
    for _ in range(2):
        out = f(fg.ones(2))
        assert out["a"][1].tolist() == [2.0, 2.0] and out["b"][0].item() == 2.0 and out["n"] == 3
        assert isinstance(out["p"], Pair) and out["p"].second[0].tolist() == [3.0, 3.0]
        pair = flat(fg.ones(2))
        assert type(pair) is tuple and pair[1].tolist() == [2.0, 2.0]


def test_create_graph_inside_a_traced_function_gives_a_hessian_vector_product():
    def hvp(x, v):
        (g,) = fg.autograd.grad((x**3).sum() * x.sum(), x, create_graph=True)
        (hv,) = fg.autograd.grad(g, x, v)
        return hv

    compiled = fg.jit(hvp)
    for _ in range(3):
        x = fg.tensor([1.0, 2.0, -1.0], dtype=fg.float64, requires_grad=True)
        v = fg.tensor([0.5, -1.0, 2.0], dtype=fg.float64)
        np.testing.assert_allclose(compiled(x, v).numpy(), hvp(x, v).numpy(), rtol=1e-12)


def test_retain_graph_on_a_compiled_node_matches_eager():
    compiled = fg.jit(lambda x: (x * x).sum())
    compiled(fg.ones(2, requires_grad=True))
    x = fg.ones(2, requires_grad=True)
    y = compiled(x)
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 4.0]
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_inplace_change_of_an_input_before_backward_is_detected():
    compiled = fg.jit(lambda x: (x * x).sum())
    compiled(fg.ones(2, requires_grad=True))
    x = fg.ones(2, requires_grad=True)
    y = compiled(x * 1)
    leaf = x * 1
    y = compiled(leaf)
    with fg.no_grad():
        leaf.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


_BUFFER_WRITES = {
    # eager saves buf for mul's backward, then the function changes it: an error
    "saved, then changed": lambda buf, w, x: (fg.tanh(buf * x).sum(), buf.add_(1))[0],
    # eager saves exp's output only: the backward must see buf as it was read
    "read, then changed": lambda buf, w, x: (((buf + w).exp() * x).sum(), buf.add_(1))[0],
}


@pytest.mark.parametrize("name", sorted(_BUFFER_WRITES))
@pytest.mark.parametrize("create_graph", [False, True])
def test_a_tensor_changed_in_place_by_the_call_is_read_by_backward_as_eagerly(name, create_graph):
    """The backward of a call that changes a captured tensor in place gets
    the gradients eager gets, or eager's error, on every call."""

    def run(function_of):
        buf = fg.ones(3)
        w = fg.tensor([0.5, 1.0, 2.0], requires_grad=True)
        function = function_of(lambda x: _BUFFER_WRITES[name](buf, w, x))
        results = []
        for _ in range(3):
            x = fg.tensor([0.1, 0.2, 0.3], requires_grad=True)
            try:
                function(x).backward(create_graph=create_graph)
                results.append((x.grad.tolist(), w.grad.tolist()))
            except RuntimeError as error:
                results.append(str(error).split(":")[0])
        return results, buf.tolist()

    eager, compiled = run(lambda f: f), run(fg.jit)
    assert compiled[1] == eager[1]
    for got, expected in zip(compiled[0], eager[0]):
        if isinstance(expected, str):
            assert got == expected
        else:
            np.testing.assert_allclose(got, expected, rtol=1e-5)


class _Legendre3(fg.autograd.Function):
    """PyTorch's tutorial Function, with a backward that is not the forward's
    derivative the adjoint pass would derive (it scales by 1.5 exactly)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 0.5 * (5 * x**3 - 3 * x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 1.5 * (5 * x**2 - 1)


class _SplitSigns(fg.autograd.Function):
    """Two outputs, a non-differentiable one, and a backward given as 2x."""

    @staticmethod
    def forward(ctx, x):
        signs = (x > 0).to(x.dtype)
        ctx.mark_non_differentiable(signs)
        return x * 3, signs

    @staticmethod
    def backward(ctx, grad, _):
        return grad * 2


class _PassThrough(fg.autograd.Function):
    """Returns its input itself; its gradient is given as 3x."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad * 3


class _DoubleInPlace(fg.autograd.Function):
    """Doubles its input in place (mark_dirty); its gradient is given as 2x."""

    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


class _SavesAfterItsOutput(fg.autograd.Function):
    """Saves a value its forward makes after its output (the replay of the
    compiled backward must wait for it); its gradient is given as 2x * x."""

    @staticmethod
    def forward(ctx, x):
        out = x * x
        ctx.save_for_backward(x * 2)
        return out

    @staticmethod
    def backward(ctx, grad):
        (twice,) = ctx.saved_tensors
        return grad * twice * twice.detach() * 0.5


def _custom_functions(x, w):
    y, signs = _SplitSigns.apply(_Legendre3.apply(x * w))
    return (y * y * signs).sum() + _SavesAfterItsOutput.apply(x * w).sum()


def _custom_aliasing_functions(x, w):
    y = _DoubleInPlace.apply(_PassThrough.apply(x * w) + 1)
    return (y * y * x).sum()


@pytest.mark.parametrize("program", [_custom_functions, _custom_aliasing_functions])
def test_a_custom_function_compiles_with_its_backward_as_the_gradient(program):
    compiled = fg.jit(program)
    results = []
    for function in (program, compiled, compiled, compiled):
        x = fg.linspace(-1, 1, 5, dtype=fg.float64)
        w = fg.tensor(0.7, dtype=fg.float64, requires_grad=True)
        loss = function(x, w)
        (g,) = fg.autograd.grad(loss, w, create_graph=True)
        (h,) = fg.autograd.grad(g, w)
        results.append((loss.item(), g.item(), h.item()))
    for got in results[1:]:
        np.testing.assert_allclose(got, results[0], rtol=1e-12)
    assert compiled.cache_info().misses == 1


def _hooked(x):
    y = x.tanh() * 2
    y.register_hook(lambda g: g * 10)
    y.register_hook(lambda g: g.clamp(-3.0, 3.0))  # after the first, as registered
    return (y * y * x).sum()


def _hooked_step(w):
    y = w.sin()
    y.register_hook(lambda g: g.clamp(-0.2, 0.2))
    loss = (y * 5).sum()
    loss.backward()  # the hook runs in the function's own backward too
    return loss


@pytest.mark.parametrize("fn", [_hooked, _hooked_step], ids=["outside", "inside"])
def test_hooks_on_values_the_function_makes_change_their_gradients_as_eagerly(fn):
    compiled = fg.jit(fn)
    for size in (5, 5, 6, 7, 6):  # the third call on: a dynamic size
        x = fg.randn(size, requires_grad=True)
        twin = x.detach().clone().requires_grad_()
        out, expected = compiled(x), fn(twin)
        if fn is _hooked:
            out.backward()
            expected.backward()
        np.testing.assert_allclose(x.grad.numpy(), twin.grad.numpy(), rtol=1e-6)


def test_a_hooked_gradient_differentiates_again():
    x = fg.randn(4, requires_grad=True, dtype=fg.float64)
    twin = x.detach().clone().requires_grad_()
    compiled = fg.jit(_hooked)
    for tensor, fn in ((x, compiled), (twin, _hooked)):
        (grad,) = fg.autograd.grad(fn(tensor), tensor, create_graph=True)
        grad.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), twin.grad.numpy(), rtol=1e-10)


def test_a_hook_registered_on_an_argument_runs_the_call_eagerly():
    # the hook stays on the caller's tensor and fires in its later backward
    # passes; a compiled call on a new tensor would not register it
    def step(x):
        with fg.no_grad():
            x.mul_(0.5)
        x.register_hook(lambda g: g * 2.0)
        return (x * x).sum()

    def later_gradients(fn):
        sums = []
        for seed in range(3):
            x = fg.tensor(np.random.default_rng(seed).standard_normal(3), requires_grad=True)
            fn(x)
            (x * 3).sum().backward()
            sums.append(float(x.grad.sum()))
        return sums

    with pytest.warns(UserWarning, match=r"registers a hook on a tensor it did not make"):
        compiled = later_gradients(fg.jit(step))
    assert compiled == later_gradients(step)


def test_what_a_compiled_program_cannot_reproduce_is_a_clear_error():
    def reading_only(x):
        y = x * 2
        y.register_hook(lambda g: None)  # would see the trace's stand-in gradient
        return y.sum()

    with pytest.raises(fg.TracingError, match="returns nothing"):
        fg.jit(reading_only)(fg.ones(2, requires_grad=True))


def test_tracing_in_one_thread_does_not_record_another_threads_ops():
    import threading

    started, release = threading.Event(), threading.Event()

    def slow(x):
        started.set()
        release.wait(5)
        return x * 2

    compiled = fg.jit(slow)
    thread = threading.Thread(target=lambda: compiled(fg.ones(2)))
    thread.start()
    started.wait(5)
    noise = fg.ones(3) + 1  # eager work in this thread while the other one traces
    release.set()
    thread.join()
    assert noise.tolist() == [2.0, 2.0, 2.0]
    program = compiled.lower(fg.ones(2)).program
    assert [e.prim.name for e in program.forward.eqns] == ["mul"]


def _call_at_once(function, arguments: list) -> list:
    """``function(*a)`` for each ``a`` of ``arguments``, each in a thread of its
    own, released together; the results, or the exceptions raised."""
    start = threading.Barrier(len(arguments))
    results: list = [None] * len(arguments)

    def call(i):
        start.wait()
        try:
            results[i] = function(*arguments[i])
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(arguments))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_concurrent_first_calls_of_one_signature_compile_once():
    def slow(x, k):
        time.sleep(0.2)  # the other threads call meanwhile (the trace only: no state)
        return (x * k).sum()

    f = fg.jit(slow)
    results = _call_at_once(f, [(fg.ones(3), 2.0) for _ in range(12)])
    assert [r.item() for r in results] == [6.0] * 12
    assert f.cache_info()[:3] == (11, 1, 1)


def test_concurrent_first_calls_of_different_signatures_trace_at_the_same_time():
    tracing = {2: threading.Event(), 3: threading.Event()}

    def meet(x):
        n = x.shape[0]
        tracing[n].set()
        assert tracing[5 - n].wait(10), "the other signature's trace did not run meanwhile"
        return x * 2

    results = _call_at_once(fg.jit(meet), [(fg.ones(2),), (fg.ones(3),)])
    assert [r.tolist() for r in results] == [[2.0] * 2, [2.0] * 3]


def test_a_failed_trace_raises_in_its_caller_and_the_waiting_calls_trace_again():
    traces = threading.Semaphore(1)  # what Python state cannot show: a trace counter

    def fails_first(x):
        time.sleep(0.2)
        if traces.acquire(blocking=False):
            raise ValueError("the first trace fails")
        return x + 1

    f = fg.jit(fails_first)
    results = _call_at_once(f, [(fg.ones(2),) for _ in range(6)])
    errors = [r for r in results if isinstance(r, ValueError)]
    assert len(errors) == 1
    assert all(r.tolist() == [2.0, 2.0] for r in results if r not in errors)
    assert f.cache_info()[:3] == (4, 2, 1)


def test_a_trace_waiting_for_a_thread_calling_the_same_signature_does_not_deadlock(
    monkeypatch,
):
    monkeypatch.setattr(jit_module, "TRACE_PATIENCE", 0.2)

    def joins_a_caller(x):
        if threading.current_thread() is threading.main_thread():
            helper = threading.Thread(target=lambda: inner.append(f(fg.ones(2))))
            helper.start()
            helper.join()
        return x * 3

    inner: list = []
    f = fg.jit(joins_a_caller)
    assert f(fg.ones(2)).tolist() == [3.0, 3.0]
    assert inner[0].tolist() == [3.0, 3.0]


def test_an_output_whose_graph_the_function_consumed_refuses_a_second_backward():
    w = fg.ones(2, requires_grad=True)

    def step():
        loss = (w * w).sum()
        loss.backward()
        return loss

    compiled = fg.jit(step)
    for fn in (step, compiled, compiled):
        loss = fn()
        assert loss.requires_grad
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loss.backward()
    assert compiled.lower().backward_ir is None


def test_in_place_updates_are_written_back_in_any_order():
    def step(a, b, c):
        with fg.no_grad():
            b.copy_(a)
            a.copy_(c)
            c.mul_(1.0)

    compiled = fg.jit(step)
    for _ in range(3):
        a, b, c = fg.tensor([1.0, 2.0]), fg.tensor([0.0, 0.0]), fg.tensor([7.0, 8.0])
        compiled(a, b, c)
        assert (a.tolist(), b.tolist(), c.tolist()) == ([7.0, 8.0], [1.0, 2.0], [7.0, 8.0])


def test_a_view_of_an_input_written_back_is_read_before_the_input_is_written():
    def step(a, b, c):
        with fg.no_grad():
            b.copy_(a.t())
            a.copy_(c)
            c.add_(b)

    compiled = fg.jit(step)
    for _ in range(3):
        values = [[[1.0, 2.0], [3.0, 4.0]], [[0.0, 0.0], [0.0, 0.0]], [[5.0, 6.0], [7.0, 8.0]]]
        eager, jitted = [fg.tensor(v) for v in values], [fg.tensor(v) for v in values]
        step(*eager)
        compiled(*jitted)
        assert [t.tolist() for t in jitted] == [t.tolist() for t in eager]


def test_assigning_data_inside_jit_is_a_clear_error():
    def swap_storage(x, y):
        x.data = y
        return x * 2

    with pytest.raises(fg.TracingError, match=r"assigning \.data"):
        fg.jit(swap_storage)(fg.ones(2), fg.zeros(2))


def test_a_changed_learning_rate_is_read_rather_than_frozen():
    w = nn.Parameter(fg.tensor([1.0, -2.0]))
    opt = fg.optim.SGD([w], lr=0.1)

    @fg.jit
    def step():
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()

    step()
    step()
    before = w.detach().numpy().copy()
    misses = step.cache_info().misses
    opt.param_groups[0]["lr"] = 0.5  # a scheduler's change
    step()
    np.testing.assert_allclose(w.detach().numpy(), before - 0.5 * 2 * before, rtol=1e-6)
    assert step.cache_info().misses == misses  # an input of the program, not traced again


def test_switching_a_dropout_module_to_training_is_not_silently_ignored():
    model = nn.Sequential(nn.Linear(2, 16), nn.Dropout(0.5)).eval()
    compiled = fg.jit(lambda x: model(x))
    x = fg.ones(1, 2)
    compiled(x)
    compiled(x)
    model.train()
    state = fg.get_rng_state()
    dropped = compiled(x)
    fg.set_rng_state(state)
    np.testing.assert_allclose(dropped.detach().numpy(), model(x).detach().numpy(), rtol=1e-6)
    assert (dropped == 0).any() and compiled.cache_info().misses == 2


def test_numpy_reads_of_traced_values_are_guarded():
    @fg.jit
    def f(x):
        return x * float(np.asarray(x).sum())

    assert f(fg.tensor([1.0, 2.0])).tolist() == [3.0, 6.0]
    assert f(fg.tensor([1.0, 4.0])).tolist() == [5.0, 20.0]


def test_random_integers_and_one_hot_under_jit():
    draw = fg.jit(lambda x: x + fg.randint(0, 3, (2,)))
    state = fg.get_rng_state()
    drawn = [draw(fg.ones(2)).tolist() for _ in range(3)]
    fg.set_rng_state(state)
    assert drawn == [(fg.ones(2) + fg.randint(0, 3, (2,))).tolist() for _ in range(3)]
    encode = fg.jit(lambda labels: fg.nn.functional.one_hot(labels, 4))
    assert encode(fg.tensor([0, 3])).tolist() == [[1, 0, 0, 0], [0, 0, 0, 1]]
    assert encode(fg.tensor([2, 1])).tolist() == [[0, 0, 1, 0], [0, 1, 0, 0]]
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
        encode(fg.tensor([2, 4]))  # the check is a guard: this call traces again
    with pytest.raises(RuntimeError, match="Class values must be non-negative"):
        encode(fg.tensor([-1, 1]))
    assert encode(fg.tensor([1, 3])).tolist() == [[0, 1, 0, 0], [0, 0, 0, 1]]


def test_the_backward_computes_elementwise_values_again_rather_than_saving_them():
    """W1's loss: the forward saves nothing beyond x; the backward program
    recomputes tanh, sigmoid and exp from x in its own kernel."""

    @fg.jit
    def f(x):
        return (fg.tanh(x) * fg.sigmoid(x) + fg.exp(-x * x) * 0.5 + fg.log1p(x * x)).sum()

    x = fg.tensor(np.linspace(-2, 2, 5000, dtype=np.float32), requires_grad=True)
    lowered = f.lower(x)
    assert lowered.saved_bytes == 0 and "saved for the backward beyond the inputs: 0" in str(
        lowered
    )
    assert "tanh" in lowered.backward_ir
    f(x).backward()
    f(x).backward()
    y = fg.tensor(x.detach().numpy(), requires_grad=True)
    (fg.tanh(y) * fg.sigmoid(y) + fg.exp(-y * y) * 0.5 + fg.log1p(y * y)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * y.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_a_matrix_product_is_saved_not_computed_again():
    @fg.jit
    def f(x, w):
        return fg.tanh(x @ w).sum()

    lowered = f.lower(fg.ones(2, 3), fg.ones(3, 4, requires_grad=True))
    assert lowered.saved_bytes == 2 * 4 * 4 and "matmul" not in lowered.backward_ir.split("\n")[1]


def test_the_cheapest_cut_saves_one_sum_rather_than_the_two_products_it_adds():
    @fg.jit
    def f(a, w, c, v):
        return fg.tanh(a @ w + c @ v).sum()

    args = [fg.randn(6, 3), fg.randn(3, 5, requires_grad=True), fg.randn(6, 2), fg.randn(2, 5)]
    lowered = f.lower(*args)
    assert lowered.saved_bytes == 6 * 5 * 4  # the sum; recomputing it would need both products
    assert "matmul" not in lowered.backward_ir.split("\n", 1)[1].split("\n")[0]
    f(*args).backward()
    f(*args).backward()
    w = fg.tensor(args[1].detach().numpy(), requires_grad=True)
    fg.tanh(args[0] @ w + args[2] @ args[3]).sum().backward()
    np.testing.assert_allclose(args[1].grad.numpy(), 2 * w.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_detaching_costs_no_copy_in_a_compiled_program():
    """value_and_grad detaches its inputs; the programs that run make that
    the identity, so no kernel copies the weights (one did, 1.6 MB per call
    in the MLP benchmark)."""
    x = fg.ones(8, 5)
    f = fg.jit(fg.value_and_grad(lambda w: fg.tanh(x @ w).sum()))
    w = fg.full((5, 3), 0.1)
    lowered = f.lower(w)
    assert "stop_gradient" not in lowered.forward_ir
    assert all(e.prim.name != "stop_gradient" for k in lowered.kernels for e in k.eqns)
    f(w)
    _, grad = f(w)  # the compiled program
    y = fg.full((5, 3), 0.1, requires_grad=True)
    fg.tanh(x @ y).sum().backward()
    np.testing.assert_allclose(grad.numpy(), y.grad.numpy(), rtol=1e-6)


def test_the_seed_of_a_traced_backward_is_a_constant_of_the_program():
    """backward() of a scalar inside a trace seeds it with ones made by a
    traced op, so the program folds them (x * 1 is x) instead of reading a
    captured tensor on every call (a regression caught by call_overhead.py)."""
    f = fg.jit(fg.value_and_grad(lambda x: (fg.tanh(x) * x).sum()))
    x = fg.randn(16)
    program = f.lower(x).program
    assert len(program.forward.inputs) == 1 and not program.captured


def test_gradients_of_several_outputs_of_one_compiled_call():
    """The outputs share one backward node: as roots, it is counted once
    (counted per output, the leaves waited for a second arrival and got no
    gradient, or half of it)."""

    def program(x, y):
        return fg.where(y > -1.5, x, y), x + x, fg.expm1(x)

    compiled = fg.jit(program)
    for call in range(3):
        results = []
        for function in (program, compiled):
            x = fg.tensor([0.5], requires_grad=True)
            y = fg.tensor([0.1, 0.2, 0.3], dtype=fg.float64, requires_grad=True)
            outputs = function(x, y)
            seeds = [fg.ones(o.shape, dtype=o.dtype) for o in outputs]
            grads = fg.autograd.grad(list(outputs), [x, y], seeds)
            fg.autograd.backward(list(function(x, y)), seeds)
            results.append([g.tolist() for g in grads] + [x.grad.tolist(), y.grad.tolist()])
        assert results[0] == results[1], call


def test_an_output_without_a_cotangent_adds_nothing_to_the_compiled_backward():
    """Only the first output is differentiated: the second's backward, 0/0
    here (std of one element), must not run, as eagerly it does not (a zeros
    cotangent for it gave nan)."""

    def program(x):
        product = x @ x
        return product, product.std(correction=0)

    compiled = fg.jit(program)
    for call in range(3):
        for create_graph in (False, True):
            expected = []
            for function in (program, compiled):
                x = fg.tensor([0.3], requires_grad=True)
                first, _ = function(x)
                (grad,) = fg.autograd.grad(first, x, create_graph=create_graph)
                expected.append(grad.tolist())
            assert expected[0] == expected[1] == [0.6000000238418579], (call, create_graph)


def test_a_value_the_backward_computes_again_has_the_bits_the_forward_computed():
    """amin's gradient compares its input, computed again in the backward,
    with the saved minimum: a tiny forward kernel once ran in numpy while the
    backward's ran natively, two approximations of 2**x that differ in the
    last bit, and no element was the minimum any more (0/0)."""

    def program(x, y):
        return fg.maximum(y, 2.0**x).amin(dim=0)

    compiled = fg.jit(program)
    for call in range(3):
        grads = []
        for function in (program, compiled):
            x = fg.tensor(2.3641562, requires_grad=True)
            y = fg.tensor(-0.6305658525785082, dtype=fg.float64, requires_grad=True)
            grads.append([g.item() for g in fg.autograd.grad(function(x, y), [x, y])])
        np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6, err_msg=str(call))


# Programs whose compiled calls from the second on once differed from eager
# (plans wrote a value that is both an output and a spill row with the spill
# row's shape; empty launches left row equations uninitialized).
def _amax_then_sum(x0):
    v1 = x0.exp()
    v2 = v1.amax(dim=1, keepdim=True)
    return v1 + (v1 * v2).sum()


def _softmaxes_and_views(x0):
    v1 = x0.exp()
    v2 = fg.softmax(v1, dim=1)
    v3 = fg.mean(v2, dim=1)
    v4 = v3.unsqueeze(0)
    v5 = v1.expand((4, 3, 5))
    v6 = v4.exp()
    v7 = fg.abs(v6 + -1.562)
    v8 = fg.softmax(v5, dim=-2)
    return fg.where(v6 > 1.562, v7[-1], v8[::3, 1::2, -5])


def _softmax_matmul(x0, x1):
    v2 = fg.where(x1 > x0 + 6.749, x0, x1)
    v3 = fg.where(v2 > 4.854, v2, v2)
    return v3.softmax(dim=-1) @ v3.transpose(-1, -2)


def _attention_step(x, wq, wk, wv):
    q, k, v = x @ wq, x @ wk, x @ wv
    return (F.softmax(q @ k.transpose(-2, -1), dim=-1) @ v).pow(2).sum()


_rng = np.random.default_rng(0)
CALLS_CASES = [
    (_amax_then_sum, [_rng.standard_normal((2, 1))]),
    (_softmaxes_and_views, [_rng.standard_normal((3, 5))]),
    (_softmax_matmul, [_rng.standard_normal((1, 1, 2, 4)), _rng.standard_normal((1, 3, 2, 4))]),
    (
        _attention_step,
        [_rng.standard_normal((4, 16, 32)).astype(np.float32)]
        + [(_rng.standard_normal((32, 32)) * 0.1).astype(np.float32) for _ in range(3)],
    ),
    (lambda a: a.mean(), [np.zeros(0)]),
    (lambda a: a.reshape(0, 3).mean(dim=0), [np.zeros(0)]),
    (lambda a: a.sum() + 1, [np.zeros(0, np.float32)]),
    (lambda a: (a.var(), fg.logsumexp(a, dim=0), F.mse_loss(a, a * 2)), [np.zeros(0)]),
    (lambda a: F.cross_entropy(a, fg.zeros(0, dtype=fg.int64)), [np.zeros((0, 3))]),
]


@pytest.mark.parametrize("program,arrays", CALLS_CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_compiled_calls_one_to_three_equal_eager(program, arrays):
    compiled = fg.jit(program)
    for call in range(3):
        results = []
        for function in (program, compiled):
            args = [fg.tensor(a, requires_grad=a.size > 0) for a in arrays]
            outputs = function(*args)
            outputs = list(outputs) if isinstance(outputs, tuple) else [outputs]
            values = [o.detach().numpy() for o in outputs]
            needing = [a for a in args if a.requires_grad]
            loss = sum(o.sum() for o in outputs if o.requires_grad)
            grads = fg.autograd.grad(loss, needing) if needing and loss.requires_grad else []
            results.append(values + [g.numpy() for g in grads])
        for got, want in zip(results[1], results[0]):
            assert got.shape == want.shape, call
            scale = np.abs(want).max(initial=1.0)  # float32 sums in another order
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * scale, err_msg=str(call))


def test_python_numbers_are_inputs_of_one_program():
    @fg.jit
    def f(x, lr, steps):
        return x * lr + steps

    x = fg.ones(3)
    for k in range(100):
        assert f(x, 0.1 * k, k).tolist() == pytest.approx([0.1 * k + k] * 3)
    assert f.cache_info().misses == 1


def test_a_number_python_decides_on_is_guarded_by_its_outcome_or_its_value():
    @fg.jit
    def f(x, scale, n):
        y = x * scale if scale > 1.0 else x - scale  # the outcome is guarded
        return y.reshape(n, -1)  # the value is: a shape

    x = fg.arange(6.0)
    for scale, n in [(2.0, 2), (3.0, 2), (0.5, 2), (0.25, 2), (2.0, 3), (5.0, 3)]:
        eager = (x * scale if scale > 1.0 else x - scale).reshape(n, -1)
        assert f(x, scale, n).tolist() == eager.tolist()
    assert f.cache_info().misses == 3  # (>1, n=2), (<=1, n=2), (>1, n=3): n keyed by value


def test_numbers_read_and_returned_inside_are_the_programs_values():
    w = fg.tensor([1.0, 2.0], requires_grad=True)

    @fg.jit
    def step(x, c):
        loss = (w * x * c).sum()
        loss.backward()
        return loss.item(), float(c) > 0

    for c in [1.0, 2.0, 3.0]:
        w.grad = None
        value, positive = step(fg.ones(2), c)
        assert value == 3.0 * c and positive is True and w.grad.tolist() == [c, c]
    assert step.cache_info().misses == 3  # float(c) decided on the value


def test_the_recompile_log_names_arguments_and_the_guard_that_failed(capsys, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_LOG", "recompiles")

    @fg.jit
    def f(x, *, flag, offset):
        return x + offset if (x.sum() > 0) == flag else x

    f(fg.ones(2), flag=True, offset=1.0)
    f(fg.ones(2), flag=False, offset=2.0)
    f(-fg.ones(2), flag=False, offset=3.0)
    log = capsys.readouterr().err.splitlines()
    assert log[0].endswith("compiling f: first call")
    assert log[1].endswith("compiling f: argument 'flag': True -> False")
    assert "a guard failed: bool() at " in log[2] and log[2].endswith(": False -> True")


def test_the_cache_keeps_the_most_recently_used_programs():
    f = fg.jit(lambda x: x * 2, cache_size=2, dynamic=False)
    for n in (1, 2, 3, 1):
        f(fg.ones(n))
    assert f.cache_info().entries == 2 and f.cache_info().misses == 4
    f(fg.ones(1))  # the most recent stays
    assert f.cache_info().hits == 1


def test_calls_like_the_last_one_run_its_program_directly_and_others_as_before():
    """A call whose tensors have the last call's dtypes, flags and layouts
    runs its program without computing the key; every other call still
    finds its own program (or traces one), and gets eager's values."""

    def fn(*args):
        x, y = args[0], args[1] if isinstance(args[1], fg.Tensor) else args[1][0]
        return (x * y + y).sum(0), x - y

    f = fg.jit(fn)
    rng = np.random.default_rng(0)
    square = rng.standard_normal((64, 64)).astype(np.float32)  # native kernels
    x, y = fg.tensor(square), fg.tensor(square.T.copy())
    calls = [
        (x, y),
        (x, y),
        (fg.tensor(square + 1), y),  # new tensors, same layouts: direct
        (x, y.t().contiguous().t()),  # same shape, transposed strides
        (x, fg.tensor(square.T.copy(), requires_grad=True)),
        (x.double(), y.double()),
        (x, (y,)),
        (x, y, None),
        (x, y),
    ]
    for args in calls:
        for _ in range(3):
            got, want = f(*args), fn(*args)
            for g, w in zip(got, want):  # sums: the kernels' order, not numpy's
                np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), 1e-5, 1e-5)
                assert g.requires_grad == w.requires_grad and g.dtype is w.dtype
    assert f._direct is not None  # the last calls took it
    with fg.no_grad():
        got = f(x, fg.tensor(square, requires_grad=True))[0]
    assert not got.requires_grad
    info = f.cache_info()
    assert info.misses == 6 and info.hits == 3 * len(calls) - info.misses + 1

    outer = fg.jit(lambda x, y: f(x, y)[0] * 2)  # inside a trace: traced inline
    np.testing.assert_array_equal(outer(x, y).numpy(), (fn(x, y)[0] * 2).numpy())

    # calls alternating between two programs make no function per hit
    for _ in range(4):
        f(x, y), f(x.double(), y.double())
    assert f._direct is None
    f(x, y), f(x, y)
    assert f._direct is not None


OUTPUTS_SHARING_MEMORY = {
    "x * 1 is x": lambda x: x * 1,
    "x / 1 and x - 0": lambda x: (x / 1, x - 0),
    "two equal expressions": lambda x: (x * 2, x * 2),
    "a constant": lambda x: fg.ones(2, 3) + 0,
    "a slice times 1": lambda x: x[1:] * 1,
    "a broadcast times 1": lambda x: x[0].expand(4, 3) * 1,
    "a value and its view": lambda x: (lambda y: (y, y.t(), y * 1))(x * 2),
    "rows gathered and their view": lambda x: (lambda y: (y, y.t()))(x[fg.tensor([1, 0])]),
    "a value, its broadcast, itself": lambda x: (lambda y: (y, y.expand(2, 2, 3), y))(x * 2),
    "views before their value": lambda x: (lambda y: (y.t()[0], y.t(), y))(x * 1),
    "the input": lambda x: x,
    "the input changed in place": lambda x: x.mul_(3),  # given as it is, not as a view
    "views of the input": lambda x: (x.t(), x[1], x.reshape(3, 2), x.detach(), x[0][1:]),
    "a view of a view given": lambda x: x.t()[1],
    "views of one intermediate": lambda x: (lambda y: (y.t(), y.reshape(6), y[0]))(x * 2),
    "views of a reduction": lambda x: (lambda m: (m.transpose(-1, 0), m.reshape(1, 1)))(x.amin()),
    "views of a constant": lambda x: (lambda c: (c.t() + 0, c.t(), c[1]))(fg.ones(2, 3)),
}


@pytest.mark.parametrize("native", [False, True], ids=["tiny kernels in numpy", "all native"])
@pytest.mark.parametrize("name", OUTPUTS_SHARING_MEMORY)
def test_writing_into_an_output_changes_what_it_changes_eagerly(name, native, monkeypatch):
    """Outputs share memory with the inputs, each other or a constant
    exactly where eager's do: simplification makes x * 1 the value x, two
    equal expressions one value, numpy's view steps return views (each
    output a tensor of its own eagerly); and an input, or a view of one,
    returned is that input or a view of it again, so writes reach it, as
    do views of one base returned without it (a kernel computes a view
    step as a copy, so they are views of it taken again)."""
    from fusegrad.runtime import launch

    if native:
        monkeypatch.setattr(launch, "SMALL_WORK", 0)
    fn = OUTPUTS_SHARING_MEMORY[name]

    def after_writing(f, k):
        base = fg.ones(3, 2)
        x = base if "in place" in name else base.t()  # a view given: its writes reach base
        seen = []
        for _ in range(3):
            outputs = f(x)
            outputs = outputs if isinstance(outputs, tuple) else (outputs,)
            seen.append([o.tolist() for o in outputs])  # an earlier call's write must not show
            try:
                outputs[k].fill_(5)
            except RuntimeError as refused:  # into a broadcast, as PyTorch refuses
                seen.append(str(refused))
            seen.append([base.tolist()] + [o.tolist() for o in outputs])
            seen.append([o is outputs[k] for o in outputs])
            base.copy_(fg.arange(6.0).reshape(3, 2))
        return seen

    outputs = fn(fg.ones(3, 2) if "in place" in name else fg.ones(2, 3))
    for k in range(len(outputs) if isinstance(outputs, tuple) else 1):
        assert after_writing(fg.jit(fn), k) == after_writing(fn, k)


W_GLOBAL = fg.ones(2)


def _reads_the_global(x):
    return x * W_GLOBAL


def test_rebinding_a_global_or_a_module_parameter_is_seen_on_the_next_call():
    global W_GLOBAL
    f = fg.jit(_reads_the_global)
    assert f(fg.ones(2)).tolist() == [1.0, 1.0]
    W_GLOBAL = fg.full((2,), 3.0)
    assert f(fg.ones(2)).tolist() == [3.0, 3.0]
    W_GLOBAL = fg.ones(3)  # another shape: retraced, as eager would compute
    assert f(fg.ones(3)).tolist() == [1.0, 1.0, 1.0]

    model = nn.Linear(2, 1)
    step = fg.jit(lambda x: model(x).sum())
    x = fg.ones(1, 2)
    step(x)
    with fg.no_grad():
        model.weight = nn.Parameter(fg.zeros(1, 2))
        model.bias = nn.Parameter(fg.zeros(1))
    assert step(x).item() == 0.0
    assert step.cache_info().misses == 1  # read from where it lives, not traced again


def test_a_tensor_two_places_held_is_retraced_for_once_they_differ():
    model = nn.Linear(2, 1, bias=False)
    opt = fg.optim.SGD(model.parameters(), lr=0.5)

    def step(x):
        opt.zero_grad()
        loss = model(x).sum()
        loss.backward()
        opt.step()
        return loss

    compiled = fg.jit(step)
    weights = []
    for function in (step, compiled):
        with fg.no_grad():
            model.weight = nn.Parameter(fg.ones(1, 2))
        opt.param_groups[0]["params"] = [model.weight]
        function(fg.ones(1, 2))
        with fg.no_grad():  # the optimizer keeps the old parameter, as in PyTorch
            model.weight = nn.Parameter(fg.full((1, 2), 2.0))
        function(fg.ones(1, 2))
        weights.append((model.weight.tolist(), opt.param_groups[0]["params"][0].tolist()))
    assert weights[0] == weights[1]


@pytest.mark.parametrize(
    "make", [fg.optim.Adam, fg.optim.AdamW, fg.optim.RMSprop, fg.optim.Adagrad]
)
def test_an_optimizer_creating_its_state_in_the_first_compiled_step_trains_as_eagerly(make):
    """The first step creates the state in Python; that trace's program then
    guards a state that no longer holds, so the call keeps the trace's eager
    result and the next call traces with the state (once this undid the
    state: every compiled step started Adam over)."""
    fg.manual_seed(0)
    x, y = fg.randn(16, 2), fg.randint(0, 2, (16,))
    assert_trains_as_eagerly(
        lambda: nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 2)),
        lambda params: make(params, lr=0.01),
        minimizing(lambda model, x, y: F.cross_entropy(model(x), y)),
        [(x, y)] * 8,
        rtol=1e-6,
        atol=1e-7,
    )


@pytest.mark.parametrize(
    "schedule",
    [
        lambda opt: fg.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5),
        lambda opt: fg.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=30),
        lambda opt: fg.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=30),
    ],
    ids=["step", "cosine", "one_cycle"],
)
def test_a_learning_rate_schedule_changes_no_program(schedule):
    """The optimizer's numbers are inputs of the compiled step: 30 steps
    under a per-step schedule compile at most twice (the second for the
    state the first step creates) and match eager."""
    schedulers = {}

    def make_optimizer(params):
        opt = fg.optim.Adam(params, lr=0.01, betas=(0.9, 0.99))
        schedulers[id(opt)] = schedule(opt)
        return opt

    fg.manual_seed(0)
    x, y = fg.randn(32, 3), fg.randn(32, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # never falls back to eager
        _, _, compiled = assert_trains_as_eagerly(
            lambda: nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)),
            make_optimizer,
            minimizing(lambda model, x, y: F.mse_loss(model(x), y)),
            [(x, y)] * 30,
            rtol=1e-5,
            atol=1e-6,
            after_step=lambda opt: schedulers[id(opt)].step(),
        )
    assert compiled.cache_info().misses <= 2


def test_pythons_random_inside_a_jit_function_draws_as_eagerly():
    """PyTorch's dynamic_net example: a random number of layers each call,
    with random scales; compiled calls draw again, consuming Python's
    generator as the eager calls do."""
    import random

    def net(x):
        h = x * 2
        for _ in range(random.randint(0, 3)):
            h = fg.tanh(h) * random.uniform(0.5, 1.5)
        return h.sum() + float(np.random.randn() > 0) + np.random.randint(5)

    x = fg.ones(3)
    results = []
    for function in (net, fg.jit(net)):
        random.seed(0)
        np.random.seed(0)
        results.append([function(x).item() for _ in range(12)] + [random.random()])
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)


def test_a_shuffle_inside_a_jit_function_shuffles_on_every_call():
    import random

    order = list(range(5))

    def pick(x):
        random.shuffle(order)
        return x[order[0]]

    results = []
    for function in (pick, fg.jit(pick)):
        random.seed(1)
        order[:] = range(5)
        results.append([function(fg.arange(5.0)).item() for _ in range(8)] + [list(order)])
    assert results[1] == results[0]


def test_a_draw_jit_cannot_see_again_is_a_clear_error():
    from random import random as draw  # bound before the call: not wrapped

    with pytest.raises(fg.TracingError, match="bound before the call"):
        fg.jit(lambda x: x * draw())(fg.ones(2))


def test_the_data_update_idiom_compiles():
    """makemore's ``p.data += -lr * p.grad``: the in-place update writes p's
    storage, so assigning ``.data`` back is no storage swap."""
    results = []
    for compiled in (False, True):
        p = nn.Parameter(fg.ones(3))

        def step(p=p):
            loss = (p * p).sum()
            loss.backward()
            p.data += -0.1 * p.grad
            p.grad = None
            return loss

        run = fg.jit(step) if compiled else step
        results.append(([run().item() for _ in range(4)], p.tolist()))
    assert results[0] == results[1]


@pytest.mark.parametrize(
    "make",
    [
        lambda: fg.randn(3, 2),
        lambda: fg.randn(5),  # an odd count: Box-Muller's pairs cut to size
        lambda: fg.rand(3, 2),
        lambda: fg.normal(0.0, 1.0, size=(3, 2)),
        lambda: fg.randint(0, 4, (3, 2)).float(),
        lambda: fg.empty(3, 2).normal_(),
    ],
    ids=["randn", "randn-odd", "rand", "normal", "randint", "normal_"],
)
def test_the_makemore_update_compiles_on_sampled_parameters(make):
    """``p.data += -lr * p.grad`` on a parameter a sampler made (no view,
    though the sampler's last step may be one)."""
    fg.manual_seed(0)
    w = make().requires_grad_()
    twin = w.detach().clone().requires_grad_()
    assert w._base is None
    x = fg.randn(4, w.shape[0])

    def step(w, x):
        loss = (x @ w).tanh().sum()
        w.grad = None
        loss.backward()
        w.data += -0.1 * w.grad
        return loss

    compiled = fg.jit(step)
    for _ in range(3):
        np.testing.assert_allclose(float(compiled(w, x)), float(step(twin, x)), rtol=1e-5)
    np.testing.assert_allclose(w.detach().numpy(), twin.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_a_tiny_kernel_approximating_after_its_reduction_runs_compiled():
    """``m ** m`` of ``m = x.max()`` is computed after the kernel's reduction (a
    row equation). Tiny kernels run in numpy unless they approximate: that
    must count row equations too, or the forward's power has numpy's bits
    while the backward, computing it again in a kernel, has the kernel's; the
    min's tie test between the two then failed and its gradient was 0/0."""
    from fusegrad.ir.graph import evaluate
    from fusegrad.runtime.executor import Executor

    def program(x):
        m = x.max()
        return (m**m).amin(dim=-1, keepdim=True)

    x = np.random.default_rng(1133617932).standard_normal((1, 3, 1, 1))  # the fuzzer's find
    traced = fg.jit(program).lower(fg.tensor(x, requires_grad=True)).program
    first_residual = traced.num_outputs + traced.num_extras
    cotangent = [np.array(-1.3)]
    want = evaluate(traced.backward, evaluate(traced.forward, [x])[first_residual:] + cotangent)
    values = Executor(traced.forward).run([x])
    got = Executor(traced.backward).run(list(values[first_residual:]) + cotangent)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    assert np.isfinite(got[0]).all()


def test_a_trace_frees_the_values_the_function_drops():
    """Tracing holds no intermediate the function let go of (holding them all
    made every new array fresh memory: a GPT-mini step's trace took 3x its
    eager run), and a dead value's id, given to a new tensor, is not read
    as the old value's: the program equals eager mode on calls 1, 2 and 3."""
    import weakref

    freed = []

    def step(x):
        total = x.sum() * 0.0
        for k in range(40):  # temporaries of changing shapes: ids are reused
            temporary = x[: k % 7 + 1] * float(k) + 1.0
            watched = weakref.ref(temporary)
            total = total + temporary.tanh().sum()
            del temporary
            freed.append(watched() is None)
        return total

    x = fg.tensor(np.linspace(-1.0, 1.0, 24).reshape(8, 3))
    want = step(x).item()
    compiled = fg.jit(step)
    freed.clear()
    results = [compiled(x).item()]  # the trace runs the function
    assert len(freed) == 40 and all(freed)
    results += [compiled(x).item(), compiled(x).item()]
    np.testing.assert_allclose(results, [want] * 3, rtol=1e-12)


def test_a_compile_phase_counts_its_own_time_only(monkeypatch):
    """Machine code compiled inside the trace (eager operations run
    natively) is the machine code's time, not also the trace's: the log's
    phases add up to the call's time, none negative."""
    from fusegrad import timing

    clock = iter(range(100))
    monkeypatch.setattr(timing.time, "perf_counter", lambda: float(next(clock)))
    monkeypatch.setattr(timing, "seconds", timing.Counter())
    with timing.phase("trace"):  # opens at 0
        with timing.phase("machine code"):  # 1 to 2
            pass
        with timing.phase("machine code"):  # 3 to 4
            pass
    # closes at 5
    assert timing.seconds == {"trace": 3.0, "machine code": 2.0}


def test_a_grad_set_to_none_is_set_on_every_call():
    """Setting ``.grad`` to None computes nothing, yet is a write every call
    makes (the program has no extra output for it), on the direct path too."""

    @fg.jit
    def f(x, w):
        w.grad = None
        return x * 2

    w = fg.ones(2, requires_grad=True)
    for _ in range(4):
        w.grad = fg.ones(2)
        f(fg.ones(2), w)
        assert w.grad is None


def test_a_returned_value_the_function_retains_the_gradient_of_gets_it():
    @fg.jit
    def f(x):
        y = x * 2
        y.retain_grad()
        return y

    for _ in range(3):  # the trace, then the program
        y = f(fg.tensor([1.0, 2.0], requires_grad=True))
        y.sum().backward()
        assert y.retains_grad and y.grad.tolist() == [1.0, 1.0]


def test_the_gradient_at_an_output_others_are_computed_from_is_refused_not_partial():
    """Eagerly, the gradient arriving at h also holds what flowed back through
    the loss computed from it; a compiled call's backward passes that straight
    to x, so reading it at h (where allow_unused=True gave None) raises."""

    @fg.jit
    def f(x):
        h = x * 3
        return (h * h).sum(), h

    x = fg.tensor([1.0, 2.0], requires_grad=True)
    for _ in range(3):
        loss, h = f(x)
        for allow_unused in (False, True):
            with pytest.raises(RuntimeError, match="computed from it inside the call"):
                fg.autograd.grad(loss, h, retain_graph=True, allow_unused=allow_unused)
        assert fg.autograd.grad(h.sum(), h, retain_graph=True)[0].tolist() == [1.0, 1.0]
        h.register_hook(lambda g: g * 2)
        with pytest.raises(RuntimeError, match="computed from it inside the call"):
            loss.backward(retain_graph=True)
        x.grad = None
    loss, _ = f(x)
    loss.backward()  # reading nothing at h: as eagerly
    assert x.grad.tolist() == [18.0, 36.0]


def test_a_list_only_appended_to_compiles_once():
    """Its items are never read, so they guard nothing: a loss history does
    not make every call trace again (a list that is also read does)."""
    history, seen = [], []

    @fg.jit
    def step(x):
        loss = (x * x).sum()
        history.append(loss.item())
        return loss

    @fg.jit
    def reads(x):
        seen.append(x.sum().item())
        return x * len(seen)

    for k in range(6):
        step(fg.full((2,), float(k)))
        assert reads(fg.ones(2)).tolist() == [k + 1.0, k + 1.0]
    assert history == [2.0 * k * k for k in range(6)] and type(history[-1]) is float
    assert step.cache_info().misses == 1
    assert reads.cache_info().misses == 6


def test_numbers_the_function_changes_become_inputs():
    """A step counter and a learning rate a scheduler decays, changed by the
    step itself: guarded by value, every call would trace again; from the
    trace after the first change on they are inputs, read and written back
    by the program, and a branch on them is a guard on its outcome."""
    fg.manual_seed(0)
    model = fg.nn.Linear(3, 1)
    opt = fg.optim.SGD(model.parameters(), lr=0.1)
    scheduler = fg.optim.lr_scheduler.StepLR(opt, 3, 0.5)

    @fg.jit
    def step(x):
        opt.zero_grad()
        loss = model(x).sum()
        loss.backward()
        opt.step()
        scheduler.step()
        return loss

    for _ in range(12):
        step(fg.ones(2, 3))
    assert scheduler.last_epoch == 12 and type(scheduler.last_epoch) is int
    assert opt.param_groups[0]["lr"] == 0.1 * 0.5**4
    assert step.cache_info().misses <= 4 and step.cache_info().hits >= 8


@pytest.mark.filterwarnings("ignore:fusegrad.jit")
def test_a_hook_on_an_argument_runs_once_when_a_new_shape_traces_again():
    # program fuzzer seed 73, program 313: the retrace for the new shape was
    # undone and run eagerly, but the hook its trace registered stayed
    def step(x, y):
        h = x + y
        with fg.no_grad():
            x.mul_(0.5)
        x.register_hook(lambda g: g * 2.0)
        (h * h).sum().backward(retain_graph=True)
        return float(x.grad.sum())

    def arguments(rows):
        rng = np.random.default_rng(rows)
        x = fg.tensor(rng.standard_normal((rows, 2)), requires_grad=True)
        return x, fg.tensor(rng.standard_normal((rows, 2)))

    compiled = fg.jit(step)
    for rows in (3, 4):
        assert compiled(*arguments(rows)) == pytest.approx(step(*arguments(rows)))


def test_the_backward_of_an_earlier_compiled_call_is_recorded_by_a_trace():
    # the compiled backward ran its own program, unseen by the trace, whose
    # result then read as a captured constant: later calls got the first call's
    square_sin = fg.jit(lambda x: (x * x).sin())
    x = fg.randn(3, requires_grad=True)
    y = square_sin(x)
    vjp = fg.jit(lambda v: fg.autograd.grad(y, x, v, retain_graph=True)[0])
    for seed in range(3):
        v = fg.tensor(np.random.default_rng(seed).standard_normal(3), dtype=fg.float32)
        want = fg.autograd.grad(y, x, v, retain_graph=True)[0]
        np.testing.assert_allclose(vjp(v).numpy(), want.numpy(), rtol=1e-6)
