"""PyTorch's in-place and legacy Tensor methods: values against numpy, what
autograd does with them (a leaf refuses them, a non-leaf's graph records
them, versions bump), views, storages, errors worded as PyTorch words them,
and compiled calls computing what eager calls compute."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn

LEAF_ERROR = "a leaf Variable that requires grad is being used in an in-place operation."


def _array(shape=(3, 3), seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


A, B = _array(), _array(seed=1)
TALL = _array((7, 3), seed=2)
I = np.array([0, 2])  # noqa: E741  (an index, as PyTorch's docs name it)
SUM_INDEX = [[0, 0, 1]] * 3


def _with(a, index, value):
    a = a.copy()
    a[index] = value
    return a


def _diagonal_filled(a, value, wrap=False):
    a = a.copy()
    np.fill_diagonal(a, value, wrap=wrap)
    return a


def _grown(a, count):
    out = np.zeros(count)
    out[: a.size] = a.ravel()
    return out


def _summed_into_columns(a, src):
    return a + np.stack([src[:, 0] + src[:, 1], src[:, 2], 0 * src[:, 0]], 1)


# (id, the tensor's values, the in-place call, numpy's result from the values)
VALUES = [
    ("squeeze_", A.reshape(1, 9), lambda t: t.squeeze_(), lambda a: a.reshape(9)),
    ("squeeze_dim", A.reshape(3, 1, 3), lambda t: t.squeeze_(1), lambda a: a[:, 0]),
    ("unsqueeze_", A, lambda t: t.unsqueeze_(1), lambda a: a[:, None]),
    ("t_", A, lambda t: t.t_(), lambda a: a.T),
    ("transpose_", A[:, :, None], lambda t: t.transpose_(0, 2), lambda a: a.transpose(2, 1, 0)),
    ("swapdims_", A, lambda t: t.swapdims_(0, 1), lambda a: a.T),
    ("swapaxes_", A, lambda t: t.swapaxes_(1, 0), lambda a: a.T),
    ("resize_", A, lambda t: t.resize_(2, 2), lambda a: a.ravel()[:4].reshape(2, 2)),
    ("resize_grow", A, lambda t: t.resize_(12), lambda a: _grown(a, 12)),
    ("resize_as_", A, lambda t: t.resize_as_(fg.zeros(4)), lambda a: a.ravel()[:4]),
    ("fill_diagonal_", A, lambda t: t.fill_diagonal_(7.0), lambda a: _diagonal_filled(a, 7.0)),
    (
        "fill_diagonal_wrap",
        TALL,
        lambda t: t.fill_diagonal_(2.0, wrap=True),
        lambda a: _diagonal_filled(a, 2.0, wrap=True),
    ),
    ("copysign_", A, lambda t: t.copysign_(fg.tensor(B)), lambda a: np.copysign(a, B)),
    ("copysign_number", A, lambda t: t.copysign_(-1), lambda a: -np.abs(a)),
    (
        "index_fill_",
        A,
        lambda t: t.index_fill_(1, fg.tensor(I), 1.5),
        lambda a: _with(a, (slice(None), I), 1.5),
    ),
    (
        "addmm_",
        A,
        lambda t: t.addmm_(fg.tensor(B), fg.tensor(B), alpha=2),
        lambda a: a + 2 * B @ B,
    ),
    (
        "baddbmm_",
        A[None],
        lambda t: t.baddbmm_(fg.tensor(B[None]), fg.tensor(B[None])),
        lambda a: a + B @ B,
    ),
    (
        "addcmul_",
        A,
        lambda t: t.addcmul_(fg.tensor(B), fg.tensor(B), value=0.5),
        lambda a: a + 0.5 * B * B,
    ),
    (
        "addcdiv_",
        A,
        lambda t: t.addcdiv_(fg.tensor(B), fg.tensor(np.abs(B) + 1)),
        lambda a: a + B / (np.abs(B) + 1),
    ),
    ("lerp_", A, lambda t: t.lerp_(fg.tensor(B), 0.25), lambda a: a + 0.25 * (B - a)),
    ("clamp_min_", A, lambda t: t.clamp_min_(0.1), lambda a: np.maximum(a, 0.1)),
    ("clamp_max_", A, lambda t: t.clamp_max_(0.1), lambda a: np.minimum(a, 0.1)),
    ("sign_", A, lambda t: t.sign_(), np.sign),
    ("cumsum_", A, lambda t: t.cumsum_(1), lambda a: np.cumsum(a, 1)),
    (
        "masked_fill_",
        A,
        lambda t: t.masked_fill_(fg.tensor(B > 0), 3.0),
        lambda a: np.where(B > 0, 3.0, a),
    ),
    ("floor_divide_", A, lambda t: t.floor_divide_(0.7), lambda a: np.floor_divide(a, 0.7)),
    ("logical_not_", A, lambda t: t.logical_not_(), lambda a: (a == 0).astype(float)),
    (
        "nan_to_num_",
        np.array([np.nan, np.inf, -np.inf, 1.5]),
        lambda t: t.nan_to_num_(0.5, 2.0, -2.0),
        lambda a: np.array([0.5, 2.0, -2.0, 1.5]),
    ),
    ("relu_", A, lambda t: t.relu_(), lambda a: np.maximum(a, 0.0)),
    ("sigmoid_", A, lambda t: t.sigmoid_(), lambda a: 1 / (1 + np.exp(-a))),
    ("tanh_", A, lambda t: t.tanh_(), np.tanh),
    (
        "index_copy_",
        A,
        lambda t: t.index_copy_(0, fg.tensor(I), fg.tensor(B[:2])),
        lambda a: _with(a, I, B[:2]),
    ),
    (
        "scatter_reduce_",
        A,
        lambda t: t.scatter_reduce_(1, fg.tensor(SUM_INDEX), fg.tensor(B), "sum"),
        lambda a: _summed_into_columns(a, B),
    ),
    (
        "index_put_",
        A,
        lambda t: t.index_put_((fg.tensor(I), fg.tensor(I)), fg.tensor(5.0, dtype=fg.float64)),
        lambda a: _with(a, (I, I), 5.0),
    ),
    (
        "put_",
        A,
        lambda t: t.put_(fg.tensor([0, 4]), fg.tensor([9.0, 8.0], dtype=fg.float64)),
        lambda a: _with(a, ([0, 1], [0, 1]), [9.0, 8.0]),
    ),
    (
        "masked_scatter_",
        A,
        lambda t: t.masked_scatter_(fg.tensor(B > 0), fg.tensor(B * 10)),
        lambda a: _with(a, B > 0, (B * 10).ravel()[: (B > 0).sum()]),
    ),
    ("apply_", A, lambda t: t.apply_(lambda v: v * 2), lambda a: a * 2),
    ("map_", A, lambda t: t.map_(fg.tensor(B), lambda v, w: v - w), lambda a: a - B),
]


@pytest.mark.parametrize("name,values,call,expected", VALUES, ids=[v[0] for v in VALUES])
def test_values_match_numpy_the_tensor_is_returned_and_its_version_bumps(
    name, values, call, expected
):
    t = fg.tensor(values)
    assert call(t) is t
    want = expected(values)
    assert t.shape == want.shape
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-12)
    assert t._version >= 1


# ------------------------------------------------------------------ autograd

REFUSED_ON_A_LEAF = [
    v for v in VALUES if not v[0].startswith(("resize_", "fill_diagonal_", "apply_", "map_"))
]


@pytest.mark.parametrize(
    "name,values,call,expected", REFUSED_ON_A_LEAF, ids=[v[0] for v in REFUSED_ON_A_LEAF]
)
def test_a_leaf_that_requires_grad_refuses_the_method_but_not_under_no_grad(
    name, values, call, expected
):
    leaf = fg.tensor(values, requires_grad=True)
    with pytest.raises(RuntimeError) as raised:
        call(leaf)
    assert str(raised.value) == LEAF_ERROR
    assert leaf._version == 0 and leaf.shape == values.shape
    with fg.no_grad():
        call(leaf)
    assert leaf.is_leaf and leaf.requires_grad
    np.testing.assert_allclose(leaf.detach().numpy(), expected(values), rtol=1e-12)


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda t: t.resize_(9), "cannot resize variables that require grad"),
        (lambda t: t.resize_as_(fg.zeros(2)), "cannot resize variables that require grad"),
        (
            lambda t: t.fill_diagonal_(1.0),
            "a view of a leaf Variable that requires grad is being used in an in-place operation.",
        ),
        (
            lambda t: t[0].unsqueeze_(0),
            "a view of a leaf Variable that requires grad is being used in an in-place operation.",
        ),
        (
            lambda t: t.apply_(abs),
            "Can't call apply_() on Variable that requires grad. Use var.detach().apply_() "
            "instead.",
        ),
        (
            lambda t: fg.zeros(3, 3).map_(t, max),
            "Can't call map_() on Variable that requires grad. Use var.detach().map_() instead.",
        ),
        (lambda t: t.set_(fg.zeros(2)), LEAF_ERROR),
    ],
)
def test_pytorchs_other_refusals_of_tensors_that_require_grad(call, message):
    leaf = fg.tensor(A, requires_grad=True)
    with pytest.raises(RuntimeError) as raised:
        call(leaf)
    assert str(raised.value) == message
    with pytest.raises(RuntimeError, match="cannot resize"), fg.no_grad():
        leaf.resize_(2)  # refused whatever the grad mode, as in PyTorch


# (id, in place on a non-leaf y, the same out of place, PyTorch's name of y's grad_fn)
GRADIENTS = [
    ("squeeze_", lambda y: y.reshape(1, 9).squeeze_(), lambda y: y.reshape(9), "SqueezeBackward3"),
    (
        "squeeze_dim",
        lambda y: y.reshape(3, 1, 3).squeeze_(1),
        lambda y: y.reshape(3, 3),
        "SqueezeBackward4",
    ),
    (
        "squeeze_dims",
        lambda y: y.reshape(3, 1, 3).squeeze_((1,)),
        lambda y: y.reshape(3, 3),
        "SqueezeBackward5",
    ),
    ("unsqueeze_", lambda y: y.unsqueeze_(1), lambda y: y.unsqueeze(1), "UnsqueezeBackward1"),
    ("t_", lambda y: y.t_(), lambda y: y.t(), "TBackward1"),
    ("transpose_", lambda y: y.transpose_(0, 1), lambda y: y.t(), "TransposeBackward1"),
    ("swapdims_", lambda y: y.swapdims_(1, 0), lambda y: y.t(), "TransposeBackward1"),
    (
        "fill_diagonal_",
        lambda y: y.fill_diagonal_(7.0),
        lambda y: fg.where(fg.eye(3, dtype=fg.bool), 7.0, y),
        "CopySlices",
    ),
    (
        "copysign_",
        lambda y: y.copysign_(fg.tensor(B)),
        lambda y: y.abs() * fg.tensor(np.sign(B)),
        "CopysignBackward0",
    ),
    ("copysign_number", lambda y: y.copysign_(-1.0), lambda y: -y.abs(), "CopysignBackward1"),
    (
        "index_fill_",
        lambda y: y.index_fill_(1, fg.tensor(I), 1.5),
        lambda y: y.index_fill(1, fg.tensor(I), 1.5),
        "IndexFillBackward0",
    ),
    (
        "addmm_",
        lambda y: y.addmm_(y, y, beta=0.5),
        lambda y: 0.5 * y + y @ y,
        "AddmmBackward0",
    ),
    ("addcmul_", lambda y: y.addcmul_(y, y), lambda y: y + y * y, "AddcmulBackward0"),
    (
        "lerp_",
        lambda y: y.lerp_(fg.tensor(B), 0.25),
        lambda y: 0.75 * y + 0.25 * fg.tensor(B),
        "LerpBackward0",
    ),
    ("clamp_min_", lambda y: y.clamp_min_(0.1), lambda y: y.clamp(min=0.1), "ClampMinBackward0"),
    ("cumsum_", lambda y: y.cumsum_(0), lambda y: y.cumsum(0), "CumsumBackward0"),
    (
        "index_put_",
        lambda y: y.index_put_((fg.tensor(I),), fg.tensor(5.0, dtype=fg.float64), accumulate=True),
        lambda y: y + fg.tensor(_with(0 * A, I, 5.0)),
        "IndexPutBackward0",
    ),
    (
        "put_",
        lambda y: y.put_(fg.tensor([0, 4]), y[0, :2] * 2),
        lambda y: y.put(fg.tensor([0, 4]), y[0, :2] * 2),
        "PutBackward0",
    ),
    ("mul_self", lambda y: y.mul_(y), lambda y: y * y, "MulBackward0"),
    ("sin_", lambda y: y.sin_(), lambda y: y.sin(), "SinBackward0"),
    ("abs_", lambda y: y.abs_(), lambda y: y.abs(), "AbsBackward0"),
    ("pow_", lambda y: y.pow_(3), lambda y: y**3, "PowBackward0"),
    ("sign_", lambda y: y.sign_(), lambda y: y.sign() + 0 * y, None),
    ("floor_", lambda y: y.floor_(), lambda y: y.floor() + 0 * y, None),
    ("through_a_view", lambda y: _base_after(y[1:].sin_(), y), lambda y: _sin_below_row_0(y), None),
    (
        "view_then_shape",
        lambda y: _base_after(y[0].unsqueeze_(0).mul_(y[1:2]), y),
        lambda y: fg.cat([y[:1] * y[1:2], y[1:]]),
        None,
    ),
]


def _base_after(view, base):
    """The base, once the in-place call on its view (evaluated first) ran."""
    return base


def _sin_below_row_0(y):
    return fg.cat([y[:1], y[1:].sin()])


@pytest.mark.parametrize("name,inplace,twin,node", GRADIENTS, ids=[g[0] for g in GRADIENTS])
def test_a_non_leafs_graph_records_the_method_as_the_out_of_place_op(name, inplace, twin, node):
    x = fg.tensor(A, requires_grad=True)
    got, want = inplace(x * 1), twin(x * 1)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    if node is not None:
        assert got.grad_fn.name() == node
    seed = fg.tensor(np.linspace(-1, 1, got.numel()).reshape(got.shape))
    (g,) = fg.autograd.grad(got, x, seed)
    (w,) = fg.autograd.grad(want, x, seed)
    np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12)


def test_second_derivatives_see_the_value_an_in_place_op_replaced():
    x = fg.tensor(A, requires_grad=True)
    y = x * 1
    y.sin_()
    (g,) = fg.autograd.grad(y.sum(), x, create_graph=True)
    (gg,) = fg.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(g.detach().numpy(), np.cos(A), rtol=1e-12)
    np.testing.assert_allclose(gg.numpy(), -np.sin(A), rtol=1e-12)


def test_a_tensor_saved_before_the_method_still_refuses_backward():
    x = fg.tensor(A, requires_grad=True)
    y = x * 1
    z = y.sin()  # saves y
    y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()


# ------------------------------------------------------------------- compiled

EAGER_ONLY = {"resize_grow", "masked_scatter_", "apply_", "map_"}
CHANGES_SHAPE = {
    "squeeze_",
    "squeeze_dim",
    "unsqueeze_",
    "t_",
    "transpose_",
    "swapdims_",
    "swapaxes_",
    "resize_",
    "resize_as_",
}
COMPILED = [v for v in VALUES if v[0] not in EAGER_ONLY]
ON_ARGUMENTS = [v for v in COMPILED if v[0] not in CHANGES_SHAPE]


def _values_of_call(values, call):
    return values * (call + 1) - call


def _same_on_three_calls(fn, values):
    """fn compiled computes what fn computes eagerly on calls 1, 2 and 3,
    with new values each call, and leaves its argument as eagerly."""
    compiled = fg.jit(fn)
    for call in range(3):
        eager_arg = fg.tensor(_values_of_call(values, call))
        compiled_arg = fg.tensor(_values_of_call(values, call))
        want, got = fn(eager_arg), compiled(compiled_arg)
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
        np.testing.assert_allclose(compiled_arg.numpy(), eager_arg.numpy(), rtol=1e-12)
    return compiled


@pytest.mark.parametrize("name,values,call,expected", COMPILED, ids=[v[0] for v in COMPILED])
def test_compiled_on_a_tensor_the_function_computes(name, values, call, expected):
    compiled = _same_on_three_calls(lambda x: call(x * 1) + 1, values)
    assert compiled.cache_info().misses == 1


@pytest.mark.parametrize(
    "name,values,call,expected", ON_ARGUMENTS, ids=[v[0] for v in ON_ARGUMENTS]
)
def test_compiled_on_an_argument_writes_the_change_back(name, values, call, expected):
    _same_on_three_calls(lambda x: call(x) * 2, values)


@pytest.mark.parametrize(
    "name,values,call,expected",
    [v for v in VALUES if v[0] in CHANGES_SHAPE],
    ids=sorted(CHANGES_SHAPE, key=[v[0] for v in VALUES].index),
)
def test_compiled_shape_change_of_an_argument_is_a_clear_error(name, values, call, expected):
    x = fg.tensor(values)
    with pytest.raises(fg.TracingError, match=r"in-place shape change .*test_inplace_methods"):
        fg.jit(lambda x: call(x) * 2)(x)
    assert x.shape == values.shape and np.array_equal(x.numpy(), values)


@pytest.mark.parametrize("name", sorted(EAGER_ONLY))
def test_compiled_eager_only_methods_are_a_clear_error(name):
    (call,) = [v[2] for v in VALUES if v[0] == name]
    with pytest.raises(fg.TracingError, match="test_inplace_methods"):
        fg.jit(lambda x: call(x * 1))(fg.tensor(A))


class _Filler(nn.Module):
    """A module changing its buffer in place and shaping a value in place."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mask", fg.zeros(3, 3))
        self.weight = nn.Parameter(fg.ones(3))

    def forward(self, x):
        self.mask.fill_diagonal_(1.0).mul_(2).index_fill_(1, fg.tensor([0]), -1.0)
        self.mask.add_(x)
        y = (x * self.weight).sum(0)
        y.unsqueeze_(0).t_()
        y.copysign_(self.mask[:, :1]).sin_()
        return y.sum()


@pytest.mark.parametrize("dynamic", [False, True])
def test_compiled_module_changing_its_buffer_and_shapes_in_place(dynamic):
    eager, compiled = _Filler(), _Filler()
    step = fg.jit(compiled, dynamic=dynamic) if dynamic else fg.jit(compiled)
    for call in range(3):
        x = fg.tensor(_array(seed=call), dtype=fg.float32)
        want, got = eager(x), step(x)
        want.backward()
        got.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
        np.testing.assert_allclose(compiled.mask.numpy(), eager.mask.numpy(), rtol=1e-6)
        np.testing.assert_allclose(
            compiled.weight.grad.numpy(), eager.weight.grad.numpy(), rtol=1e-5
        )


def test_compiled_with_sizes_that_vary():
    def fn(x):
        y = x * 1
        y.fill_diagonal_(0.5, wrap=True)
        y.resize_(2, 2)
        return y.t_()

    compiled = fg.jit(fn, dynamic=True)
    for rows in (5, 6, 7):
        x = fg.tensor(_array((rows, 3), seed=rows))
        np.testing.assert_array_equal(compiled(x).numpy(), fn(x).numpy())


def test_compiled_backward_after_an_in_place_op_reading_its_input():
    def step(x):
        y = x * 1
        y.sin_()
        (y * x).sum().backward()
        return x.grad

    compiled = fg.jit(step)
    for call in range(3):
        values = _values_of_call(A, call)
        x, x_compiled = (fg.tensor(values, requires_grad=True) for _ in range(2))
        np.testing.assert_allclose(compiled(x_compiled).numpy(), step(x).numpy(), rtol=1e-12)


def test_compiled_views_of_a_tensor_whose_shape_changes_in_place():
    def fn(x):
        y = x * 2
        row, column = y[0], y[:, 1]
        row.unsqueeze_(0)
        y.t_()  # row and column keep their elements, from y's old shape
        return y, row, column

    compiled = fg.jit(fn)
    for call in range(3):
        x = fg.tensor(_values_of_call(A, call))
        for got, want in zip(compiled(x), fn(x)):
            assert got.shape == want.shape
            np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_compiled_views_follow_what_is_written_into_their_storage():
    def fn(x):
        y = x * 2
        row, column = y[0], y[:, 1]
        row.add_(1)
        y.mul_(x)
        x.sub_(1)
        return column * 1, row, x[2]

    _same_on_three_calls(lambda x: fg.cat([t.reshape(-1) for t in fn(x)]), A)


@pytest.mark.parametrize("then", [lambda row: row.add_(1), lambda row: row * 1])
def test_compiled_writes_or_reads_of_a_view_from_before_a_shape_change_are_an_error(then):
    def fn(x):
        y = x * 2
        row = y[0]
        y.t_()
        y.add_(1)
        return then(row)

    with pytest.raises(fg.TracingError, match="view taken before its base's shape changed"):
        fg.jit(fn)(fg.tensor(A))


# ---------------------------------------------------------------------- views


def test_a_view_changed_in_shape_stays_a_view_of_its_base():
    base = fg.zeros(2, 3)
    row = base[1]
    row.unsqueeze_(0)
    assert row.shape == (1, 3) and row._base is base and row._version == base._version == 1
    row.add_(fg.tensor([1.0, 2.0, 3.0]))
    assert base.tolist() == [[0, 0, 0], [1, 2, 3]]


def test_views_taken_before_the_bases_shape_changed_keep_their_elements():
    base = fg.zeros(2, 3)
    row = base[0]
    base.t_()
    assert base.shape == (3, 2) and row.shape == (3,) and row._version == 1
    row.add_(1)
    assert base.tolist() == [[1, 0], [1, 0], [1, 0]]


def test_such_a_view_changed_in_place_with_gradients_is_a_clear_error():
    y = fg.zeros(3, 3)
    row = y[0]
    y.t_()
    with pytest.raises(RuntimeError, match="view taken before its base's shape changed"):
        row.copy_(fg.ones(3, requires_grad=True) * 2)


# -------------------------------------------------------------------- storage


@pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")
def test_storage_is_the_memory_views_share():
    base = fg.arange(6.0)
    row = base.view(2, 3)[1]
    storage = row.storage()
    assert storage.size() == len(storage) == 6 and row.storage_offset() == 3
    assert storage.data_ptr() == base.data_ptr() == row.data_ptr() - 3 * 4
    assert storage.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert storage[-1] == 5.0 and type(storage[0]) is float
    assert storage.element_size() == 4 and storage.nbytes() == 24
    assert storage.dtype is fg.float32 and storage.device == fg.device("cpu")
    assert storage.type() == "fusegrad.FloatStorage"
    storage[0] = 10
    storage[4:] = 7
    assert base.tolist() == [10.0, 1.0, 2.0, 3.0, 7.0, 7.0]
    assert repr(fg.tensor([1, 2]).storage()).startswith(" 1\n 2\n[")
    assert repr(fg.tensor([1, 2]).storage()).endswith(
        "(dtype=fusegrad.int64, device=cpu) of size 2]"
    )


def test_typed_storage_warns_once_that_it_is_deprecated(monkeypatch):
    import fusegrad.eager.storage as storage_module

    monkeypatch.setattr(storage_module, "_warned_typed_storage", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fg.ones(2).storage()
        fg.ones(2).storage()
    assert [str(w.message)[:25] for w in caught] == ["TypedStorage is deprecate"]


@pytest.mark.parametrize(
    "dtype,numpy_type",
    [(fg.float32, np.float32), (fg.int64, np.int64), (fg.float16, np.float16), (fg.bool, np.bool_)],
)
def test_untyped_storage_holds_the_bytes_of_the_tensors_own_type(dtype, numpy_type):
    values = [1.5, -2.0, 0.0] if dtype.is_floating_point else [1, 0, 1]
    storage = fg.tensor(values, dtype=dtype).untyped_storage()
    want = np.array(values, numpy_type).tobytes()
    assert storage.size() == len(storage) == storage.nbytes() == len(want)
    assert bytes(storage.tolist()) == want and storage[1] == want[1]
    assert storage.element_size() == 1


def test_untyped_storage_of_bfloat16_is_the_upper_half_of_float32():
    storage = fg.tensor([1.5, -2.0], dtype=fg.bfloat16).untyped_storage()
    halves = (np.array([1.5, -2.0], np.float32).view(np.uint32) >> 16).astype(np.uint16)
    assert bytes(storage.tolist()) == halves.tobytes()


def test_resize_keeps_the_storage_and_grows_it_with_zeros():
    t = fg.arange(6.0)
    t.resize_(2)
    assert t.tolist() == [0.0, 1.0] and t.storage().size() == 6 and t._version == 1
    t.resize_(2, 3)  # the storage's elements come back
    assert t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    t.resize_(3, 3)
    assert t.tolist()[2] == [0.0, 0.0, 0.0] and t.storage().size() == 9
    version = t._version
    t.resize_(3, 3)
    assert t._version == version  # the same shape: nothing happens, as in PyTorch


def test_resize_of_a_view_or_of_a_transposed_tensor_reads_storage_order():
    base = fg.arange(6.0)
    tail = base[2:]
    tail.resize_(2, 2)
    assert tail.tolist() == [[2.0, 3.0], [4.0, 5.0]] and tail.storage_offset() == 2
    transposed = fg.arange(6.0).view(2, 3).t()
    transposed.resize_(2, 3)
    assert transposed.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_set_shows_another_tensors_or_storages_elements():
    source = fg.arange(6.0)
    t = fg.zeros(2)
    assert t.set_(source) is t and t.is_set_to(source) and t._version == 1
    t[0] = 9.0
    assert source[0].item() == 9.0
    t.set_(source.untyped_storage(), 1, (2, 2))
    assert t.tolist() == [[1.0, 2.0], [3.0, 4.0]] and t.stride() == (2, 1)
    t.set_(source.storage(), 1, (2, 2), (1, 2))
    assert t.tolist() == [[1.0, 3.0], [2.0, 4.0]] and t.storage_offset() == 1
    assert t.set_().shape == (0,)
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 24"):
        fg.zeros(2).set_(source.storage(), 4, (2, 2))
    with pytest.raises(RuntimeError, match="invalid storage offset -1"):
        fg.zeros(2).set_(source.storage(), -1, (2,))


def test_is_set_to_compares_storage_offset_shape_and_strides():
    x = fg.zeros(3, 2)
    assert x.is_set_to(x) and x.is_set_to(x[:]) and x.is_set_to(x.view(3, 2))
    assert not x.is_set_to(x.clone()) and not x.is_set_to(x.t()) and not x.is_set_to(x[1:])


def test_shared_and_pinned_memory_answer_as_a_cpu_only_pytorch():
    x = fg.arange(4.0)
    assert not x.is_shared() and x.share_memory_() is x
    assert x.is_shared() and x.view(2, 2).is_shared() and x.storage().is_shared()
    assert not x.clone().is_shared()
    assert not x.is_pinned() and not x.storage().is_pinned()
    with pytest.raises(RuntimeError, match="Cannot access accelerator device"):
        x.pin_memory()


@pytest.mark.parametrize(
    "method,call",
    [
        ("storage", lambda t: t.storage()),
        ("untyped_storage", lambda t: t.untyped_storage()),
        ("share_memory_", lambda t: t.share_memory_()),
        ("is_shared", lambda t: t.is_shared()),
        ("is_set_to", lambda t: t.is_set_to(t)),
        ("set_", lambda t: t.set_(t * 2)),
    ],
)
def test_storage_methods_are_not_compiled(method, call):
    with pytest.raises(fg.TracingError, match=method):
        fg.jit(lambda x: call(x * 1))(fg.ones(2))


# ------------------------------------------------------------- ger, errors


def test_ger_is_outer():
    a, b = fg.tensor([1.0, 2.0]), fg.tensor([3.0, 4.0, 5.0])
    np.testing.assert_array_equal(fg.ger(a, b).numpy(), np.outer([1, 2], [3, 4, 5]))
    np.testing.assert_array_equal(a.ger(b).numpy(), np.outer([1, 2], [3, 4, 5]))
    assert fg.ger(a, b, out=fg.empty(2, 3)).shape == (2, 3)


@pytest.mark.parametrize(
    "call,error,message",
    [
        (
            lambda: fg.zeros(2, 3, 4).t_(),
            RuntimeError,
            "t_() expects a tensor with <= 2 dimensions, but self is 3D",
        ),
        (
            lambda: fg.zeros(2, 3).squeeze_(5),
            IndexError,
            "Dimension out of range (expected to be in range of [-2, 1], but got 5)",
        ),
        (
            lambda: fg.zeros(2, 3).unsqueeze_(5),
            IndexError,
            "Dimension out of range (expected to be in range of [-3, 2], but got 5)",
        ),
        (
            lambda: fg.zeros(2, 3).transpose_(0, 3),
            IndexError,
            "Dimension out of range (expected to be in range of [-2, 1], but got 3)",
        ),
        (lambda: fg.zeros(3).fill_diagonal_(1), RuntimeError, "dimensions must larger than 1"),
        (
            lambda: fg.zeros(3, 4, 3).fill_diagonal_(1),
            RuntimeError,
            "all dimensions of input must be of equal length",
        ),
        (lambda: fg.zeros(3).resize_(-1), RuntimeError, "numel: integer multiplication overflow"),
        (
            lambda: fg.zeros(3).resize_((2.0,)),
            TypeError,
            "resize_(): argument 'size' (position 1) must be tuple of ints, but found element "
            "of type float at pos 0",
        ),
        (
            lambda: fg.zeros(2).resize_as_(3),
            TypeError,
            "resize_as_(): argument 'the_template' (position 1) must be Tensor, not int",
        ),
        (
            lambda: fg.zeros(2).set_(fg.zeros(2, dtype=fg.int64)),
            RuntimeError,
            "Could not set tensor of type long int to a tensor of type float",
        ),
        (
            lambda: fg.zeros(2).set_(fg.zeros(2, dtype=fg.float64)),
            RuntimeError,
            "Could not set tensor of type double to a tensor of type float",
        ),
        (
            lambda: fg.zeros(2).storage()[5],
            IndexError,
            "index 5 out of range for storage of size 2",
        ),
        (
            lambda: fg.zeros(2).storage()[0:1],
            RuntimeError,
            "slices are only supported in UntypedStorage.__getitem__",
        ),
        (
            lambda: fg.zeros(2).untyped_storage()[8],
            IndexError,
            "index 8 out of range for storage of size 8",
        ),
        (
            lambda: fg.zeros(2).copysign_(fg.zeros(3)),
            RuntimeError,
            "The size of tensor a (2) must match the size of tensor b (3) at non-singleton "
            "dimension 0",
        ),
        (
            lambda: fg.zeros(2, dtype=fg.int64).copysign_(1),
            RuntimeError,
            "result type Float can't be cast to the desired output type Long",
        ),
        (
            lambda: fg.outer(fg.zeros(2), fg.zeros(2, 2)),
            RuntimeError,
            "outer: Expected 1-D argument vec2, but got 2-D",
        ),
        (
            lambda: fg.ger(fg.zeros(2, 2), fg.zeros(2)),
            RuntimeError,
            "outer: Expected 1-D argument self, but got 2-D",
        ),
        (
            lambda: fg.zeros(2).lerp_(fg.zeros(2, dtype=fg.float64), 0.5),
            RuntimeError,
            "expected dtype float for `end` but got dtype double",
        ),
        (
            lambda: fg.zeros(2).lerp_(fg.zeros(2), fg.full((2,), 0.5, dtype=fg.float64)),
            RuntimeError,
            "expected dtype float for `weight` but got dtype double",
        ),
        (
            lambda: fg.zeros(2).index_fill_(0, fg.tensor([0]), fg.tensor([1.0])),
            RuntimeError,
            "index_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 "
            "dimension(s).",
        ),
    ],
)
def test_errors_are_pytorchs(call, error, message):
    with pytest.raises(error) as raised:
        call()
    assert str(raised.value) == message
