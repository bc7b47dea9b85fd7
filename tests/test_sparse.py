"""Sparse COO tensors: constructors, conversions, products with dense
tensors against the dense products, gradients (against the dense
product's and finite differences), PyTorch's errors, and sparse tensors
as arguments, results and globals of jit functions."""

import copy
import pickle
import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn.functional as F

# an uncoalesced 2x3 matrix: position (0, 2) is stored twice
INDICES = [[0, 1, 1, 0], [2, 0, 2, 2]]
VALUES = [3.0, 4.0, 5.0, 1.0]
DENSE = np.array([[0.0, 0.0, 4.0], [4.0, 0.0, 5.0]])


def _sparse(dtype=fg.float32, **kwargs):
    return fg.sparse_coo_tensor(
        fg.tensor(INDICES), fg.tensor(VALUES, dtype=dtype), (2, 3), **kwargs
    )


# ------------------------------------------------------------ constructors

coo = fg.sparse_coo_tensor
F32, F64, I64 = fg.float32, fg.float64, fg.int64

# (id, make, its dense values, (nnz, coalesced, dtype))
CONSTRUCTED = [
    ("tensors", lambda: _sparse(), DENSE, (4, False, F32)),
    ("lists", lambda: coo(INDICES, VALUES, (2, 3)), DENSE, (4, False, F32)),
    ("dtype", lambda: coo(INDICES, VALUES, dtype=F64), DENSE, (4, False, F64)),
    ("int values", lambda: coo([[0, 1], [1, 0]], [1, 2]), [[0, 1], [2, 0]], (2, False, I64)),
    ("float indices", lambda: coo(fg.tensor(INDICES).float(), VALUES), DENSE, (4, False, F32)),
    ("one entry", lambda: coo([[1], [2]], [7.0], (2, 3)), [[0, 0, 0], [0, 0, 7]], (1, True, F32)),
    (
        "declared coalesced",
        lambda: coo([[0, 1], [0, 0]], [1.0, 2.0], (2, 2), is_coalesced=True),
        [[1, 0], [2, 0]],
        (2, True, F32),
    ),
    ("empty", lambda: coo(size=(2, 3)), np.zeros((2, 3)), (0, True, F32)),
    (
        "legacy",
        lambda: fg.sparse.FloatTensor(fg.tensor(INDICES), fg.tensor(VALUES), fg.Size([2, 3])),
        DENSE,
        (4, False, F32),
    ),
    ("legacy empty", lambda: fg.sparse.DoubleTensor(2, 3), np.zeros((2, 3)), (0, True, F64)),
    ("to_sparse", lambda: fg.tensor(DENSE).to_sparse(), DENSE, (3, True, F64)),
    (
        "to_sparse_coo",
        lambda: fg.tensor([[0, 1], [2, 0]]).to_sparse_coo(),
        [[0, 1], [2, 0]],
        (2, True, I64),
    ),
    (
        "hybrid",
        lambda: fg.tensor([[0.0, 0.0], [1.0, 0.0]]).to_sparse(1),
        [[0, 0], [1, 0]],
        (1, True, F32),
    ),
    ("coalesce", lambda: _sparse().coalesce(), DENSE, (3, True, F32)),
]


@pytest.mark.parametrize(
    "make, dense, expected", [c[1:] for c in CONSTRUCTED], ids=[c[0] for c in CONSTRUCTED]
)
def test_constructors_make_the_sparse_tensor_of_their_dense_values(make, dense, expected):
    s = make()
    assert s.is_sparse and s.layout is fg.sparse_coo and isinstance(s, fg.Tensor)
    assert (s._nnz(), s.is_coalesced(), s.dtype) == expected
    assert tuple(s.shape) == np.shape(dense) and s.size() == fg.Size(np.shape(dense))
    got = s.to_dense()
    assert got.layout is fg.strided and not got.is_sparse and got.dtype is expected[2]
    np.testing.assert_array_equal(got.numpy(), np.asarray(dense))


def test_the_size_not_given_is_the_smallest_holding_the_indices():
    assert fg.sparse_coo_tensor(INDICES, VALUES).shape == (2, 3)
    assert fg.sparse_coo_tensor(fg.zeros(1, 0, dtype=fg.int64), fg.zeros(0, 3)).shape == (0, 3)


def test_dense_tensors_are_strided_and_to_dense_is_themselves():
    x = fg.ones(2, 3)
    assert x.layout is fg.strided and not x.is_sparse and x.to_dense() is x
    assert repr(fg.strided) == "fusegrad.strided" and isinstance(fg.sparse_coo, fg.layout)


def test_structure_and_accessors():
    s = _sparse()
    assert (s.dim(), s.ndim, s.numel(), len(s), s.size(-1)) == (2, 2, 6, 2, 3)
    assert (s.sparse_dim(), s.dense_dim()) == (2, 0)
    assert s._indices().tolist() == INDICES and s._values().tolist() == VALUES
    c = s.coalesce()
    assert c.indices().tolist() == [[0, 1, 1], [2, 0, 2]] and c.values().tolist() == [4, 4, 5]
    assert c.coalesce() is c and s.to_sparse() is s and s.float() is s and s.to("cpu") is s
    assert s.double().dtype is fg.float64 and s.to(fg.float64).to_dense().dtype is fg.float64
    assert not s.is_contiguous() and s.is_leaf and s.grad is None


def test_repr_is_pytorchs():
    assert repr(_sparse(fg.float64)) == (
        "tensor(indices=tensor([[0, 1, 1, 0],\n"
        "                       [2, 0, 2, 2]]),\n"
        "       values=tensor([3., 4., 5., 1.]),\n"
        "       size=(2, 3), nnz=4, dtype=fusegrad.float64, layout=fusegrad.sparse_coo)"
    )
    assert repr(fg.sparse_coo_tensor(size=(2, 3))) == (
        "tensor(indices=tensor([], size=(2, 0)),\n"
        "       values=tensor([], size=(0,)),\n"
        "       size=(2, 3), nnz=0, layout=fusegrad.sparse_coo)"
    )
    assert repr(_sparse(requires_grad=True)).endswith(", requires_grad=True)")
    assert f"{_sparse()}" == repr(_sparse())


def test_pickle_and_deepcopy_keep_the_tensor():
    s = _sparse(requires_grad=True)
    for copied in (pickle.loads(pickle.dumps(s)), copy.deepcopy(s)):
        assert copied.is_sparse and copied.requires_grad and not copied.is_coalesced()
        assert copied._indices().tolist() == INDICES and copied._values().tolist() == VALUES


# ---------------------------------------------------------------- products

D = np.arange(6.0).reshape(3, 2) - 2.0
ROWS = np.array([[1.0, -2.0], [0.5, 3.0]])

PRODUCTS = [
    ("sparse.mm", lambda s, d: fg.sparse.mm(s, d), lambda a, d: a @ d),
    ("mm", lambda s, d: fg.mm(s, d), lambda a, d: a @ d),
    ("spmm", lambda s, d: fg.spmm(s, d), lambda a, d: a @ d),
    ("@", lambda s, d: s @ d, lambda a, d: a @ d),
    ("matmul", lambda s, d: fg.matmul(s, d), lambda a, d: a @ d),
    ("method mm", lambda s, d: s.mm(d), lambda a, d: a @ d),
    ("addmm", lambda s, d: fg.addmm(fg.ones(2, 2, dtype=d.dtype), s, d), lambda a, d: 1 + a @ d),
    ("vector", lambda s, d: s @ d[:, 0], lambda a, d: a @ d[:, 0]),
    ("transposed", lambda s, d: s.t() @ d[:2].t(), lambda a, d: a.T @ d[:2].T),
    ("dense @ sparse", lambda s, d: d.t() @ s.t(), lambda a, d: d.T @ a.T),
    ("dense mm sparse", lambda s, d: fg.sparse.mm(d.t(), s.t()), lambda a, d: d.T @ a.T),
    ("vector @ sparse", lambda s, d: d[:2, 0] @ s, lambda a, d: d[:2, 0] @ a),
    ("coalesced", lambda s, d: s.coalesce() @ d, lambda a, d: a @ d),
    ("scaled", lambda s, d: (2 * s / 4) @ d, lambda a, d: a / 2 @ d),
]


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64])
@pytest.mark.parametrize(
    "product, reference", [p[1:] for p in PRODUCTS], ids=[p[0] for p in PRODUCTS]
)
def test_products_compute_the_dense_product(product, reference, dtype):
    got = product(_sparse(dtype), fg.tensor(D, dtype=dtype))
    assert not got.is_sparse and got.dtype is dtype
    np.testing.assert_allclose(got.numpy(), reference(DENSE, D), rtol=1e-6)


@pytest.mark.parametrize(
    "product, reference", [p[1:] for p in PRODUCTS], ids=[p[0] for p in PRODUCTS]
)
def test_products_differentiate_as_the_dense_product(product, reference):
    """The dense operand's gradient, and each stored value's: the dense
    matrix's gradient at its position (an entry stored twice gets it twice)."""
    values = fg.tensor(VALUES, dtype=fg.float64, requires_grad=True)
    d = fg.tensor(D, requires_grad=True)
    out = product(fg.sparse_coo_tensor(fg.tensor(INDICES), values, (2, 3)), d)
    out.backward(fg.ones(out.shape, dtype=fg.float64) + fg.arange(out.numel()).reshape(out.shape))
    dense, d_ref = fg.tensor(DENSE, requires_grad=True), fg.tensor(D, requires_grad=True)
    ref = reference(dense, d_ref)
    ref.backward(fg.ones(ref.shape, dtype=fg.float64) + fg.arange(ref.numel()).reshape(ref.shape))
    np.testing.assert_allclose(d.grad.numpy(), d_ref.grad.numpy(), rtol=1e-12)
    rows, cols = np.array(INDICES)
    np.testing.assert_allclose(values.grad.numpy(), dense.grad.numpy()[rows, cols], rtol=1e-12)


def test_gradients_match_finite_differences():
    def f(values, d):
        s = fg.sparse_coo_tensor(fg.tensor(INDICES), values, (2, 3))
        return fg.tanh(fg.sparse.mm(s, d)) * (s * 2).to_dense()[:, :2] + (d.t() @ s.t()).t()

    values = fg.tensor(VALUES, dtype=fg.float64, requires_grad=True)
    assert fg.autograd.gradcheck(f, (values, fg.tensor(D, requires_grad=True)))


def test_a_leaf_gets_a_sparse_gradient_of_its_coalesced_pattern():
    s = _sparse(requires_grad=True)
    d = fg.tensor(D, dtype=fg.float32)
    for _ in range(2):
        fg.sparse.mm(s, d).backward(fg.tensor(ROWS, dtype=fg.float32))
    grad = s.grad
    assert (
        grad.is_sparse
        and grad.is_coalesced()
        and grad._indices().tolist() == [[0, 1, 1], [2, 0, 2]]
    )
    assert grad._values().tolist() == (2 * ROWS @ D.T)[[0, 1, 1], [2, 0, 2]].tolist()
    s.grad = None
    assert s.grad is None
    s.to_dense().backward(fg.arange(6.0).reshape(2, 3))
    assert s.grad._values().tolist() == [2.0, 3.0, 5.0]  # (0, 2) once, as PyTorch's


def test_values_that_require_grad_make_a_non_leaf():
    values = fg.tensor(VALUES, requires_grad=True)
    s = fg.sparse_coo_tensor(INDICES, values, (2, 3))
    assert s.requires_grad and not s.is_leaf and s.grad_fn is not None and s.grad is None
    assert "SparseCooTensorWithDimsAndTensorsBackward0" in repr(s)
    assert not s._values().requires_grad and not s.detach().requires_grad
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
        s.requires_grad_(False)
    plain = fg.tensor(VALUES)
    fg.sparse_coo_tensor(INDICES, plain, (2, 3)).requires_grad_()
    assert not plain.requires_grad  # the caller's values keep their flag


def test_to_sparse_and_coalesce_pass_gradients_back():
    x = fg.tensor([[0.0, 1.0], [2.0, 0.0]], requires_grad=True)
    fg.sparse.mm(x.to_sparse(), fg.ones(2, 2)).sum().backward()
    assert x.grad.tolist() == [[0.0, 2.0], [2.0, 0.0]]
    values = fg.tensor(VALUES, requires_grad=True)
    c = fg.sparse_coo_tensor(INDICES, values, (2, 3)).coalesce()
    (c.values() * fg.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert values.grad.tolist() == [1.0, 2.0, 3.0, 1.0]


# ---------------------------------------------------------------- arithmetic

ARITHMETIC = [
    ("times 2", lambda s: s * 2, DENSE * 2, False),
    ("2 times", lambda s: 2 * s, DENSE * 2, False),
    ("times 0-d", lambda s: s * fg.tensor(2.0), DENSE * 2, False),
    ("times row", lambda s: s * fg.tensor([2.0, 3.0, 4.0]), DENSE * [2, 3, 4], False),
    ("divided", lambda s: s / 4, DENSE / 4, False),
    ("negated", lambda s: -s, -DENSE, False),
    ("sparse + sparse", lambda s: s + s, DENSE * 2, False),
    ("coalesced + coalesced", lambda s: s.coalesce() + s.coalesce(), DENSE * 2, True),
    ("sparse - sparse", lambda s: s - s * 3, -DENSE * 2, False),
    ("dense + sparse", lambda s: fg.ones(2, 3) + s, 1 + DENSE, None),
    ("dense - sparse", lambda s: fg.ones(2, 3) - s, 1 - DENSE, None),
    ("t", lambda s: s.t(), DENSE.T, False),
    ("T", lambda s: s.coalesce().T, DENSE.T, False),
    ("transpose", lambda s: s.transpose(1, 0), DENSE.T, False),
    ("sum over rows", lambda s: fg.sparse.sum(s, 1), DENSE.sum(1), True),
    ("sum over columns", lambda s: s.sum(0), DENSE.sum(0), True),
    ("sum", lambda s: fg.sparse.sum(s), DENSE.sum(), None),
    ("sum over both", lambda s: fg.sparse.sum(s, (0, -1)), DENSE.sum(), None),
    ("sum float64", lambda s: s.sum(dtype=fg.float64), DENSE.sum(), None),
]


@pytest.mark.parametrize(
    "op, expected, coalesced", [a[1:] for a in ARITHMETIC], ids=[a[0] for a in ARITHMETIC]
)
def test_arithmetic_is_the_dense_arithmetic(op, expected, coalesced):
    got = op(_sparse())
    if coalesced is None:
        assert not got.is_sparse
    else:
        assert got.is_sparse and got.is_coalesced() is coalesced
        got = got.to_dense()
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)


def test_integer_values_promote_as_dense_ones():
    s = fg.sparse_coo_tensor(INDICES, [3, 4, 5, 1], (2, 3))
    assert (
        (s * 2).dtype is fg.int64 and (s * 2.5).dtype is fg.float32 and (s / 2).dtype is fg.float32
    )
    assert s.sum().dtype is fg.int64


# ---------------------------------------------------------------- errors

ERRORS = [
    (
        "view",
        lambda s: s.view(-1),
        NotImplementedError,
        "Could not run 'aten::view' with arguments from the 'SparseCPU' backend",
    ),
    (
        "reshape",
        lambda s: s.reshape(6),
        RuntimeError,
        "reshape is not implemented for sparse tensors",
    ),
    (
        "flatten",
        lambda s: s.flatten(),
        RuntimeError,
        "reshape is not implemented for sparse tensors",
    ),
    ("dense op", lambda s: fg.exp(s), NotImplementedError, "'SparseCPU' backend"),
    ("dense method", lambda s: s.relu(), NotImplementedError, "'SparseCPU' backend"),
    ("numpy", lambda s: s.numpy(), TypeError, "can't convert Sparse layout tensor to numpy"),
    (
        "np.asarray",
        lambda s: np.asarray(s),
        TypeError,
        "can't convert Sparse layout tensor to numpy",
    ),
    ("tolist", lambda s: s.tolist(), RuntimeError, "doesn't have storage"),
    (
        "item",
        lambda s: s.item(),
        RuntimeError,
        "a Tensor with 6 elements cannot be converted to Scalar",
    ),
    (
        "plus number",
        lambda s: s + 1,
        RuntimeError,
        r"add\(sparse, dense\) is not supported. Use add\(dense, sparse\) instead.",
    ),
    (
        "minus dense",
        lambda s: s - fg.ones(2, 3),
        RuntimeError,
        r"add\(sparse, dense\) is not supported",
    ),
    (
        "sizes differ",
        lambda s: s + s.t(),
        RuntimeError,
        "expected 'self' and 'other' to have same size",
    ),
    (
        "indices",
        lambda s: s.indices(),
        RuntimeError,
        r"Cannot get indices on an uncoalesced tensor, please call .coalesce\(\) first",
    ),
    ("values", lambda s: s.values(), RuntimeError, "Cannot get values on an uncoalesced tensor"),
    (
        "dtype",
        lambda s: fg.mm(s, fg.ones(3, 2, dtype=fg.float64)),
        RuntimeError,
        "expected scalar type Float but found Double",
    ),
    (
        "dtype, dense first",
        lambda s: fg.ones(3, 2) @ s.double(),
        RuntimeError,
        "expected scalar type Double but found Float",
    ),
    (
        "sizes",
        lambda s: fg.sparse.mm(s, fg.ones(4, 2)),
        RuntimeError,
        r"addmm: Argument #3 \(dense\): Expected dim 0 size 3, got 4",
    ),
    (
        "sizes, dense first",
        lambda s: fg.ones(2, 2) @ s.t(),
        RuntimeError,
        "Expected dim 0 size 3, got 2",
    ),
    (
        "sparse.mm of a vector",
        lambda s: fg.sparse.mm(s, fg.ones(3)),
        IndexError,
        "Dimension out of range",
    ),
    (
        "batched",
        lambda s: fg.matmul(s, fg.ones(2, 3, 2)),
        RuntimeError,
        "expand is unsupported for Sparse tensors",
    ),
    ("sparse @ sparse", lambda s: s @ s.t(), NotImplementedError, "product of two sparse tensors"),
    (
        "0-d",
        lambda s: s @ fg.tensor(2.0),
        RuntimeError,
        "both arguments to matmul need to be at least 1D",
    ),
    (
        "t of 3-D",
        lambda s: fg.sparse_coo_tensor([[0], [0], [0]], [1.0]).t(),
        RuntimeError,
        "t\\(\\) expects a tensor with <= 2 sparse and 0 dense dimensions, but got 3 sparse",
    ),
    (
        "sum of dense",
        lambda s: fg.sparse.sum(fg.ones(2)),
        RuntimeError,
        "coalesce expected sparse coordinate tensor layout but got Strided",
    ),
    (
        "indices of dense",
        lambda s: fg.ones(2).indices(),
        RuntimeError,
        "indices expected sparse coordinate tensor layout but got Strided",
    ),
    (
        "values of dense",
        lambda s: fg.ones(2).values(),
        RuntimeError,
        "values expected sparse tensor layout but got Strided",
    ),
    (
        "grad of ints",
        lambda s: fg.sparse_coo_tensor(INDICES, [1, 2, 3, 4], requires_grad=True),
        RuntimeError,
        "floating point",
    ),
]


@pytest.mark.parametrize(
    "call, error, message", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS]
)
def test_what_pytorch_refuses_on_sparse_tensors_raises_its_error(call, error, message):
    with pytest.raises(error, match=message):
        call(_sparse())


CONSTRUCTOR_ERRORS = [
    (
        "sizes",
        lambda: fg.sparse_coo_tensor(INDICES, VALUES, (2, 3, 4)),
        r"'len\(size\) == sparse_dim \+ dense_dim' is not satisfied: "
        r"len\(size\) = 3, sparse_dim = 2, dense_dim = 0",
    ),
    (
        "nnz",
        lambda: fg.sparse_coo_tensor(INDICES, VALUES[:3], (2, 3)),
        "indices and values must have same nnz, but got nnz from indices: 4, nnz from values: 3",
    ),
    ("scalar values", lambda: fg.sparse_coo_tensor(INDICES, 2.0, (2, 3)), "nnz from values: 1"),
    (
        "1-D indices",
        lambda: fg.sparse_coo_tensor(INDICES[0], VALUES),
        r"indices must be sparse_dim x nnz, but got: \[4\]",
    ),
    (
        "negative",
        lambda: fg.sparse_coo_tensor([[0, -1]], [1.0, 2.0], (2,)),
        "found negative index -1 for dim 0",
    ),
    (
        "too small",
        lambda: fg.sparse_coo_tensor(INDICES, VALUES, (2, 2)),
        "size is inconsistent with indices: for dim 1, size is 2 but found index 2",
    ),
    (
        "legacy indices",
        lambda: fg.sparse.FloatTensor(fg.tensor(INDICES).float(), fg.tensor(VALUES), (2, 3)),
        "indices must be an int64 tensor",
    ),
    ("to_sparse csr", lambda: fg.ones(2, 2).to_sparse(layout="csr"), "sparse COO layout only"),
]


@pytest.mark.parametrize(
    "call, message", [e[1:] for e in CONSTRUCTOR_ERRORS], ids=[e[0] for e in CONSTRUCTOR_ERRORS]
)
def test_constructors_check_as_pytorch_does(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


# ---------------------------------------------------------------- jit


def _graph(nodes=12, features=5, seed=0):
    rng = np.random.default_rng(seed)
    links = rng.random((nodes, nodes)) < 0.25
    rows, cols = np.nonzero(links | links.T | np.eye(nodes, dtype=bool))
    degree = np.bincount(rows, minlength=nodes)
    weights = 1.0 / np.sqrt(degree[rows] * degree[cols])
    adj = fg.sparse_coo_tensor(
        fg.tensor(np.stack([rows, cols])), fg.tensor(weights, dtype=fg.float32), (nodes, nodes)
    )
    x = fg.tensor(rng.standard_normal((nodes, features)), dtype=fg.float32)
    return adj, x, fg.tensor(rng.integers(0, 3, nodes)), rng


def _gcn_step(weights):
    w1, w2 = weights

    def step(x, adj, labels):
        hidden = fg.relu(fg.spmm(adj, x @ w1))
        out = F.log_softmax(fg.sparse.mm(adj, hidden @ w2), 1)
        loss = F.nll_loss(out, labels)
        loss.backward()
        with fg.no_grad():
            for w in weights:
                w -= 0.5 * w.grad
                w.grad = None
        return loss

    return step


def test_a_gcn_step_with_a_sparse_argument_compiles_and_matches_eager():
    adj, x, labels, rng = _graph()
    initial = [rng.standard_normal((5, 8)) * 0.3, rng.standard_normal((8, 3)) * 0.3]
    eager_weights = [fg.tensor(w, dtype=fg.float32, requires_grad=True) for w in initial]
    jit_weights = [fg.tensor(w, dtype=fg.float32, requires_grad=True) for w in initial]
    eager, compiled = _gcn_step(eager_weights), fg.jit(_gcn_step(jit_weights))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no eager fallback
        for _ in range(3):
            np.testing.assert_allclose(
                compiled(x, adj, labels).item(), eager(x, adj, labels).item(), rtol=1e-5
            )
    assert compiled.cache_info().misses == 1 and compiled.cache_info().hits == 2
    for a, b in zip(eager_weights, jit_weights):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-7)


def test_new_sparse_arguments_of_the_same_size_reuse_the_program():
    f = fg.jit(lambda s, d: s @ d)
    d = fg.tensor(D, dtype=fg.float32)
    for k in range(3):
        s = fg.sparse_coo_tensor(INDICES, fg.tensor(VALUES) * (k + 1), (2, 3))
        np.testing.assert_allclose(f(s, d).numpy(), (k + 1) * DENSE @ D, rtol=1e-6)
    assert f.cache_info().misses == 1
    f(_sparse().coalesce(), d)  # coalesced: another key
    f(fg.sparse_coo_tensor(INDICES, VALUES, (3, 3)), d[:3])
    assert f.cache_info().misses == 3


def test_sparse_tensors_made_inside_and_returned():
    f = fg.jit(lambda i, v: (fg.sparse_coo_tensor(i, v, (2, 3)) * 2).t())
    for _ in range(2):
        out = f(fg.tensor(INDICES), fg.tensor(VALUES))
    assert out.is_sparse and out.shape == (3, 2) and not out.is_coalesced()
    np.testing.assert_array_equal(out.to_dense().numpy(), 2 * DENSE.T)


@pytest.mark.parametrize("product", [fg.sparse.mm, fg.mm], ids=["sparse.mm", "mm"])
def test_a_leafs_sparse_gradient_under_jit(product):
    d = fg.tensor(D, dtype=fg.float32)

    def f(s):
        (product(s, d) ** 2).sum().backward()

    eager, compiled = _sparse(requires_grad=True), _sparse(requires_grad=True)
    g = fg.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no eager fallback
        for _ in range(3):
            f(eager)
            g(compiled)
    np.testing.assert_allclose(compiled.grad._values().numpy(), eager.grad._values().numpy())


ADJACENCY = _sparse()


def test_a_global_sparse_tensor_rebound_is_read_again():
    global ADJACENCY
    f = fg.jit(lambda d: ADJACENCY @ d)
    d = fg.tensor(D, dtype=fg.float32)
    f(d), f(d)
    try:
        ADJACENCY = _sparse() * 10
        np.testing.assert_allclose(f(d).numpy(), 10 * DENSE @ D, rtol=1e-6)
        ADJACENCY = fg.sparse_coo_tensor(INDICES, VALUES, (3, 3))
        assert f(d).shape == (3, 2)
    finally:
        ADJACENCY = _sparse()


@pytest.mark.parametrize(
    "fn, argument, message",
    [
        (lambda x: x.to_sparse(), lambda: fg.tensor(DENSE), "to_sparse"),
        (lambda s: s.coalesce(), _sparse, "coalescing a sparse tensor"),
        (lambda s: s.grad, lambda: _sparse(requires_grad=True), None),
    ],
)
def test_what_depends_on_values_is_refused_under_jit(fn, argument, message):
    if message is None:  # no gradient yet: nothing to coalesce
        assert fg.jit(fn)(argument()) is None
        return
    with pytest.raises(fg.TracingError, match=message):
        fg.jit(fn)(argument())
