"""Tensor ops beyond what the op table checks: PyTorch's conventions (sort
stability, ties, dtypes, copies and views, errors), and compiled calls whose
values change between calls."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fusegrad as fg


def _calls(fn, make_args, calls=3):
    """fn compiled and eager on fresh arguments per call: values and gradients agree."""
    compiled = fg.jit(fn)
    for call in range(calls):
        args, eager_args = make_args(call), make_args(call)
        got, want = compiled(*args), fn(*eager_args)
        got, want = (
            (got if isinstance(got, tuple) else (got,)),
            (want if isinstance(want, tuple) else (want,)),
        )
        for g, w in zip(got, want):
            assert g.dtype is w.dtype
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-12)
        if got[0].requires_grad:
            leaves = [a for a in args if isinstance(a, fg.Tensor) and a.requires_grad]
            eager_leaves = [a for a in eager_args if isinstance(a, fg.Tensor) and a.requires_grad]
            seed = fg.tensor(np.linspace(-1, 1, got[0].numel()).reshape(got[0].shape))
            for g, w in zip(
                fg.autograd.grad(got[0], leaves, seed),
                fg.autograd.grad(want[0], eager_leaves, seed),
            ):
                np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12)
    return compiled


def _values(call, shape=(4, 6), requires_grad=True):
    rng = np.random.default_rng(call)
    return fg.tensor(rng.standard_normal(shape), requires_grad=requires_grad)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: fg.sort(x, dim=1, descending=True),
        lambda x: x.argsort(0),
        lambda x: x.topk(3, dim=1),
        lambda x: x.topk(2, dim=0, largest=False),
        lambda x: x.cumsum(1) * x.cumprod(0),
        lambda x: x.masked_fill(x > 0.3, -1.0),
        lambda x: fg.einsum("ij,kj->ik", x, x.flip(0)),
        lambda x: x[:, :4].diagonal() + x.roll(2, 1).tril()[:4, :4].sum(0),
        lambda x: fg.zeros(4, 6, dtype=fg.float64).scatter_add(1, x.argsort(1)[:, :3], x[:, :3]),
        lambda x: fg.atan2(x, x.flip(1)) + fg.log2(x.abs() + 1) * fg.exp2(x),
    ],
)
def test_compiled_value_dependent_ops_follow_new_values_on_every_call(fn):
    compiled = _calls(fn, lambda call: (_values(call),))
    assert compiled.cache_info().misses == 1


def test_cumprod_with_zeros_compiled_and_eager_agree_on_changing_zeros():
    def make(call):
        x = np.random.default_rng(call).standard_normal((3, 5))
        x[call % 3, call + 1] = 0.0
        x[(call + 1) % 3, :: call + 2] = 0.0
        return (fg.tensor(x, requires_grad=True),)

    _calls(lambda x: x.cumprod(1), make)


def test_repeat_interleave_with_counts_compiles_again_when_the_counts_change():
    compiled = fg.jit(lambda x, counts: x.repeat_interleave(counts, dim=0))
    x = fg.tensor([[1.0, 2.0], [3.0, 4.0]])
    for counts in ([1, 2], [1, 2], [3, 0]):
        got = compiled(x, fg.tensor(counts))
        np.testing.assert_array_equal(got.numpy(), np.repeat(x.numpy(), counts, axis=0))
    assert compiled.cache_info().misses == 2


@pytest.mark.parametrize(
    "fn", [lambda x: fg.nonzero(x > 0), lambda x: fg.where(x > 0), lambda x: x.nonzero()]
)
def test_nonzero_under_jit_is_a_clear_error_naming_the_line(fn):
    with pytest.raises(fg.TracingError, match=r"nonzero .*test_tensor_ops.py:\d+"):
        fg.jit(fn)(fg.ones(3))


def test_nonzero_forms():
    x = fg.tensor([[0.0, 1.5], [2.0, 0.0]])
    assert fg.nonzero(x).tolist() == [[0, 1], [1, 0]]
    rows, cols = fg.nonzero(x, as_tuple=True)
    assert rows.tolist() == [0, 1] and cols.tolist() == [1, 0]
    assert [t.tolist() for t in fg.where(x > 1.8)] == [[1], [0]]
    assert fg.nonzero(fg.tensor(3.0)).shape == (1, 0)
    assert [t.tolist() for t in fg.nonzero(fg.tensor(0.0), as_tuple=True)] == [[]]
    assert fg.argwhere(x).dtype is fg.int64


def test_sort_is_stable_and_puts_nan_above_every_number():
    x = fg.tensor([2.0, float("nan"), 1.0, 2.0, -math.inf, 1.0])
    assert fg.sort(x).indices.tolist() == [4, 2, 5, 0, 3, 1]
    assert x.sort(descending=True).indices.tolist() == [1, 0, 3, 2, 5, 4]
    assert x.argsort(descending=True, stable=True).tolist() == [1, 0, 3, 2, 5, 4]
    values, indices = fg.sort(fg.tensor([[3, 1], [0, 0]]), dim=0)
    assert values.tolist() == [[0, 0], [3, 1]] and indices.tolist() == [[1, 1], [0, 0]]


def test_topk_of_ties_takes_the_first_ones_in_order():
    x = fg.tensor([1.0, 3.0, 3.0, 0.0, 3.0, 0.0])
    assert x.topk(2).indices.tolist() == [1, 2]
    assert x.topk(2, largest=False).indices.tolist() == [3, 5]
    result = fg.topk(fg.tensor([[1.0, 5.0, 2.0]]), 1, sorted=False)
    assert result.values.tolist() == [[5.0]] and result.indices.tolist() == [[1]]
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        x.topk(7)


def test_sort_and_topk_gradients_go_to_the_chosen_elements():
    x = fg.tensor([0.5, 2.0, -1.0, 2.0], requires_grad=True)
    (x.topk(2).values * fg.tensor([10.0, 1.0])).sum().backward()
    assert x.grad.tolist() == [0.0, 10.0, 0.0, 1.0]
    y = fg.tensor([[3.0, 1.0, 2.0]], requires_grad=True)
    (fg.sort(y).values * fg.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert y.grad.tolist() == [[3.0, 1.0, 2.0]]
    assert type(fg.sort(y).values.grad_fn).__name__ == "SortBackward0"
    assert type(y.topk(1).values.grad_fn).__name__ == "TopkBackward0"


@pytest.mark.parametrize("op", [fg.cumsum, fg.cumprod])
def test_scans_of_integers_and_bools_accumulate_in_int64(op):
    assert op(fg.tensor([1, 2, 3], dtype=fg.int32), 0).dtype is fg.int64
    assert op(fg.tensor([True, True, False]), 0).tolist() == (
        [1, 2, 2] if op is fg.cumsum else [1, 1, 0]
    )
    assert op(fg.tensor([1, 2]), 0, dtype=fg.float64).dtype is fg.float64
    assert op(fg.tensor([1.5, 2.0], dtype=fg.float64), 0).dtype is fg.float64


def test_cumsum_gradient_is_the_reversed_cumsum():
    x = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x.cumsum(0) * fg.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert x.grad.tolist() == [111.0, 110.0, 100.0]
    assert type(x.cumsum(0).grad_fn).__name__ == "CumsumBackward0"


def test_cumprod_gradient_at_zeros():
    x = fg.tensor([2.0, 0.0, 3.0, 0.0, 5.0], requires_grad=True)
    x.cumprod(0).sum().backward()
    # d/dx1 = 2 + 2*3 (through out_1, out_2); past the first zero every product is 0
    assert x.grad.tolist() == [1.0, 8.0, 0.0, 0.0, 0.0]


def test_flip_roll_repeat_and_diag_return_copies_diagonal_a_view():
    x = fg.arange(6.0).reshape(2, 3)
    for copy in (x.flip(0), x.roll(1, 0), x.repeat(1, 1), fg.diag(x), x.repeat_interleave(1)):
        copy.mul_(0)
    assert x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    x.diagonal().fill_(-1.0)
    assert x.tolist() == [[-1.0, 1.0, 2.0], [3.0, -1.0, 5.0]]


def test_repeat_tiles_and_refuses_fewer_sizes_than_dimensions():
    assert fg.tensor([1, 2]).repeat(2, 2).tolist() == [[1, 2, 1, 2], [1, 2, 1, 2]]
    assert fg.tensor([[1, 2]]).repeat((1, 2)).tolist() == [[1, 2, 1, 2]]
    with pytest.raises(RuntimeError, match="can not be smaller than number of dimensions"):
        fg.ones(2, 2).repeat(2)


def test_repeat_interleave_forms_and_errors():
    assert fg.repeat_interleave(fg.tensor([2, 0, 1])).tolist() == [0, 0, 2]
    assert fg.tensor([[1, 2], [3, 4]]).repeat_interleave(2).tolist() == [1, 1, 2, 2, 3, 3, 4, 4]
    x = fg.tensor([[1, 2], [3, 4]])
    assert x.repeat_interleave(fg.tensor([1, 2]), dim=0).tolist() == [[1, 2], [3, 4], [3, 4]]
    assert x.repeat_interleave(fg.tensor(2), dim=1).tolist() == [[1, 1, 2, 2], [3, 3, 4, 4]]
    with pytest.raises(RuntimeError, match="repeats must have the same size as input along dim"):
        x.repeat_interleave(fg.tensor([1, 2, 3]), dim=0)
    with pytest.raises(RuntimeError, match="repeats can not be negative"):
        x.repeat_interleave(-1)


def test_masked_fill_and_its_inplace_form():
    x = fg.zeros(2, 3)
    mask = fg.tensor([True, False, True])
    assert x.masked_fill(mask, 2.0).tolist() == [[2.0, 0.0, 2.0]] * 2
    assert fg.tensor([1, 2, 3]).masked_fill(mask, 7).dtype is fg.int64
    assert x.masked_fill_(mask, 5.0) is x and x.tolist() == [[5.0, 0.0, 5.0]] * 2
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        x.masked_fill(fg.tensor([1, 0, 1]), 0.0)
    with pytest.raises(RuntimeError, match="expand"):
        fg.zeros(3).masked_fill_(fg.ones(2, 3) > 0, 1.0)
    with pytest.raises(RuntimeError, match="0-dimensional value tensor"):
        x.masked_fill(mask, fg.ones(3))
    value = fg.tensor(2.0, requires_grad=True)
    x.masked_fill(mask, value).sum().backward()
    assert value.grad.item() == 4.0


def test_tril_triu_refuse_vectors_and_keep_dtype():
    assert fg.tensor([[1, 2], [3, 4]]).triu().tolist() == [[1, 2], [0, 4]]
    assert fg.ones(2, 2, dtype=fg.bool).tril(-1).tolist() == [[False, False], [True, False]]
    with pytest.raises(RuntimeError, match="tril: input tensor must have at least 2 dimensions"):
        fg.ones(3).tril()


def test_einsum_implicit_output_is_alphabetical_upper_case_first():
    a, b = fg.ones(2, 3), fg.ones(3, 4)
    assert fg.einsum("ba,ac", b.t(), b).shape == (4, 4)  # "bc"
    assert fg.einsum("zA,Bz", fg.ones(3, 2), fg.ones(5, 3)).shape == (2, 5)  # "AB"
    assert fg.einsum("ij,jk", [a, b]).tolist() == [[3.0] * 4] * 2
    assert fg.einsum(a, [0, 1], b, [1, 2], [0, 2]).shape == (2, 4)
    assert fg.einsum("...j,j->...", fg.ones(2, 5, 3), fg.ones(3)).shape == (2, 5)


@pytest.mark.parametrize(
    "equation,shapes,message",
    [
        ("ij->ii", [(2, 2)], "output subscript i appears more than once in the output"),
        ("ij->k", [(2, 2)], "output subscript k does not appear in the equation"),
        ("ij,jk", [(2, 2)], "fewer operands were provided than specified"),
        ("ij", [(2, 2), (2, 2)], "more operands were provided than specified"),
        ("ijk", [(2, 2)], r"number of subscripts in the equation \(3\) does not match"),
        ("ii", [(2, 3)], "subscript i is repeated for operand 0 but the sizes don't match"),
        ("ij,jk", [(2, 3), (4, 2)], "must match"),
        ("i1", [(2, 2)], "subscripts must be in"),
    ],
)
def test_einsum_errors(equation, shapes, message):
    with pytest.raises(RuntimeError, match=message):
        fg.einsum(equation, *[fg.ones(s) for s in shapes])


def test_scatter_forms_and_errors():
    index = fg.tensor([[0, 2]])
    assert fg.zeros(2, 3).scatter(1, index, fg.ones(1, 2)).tolist() == [
        [1.0, 0.0, 1.0],
        [0.0, 0.0, 0.0],
    ]
    assert fg.zeros(1, 3).scatter(1, index, value=4.0).tolist() == [[4.0, 0.0, 4.0]]
    added = fg.zeros(1, 3).scatter(1, fg.tensor([[1, 1]]), fg.ones(1, 2), reduce="add")
    assert added.tolist() == [[0.0, 2.0, 0.0]]
    x = fg.zeros(1, 3)
    assert x.scatter_add_(1, fg.tensor([[2, 2]]), fg.ones(1, 2)) is x and x.tolist() == [
        [0.0, 0.0, 2.0]
    ]
    with pytest.raises(RuntimeError, match="index 3 is out of bounds for dimension 1 with size 3"):
        x.scatter(1, fg.tensor([[3]]), 1.0)
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        x.scatter(1, fg.tensor([0]), 1.0)
    with pytest.raises(RuntimeError, match=r"Expected self\.dtype to be equal to src\.dtype"):
        x.scatter(1, index, fg.ones(1, 2, dtype=fg.float64))


def test_index_add_accumulates_repeated_indices_with_alpha():
    x = fg.ones(3, 2, requires_grad=True)
    source = fg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    out = x.index_add(0, fg.tensor([2, 2]), source, alpha=2.0)
    assert out.tolist() == [[1.0, 1.0], [1.0, 1.0], [9.0, 13.0]]
    out.sum().backward()
    assert x.grad.tolist() == [[1.0, 1.0]] * 3 and source.grad.tolist() == [[2.0, 2.0]] * 2
    with pytest.raises(RuntimeError, match="source shape"):
        x.index_add(0, fg.tensor([0]), fg.ones(2, 2))


def test_flip_and_roll_argument_errors():
    with pytest.raises(RuntimeError, match="dims has duplicates"):
        fg.ones(2, 2).flip((0, 0))
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        fg.ones(2, 2).roll((1, 2), 0)
    assert fg.arange(4).roll(1).tolist() == [3, 0, 1, 2]
    assert fg.arange(4).reshape(2, 2).roll(1).tolist() == [[3, 0], [1, 2]]
    with pytest.raises(RuntimeError, match=r"Input must be >= 2-d\."):
        fg.ones(3).fliplr()


def test_diagonal_diag_and_trace_forms():
    x = fg.arange(12.0).reshape(3, 4)
    assert x.diagonal(1).tolist() == [1.0, 6.0, 11.0]
    assert x.diagonal(-1).tolist() == [4.0, 9.0]
    assert fg.diag(fg.tensor([1, 2]), 1).tolist() == [[0, 1, 0], [0, 0, 2], [0, 0, 0]]
    assert x.trace().item() == 15.0
    assert fg.diag_embed(fg.ones(2, 2)).shape == (2, 2, 2)
    with pytest.raises(RuntimeError, match="diagonal dimensions cannot be identical"):
        x.diagonal(0, 1, 1)


def test_new_tensors_take_the_dtype_of_self():
    x = fg.ones(2, dtype=fg.float64)
    assert x.new_zeros(2, 3).dtype is fg.float64 and x.new_zeros((2, 3)).shape == (2, 3)
    assert x.new_ones(1).tolist() == [1.0] and x.new_empty(2).shape == (2,)
    assert x.new_full((2,), 7).tolist() == [7.0, 7.0] and x.new_full((2,), 7).dtype is fg.float64
    assert x.new_tensor([1, 2]).dtype is fg.float64
    assert x.new_zeros(2, dtype=fg.int64).dtype is fg.int64
    assert x.new_ones(2, requires_grad=True).requires_grad
    with pytest.warns(UserWarning, match="To copy construct from a tensor"):
        copy = x.new_tensor(x)
    assert not copy.requires_grad and copy.tolist() == [1.0, 1.0]


@pytest.mark.parametrize(
    "name,args",
    [
        ("clamp_min_", (0.5,)),
        ("clamp_max_", (0.5,)),
        ("square_", ()),
        ("reciprocal_", ()),
        ("log2_", ()),
        ("cumsum_", (0,)),
        ("tril_", ()),
        ("triu_", (1,)),
    ],
)
def test_inplace_variants_write_what_the_op_returns(name, args):
    x = fg.tensor([[0.25, 2.0], [4.0, 0.5]])
    expected = getattr(x, name[:-1])(*args)
    assert getattr(x, name)(*args) is x
    np.testing.assert_array_equal(x.numpy(), expected.numpy())


def test_elementwise_math_at_special_points():
    assert fg.log10(fg.tensor([1000.0, 0.0])).tolist() == [3.0, -math.inf]
    assert fg.log2(fg.tensor([8.0], dtype=fg.float64)).item() == 3.0
    assert fg.exp2(fg.tensor([3, 10])).tolist() == [8.0, 1024.0]
    assert fg.square(fg.tensor([3])).dtype is fg.int64
    assert fg.reciprocal(fg.tensor([4])).tolist() == [0.25]
    y, x = fg.zeros(1, requires_grad=True), fg.zeros(1, requires_grad=True)
    fg.atan2(y, x).sum().backward()
    assert y.grad.item() == 0.0 and x.grad.item() == 0.0  # PyTorch's, not 0/0


# ------------------------------------------------------ argument forms PyTorch accepts


def test_numpy_names_for_dim_and_keepdim():
    x = fg.arange(6.0).reshape(2, 3)
    assert x.sum(axis=0, keepdims=True).tolist() == [[3.0, 5.0, 7.0]]
    assert fg.mean(x, axis=1).tolist() == [1.0, 4.0]
    assert x.argmax(axis=1).tolist() == [2, 2] and x.max(axis=0).indices.tolist() == [1, 1, 1]
    assert fg.cat([x, x], axis=1).shape == (2, 6)
    assert x.cumsum(axis=1).tolist() == [[0.0, 1.0, 3.0], [3.0, 7.0, 12.0]]
    with pytest.raises(TypeError, match="multiple values for argument 'dim'"):
        x.sum(dim=0, axis=1)


@pytest.mark.parametrize("index", [np.int64(1), np.int32(-1), fg.tensor(1)])
def test_numpy_and_tensor_integers_as_dims(index):
    x = fg.arange(6.0).reshape(2, 3)
    assert x.sum(dim=index).tolist() == [3.0, 12.0]
    assert x.size(index) == 3 and x.softmax(index).shape == (2, 3)
    assert x.transpose(0, index).shape == (3, 2) and x.unsqueeze(index).ndim == 3
    assert x.flip(index).tolist() == [[2.0, 1.0, 0.0], [5.0, 4.0, 3.0]]
    assert x.reshape(2, 3, 1).squeeze(np.int64(2)).shape == (2, 3)


def test_out_writes_into_the_given_tensor_and_returns_it():
    x = fg.arange(6.0).reshape(2, 3)
    out = fg.empty(2, 3)
    assert fg.add(x, 1, out=out) is out and out.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    before = out._version
    fg.mul(out, out, out=out)  # out may be an operand
    assert out[0].tolist() == [1.0, 4.0, 9.0] and out._version == before + 1
    wide = fg.empty(3, dtype=fg.float64)
    assert fg.sum(x, 0, out=wide).dtype is fg.float64 and wide.tolist() == [3.0, 5.0, 7.0]
    values, indices = fg.empty(2), fg.empty(2, dtype=fg.int64)
    result = fg.max(x, 1, out=(values, indices))
    assert result.values is values and indices.tolist() == [2, 2]
    fg.sort(-x, 1, out=(values.new_empty(0), indices.new_empty(0)))
    stacked = fg.empty(0)
    fg.stack([x, x], out=stacked)  # an empty out is resized silently
    assert stacked.shape == (2, 2, 3)


def test_out_of_another_shape_is_resized_with_pytorchs_warning():
    out = fg.zeros(2)
    with pytest.warns(UserWarning, match=r"was resized since it had shape \[2\]"):
        fg.matmul(fg.ones(3, 2), fg.ones(2, 4), out=out)
    assert out.shape == (3, 4) and out.tolist() == [[2.0] * 4] * 3


def test_out_refuses_gradients_and_narrowing_casts():
    x = fg.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"exp\(\): functions with out=\.\.\. arguments"):
        fg.exp(x, out=fg.empty(2))
    with fg.no_grad():
        assert fg.exp(x, out=fg.empty(2)).tolist() == pytest.approx([math.e] * 2)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output"):
        fg.add(fg.ones(2), 0.5, out=fg.empty(2, dtype=fg.int64))
    leaf = fg.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        fg.add(fg.ones(2), 1, out=leaf)


def test_out_under_jit_writes_into_an_input():
    def step(x, out):
        fg.mul(x, 2, out=out)
        return out.sum()

    compiled = fg.jit(step)
    for call in range(3):
        x = fg.tensor([1.0, 2.0]) * (call + 1)
        out, eager_out = fg.zeros(2), fg.zeros(2)
        assert compiled(x, out).item() == step(x, eager_out).item()
        assert out.tolist() == eager_out.tolist() == (x * 2).tolist()


def test_indexing_with_a_range_and_lists_of_ints():
    x = fg.arange(12.0).reshape(3, 4)
    assert x[range(2)].tolist() == x[:2].tolist()
    assert x[:, range(1, 4, 2)].tolist() == [[1.0, 3.0], [5.0, 7.0], [9.0, 11.0]]
    assert x[[2, 0]].tolist() == [x[2].tolist(), x[0].tolist()]
    assert x[[0, 2], [1, 3]].tolist() == [1.0, 11.0]
    assert x[[[0], [2]], [1, 3]].tolist() == [[1.0, 3.0], [9.0, 11.0]]
    y = fg.zeros(4)
    y[range(0, 4, 2)] = 1.0
    assert y.tolist() == [1.0, 0.0, 1.0, 0.0]


def test_format_of_tensors_as_pytorch():
    loss = fg.tensor(0.123456)
    assert f"{loss:.4f}" == "0.1235" and f"{loss}" == format(loss.item())
    assert f"{fg.tensor(7):03d}" == "007"
    x = fg.ones(2)
    assert f"{x}" == str(x)
    with pytest.raises(TypeError, match=r"unsupported format string passed to Tensor\.__format__"):
        f"{x:.2f}"
    assert f"{fg.nn.Parameter(fg.tensor(1.0))}" == str(fg.nn.Parameter(fg.tensor(1.0)))


def test_out_takes_a_plain_tuple_for_an_op_returning_one():
    rows, cols = fg.empty(0, dtype=fg.int64), fg.empty(0, dtype=fg.int64)
    result = fg.nonzero(fg.tensor([[0, 1], [1, 1]]), as_tuple=True, out=(rows, cols))
    assert type(result) is tuple and result[0] is rows
    assert rows.tolist() == [0, 1, 1] and cols.tolist() == [1, 0, 1]


@pytest.mark.parametrize(
    "op,name",
    [
        (lambda x: x.cumsum(0), "CumsumBackward0"),
        (lambda x: x.cumprod(1), "CumprodBackward0"),
        (lambda x: x.sort().values, "SortBackward0"),
        (lambda x: x.topk(1).values, "TopkBackward0"),
        (lambda x: x.tril(), "TrilBackward0"),
        (lambda x: x.triu(), "TriuBackward0"),
        (lambda x: x.masked_fill(x > 1, 0.0), "MaskedFillBackward0"),
        (lambda x: x.flip(0), "FlipBackward0"),
        (lambda x: x.roll(1, 0), "RollBackward0"),
        (lambda x: x.repeat(2, 1), "RepeatBackward0"),
        (lambda x: x.diagonal(), "DiagonalBackward0"),
        (lambda x: x.trace(), "TraceBackward0"),
        (lambda x: x.reciprocal(), "ReciprocalBackward0"),
        (lambda x: x.square(), "PowBackward0"),
        (lambda x: x.log2(), "Log2Backward0"),
        (lambda x: x.log10(), "Log10Backward0"),
        (lambda x: x.exp2(), "Exp2Backward0"),
        (lambda x: x.atan2(x), "Atan2Backward0"),
        (lambda x: x.clamp_min(0.5), "ClampMinBackward0"),
        (lambda x: x.clamp_max(0.5), "ClampMaxBackward0"),
        (lambda x: x.scatter_add(0, fg.tensor([[1, 0]]), x), "ScatterAddBackward0"),
        (lambda x: x.scatter(0, fg.tensor([[1, 0]]), x), "ScatterBackward0"),
        (lambda x: x.index_add(0, fg.tensor([1]), x[:1]), "IndexAddBackward0"),
    ],
)
def test_new_ops_nodes_have_pytorchs_names(op, name):
    node = op(fg.ones(2, 2, requires_grad=True)).grad_fn
    assert type(node).__name__ == name


@pytest.mark.parametrize("op", [lambda x: x.prod(), lambda x: x.cumprod(0)[-1]])
def test_second_derivatives_of_products_with_two_zeros(op):
    x = fg.tensor([2.0, 0.0, 3.0, 0.0], requires_grad=True)
    (first,) = fg.autograd.grad(op(x), x, create_graph=True)
    assert first.tolist() == [0.0, 0.0, 0.0, 0.0]
    (second,) = fg.autograd.grad(first[1], x)
    assert second.tolist() == [0.0, 0.0, 0.0, 6.0]  # d2/dx1dx3 = x0 * x2


# ------------------------------------------- edges of the ops composed of others
# (values and gradients PyTorch 2 gives, checked with it once)

INF, NAN = math.inf, math.nan


def _native(monkeypatch):
    from fusegrad.runtime import launch

    monkeypatch.setattr(launch, "SMALL_WORK", 0)


def test_xlogy_is_zero_where_x_is_zero_and_its_gradient_there_is_log_y(monkeypatch):
    _native(monkeypatch)
    x = fg.tensor([0.0, 0.0, 0.0, 0.0, 2.0], dtype=fg.float64, requires_grad=True)
    y = fg.tensor([0.0, NAN, INF, 2.0, 3.0], dtype=fg.float64)
    want = [0.0, NAN, 0.0, 0.0, 2 * math.log(3.0)]
    for fn in (fg.xlogy, fg.jit(fg.xlogy)):
        for _ in range(2):
            out = fn(x, y)
            np.testing.assert_allclose(out.detach().numpy(), want)
            (grad,) = fg.autograd.grad(out.sum(), x)
            np.testing.assert_allclose(grad.numpy()[[0, 3, 4]], [0.0, math.log(2.0), math.log(3.0)])


@pytest.mark.parametrize(
    "op,x,value,grad",
    [  # max() and min(): PyTorch's evenly_distribute_backward, NaNs tie with a NaN result
        (lambda x: x.max(), [1.0, NAN, 3.0], NAN, [0.0, 1.0, 0.0]),
        (lambda x: x.min(), [NAN, 1.0, NAN], NAN, [0.5, 0.0, 0.5]),
        (lambda x: x.max(), [INF, NAN, 3.0], NAN, [0.0, 1.0, 0.0]),
        (lambda x: x.max(), [3.0, 1.0, 3.0], 3.0, [0.5, 0.0, 0.5]),
        (lambda x: x.min(), [-INF, 1.0, -INF], -INF, [0.5, 0.0, 0.5]),
        (lambda x: x.max(0).values, [1.0, NAN, NAN], NAN, [0.0, 1.0, 0.0]),  # the first NaN
        # amax: PyTorch's scale_grad_by_count finds no element equal to NaN: 0/0
        (lambda x: x.amax(), [1.0, NAN, 3.0], NAN, [NAN, NAN, NAN]),
    ],
)
def test_max_and_min_share_the_gradient_between_ties_and_nans(op, x, value, grad, monkeypatch):
    _native(monkeypatch)
    for fn in (op, fg.jit(op)):
        for _ in range(2):
            leaf = fg.tensor(x, requires_grad=True)
            out = fn(leaf)
            np.testing.assert_array_equal(out.detach().numpy(), value)
            np.testing.assert_array_equal(fg.autograd.grad(out, leaf)[0].numpy(), grad)


@pytest.mark.parametrize("dtype", [fg.float16, fg.float32, fg.float64])
def test_nan_to_num_defaults_to_the_largest_finite_value_of_the_dtype(dtype):
    largest = fg.finfo(dtype).max
    out = fg.nan_to_num(fg.tensor([INF, -INF, NAN, 1.5], dtype=dtype))
    assert out.dtype is dtype
    assert out.tolist() == [largest, -largest, 0.0, 1.5]
    x = fg.tensor([INF, NAN, 1.5], requires_grad=True)
    (grad,) = fg.autograd.grad(fg.nan_to_num(x, nan=2.0).sum(), x)
    assert grad.tolist() == [0.0, 0.0, 1.0]


def test_finfo_and_iinfo_give_pytorchs_limits():
    assert fg.finfo(fg.float32).eps == 2.0**-23 and fg.finfo().max == float(
        np.finfo(np.float32).max
    )
    assert (
        fg.finfo(fg.bfloat16).max == 3.3895313892515355e38 and fg.finfo(fg.bfloat16).eps == 2.0**-7
    )
    assert fg.finfo(fg.float16).resolution == 0.001 and fg.finfo(fg.float16).tiny == 2.0**-14
    assert (fg.iinfo(fg.int32).min, fg.iinfo(fg.int64).max) == (-(2**31), 2**63 - 1)
    with pytest.raises(TypeError):
        fg.finfo(fg.int64)


def test_logaddexp_of_equal_infinities_and_large_values(monkeypatch):
    _native(monkeypatch)
    a = fg.tensor([-INF, INF, 1000.0, -1000.0, 0.5])
    b = fg.tensor([-INF, INF, 1000.0, -1000.5, NAN])
    for fn in (fg.logaddexp, fg.jit(fg.logaddexp)):
        for _ in range(2):
            out = fn(a, b).tolist()
            assert out[:2] == [-INF, INF] and math.isnan(out[4])
            np.testing.assert_allclose(
                out[2:4], [1000.0 + math.log(2), np.logaddexp(-1000.0, -1000.5)]
            )
    for fn in (fg.logaddexp2, fg.jit(fg.logaddexp2)):
        assert fn(a[:3], b[:3]).tolist() == [-INF, INF, 1001.0]


def test_hypot_does_not_overflow_where_the_squares_would(monkeypatch):
    _native(monkeypatch)
    big = fg.tensor([1e20, 3.0])
    for fn in (fg.hypot, fg.jit(fg.hypot)):
        np.testing.assert_allclose(
            fn(big, big).numpy(), [1e20 * math.sqrt(2), 3 * math.sqrt(2)], rtol=1e-6
        )


def test_sinc_at_zero_is_one_with_every_derivative_of_its_series():
    x = fg.tensor([0.0], dtype=fg.float64, requires_grad=True)
    y = fg.sinc(x)
    (first,) = fg.autograd.grad(y.sum(), x, create_graph=True)
    (second,) = fg.autograd.grad(first.sum(), x)
    assert y.item() == 1.0 and first.item() == 0.0
    assert second.item() == pytest.approx(-(math.pi**2) / 3)


def test_addmm_with_beta_zero_ignores_the_nans_of_input():
    out = fg.addmm(fg.full((3, 1), NAN), fg.ones(3, 2), fg.ones(2, 4), beta=0)
    assert out.shape == (3, 4) and out.tolist() == [[2.0] * 4] * 3


def test_in_place_forms_of_the_composed_ops():
    a, b, c = fg.ones(2, 3), fg.full((2, 3), 2.0), fg.full((3,), 4.0)
    assert a.clone().addcmul_(b, c, value=0.5).tolist() == [[5.0] * 3] * 2
    assert a.clone().addcdiv_(b, c).tolist() == [[1.5] * 3] * 2
    assert a.clone().lerp_(b, 0.25).tolist() == [[1.25] * 3] * 2
    assert fg.zeros(2, 2).addmm_(fg.eye(2), fg.full((2, 2), 3.0)).tolist() == [[3.0] * 2] * 2


def test_unfold_select_and_movedim_refuse_what_pytorch_refuses():
    x = fg.arange(10.0)
    assert x.unfold(0, 4, 3).tolist() == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
    with pytest.raises(RuntimeError, match="maximum size for tensor at dimension 0 is 10"):
        x.unfold(0, 11, 1)
    with pytest.raises(RuntimeError, match="step is 0"):
        x.unfold(0, 2, 0)
    with pytest.raises(IndexError, match="out of range"):
        fg.select(fg.ones(2, 3), 1, 3)
    with pytest.raises(RuntimeError, match="same number of dims"):
        fg.movedim(fg.ones(2, 3), (0, 1), 0)


def test_meshgrid_xy_swaps_the_first_two_axes():
    x, y = fg.tensor([1.0, 2.0, 3.0]), fg.tensor([10.0, 20.0])
    gx, gy = fg.meshgrid(x, y, indexing="xy")
    assert gx.tolist() == [[1, 2, 3], [1, 2, 3]] and gy.tolist() == [[10] * 3, [20] * 3]
    with pytest.warns(UserWarning, match="indexing"):
        ix, _ = fg.meshgrid(x, y)
    assert ix.shape == (3, 2)


def test_unique_and_bincount_give_pytorchs_results_eagerly_and_refuse_to_compile():
    x = fg.tensor([[3, 1, 3], [1, 1, 2], [3, 1, 3]])
    values, inverse, counts = fg.unique(x, return_inverse=True, return_counts=True)
    assert (values.tolist(), inverse.tolist(), counts.tolist()) == (
        [1, 2, 3],
        [[2, 0, 2], [0, 0, 1], [2, 0, 2]],
        [4, 1, 4],
    )
    rows, row_of = fg.unique(x, dim=0, return_inverse=True)
    assert rows.tolist() == [[1, 1, 2], [3, 1, 3]] and row_of.tolist() == [1, 0, 1]
    runs, counts = fg.unique_consecutive(fg.tensor([2.0, 1, 2, 2, 3, 1]), return_counts=True)
    assert runs.tolist() == [2, 1, 2, 3, 1] and counts.tolist() == [1, 1, 2, 1, 1]
    assert fg.bincount(fg.tensor([1, 1, 3, 0])).tolist() == [1, 2, 0, 1]
    weighted = fg.bincount(fg.tensor([1, 1, 3]), fg.tensor([0.5, 1.0, 2.0]), minlength=5)
    assert weighted.dtype is fg.float32 and weighted.tolist() == [0, 1.5, 0, 2, 0]
    with pytest.raises(RuntimeError, match="non-negative"):
        fg.bincount(fg.tensor([-1, 1]))
    for fn in (fg.unique, fg.bincount, lambda t: fg.masked_select(t, t > 1)):
        with pytest.raises(fg.TracingError, match="shape depends on"):
            fg.jit(fn)(fg.tensor([1, 2, 2]))


def test_float_power_computes_in_float64():
    assert fg.float_power(fg.ones(2), 2).dtype is fg.float64
    assert fg.float_power(fg.tensor([2, 3]), fg.tensor([0.5])).dtype is fg.float64


def test_windows_and_logspace_are_numpys():
    np.testing.assert_allclose(fg.hann_window(7, periodic=False).numpy(), np.hanning(7), atol=1e-7)
    np.testing.assert_allclose(fg.hann_window(8).numpy(), np.hanning(9)[:-1], atol=1e-7)
    np.testing.assert_allclose(
        fg.hamming_window(6, periodic=False, dtype=fg.float64).numpy(), np.hamming(6)
    )
    assert fg.hann_window(1).tolist() == [1.0] and fg.hann_window(0).shape == (0,)
    np.testing.assert_allclose(fg.logspace(0, 3, 4, base=2).numpy(), [1, 2, 4, 8])
    np.testing.assert_allclose(fg.logspace(-1, 1, 5).numpy(), np.logspace(-1, 1, 5), rtol=1e-6)


def test_python_callables_storage_offsets_and_more_samplers():
    x = fg.arange(6.0).reshape(2, 3)
    assert x.clone().apply_(lambda v: v * v).tolist() == [[0, 1, 4], [9, 16, 25]]
    assert x.clone().map_(fg.tensor([1.0, 2.0, 3.0]), lambda a, b: a - b).tolist() == [
        [-1, -1, -1],
        [2, 2, 2],
    ]
    with pytest.raises(fg.TracingError, match="each element"):
        fg.jit(lambda t: t.clone().apply_(abs))(x)
    assert [x[1].storage_offset(), x[:, 2:].storage_offset(), x.t()[2].storage_offset()] == [
        3,
        2,
        2,
    ]
    fg.manual_seed(0)
    logs = fg.empty(50000, dtype=fg.float64).log_normal_(0.5, 0.25).log()
    assert abs(logs.mean().item() - 0.5) < 0.01 and abs(logs.std().item() - 0.25) < 0.01
    cauchy = fg.empty(50001, dtype=fg.float64).cauchy_(2.0, 3.0)
    assert abs(cauchy.median().item() - 2.0) < 0.1
    assert abs(((cauchy - 2.0).abs() < 3.0).double().mean().item() - 0.5) < 0.01
