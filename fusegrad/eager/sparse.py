"""Sparse tensors in PyTorch's COO layout, as graph neural networks hold an
adjacency matrix: a tensor of indices (a row per sparse dimension, a column
per stored entry) and a tensor of values (an entry per row, any dense
dimensions after).

A ``SparseTensor`` is a Tensor holding those two as ordinary tensors, and
everything it computes is made of dense primitives: a product with a dense
matrix gathers the dense rows the entries read (``index``), scales them by
the entries' values and adds them into the rows the entries belong to
(``scatter_add``). Gradients (to the dense operand, to the values) and
traces come from those primitives' rules, with nothing of their own; a jit
function takes a sparse argument as its two tensors (tracer/signature.py).
The values receive a gradient per stored entry; a leaf's ``.grad`` is, as
PyTorch's, a sparse tensor of the coalesced pattern holding the gradient at
each position. Dense code never sees a sparse tensor: it has no ``_data``,
so a dense op applied to one raises PyTorch's error for an op the sparse
backend lacks, and dense tensors pay nothing for this module.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import dtypes
from ..ir import primitives as P
from ..ir.shapes import normalize_dim
from .ops.arguments import _NUMBERS, _binary, _cast, _eager_only, _ints
from .ops.copies import to as dense_to
from .ops.reductions import sum as dense_sum
from .printing import _add_suffixes, tensor_repr
from .tensor import Size, Tensor, constant_array, recording


class layout:
    """How a tensor's elements are stored: ``fusegrad.strided`` (dense) or
    ``fusegrad.sparse_coo``."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"fusegrad.{self.name}"


strided = layout("strided")
sparse_coo = layout("sparse_coo")

_NO_SPARSE_KERNEL = (
    "Could not run this operation with arguments from the 'SparseCPU' backend: fusegrad's "
    "sparse COO tensors have products with dense tensors, scaling, sums, transposes and "
    "conversions; call to_dense() first for other operations"
)
_ALL = (("array",),)  # an index spec: one index array, along the first dimension


class SparseTensor(Tensor):
    """A tensor in the sparse COO layout (``fusegrad.sparse_coo``). Its flags
    follow its values tensor: it requires grad, and has a ``grad_fn``,
    when they do. Its fields are in its ``__dict__``, where the walk of a
    jit function's Python state finds its tensors (tracer/walk.py)."""

    layout = sparse_coo
    is_sparse = True

    @classmethod
    def _of(cls, indices: Tensor, values: Tensor, size, coalesced: bool) -> SparseTensor:
        s = object.__new__(cls)
        s._indices_t, s._values_t = indices, values
        s._size, s._coalesced = tuple(size), coalesced
        s._dtype = values._dtype
        s._output_nr, s._version_counter, s._base = 0, [0], None
        return s

    def _with_values(self, values: Tensor, coalesced=None) -> SparseTensor:
        keep = self._coalesced if coalesced is None else coalesced
        return SparseTensor._of(self._indices_t, values, self._size, keep)

    @property
    def _data(self):
        raise NotImplementedError(_NO_SPARSE_KERNEL)

    # ------------------------------------------------------------ autograd

    _requires_grad = property(lambda self: self._values_t._requires_grad)
    grad_fn = property(lambda self: self._values_t.grad_fn)

    @property
    def requires_grad(self) -> bool:
        return self._values_t._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        values = self._values_t
        if values.grad_fn is None and bool(flag) != values._requires_grad:
            values = self._values_t = values.detach()  # the caller's values keep their flag
        values.requires_grad = flag

    @property
    def grad(self):
        values = self._values_t
        grad = values.grad
        if grad is None or values.grad_fn is not None:
            return None
        if self._coalesced:
            return self._with_values(grad)
        unique, first = np.unique(self._keys(), return_index=True)
        indices = self._unraveled(unique)
        return SparseTensor._of(indices, P.index(grad, _int64(first), spec=_ALL), self._size, True)

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            raise RuntimeError("fusegrad: a sparse tensor's .grad can only be set to None")
        self._values_t.grad = None

    def _grad_accumulator(self):
        return self._values_t._grad_accumulator()  # where its gradient arrives: its values'

    @property
    def data(self) -> SparseTensor:
        return self.detach()

    def detach(self) -> SparseTensor:
        return self._with_values(self._values_t.detach())

    def clone(self) -> SparseTensor:
        return SparseTensor._of(
            P.convert(self._indices_t, dtype=dtypes.int64),
            P.convert(self._values_t, dtype=self._dtype),
            self._size,
            self._coalesced,
        )

    # ----------------------------------------------------------- structure

    @property
    def shape(self) -> Size:
        return Size(self._size)

    @property
    def ndim(self) -> int:
        return len(self._size)

    def dim(self) -> int:
        return len(self._size)

    def numel(self) -> int:
        return math.prod(self._size)

    def __len__(self) -> int:
        if not self._size:
            raise TypeError("len() of a 0-d tensor")
        return self._size[0]

    def is_contiguous(self, memory_format=None) -> bool:
        return False

    def sparse_dim(self) -> int:
        return self._indices_t.shape[0]

    def dense_dim(self) -> int:
        return self._values_t.ndim - 1

    def _nnz(self) -> int:
        return self._values_t.shape[0]

    def _indices(self) -> Tensor:
        return self._indices_t

    def _values(self) -> Tensor:
        return self._values_t.detach()  # as PyTorch's: not differentiable

    def indices(self) -> Tensor:
        self._require_coalesced("indices")
        return self._indices_t

    def values(self) -> Tensor:
        self._require_coalesced("values")
        return self._values_t

    def _require_coalesced(self, what: str) -> None:
        if not self._coalesced:
            raise RuntimeError(
                f"Cannot get {what} on an uncoalesced tensor, please call .coalesce() first"
            )

    def is_coalesced(self) -> bool:
        return self._coalesced

    def _keys(self) -> np.ndarray:
        """Each entry's position as one number: its flat index among the sparse dimensions."""
        _eager_only("coalescing a sparse tensor", "how many entries it keeps depends on values")
        sparse_size = self._size[: self.sparse_dim()]
        return np.ravel_multi_index(tuple(self._indices_t._data), sparse_size)

    def _unraveled(self, keys: np.ndarray) -> Tensor:
        sparse_size = self._size[: self.sparse_dim()]
        return _int64(np.stack(np.unravel_index(keys, sparse_size)).reshape(len(sparse_size), -1))

    def coalesce(self) -> SparseTensor:
        """The same tensor with its indices sorted and unique, the values of
        repeated ones added."""
        if self._coalesced:
            return self
        unique, inverse = np.unique(self._keys(), return_inverse=True)
        shape = (len(unique), *self._values_t.shape[1:])
        values = P.scatter_add(self._values_t, _int64(inverse.ravel()), spec=_ALL, shape=shape)
        return SparseTensor._of(self._unraveled(unique), values, self._size, True)

    def to_dense(self, dtype=None, *, masked_grad=None) -> Tensor:
        values = self._values_t if dtype is None else dense_to(self._values_t, dtype)
        rows = self._rows()
        return P.scatter_add(values, *rows, spec=_ALL * len(rows), shape=self._size)

    def to_sparse(self, *args, **kwargs) -> SparseTensor:
        return self

    to_sparse_coo = to_sparse

    def to(self, *args, **kwargs) -> SparseTensor:
        values = dense_to(self._values_t, *args, **kwargs)
        return self if values is self._values_t else self._with_values(values)

    def float(self) -> SparseTensor:
        return self.to(dtypes.float32)

    def double(self) -> SparseTensor:
        return self.to(dtypes.float64)

    def transpose(self, dim0, dim1) -> SparseTensor:
        dim0, dim1 = normalize_dim(dim0, self.ndim), normalize_dim(dim1, self.ndim)
        if dim0 == dim1:
            return self
        if max(dim0, dim1) >= self.sparse_dim():
            raise RuntimeError(
                "fusegrad: transpose of a sparse tensor's dense dimensions is not supported"
            )
        order = list(range(self.sparse_dim()))
        order[dim0], order[dim1] = dim1, dim0
        size = list(self._size)
        size[dim0], size[dim1] = size[dim1], size[dim0]
        rows = constant_array(np.array(order), dtypes.int64)
        indices = P.index(self._indices_t, rows, spec=_ALL)
        return SparseTensor._of(indices, self._values_t, size, False)

    def t(self) -> SparseTensor:
        if self.sparse_dim() > 2 or self.dense_dim():
            raise RuntimeError(
                "t() expects a tensor with <= 2 sparse and 0 dense dimensions, but got "
                f"{self.sparse_dim()} sparse and {self.dense_dim()} dense dimensions"
            )
        return self.transpose(0, 1) if self.ndim == 2 else self

    T = property(t)

    def view(self, *shape):
        raise NotImplementedError(
            "Could not run 'aten::view' with arguments from the 'SparseCPU' backend."
        )

    def reshape(self, *shape):
        raise RuntimeError("reshape is not implemented for sparse tensors")

    flatten = reshape

    # ---------------------------------------------------------- arithmetic

    def sum(self, dim=None, *, dtype=None):
        return sparse_sum(self, dim, dtype)

    def __mul__(self, other):
        if isinstance(other, Tensor) and other.is_sparse:
            raise NotImplementedError(
                "fusegrad: the elementwise product of two sparse tensors is not supported"
            )
        if isinstance(other, Tensor) and other.ndim:  # the dense values at the entries
            if self.dense_dim():
                raise NotImplementedError(
                    "fusegrad: a sparse tensor with dense dimensions times a dense tensor "
                    "is not supported"
                )
            rows = self._rows()
            other = P.index(P.broadcast_to(other, shape=self._size), *rows, spec=_ALL * len(rows))
        elif not isinstance(other, (Tensor, *_NUMBERS)):
            return NotImplemented
        return self._with_values(_binary(P.mul, self._values_t, other))

    __rmul__ = mul = __mul__

    def __truediv__(self, other):
        if isinstance(other, Tensor) and (other.is_sparse or other.ndim):
            raise NotImplementedError("fusegrad: a sparse tensor divides by a scalar only")
        if not isinstance(other, (Tensor, *_NUMBERS)):
            return NotImplemented
        return self._with_values(_binary(P.div, self._values_t, other, floating=True))

    div = __truediv__

    def __neg__(self) -> SparseTensor:
        return self._with_values(P.neg(self._values_t))

    neg = __neg__

    def __add__(self, other):
        if isinstance(other, Tensor) and other.is_sparse:
            return _sparse_add(self, other)
        if isinstance(other, (Tensor, *_NUMBERS)):
            raise RuntimeError(
                "add(sparse, dense) is not supported. Use add(dense, sparse) instead."
            )
        return NotImplemented

    add = __add__

    def __radd__(self, other):  # dense + sparse: Python asks the subclass first
        return other + self.to_dense() if isinstance(other, Tensor) else self.__add__(other)

    def __sub__(self, other):
        if isinstance(other, Tensor) and other.is_sparse:
            return _sparse_add(self, -other)
        return self.__add__(other)

    sub = __sub__

    def __rsub__(self, other):
        return other - self.to_dense() if isinstance(other, Tensor) else self.__add__(other)

    def _rows(self) -> list:
        """The entries' index along each sparse dimension."""
        return [P.index(self._indices_t, spec=(("int", d),)) for d in range(self.sparse_dim())]

    # ------------------------------------------------------------- Python

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(
                f"a Tensor with {self.numel()} elements cannot be converted to Scalar"
            )
        return self.to_dense().item()

    def numpy(self, *, force=False):
        raise TypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() first.")

    def __array__(self, dtype=None, copy=None):
        return self.numpy()

    def tolist(self):
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    def __repr__(self) -> str:
        indices = tensor_repr(
            self._indices_t._data, dtypes.int64, dtypes.int64, [], prefix="tensor(indices=tensor("
        )
        empty = ["size=(0,)"] if self._values_t.shape == (0,) else []  # as PyTorch prints it
        values = tensor_repr(
            self._values_t._data, self._dtype, self._dtype, empty, prefix="       values=tensor("
        )
        suffixes = [f"nnz={self._nnz()}"]
        if self._dtype is not dtypes.default_float() and self._dtype.name not in ("int64", "bool"):
            suffixes.append(f"dtype={self._dtype!r}")
        suffixes.append(f"layout={sparse_coo!r}")
        if self.grad_fn is not None:
            suffixes.append(f"grad_fn=<{self.grad_fn.name()}>")
        elif self.requires_grad:
            suffixes.append("requires_grad=True")
        return _add_suffixes(f"{indices},\n{values},\n       size={self._size}", suffixes, 7)

    def __format__(self, format_spec: str) -> str:
        return object.__format__(self, format_spec)

    def __reduce_ex__(self, protocol):
        indices, values = self._indices_t._data.copy(), self._values_t._data.copy()
        parts = (indices, values, self._dtype, self._size, self._coalesced, self.requires_grad)
        return (_rebuild, parts)

    def __deepcopy__(self, memo):
        rebuilt, parts = self.__reduce_ex__(4)
        memo[id(self)] = copied = rebuilt(*parts)
        return copied


def _rebuild(indices, values, dtype, size, coalesced, requires_grad) -> SparseTensor:
    values = Tensor._make(values, dtype)
    values.requires_grad = requires_grad
    return SparseTensor._of(Tensor._make(indices, dtypes.int64), values, size, coalesced)


def _label(t: Tensor, name: str) -> Tensor:
    """``t``, its node named as PyTorch names the step that made it."""
    if t.grad_fn is not None:
        t.grad_fn.label = name
    return t


def _int64(array: np.ndarray) -> Tensor:
    return Tensor._new(np.ascontiguousarray(array, dtype=np.int64), dtypes.int64)


# ---------------------------------------------------------------- making


def make(indices: Tensor, values: Tensor, size, *, requires_grad=False, is_coalesced=None):
    """A sparse tensor of ``indices`` (converted to int64) and ``values``
    (shared, as PyTorch shares them), of ``size`` (None: the smallest that
    holds the indices); PyTorch's checks and messages."""
    if indices.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(indices.shape)}")
    if indices._dtype is not dtypes.int64:
        indices = P.convert(indices, dtype=dtypes.int64)
    sparse_dim, nnz = indices.shape
    if values.ndim == 0 or values.shape[0] != nnz:
        raise RuntimeError(
            "indices and values must have same nnz, but got nnz from indices: "
            f"{nnz}, nnz from values: {values.shape[0] if values.ndim else 1}"
        )
    if size is None:
        size = (*_smallest_size(indices), *values.shape[1:])
    size = tuple(int(n) for n in size)
    if len(size) != sparse_dim + values.ndim - 1:
        raise RuntimeError(
            f"'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = {len(size)}, "
            f"sparse_dim = {sparse_dim}, dense_dim = {values.ndim - 1}"
        )
    if recording.trace is None:  # a trace does not read values: its inputs change
        _check_indices(indices._data, size)
    if requires_grad:
        values = values.detach().requires_grad_()
    elif values._requires_grad:  # an alias with a node: the sparse tensor is no leaf
        values = P.reshape(values, shape=values.shape)
        _label(values, "SparseCooTensorWithDimsAndTensorsBackward0")
    coalesced = nnz <= 1 if is_coalesced is None else bool(is_coalesced)
    return SparseTensor._of(indices, values, size, coalesced)


def _smallest_size(indices: Tensor) -> list:
    if indices.shape[1] == 0:
        return [0] * indices.shape[0]
    return [n + 1 for n in indices.amax(1).tolist()]  # traced: a guard on the values


def _check_indices(indices: np.ndarray, size: tuple) -> None:
    """PyTorch's invariant checks (which it skips by default, to crash or
    compute garbage later)."""
    for d, row in enumerate(indices):
        if row.size and row.min() < 0:
            raise RuntimeError(f"found negative index {row.min()} for dim {d}")
        if row.size and row.max() >= size[d]:
            raise RuntimeError(
                f"size is inconsistent with indices: for dim {d}, size is {size[d]} "
                f"but found index {row.max()}"
            )


def to_sparse(input: Tensor, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """``Tensor.to_sparse``: the non-zero elements (rows of elements, with
    ``sparse_dim`` less than the tensor's dimensions) of a dense tensor,
    coalesced. Eager only: how many there are is a value."""
    if layout not in (None, sparse_coo) or blocksize is not None:
        raise RuntimeError(f"fusegrad has the sparse COO layout only, not {layout}")
    _eager_only("to_sparse()")
    sparse_dim = input.ndim if sparse_dim is None else sparse_dim
    nonzero = input._data != 0
    if sparse_dim < input.ndim:
        nonzero = nonzero.any(axis=tuple(range(sparse_dim, input.ndim)))
    positions = [_int64(p) for p in np.nonzero(nonzero)]
    values = _label(P.index(input, *positions, spec=_ALL * sparse_dim), "ToSparseBackward1")
    indices = _int64(np.stack([p._data for p in positions]).reshape(sparse_dim, -1))
    return SparseTensor._of(indices, values, input.shape, True)


# ---------------------------------------------------------------- products


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` where one of them is sparse (2-D, no dense dimensions) and
    the other dense (a vector or a matrix)."""
    if a.is_sparse and b.is_sparse:
        raise NotImplementedError(
            "fusegrad: the product of two sparse tensors is not supported; "
            "call to_dense() on one of them"
        )
    if a.is_sparse:
        return _sparse_times_dense(a, b)
    if a.ndim == 1:
        return _sparse_times_dense(b.t(), a)
    if a.ndim > 2:
        raise RuntimeError("expand is unsupported for Sparse tensors")
    product = _sparse_times_dense(b.t(), P.transpose(a, perm=(1, 0)))
    return P.transpose(product, perm=(1, 0))


def _sparse_times_dense(sparse: SparseTensor, dense: Tensor) -> Tensor:
    """Each entry's value times the dense row its column names, added into
    its row of the result."""
    if sparse.ndim != 2 or sparse.dense_dim():
        raise RuntimeError(
            "fusegrad: sparse products take a 2-D sparse matrix without dense dimensions, got "
            f"{sparse.sparse_dim()} sparse and {sparse.dense_dim()} dense dimensions"
        )
    if dense.ndim > 2:
        raise RuntimeError("expand is unsupported for Sparse tensors")
    if dense.shape[0] != sparse.shape[1]:
        raise RuntimeError(
            f"addmm: Argument #3 (dense): Expected dim 0 size {sparse.shape[1]}, "
            f"got {dense.shape[0]}"
        )
    if dense._dtype is not sparse._dtype:
        raise RuntimeError(
            f"expected scalar type {sparse._dtype.scalar_name} but found {dense._dtype.scalar_name}"
        )
    rows, columns = sparse._rows()
    values = sparse._values_t
    if dense.ndim == 2:
        values = P.reshape(values, shape=(values.shape[0], 1))
    read = P.mul(P.index(dense, columns, spec=_ALL), values)
    return P.scatter_add(read, rows, spec=_ALL, shape=(sparse.shape[0], *dense.shape[1:]))


# ---------------------------------------------------------------- sums


def sparse_sum(input: SparseTensor, dim=None, dtype=None) -> Tensor:
    """``torch.sparse.sum``: over every dimension, or over ``dim``: a dense
    tensor once every sparse dimension is summed, else a coalesced sparse one."""
    values = input._values_t
    if dim is None:
        return dense_sum(values, dtype=dtype)
    dims = {normalize_dim(d, input.ndim) for d in _ints(dim)}
    sparse_dim = input.sparse_dim()
    dense_axes = tuple(d - sparse_dim + 1 for d in sorted(dims) if d >= sparse_dim)
    if dtype is not None:
        values = dense_to(values, dtype)
    if dense_axes:
        values = dense_sum(values, dense_axes)
    kept = [d for d in range(sparse_dim) if d not in dims]
    if not kept:
        return dense_sum(values, 0)
    rows = constant_array(np.array(kept), dtypes.int64)
    indices = P.index(input._indices_t, rows, spec=_ALL)
    size = [n for d, n in enumerate(input._size) if d not in dims]
    coalesced = input._coalesced and len(kept) == sparse_dim
    return SparseTensor._of(indices, values, size, coalesced).coalesce()


def _sparse_add(a: SparseTensor, b: SparseTensor) -> SparseTensor:
    """Both tensors' entries (coalesced when both were)."""
    if a.shape != b.shape:
        raise RuntimeError(
            f"add: expected 'self' and 'other' to have same size, but self has size "
            f"{list(a.shape)} while other has size {list(b.shape)} (FYI: op2-sparse addition "
            "does not currently support broadcasting)"
        )
    dtype = dtypes.result_type(a._values_t, b._values_t)
    values = P.concatenate(_cast(a._values_t, dtype), _cast(b._values_t, dtype), axis=0)
    indices = P.concatenate(a._indices_t, b._indices_t, axis=1)
    joined = SparseTensor._of(indices, values, a._size, False)
    return joined.coalesce() if a._coalesced and b._coalesced else joined
