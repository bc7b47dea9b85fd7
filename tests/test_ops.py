"""The op table (tests/op_table.py) through one parametrized suite."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.eager.plain import PlainValue
from fusegrad.ir import primitives

from op_table import OPS, OPS_BY_NAME

CASES = [
    pytest.param(op, sample, id=f"{op.name}-{sample!r}") for op in OPS for sample in op.samples
]
DIFF_CASES = [c for c in CASES if c.values[0].differentiable]
FINITE_DIFFERENCE_CASES = [c for c in DIFF_CASES if c.values[0].finite_differences]
SECOND_CASES = [c for c in FINITE_DIFFERENCE_CASES if c.values[0].second_order]
JIT_CASES = [c for c in CASES if c.values[0].jit]


def _is_float_array(a):
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def _float_positions(op, sample):
    if op.float_inputs is not None:
        return op.float_inputs
    return tuple(i for i, a in enumerate(sample.args) if _is_float_array(a))


def _tensors(op, sample, dtype, requires_grad=False):
    out = []
    for i, a in enumerate(sample.args):
        if not isinstance(a, np.ndarray):
            out.append(a)
        elif i in _float_positions(op, sample):
            out.append(fg.tensor(a, dtype=dtype, requires_grad=requires_grad))
        else:
            out.append(fg.tensor(a))
    return out


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op,sample", CASES)
def test_values_match_numpy(op, sample, dtype):
    result = op.op(*_tensors(op, sample, dtype), **sample.kwargs)
    expected = np.asarray(op.ref(*sample.args, **sample.kwargs))
    assert tuple(result.shape) == expected.shape
    if expected.dtype.kind == "f":
        assert result.dtype is dtype
        rtol = op.rtol32 if dtype is fg.float32 else 1e-12
        np.testing.assert_allclose(result.numpy(), expected, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(result.numpy(), expected)


@pytest.mark.parametrize("op,sample", CASES)
def test_differentiable_flag(op, sample):
    """The flag holds both ways: differentiable ops give outputs requiring grad, others don't."""
    args = _tensors(op, sample, fg.float64, requires_grad=True)
    assert op.op(*args, **sample.kwargs).requires_grad == op.differentiable


def _as_function(op, sample):
    positions = _float_positions(op, sample)
    args = _tensors(op, sample, fg.float64)

    def fn(*diff_args):
        full = list(args)
        for p, a in zip(positions, diff_args):
            full[p] = a
        return op.op(*full, **sample.kwargs)

    diff_inputs = tuple(
        fg.tensor(sample.args[p], dtype=fg.float64, requires_grad=True) for p in positions
    )
    return fn, diff_inputs


@pytest.mark.parametrize("op,sample", FINITE_DIFFERENCE_CASES)
def test_gradients_match_finite_differences(op, sample):
    fn, inputs = _as_function(op, sample)
    assert fg.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("op,sample", SECOND_CASES)
def test_second_derivatives_match_finite_differences(op, sample):
    fn, inputs = _as_function(op, sample)
    assert fg.autograd.gradgradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-4)


def _gradients(op, sample, dtype):
    args = _tensors(op, sample, dtype, requires_grad=True)
    out = op.op(*args, **sample.kwargs)
    seed = fg.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape), dtype=dtype)
    leaves = [a for a in args if isinstance(a, fg.Tensor) and a.requires_grad]
    return fg.autograd.grad(out, leaves, seed, allow_unused=True), out.grad_fn


@pytest.mark.parametrize("op,sample", DIFF_CASES)
def test_backward_on_plain_values_equals_backward_on_tensors(op, sample, monkeypatch):
    """Without create_graph the rules run on plain values; with tensors they
    must give the same bits."""
    asked = []
    monkeypatch.setattr(PlainValue, "usable", staticmethod(lambda: asked.append(1) or True))
    on_plain, node = _gradients(op, sample, fg.float32)
    assert asked or node is None  # an op that returns its input records nothing
    monkeypatch.setattr(PlainValue, "usable", staticmethod(lambda: False))
    on_tensors, _ = _gradients(op, sample, fg.float32)
    for a, b in zip(on_plain, on_tensors):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.dtype is b.dtype
            np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("dtype", [fg.float16, fg.bfloat16], ids=["f16", "bf16"])
def test_reduced_float_backward_keeps_the_saved_output_dtype(dtype):
    """A saved output was rebuilt from its float32 storage as float32, which
    a rule on plain values (no promotion) cannot mix with a float16 cotangent."""
    x = fg.tensor([-2.0, -0.5, 0.0, 0.75, 3.0], dtype=dtype, requires_grad=True)
    (x.tanh() * x.sigmoid()).sum().backward()
    assert x.grad.dtype is dtype
    plain_grad = x.grad.float().numpy()
    x.grad = None
    with fg.enable_grad():
        (grad,) = fg.autograd.grad((x.tanh() * x.sigmoid()).sum(), x, create_graph=True)
    np.testing.assert_allclose(plain_grad, grad.float().detach().numpy(), rtol=1e-2)


@pytest.mark.parametrize("op,sample", DIFF_CASES)
def test_float32_gradients_agree_with_float64(op, sample):
    grads = {}
    for dtype in (fg.float32, fg.float64):
        args = _tensors(op, sample, dtype, requires_grad=True)
        out = op.op(*args, **sample.kwargs)
        seed = fg.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape), dtype=dtype)
        leaves = [a for a in args if isinstance(a, fg.Tensor) and a.requires_grad]
        grads[dtype] = fg.autograd.grad(out, leaves, seed)
        for g in grads[dtype]:
            assert g.dtype is dtype
    for g32, g64 in zip(grads[fg.float32], grads[fg.float64]):
        np.testing.assert_allclose(g32.numpy(), g64.numpy(), rtol=1e-4, atol=1e-4)


def test_op_table_exercises_every_primitive_and_shape_rules_agree_with_numpy(monkeypatch):
    seen = set()
    original = primitives.bind

    def recording_bind(prim, args, params):
        seen.add(prim.name)
        out = original(prim, args, params)
        values = (fg.Tensor, PlainValue)  # a backward without create_graph runs on plain values
        scalar_dtype = primitives.number_dtype([a.dtype for a in args if isinstance(a, values)])
        tensors = [a if isinstance(a, values) else fg.tensor(a, dtype=scalar_dtype) for a in args]
        shape, dtype = prim.shape_rule(*tensors, **params)
        assert (tuple(shape), dtype) == (tuple(out.shape), out.dtype), prim.name
        return out

    monkeypatch.setattr(primitives, "_dispatch", recording_bind)
    for op in OPS:
        for sample in op.samples:
            args = _tensors(op, sample, fg.float64, requires_grad=op.differentiable)
            out = op.op(*args, **sample.kwargs)
            if out.requires_grad:
                leaves = [a for a in args if isinstance(a, fg.Tensor) and a.requires_grad]
                grads = fg.autograd.grad(out.sum(), leaves, create_graph=True, allow_unused=True)
                for g in grads:
                    if g is not None and g.requires_grad:
                        fg.autograd.grad(g.sum(), leaves, retain_graph=True, allow_unused=True)
    fg.cat([fg.ones(2, requires_grad=True), fg.ones(1)]).sum().backward()  # concatenate
    fg.ones(3).to(fg.float64)  # convert
    fg.jit(lambda t: t.detach() + 1)(fg.ones(2))  # stop_gradient, recorded only in traces
    fg.jit(lambda t, s: t * s)(fg.ones(2, dtype=fg.bfloat16), 0.7)  # unrounded: a traced number
    hvp = fg.jit(lambda x, d: fg.func.jvp(fg.func.grad(lambda y: y.sin().sum()), (x,), (d,)))
    hvp(fg.ones(2), fg.ones(2))  # forward_only: a transform's detach in a trace
    (fg.ones(3) > 0) & (fg.ones(3) > 1) | ~(fg.ones(3) > 0)  # logical ops
    fg.randperm(4)  # random_bits, argsort: the samplers' primitives
    # collectives need a process group: tests/test_distributed.py covers them
    collectives = {name for name, p in primitives.PRIMITIVES.items() if p.collective}
    missing = set(primitives.PRIMITIVES) - seen - collectives
    assert not missing, f"primitives no op in the table reaches: {sorted(missing)}"


SPEC_OPS = (
    "add sub mul div pow neg matmul_op abs exp log log1p expm1 sqrt rsqrt sin cos tan "
    "tanh sigmoid relu gelu softplus erf clamp maximum minimum where lt le gt ge eq ne "
    "sum mean prod max min amax amin argmax argmin norm var std logsumexp all any "
    "softmax log_softmax matmul mm bmm dot reshape view flatten permute transpose t "
    "unsqueeze squeeze expand broadcast_to cat stack split chunk getitem_basic "
    "getitem_array getitem_mask setitem index_select gather mse_loss cross_entropy "
    "linear layer_norm"
).split()


def test_op_table_covers_every_op_in_spec():
    assert [name for name in SPEC_OPS if name not in OPS_BY_NAME] == []


def _random_like(tensors, seed):
    rng = np.random.default_rng(seed)
    return tuple(fg.tensor(rng.standard_normal(tuple(t.shape)), dtype=fg.float64) for t in tensors)


@pytest.mark.parametrize("op,sample", FINITE_DIFFERENCE_CASES)
def test_jvp_matches_finite_differences_and_the_vjp(op, sample):
    """Forward mode: J u against central differences along u, and
    <v, J u> against <J^T v, u> by reverse mode, for random u and v."""
    fn, inputs = _as_function(op, sample)
    primals = tuple(x.detach() for x in inputs)
    u = _random_like(primals, 0)
    out, jvp_out = fg.func.jvp(fn, primals, u)
    eps = 1e-6
    plus = fn(*(p + eps * d for p, d in zip(primals, u)))
    minus = fn(*(p - eps * d for p, d in zip(primals, u)))
    differences = (plus.numpy() - minus.numpy()) / (2 * eps)
    np.testing.assert_allclose(jvp_out.numpy(), differences, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(out.numpy(), fn(*primals).numpy())
    (v,) = _random_like((out,), 1)
    vjps = fg.autograd.grad(fn(*inputs), inputs, v, allow_unused=True)
    transposed = sum(float((g * d).sum()) for g, d in zip(vjps, u) if g is not None)
    np.testing.assert_allclose(float((v * jvp_out).sum()), transposed, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("op,sample", SECOND_CASES)
def test_forward_over_reverse_equals_reverse_over_reverse(op, sample):
    """The jvp of a vjp (saved values and outputs keep their tangents)
    against the gradient of the gradient, along random directions."""
    fn, inputs = _as_function(op, sample)
    primals = tuple(x.detach() for x in inputs)
    (v,) = _random_like((fn(*primals),), 1)
    u = _random_like(primals, 0)

    def vjp_of(*xs):
        _, vjp_fn = fg.func.vjp(fn, *xs)
        return vjp_fn(v)

    _, forward = fg.func.jvp(vjp_of, primals, u)
    grads = fg.autograd.grad(fn(*inputs), inputs, v, create_graph=True, allow_unused=True)
    linked = [(g, d) for g, d in zip(grads, u) if g is not None and g.requires_grad]
    reverse = [None] * len(inputs)
    if linked:
        reverse = fg.autograd.grad(
            [g for g, _ in linked], inputs, [d for _, d in linked], allow_unused=True
        )
    for f, r in zip(forward, reverse):
        expected = np.zeros(f.shape) if r is None else r.numpy()
        np.testing.assert_allclose(f.numpy(), expected, rtol=1e-7, atol=1e-9)


JIT_JVP_CASES = [c for c in DIFF_CASES if c.values[0].jit][::5]


@pytest.mark.parametrize("op,sample", JIT_JVP_CASES)
def test_a_compiled_jvp_matches_the_eager_one(op, sample):
    fn, inputs = _as_function(op, sample)
    primals = tuple(x.detach() for x in inputs)
    count = len(primals)
    compiled = fg.jit(lambda *xs: fg.func.jvp(fn, xs[:count], xs[count:]))
    for seed in (0, 1, 2):
        u = _random_like(primals, seed)
        expected = fg.func.jvp(fn, primals, u)
        for got, want in zip(compiled(*primals, *u), expected):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-12)
