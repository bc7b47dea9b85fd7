"""Forward-mode AD: dual tensors (autograd.forward_ad), the forward-mode
transforms of fusegrad.func and autograd.functional, their compositions with
reverse mode and jit. Each op's JVP rule is checked over the op table in
tests/test_ops.py."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.autograd.forward_ad as fwAD
from fusegrad.autograd import functional as AF
from fusegrad.eager import tensor as eager_tensor
from fusegrad.func import grad, hessian, jacfwd, jacrev, jvp, linearize, vjp


def _t(values):
    return fg.tensor(values, dtype=fg.float64)


X = _t([0.5, -1.0, 2.0])
V = _t([1.0, 0.5, -2.0])


def f(x):
    return (x.sin() * x.exp()).sum() + x.cumprod(0).sum() + x.max()


def vector_f(x):
    return fg.stack([x.tanh().sum(), (x * x).prod(), x.logsumexp(0)])


def _finite_difference(fn, x, v, eps=1e-6):
    return (fn(x + eps * v).numpy() - fn(x - eps * v).numpy()) / (2 * eps)


# ------------------------------------------------------------------ forward_ad


def test_make_dual_and_unpack_dual():
    with fwAD.dual_level() as level:
        assert level == 0
        dual = fwAD.make_dual(X, V)
        primal, tangent = fwAD.unpack_dual(dual)
        assert tangent is V
        np.testing.assert_array_equal(primal.numpy(), X.numpy())
        assert fwAD.unpack_dual(primal).tangent is None
        out = fwAD.unpack_dual(dual.sin() * 2)
        assert out._fields == ("primal", "tangent")
        np.testing.assert_allclose(out.tangent.numpy(), 2 * np.cos(X.numpy()) * V.numpy())
        assert fwAD.unpack_dual(X).tangent is None
    assert fwAD.unpack_dual(dual) == (dual, None)  # the level's tangents are gone
    assert eager_tensor.dual_levels is None  # no level: eager ops check one flag


def test_enter_and_exit_dual_level():
    assert fwAD.enter_dual_level() == 0
    dual = fwAD.make_dual(X, V)
    fwAD.exit_dual_level()
    assert dual._tangents == {}
    with pytest.raises(RuntimeError, match="no level exists"):
        fwAD.exit_dual_level()


def test_forward_ad_errors_are_pytorchs():
    with pytest.raises(RuntimeError, match="no level exists, make sure to enter_dual_level"):
        fwAD.make_dual(X, V)
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match=r"Tensor is of size \[3\] while the given"):
            fwAD.make_dual(X, fg.ones(2, dtype=fg.float64))
        with pytest.raises(ValueError, match="Expected tangent to be floating point"):
            fwAD.make_dual(X, fg.ones(3, dtype=fg.int64))
        with pytest.raises(ValueError, match="Expected primal to be floating point"):
            fwAD.make_dual(fg.ones(3, dtype=fg.int64), V)
        with pytest.raises(RuntimeError, match="Invalid level given to _make_dual"):
            fwAD.make_dual(X, V, level=3)
        with pytest.raises(RuntimeError, match="not the last one that was created"):
            with fwAD.dual_level():
                fwAD.exit_dual_level(level=0)
    assert eager_tensor.dual_levels is None


def test_a_tangent_of_another_float_dtype_takes_the_primals():
    with fwAD.dual_level():
        dual = fwAD.make_dual(X.float(), V)
        assert fwAD.unpack_dual(dual).tangent.dtype is fg.float32


def test_nested_levels_give_mixed_second_derivatives():
    with fwAD.dual_level() as outer:
        x = fwAD.make_dual(X, V)
        with fwAD.dual_level() as inner:
            u = _t([0.0, 1.0, 1.0])
            y = fwAD.make_dual(x, u, level=inner)
            out = (y * y * y).sum()
            inner_tangent = fwAD.unpack_dual(out, level=inner).tangent
            assert fwAD.unpack_dual(out, level=outer).tangent is not None
        second = fwAD.unpack_dual(inner_tangent, level=outer).tangent
    x, v, u = X.numpy(), V.numpy(), u.numpy()
    np.testing.assert_allclose(inner_tangent.detach().numpy(), (3 * x * x * u).sum())
    np.testing.assert_allclose(second.numpy(), (6 * x * v * u).sum())


def test_in_place_ops_on_duals_update_the_tangent():
    with fwAD.dual_level():
        x = fwAD.make_dual(_t([1.0, 2.0]), _t([3.0, 4.0]))
        y = fg.zeros(2, dtype=fg.float64)
        y.add_(x)  # y had no tangent: it gets x's
        y.mul_(x)
        np.testing.assert_array_equal(fwAD.unpack_dual(y).tangent.numpy(), [6.0, 16.0])
        z = fg.zeros(4, dtype=fg.float64)
        z[1:3] = x
        np.testing.assert_array_equal(fwAD.unpack_dual(z).tangent.numpy(), [0, 3, 4, 0])
        w = fg.zeros(4, dtype=fg.float64)
        w[:2].copy_(x)  # through a view: the base's tangent
        np.testing.assert_array_equal(fwAD.unpack_dual(w).tangent.numpy(), [3, 4, 0, 0])
        x.unsqueeze_(0)
        assert fwAD.unpack_dual(x).tangent.shape == (1, 2)


def test_detach_drops_the_tangent_and_clone_keeps_it():
    with fwAD.dual_level():
        x = fwAD.make_dual(X, V)
        assert fwAD.unpack_dual(x.detach()).tangent is None
        assert fwAD.unpack_dual(x.clone()).tangent is not None


class _Cube(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x**2

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return t * 3 * x**2 + 100.0  # not the forward's derivative: shows which ran


class _Double(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_a_custom_function_gives_tangents_by_its_jvp():
    with fwAD.dual_level():
        x = fwAD.make_dual(X, V)
        tangent = fwAD.unpack_dual(_Cube.apply(x)).tangent
        np.testing.assert_allclose(tangent.numpy(), V.numpy() * 3 * X.numpy() ** 2 + 100)
        with pytest.raises(NotImplementedError, match="You must implement the jvp function"):
            _Double.apply(x)
        assert fwAD.unpack_dual(_Double.apply(X)).tangent is None


def test_gradcheck_checks_forward_mode_too():
    def pair(x):
        return x.cumprod(0), x.sin().sum()

    x = X.clone().requires_grad_()
    assert fg.autograd.gradcheck(pair, (x,), check_forward_ad=True)

    class WrongJvp(_Double):
        @staticmethod
        def jvp(ctx, t):
            return t * 3

    assert fg.autograd.gradcheck(WrongJvp.apply, (x,))
    with pytest.raises(fg.autograd.GradcheckError, match="computed with forward mode mismatch"):
        fg.autograd.gradcheck(WrongJvp.apply, (x,), check_forward_ad=True)


# ------------------------------------------------------------- func transforms


def test_jvp_matches_finite_differences():
    out, tangent = jvp(f, (X,), (V,))
    np.testing.assert_allclose(out.numpy(), f(X).numpy())
    np.testing.assert_allclose(tangent.numpy(), _finite_difference(f, X, V), rtol=1e-6)


def test_jvp_of_pytrees_with_aux():
    def fn(pair, scale):
        a, b = pair["a"], pair["b"]
        return (a * b * scale, a.sum()), a.detach()

    primals = ({"a": X, "b": X.cos()}, _t(2.0))
    tangents = ({"a": V, "b": V}, _t(0.0))
    (out, total), (jvp_out, jvp_total), aux = jvp(fn, primals, tangents, has_aux=True)
    x, v = X.numpy(), V.numpy()
    np.testing.assert_allclose(out.numpy(), 2 * x * np.cos(x))
    np.testing.assert_allclose(total.numpy(), x.sum())
    np.testing.assert_allclose(jvp_out.numpy(), 2 * (v * np.cos(x) + x * v))
    np.testing.assert_allclose(jvp_total.numpy(), v.sum())
    np.testing.assert_array_equal(aux.numpy(), x)


def test_an_output_independent_of_the_inputs_has_a_zero_tangent():
    _, tangent = jvp(lambda x: fg.ones(2, dtype=fg.float64), (X,), (V,))
    np.testing.assert_array_equal(tangent.numpy(), [0.0, 0.0])


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: jvp(f, X, V), "Expected primals to be a tuple"),
        (lambda: jvp(f, (X,), [V]), "Expected primals and tangents to have the same python"),
        (lambda: jvp(f, (1.0,), (V,)), "Expected primals to only contain Tensors"),
        (lambda: jvp(f, (), ()), "Expected primals to contain at least one Tensor"),
        (lambda: jvp(lambda x: 1.0, (X,), (V,)), "expected f\\(\\*primals\\) to return only"),
        (lambda: jvp(lambda x: x, (X,), (V,), has_aux=True), "should be a tuple: \\(output, aux"),
        (lambda: jvp(lambda x: (x, 1), (X,), (V,), has_aux=True), "Expected tensors, got"),
        (lambda: jacfwd(f, randomness="x")(X), "Only allowed values for randomness"),
        (lambda: linearize(f, X)[1](fg.ones(2)), "doesn't match the shape"),
    ],
)
def test_transform_errors_are_pytorchs(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


def test_linearize():
    out, jvp_fn = linearize(vector_f, X)
    np.testing.assert_allclose(out.numpy(), vector_f(X).numpy())
    for v in (V, _t([0.0, 1.0, 0.0])):
        np.testing.assert_allclose(jvp_fn(v).numpy(), (jacrev(vector_f)(X) @ v).numpy())


def test_jacfwd_equals_jacrev():
    np.testing.assert_allclose(jacfwd(vector_f)(X).numpy(), jacrev(vector_f)(X).numpy())

    def two(x, y):
        return {"p": x * y.sum(), "q": (x @ y).exp()}

    y = _t([[1.0, 2.0], [0.5, -1.0], [0.0, 3.0]])
    forward = jacfwd(two, argnums=(0, 1))(X, y)
    reverse = jacrev(two, argnums=(0, 1))(X, y)
    for key in ("p", "q"):
        for a, b in zip(forward[key], reverse[key]):
            assert a.shape == b.shape
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


def test_jacfwd_with_aux_and_of_an_empty_input():
    jacobian, aux = jacfwd(lambda x: (x.sin(), x.sum()), has_aux=True)(X)
    np.testing.assert_allclose(jacobian.numpy(), np.diag(np.cos(X.numpy())))
    np.testing.assert_allclose(aux.numpy(), X.numpy().sum())
    empty = jacfwd(lambda x: x.sum() + 1.0)(fg.zeros(0, dtype=fg.float64))
    assert empty.shape == (0,)


def test_hessian_is_forward_over_reverse_and_equals_reverse_over_reverse():
    np.testing.assert_allclose(
        hessian(f)(X).numpy(), jacrev(jacrev(f))(X).numpy(), rtol=1e-10, atol=1e-12
    )
    full = hessian(lambda x, y: (x * y.exp()).sum(), argnums=(0, 1))(X, V)
    assert full[0][1].shape == (3, 3)
    np.testing.assert_allclose(full[0][1].numpy(), np.diag(np.exp(V.numpy())))


def test_forward_over_reverse_hvp_equals_reverse_over_reverse():
    _, hvp = jvp(grad(f), (X,), (V,))
    np.testing.assert_allclose(hvp.numpy(), (jacrev(jacrev(f))(X) @ V).numpy(), rtol=1e-10)
    _, vjp_fn = vjp(grad(f), X)
    np.testing.assert_allclose(hvp.numpy(), vjp_fn(V)[0].numpy(), rtol=1e-10)


def test_reverse_over_forward_and_jvp_of_jvp():
    reverse = grad(lambda x: jvp(f, (x,), (V,))[1])(X)
    np.testing.assert_allclose(reverse.numpy(), (jacrev(jacrev(f))(X) @ V).numpy(), rtol=1e-10)
    second = jvp(lambda x: jvp(f, (x,), (V,))[1], (X,), (V,))[1]
    np.testing.assert_allclose(second.numpy(), (V @ jacrev(jacrev(f))(X) @ V).numpy())


def test_jvp_under_no_grad_records_nothing():
    x = X.clone().requires_grad_()
    with fg.no_grad():
        out, tangent = jvp(f, (x,), (V,))
    assert not out.requires_grad and not tangent.requires_grad
    np.testing.assert_allclose(tangent.numpy(), _finite_difference(f, X, V), rtol=1e-6)


def test_a_tangent_is_differentiable_in_reverse_mode():
    x = X.clone().requires_grad_()
    _, tangent = jvp(f, (x,), (V,))
    (g,) = fg.autograd.grad(tangent, x)
    np.testing.assert_allclose(g.numpy(), (jacrev(jacrev(f))(X) @ V).numpy(), rtol=1e-10)


def test_a_primitive_without_a_rule_uses_the_transpose_of_its_vjp():
    x = _t([[2.0, 0.0, -1.0], [0.5, 1.0, 3.0]])
    u = _t([[0.1, 0.2, 0.3], [0.2, -0.3, 0.5]])
    for fn in (lambda m: m.cumprod(1), lambda m: m.logcumsumexp(1), lambda m: fg.linalg.svdvals(m)):
        _, tangent = jvp(fn, (x,), (u,))
        np.testing.assert_allclose(tangent.numpy(), _finite_difference(fn, x, u), rtol=1e-6)


# ------------------------------------------------------------ autograd.functional


def test_functional_jvp_and_hvp_in_forward_mode():
    out, tangent = AF.jvp(vector_f, X, V)
    np.testing.assert_allclose(tangent.numpy(), (jacrev(vector_f)(X) @ V).numpy())
    assert not tangent.requires_grad
    out, hvp = AF.hvp(f, X, V)
    np.testing.assert_allclose(out.numpy(), f(X).numpy())
    np.testing.assert_allclose(hvp.numpy(), (AF.hessian(f, X) @ V).numpy(), rtol=1e-10)
    (hvp_x, hvp_y) = AF.hvp(lambda x, y: (x * x * y).sum(), (X, V), (V, X))[1]
    np.testing.assert_allclose(hvp_x.numpy(), (2 * V * V + 2 * X * X).numpy())
    np.testing.assert_allclose(hvp_y.numpy(), (2 * X * V).numpy())
    _, with_graph = AF.jvp(f, X, V, create_graph=True)
    assert with_graph.requires_grad
    with pytest.raises(RuntimeError, match="independent of the inputs"):
        AF.jvp(lambda x: fg.ones(1, dtype=fg.float64), X, V, strict=True)


# ------------------------------------------------------------------------ jit


def test_jvp_and_hvp_compile_and_match_eager():
    compiled_jvp = fg.jit(lambda x, v: jvp(f, (x,), (v,)))
    compiled_hvp = fg.jit(lambda x, v: AF.hvp(f, x, v)[1])
    forward_over_reverse = fg.jit(lambda x, v: jvp(grad(f), (x,), (v,))[1])
    for k in range(3):
        x, v = X + k, V * (k + 1)
        expected = jvp(f, (x,), (v,))
        for got, want in zip(compiled_jvp(x, v), expected):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
        hvp = (jacrev(jacrev(f))(x) @ v).numpy()
        np.testing.assert_allclose(compiled_hvp(x, v).numpy(), hvp, rtol=1e-10)
        np.testing.assert_allclose(forward_over_reverse(x, v).numpy(), hvp, rtol=1e-10)
    for fn in (compiled_jvp, compiled_hvp, forward_over_reverse):
        assert fn.cache_info().misses == 1 and fn.cache_info().hits == 2


def test_a_compiled_function_of_duals_runs_eagerly_and_keeps_the_tangents():
    compiled = fg.jit(f)
    compiled(X)
    for _ in range(2):
        _, tangent = jvp(compiled, (X,), (V,))
        np.testing.assert_allclose(tangent.numpy(), jvp(f, (X,), (V,))[1].numpy())
    scale = _t(3.0)
    captured = fg.jit(lambda x: x * scale)
    with fwAD.dual_level():
        dual_scale = fwAD.make_dual(scale, _t(1.0))
        scale = dual_scale
        out = captured(X)
        np.testing.assert_array_equal(fwAD.unpack_dual(out).tangent.numpy(), X.numpy())


def test_an_in_place_change_writes_into_the_tangent_as_pytorch_does():
    with fwAD.dual_level():
        v = _t([1.0, 1.0, 1.0])
        x = fwAD.make_dual(_t([1.0, 2.0, 3.0]), v)
        view = x[:2]
        x.mul_(2)
        np.testing.assert_array_equal(fwAD.unpack_dual(view).tangent.numpy(), [2.0, 2.0])
        np.testing.assert_array_equal(v.numpy(), [2.0, 2.0, 2.0])  # the given tangent, too
        x.copy_(_t([0.0, 0.0, 0.0]))
        np.testing.assert_array_equal(fwAD.unpack_dual(x).tangent.numpy(), [0.0, 0.0, 0.0])


def test_a_compiled_forward_over_reverse_product_matches_eager():
    # traced, grad's detached inputs lost their tangents: the product was zeros
    def hvp(x, v):
        return fg.func.jvp(fg.func.grad(lambda y: (y.sin() * y).sum()), (x,), (v,))[1]

    compiled = fg.jit(hvp)
    for seed in range(3):  # the trace's result, then the program's
        rng = np.random.default_rng(seed)
        x, v = (fg.tensor(rng.standard_normal(4)) for _ in range(2))
        np.testing.assert_allclose(compiled(x, v).numpy(), hvp(x, v).numpy(), rtol=1e-6)
        assert float(hvp(x, v).abs().sum()) > 0


def test_a_jvp_of_a_gradient_is_differentiable_in_its_tangent():
    # grad inside kept no graph when only the tangent required grad: the
    # product did not require grad (PyTorch's does; the op table's
    # func_jvp_of_grad row checks its gradients against differences)
    x = fg.tensor([0.3, -0.7])
    v = fg.tensor([1.0, 2.0], requires_grad=True)
    product = fg.func.jvp(fg.func.grad(lambda y: (y.sin() * y).sum()), (x,), (v,))[1]
    assert product.requires_grad
    product.sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), (2 * x.cos() - x * x.sin()).numpy(), rtol=1e-6)
