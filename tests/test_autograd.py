"""Autograd semantics beyond what the parity golden file pins down."""

import gc
import warnings
import weakref

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.autograd import Function


def test_gradients_accumulate_until_zeroed():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    for _ in range(3):
        (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0])
    x.grad.zero_()
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0])


def test_leaf_grad_is_not_aliased_to_a_sibling_gradient():
    a = fg.ones(2, requires_grad=True)
    b = fg.ones(2, requires_grad=True)
    (a + b).sum().backward()
    a.grad.zero_()
    np.testing.assert_allclose(b.grad.numpy(), [1.0, 1.0])


def test_retain_graph_allows_a_second_backward():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 8.0])


def test_third_derivative_through_create_graph():
    x = fg.tensor(2.0, requires_grad=True)
    y = x**4
    (g1,) = fg.autograd.grad(y, x, create_graph=True)
    (g2,) = fg.autograd.grad(g1, x, create_graph=True)
    (g3,) = fg.autograd.grad(g2, x)
    assert (g1.item(), g2.item(), g3.item()) == (32.0, 48.0, 48.0)


def test_backward_with_create_graph_keeps_a_differentiable_leaf_grad():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    (x**3).sum().backward(create_graph=True)
    assert x.grad.requires_grad
    (g,) = fg.autograd.grad(x.grad.sum(), x)
    np.testing.assert_allclose(g.numpy(), [6.0, 12.0])


def test_grad_does_not_touch_dot_grad():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    fg.autograd.grad((x * x).sum(), x)
    assert x.grad is None


def test_grad_with_respect_to_an_intermediate():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    (gy,) = fg.autograd.grad((y * y).sum(), y)
    np.testing.assert_allclose(gy.numpy(), [6.0, 12.0])


def test_grad_with_respect_to_an_intermediate_leaves_its_node_for_a_later_backward():
    w = fg.tensor([1.0, 2.0], requires_grad=True)
    x = w * w
    (g,) = fg.autograd.grad((x**2).sum(), x)
    assert g.tolist() == [2.0, 8.0]
    x.sum().backward()  # x's own node did not run, so its saved values are there
    assert w.grad.tolist() == [2.0, 4.0]


def test_backward_of_several_outputs_with_grad_tensors():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    fg.autograd.backward([x * 2, x * x], [fg.ones(2), fg.tensor([1.0, 0.5])])
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 4.0])


def test_hooks_run_in_registration_order_and_can_be_removed():
    x = fg.tensor([1.0], requires_grad=True)
    y = x * 1
    calls = []
    y.register_hook(lambda g: calls.append("a") or g * 2)
    handle = y.register_hook(lambda g: calls.append("b") or g + 1)
    y.backward(retain_graph=True)
    assert calls == ["a", "b"] and x.grad.item() == 3.0
    handle.remove()
    y.backward()
    assert x.grad.item() == 5.0


def test_no_grad_decorator_and_nesting():
    x = fg.ones(2, requires_grad=True)

    @fg.no_grad()
    def doubled(t):
        return t * 2

    assert not doubled(x).requires_grad
    with fg.no_grad():
        assert not fg.is_grad_enabled()
        with fg.enable_grad():
            assert (x * 2).requires_grad
    assert fg.is_grad_enabled()


def test_inplace_op_on_a_non_leaf_rebases_its_history():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.add_(1).mul_(2)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 6.0])
    assert y._version == 2


def _masked_view_update(x):
    y = x * 2
    v = y[1:].t()[::2]
    v[v > 0] = 0.0  # in place through a view of a view: PyTorch's CopySlices
    v.mul_(3)
    return (y * fg.arange(5.0)).sum() + (v * v).sum()


def test_inplace_through_a_view_rewrites_the_base_history_as_pytorch():
    """The base's history becomes CopySlices and the view's is taken again
    from it: gradients reach the elements the view did not cover, and none
    the view overwrote."""
    x = fg.tensor([0.5, -1.0, 2.0, -0.25, 1.5], requires_grad=True)
    loss = _masked_view_update(x)
    loss.backward()
    y = x.detach().numpy() * 2
    v_idx = np.arange(1, 5)[::2]  # positions 1 and 3
    kept = y[v_idx] <= 0  # where the view was not zeroed
    expected = 2 * np.arange(5.0)
    expected[v_idx] = np.where(kept, 2 * (3 * v_idx + 2 * 3 * 3 * y[v_idx]), 0.0)
    np.testing.assert_allclose(x.grad.numpy(), expected)
    assert type(loss.grad_fn).__name__ == "AddBackward0"
    compiled = fg.jit(_masked_view_update)
    for _ in range(3):
        z = fg.tensor([0.5, -1.0, 2.0, -0.25, 1.5], requires_grad=True)
        compiled(z).backward()
        np.testing.assert_allclose(z.grad.numpy(), expected)


def test_inplace_through_a_view_of_a_leaf_that_requires_grad_is_refused():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        x[0].add_(1)


def test_a_view_taken_before_an_inplace_change_of_its_base_is_refused():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    first = y[0]
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified in-place"):
        (first * 1).backward()


def test_optimizer_style_updates_under_no_grad_keep_leaves_leaves():
    w = fg.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    with fg.no_grad():
        w -= 0.1 * w.grad
    assert w.is_leaf and w.requires_grad and w.grad_fn is None
    np.testing.assert_allclose(w.detach().numpy(), [0.8, 1.6], rtol=1e-6)


def test_graph_is_freed_when_outputs_die():
    x = fg.ones(3, requires_grad=True)
    y = (x * 2).exp()
    node = weakref.ref(y.grad_fn)
    del y
    gc.collect()
    assert node() is None


def test_custom_function_with_two_outputs_and_materialized_zero_grads():
    class SplitScale(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2, a * 3

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 2 + gb * 3

    x = fg.tensor([1.0, 2.0], requires_grad=True)
    first, _ = SplitScale.apply(x)
    first.sum().backward()  # the second output's gradient arrives as zeros
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_custom_function_wrong_gradient_count_is_an_error():
    class Bad(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, g):
            return g, g, g

    x = fg.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        Bad.apply(x).sum().backward()


def test_custom_function_setup_context_style():
    class Square(Function):
        @staticmethod
        def forward(a):
            return a * a

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 2 * a * g

    x = fg.tensor([3.0], requires_grad=True)
    Square.apply(x).backward()
    assert x.grad.item() == 6.0


def test_custom_function_saved_input_modified_in_place_is_detected():
    class Id(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 1

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * a

    x = fg.ones(2, requires_grad=True)
    y = x * 1
    z = Id.apply(y)
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


def test_functional_hessian_and_jacobian_of_tuples():
    def f(a, b):
        return (a * a * b).sum()

    a, b = fg.tensor([1.0, 2.0]), fg.tensor([3.0, 4.0])
    haa, hab = fg.autograd.functional.hessian(f, (a, b))[0]
    np.testing.assert_allclose(haa.numpy(), np.diag([6.0, 8.0]))
    np.testing.assert_allclose(hab.numpy(), np.diag([2.0, 4.0]))


def test_gradcheck_reports_a_wrong_gradient():
    class Wrong(Function):
        @staticmethod
        def forward(ctx, a):
            return a * a

        @staticmethod
        def backward(ctx, g):
            return g  # should be 2 a g

    x = fg.tensor([1.0, 2.0], dtype=fg.float64, requires_grad=True)
    with pytest.raises(fg.autograd.GradcheckError, match="Jacobian mismatch"):
        fg.autograd.gradcheck(Wrong.apply, (x,))
    assert not fg.autograd.gradcheck(Wrong.apply, (x,), raise_exception=False)


def test_gradcheck_warns_on_float32_inputs():
    x = fg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="not a double precision"):
        fg.autograd.gradcheck(lambda a: a * 2, (x,), atol=1e-2, rtol=1e-2, eps=1e-3)


def test_volatile_variable_records_nothing_downstream():
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        v = fg.autograd.Variable(fg.ones(2), volatile=True)
    w = fg.ones(2, requires_grad=True)
    assert not ((v + 1) * w).requires_grad


def test_type_promotion_follows_pytorch():
    f32, f64, i64 = fg.ones(2), fg.ones(2, dtype=fg.float64), fg.ones(2, dtype=fg.int64)
    assert (f32 * 2.5).dtype is fg.float32
    assert (i64 * 2.5).dtype is fg.float32
    assert (f32 + f64).dtype is fg.float64
    assert (f32 + fg.tensor(1.0, dtype=fg.float64)).dtype is fg.float32
    assert (i64 + fg.tensor(1.0, dtype=fg.float64)).dtype is fg.float64
    assert (i64 / 2).dtype is fg.float32


def test_a_requested_dtype_keeps_every_digit_of_python_numbers():
    # tensor(0.1, dtype=float64) went through float32 first: 0.10000000149011612
    assert fg.tensor(0.1, dtype=fg.float64).item() == 0.1
    assert fg.tensor([[0.1, 1e-300]], dtype=fg.float64).tolist() == [[0.1, 1e-300]]
    assert fg.tensor([2**40 + 1], dtype=fg.int64).item() == 2**40 + 1


@pytest.mark.parametrize(
    "tensor_dtype,operand,expected",
    [
        # numpy scalars promote as Python numbers of their category
        (fg.float32, np.float64(2.5), fg.float32),
        (fg.float64, np.float32(2.5), fg.float64),
        (fg.int64, np.float64(2.5), fg.float32),
        (fg.int32, np.int64(2), fg.int32),
        (fg.bool, np.int64(2), fg.int64),
        (fg.int64, np.bool_(True), fg.int64),
        (fg.bool, np.bool_(True), fg.bool),
        # a 0-d array as the 0-d tensor it holds
        (fg.float32, np.array(2.5), fg.float32),
        (fg.int64, np.array(2.5), fg.float64),
        (fg.int64, np.array(2.5, dtype=np.float32), fg.float32),
    ],
    ids=repr,
)
def test_numpy_operands_promote_as_in_pytorch(tensor_dtype, operand, expected):
    x = fg.tensor([1, 0], dtype=tensor_dtype)
    product = x * operand
    assert product.dtype is expected
    np.testing.assert_array_equal(product.numpy(), x.numpy() * operand)
    assert (x == operand).dtype is fg.bool
    if not isinstance(operand, np.ndarray):  # PyTorch takes an array only right of an operator
        assert (operand * x).dtype is expected


# an expression with numpy operands, the same with Python numbers (or tensors)
NUMPY_OPERANDS = [
    pytest.param(lambda x: x * np.float64(2.5), lambda x: x * 2.5, id="mul"),
    pytest.param(lambda x: np.float32(2) + x, lambda x: 2.0 + x, id="radd"),
    pytest.param(lambda x: np.float64(3) - x, lambda x: 3.0 - x, id="rsub"),
    pytest.param(lambda x: x / np.int64(2), lambda x: x / 2, id="div"),
    pytest.param(lambda x: x ** np.int64(2), lambda x: x**2, id="pow"),
    pytest.param(lambda x: np.float32(2) ** x, lambda x: 2.0**x, id="rpow"),
    pytest.param(
        lambda x: fg.where(x > 1, x, np.float32(0)), lambda x: fg.where(x > 1, x, 0.0), id="where"
    ),
    pytest.param(lambda x: (x < np.float64(1.5)) * x, lambda x: (x < 1.5) * x, id="lt"),
    pytest.param(lambda x: x.clamp(min=np.float64(1.5)), lambda x: x.clamp(min=1.5), id="clamp"),
    pytest.param(lambda x: x.clone().add_(np.float64(1)), lambda x: x.clone().add_(1.0), id="add_"),
    pytest.param(
        lambda x: x.clone().mul_(np.bool_(True)), lambda x: x.clone().mul_(True), id="mul_-bool"
    ),
    pytest.param(
        lambda x: x * np.array(2.5), lambda x: x * fg.tensor(2.5, dtype=fg.float64), id="mul-0d"
    ),
    pytest.param(lambda x: x - np.array(1), lambda x: x - fg.tensor(1), id="sub-0d"),
]


@pytest.mark.parametrize("with_numpy,with_python", NUMPY_OPERANDS)
def test_numpy_operands_act_as_numbers_and_gradients_reach_the_tensor(with_numpy, with_python):
    x = fg.tensor([0.5, 1.0, 2.0], requires_grad=True)
    twin = fg.tensor([0.5, 1.0, 2.0], requires_grad=True)
    got, want = with_numpy(x), with_python(twin)
    assert got.dtype is want.dtype is fg.float32
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), twin.grad.numpy())


def test_where_with_two_numbers_takes_their_promoted_type():
    condition = fg.tensor([True, False])
    assert fg.where(condition, 1.0, 0.0).tolist() == [1.0, 0.0]
    assert fg.where(condition, np.float64(1), np.bool_(False)).dtype is fg.float32
    assert fg.where(condition, 2, 0).dtype is fg.int64


def test_numpy_arrays_as_operands_where_pytorch_refuses_them_stay_type_errors():
    x = fg.ones(2)
    for refused in (
        lambda: np.array(2.0) * x,  # PyTorch takes an array only right of an operator
        lambda: fg.mul(x, np.array(2.0)),
        lambda: x.add_(np.array(1.0)),
    ):
        with pytest.raises(TypeError):
            refused()


def test_mixed_dtype_gradients_come_back_in_each_inputs_dtype():
    a = fg.ones(2, requires_grad=True)
    b = fg.ones(2, dtype=fg.float64, requires_grad=True)
    (a * b).sum().backward()
    assert a.grad.dtype is fg.float32 and b.grad.dtype is fg.float64


def test_special_values_give_pytorchs_gradients():
    x = fg.tensor([-1e4, 0.0, 1e4], requires_grad=True)
    fg.sigmoid(x).sum().backward()
    assert np.isfinite(x.grad.numpy()).all()
    x = fg.tensor([0.0, 0.0], requires_grad=True)
    x.norm().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0])
    # maximum and minimum with a NaN: both operands take the gradient, as PyTorch's
    x, y = fg.tensor([np.nan, 1.0], requires_grad=True), fg.tensor([1.0, 1.0], requires_grad=True)
    (fg.maximum(x, y) + fg.minimum(x, y)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 1.0])
    np.testing.assert_array_equal(y.grad.numpy(), [2.0, 1.0])
    # atan2 at (0, 0): 0, as PyTorch (0 / 0 gave NaN)
    y, x = fg.zeros(2, requires_grad=True), fg.tensor([0.0, -1.0], requires_grad=True)
    fg.atan2(y, x).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [0.0, -1.0])
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0])
    # elu's family far past 89, where float32's exp of the branch not taken overflows
    x = fg.tensor([100.0, -100.0], requires_grad=True)
    F = fg.nn.functional
    (F.elu(x) + F.celu(x, 2.0) + F.selu(x) / 1.0507009873554805).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 0.0], rtol=1e-6, atol=1e-20)
    # abs of NaN: sign(NaN) is 0 in PyTorch, so is the gradient
    x = fg.tensor([np.nan, -2.0], requires_grad=True)
    fg.abs(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, -1.0])
    # clamp of NaN: NaN, with no gradient (it is not within the bounds)
    for clamp in (lambda x: x.clamp(max=1.0), fg.jit(lambda x: x.clamp(-1.0, 1.0))):
        x = fg.tensor([np.nan, 0.5, 2.0], requires_grad=True)
        clamp(x).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0, 0.0])
    # and no tangent in forward mode (the NaN's mask once hung on requires_grad)
    _, tangent = fg.func.jvp(lambda x: x.clamp(max=1.0), (x.detach(),), (fg.ones(3),))
    np.testing.assert_array_equal(tangent.numpy(), [0.0, 1.0, 0.0])
    # std of equal values: 0, and PyTorch's subgradient there (sqrt's gave NaN)
    for std in (lambda x: x.std(dim=0), fg.jit(lambda x: x.std(dim=0))):
        x = fg.full((5, 2), 0.3, dtype=fg.float64, requires_grad=True)
        std(x).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.zeros((5, 2)))
    # p-norms: an element at 0 and a norm of 0 take 0 (both powers' derivatives were infinite)
    for p, expected in ((3, [0.0, 0.0, 1.0]), (0.5, [0.0, 0.0, 1.0]), (-1, [0.0, 0.0, 0.0])):

        def norm(x, p=p):
            return x.norm(p=p, dim=1)

        for run in (norm, fg.jit(norm)):
            x = fg.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 3.0]], requires_grad=True)
            run(x).sum().backward()
            np.testing.assert_allclose(x.grad.numpy(), [[0.0, 0.0, 0.0], expected], rtol=1e-6)
    x = fg.tensor([-1e3, 0.0, 1e3], requires_grad=True)
    fg.softplus(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 0.5, 1.0])


PIECEWISE_CONSTANT = [
    (fg.sign, "SignBackward0"),
    (fg.sgn, "SgnBackward0"),
    (fg.floor, "FloorBackward0"),
    (fg.ceil, "CeilBackward0"),
    (fg.trunc, "TruncBackward0"),
    (fg.round, "RoundBackward0"),
    (lambda x: fg.div(x, 0.75, rounding_mode="floor"), "DivBackward2"),
    (lambda x: fg.div(x, 0.75, rounding_mode="trunc"), "DivBackward2"),
    # PyTorch's node is NotImplemented, and its backward raises: here, zeros
    (lambda x: x // 0.75, "FloorDivideBackward0"),
]


@pytest.mark.parametrize("op,name", PIECEWISE_CONSTANT, ids=[n for _, n in PIECEWISE_CONSTANT])
def test_piecewise_constant_ops_have_pytorchs_zero_gradients(op, name):
    """Their results require grad, as PyTorch's, and the gradient is zeros
    (+0): where the cotangent is infinite or NaN too (0 * inf would be NaN),
    with no graph of its own (PyTorch's zeros_like(grad)), in forward mode,
    and compiled on the tracing call and the two after it."""
    values = [-1.7, -0.5, 0.0, 0.3, 2.5, np.inf, np.nan]
    x = fg.tensor(values, requires_grad=True)
    y = op(x)
    assert y.requires_grad and type(y.grad_fn).__name__ == name
    y.sum().backward()
    zeros = np.zeros(len(values), np.float32)
    np.testing.assert_array_equal(x.grad.numpy(), zeros)
    cotangent = fg.tensor([1.0, np.inf, -np.inf, np.nan, 2.0, np.nan, np.inf], requires_grad=True)
    (grad,) = fg.autograd.grad(op(x), x, cotangent, create_graph=True)
    assert not grad.requires_grad
    np.testing.assert_array_equal(grad.numpy(), zeros)
    assert not np.signbit(grad.numpy()).any()
    _, tangent = fg.func.jvp(op, (x.detach(),), (cotangent.detach(),))
    np.testing.assert_array_equal(tangent.numpy(), zeros)
    compiled = fg.jit(op)
    for _ in range(3):
        x.grad = None
        out = compiled(x)
        np.testing.assert_array_equal(out.detach().numpy(), op(x).detach().numpy())
        out.backward(cotangent.detach())
        np.testing.assert_array_equal(x.grad.numpy(), zeros)
        assert not np.signbit(x.grad.numpy()).any()
    assert compiled.cache_info().hits == 2


def test_quotients_have_zero_gradients_in_the_divisor_and_remainders_keep_theirs():
    """floor_divide and div with a rounding mode are piecewise constant in
    both operands; remainder's and fmod's derivative in the divisor is minus
    the floored or truncated quotient, and their second derivatives are 0
    (a truncated quotient's once went through 0 / y: NaN at y = 0), as
    PyTorch's."""
    x = fg.tensor([-1.7, 3.5, 0.5, 7.0, 5.0, 1.0], dtype=fg.float64, requires_grad=True)
    y = fg.tensor([2.0, -1.5, 1.0, 0.0, np.inf, 3.0], dtype=fg.float64, requires_grad=True)
    g = fg.tensor([1.0, 2.0, np.inf, 1.0, 1.0, np.nan], dtype=fg.float64)
    quotients = (
        lambda a, b: a // b,
        lambda a, b: fg.div(a, b, rounding_mode="floor"),
        lambda a, b: fg.div(a, b, rounding_mode="trunc"),
    )
    for quotient in quotients:
        for grad in fg.autograd.grad(quotient(x, y), (x, y), g):
            np.testing.assert_array_equal(grad.numpy(), np.zeros(6))
    for op, dy in (
        (fg.remainder, [1.0, 6.0, np.nan, -np.inf, -0.0, np.nan]),
        (fg.fmod, [0.0, 4.0, np.nan, -np.inf, -0.0, np.nan]),
    ):
        gx, gy = fg.autograd.grad(op(x, y), (x, y), g, create_graph=True)
        np.testing.assert_array_equal(gx.detach().numpy(), g.numpy())
        np.testing.assert_array_equal(gy.detach().numpy(), dy)
        assert gy.requires_grad  # through the quotient, as PyTorch's
        for second in fg.autograd.grad(gy.sum(), (x, y)):
            np.testing.assert_array_equal(second.numpy(), np.zeros(6))


def test_integer_indexing_returns_a_view_that_inplace_ops_write_through():
    x = fg.zeros(2, 2)
    x[1, 1].add_(5)
    x[0].fill_(1)
    assert x.tolist() == [[1.0, 1.0], [0.0, 5.0]]
    assert x._version == 2


@pytest.mark.parametrize(
    "make,name",
    [
        (lambda x: x + 1, "AddBackward0"),
        (lambda x: x * x, "MulBackward0"),
        (lambda x: x.sum(), "SumBackward0"),
        (lambda x: x.sum(0), "SumBackward1"),
        (lambda x: x.mean(), "MeanBackward0"),
        (lambda x: x[0], "SelectBackward0"),
        (lambda x: x.t(), "TBackward0"),
        (lambda x: x.exp(), "ExpBackward0"),
    ],
)
def test_grad_fn_class_is_named_as_pytorch_names_the_node(make, name):
    """Tools read type(t.grad_fn).__name__, not only the repr."""
    node = make(fg.ones(2, 2, requires_grad=True)).grad_fn
    assert type(node).__name__ == name and node.name() == name
    assert repr(node).startswith(f"<{name} object at 0x")


def test_custom_function_node_class_is_named_after_the_function():
    class Double(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    y = Double.apply(fg.ones(2, requires_grad=True))
    assert type(y.grad_fn).__name__ == "DoubleBackward"
    assert isinstance(y.grad_fn, fg.autograd.FunctionCtx)
    y.sum().backward()


def test_a_composite_ops_node_shows_its_inputs_nodes_as_pytorchs_does():
    """mse_loss is several primitives; its node shows the nodes of the op's own
    inputs (the engine still runs the inner ones)."""
    layer = fg.nn.Linear(3, 2)
    x, target = fg.randn(4, 3), fg.randn(4, 2)
    loss = fg.nn.functional.mse_loss(layer(x), target)
    assert type(loss.grad_fn).__name__ == "MseLossBackward0"
    (inner, _), (absent, _) = loss.grad_fn.next_functions
    assert inner.name() == "AddmmBackward0" and absent is None  # the target needs no grad
    loss.backward()
    expected = 2 * ((layer(x) - target).detach().numpy()).T @ x.numpy() / 8
    np.testing.assert_allclose(layer.weight.grad.numpy(), expected, rtol=1e-5)
