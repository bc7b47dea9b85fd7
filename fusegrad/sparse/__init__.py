"""``torch.sparse``, and ``torch.sparse_coo_tensor`` and ``torch.spmm``:
sparse COO tensors (eager/sparse.py), their products with dense matrices,
their sums, and PyTorch's legacy constructors (``torch.sparse.FloatTensor``).

>>> import fusegrad
>>> adjacency = fusegrad.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2))
>>> fusegrad.sparse.mm(adjacency, fusegrad.ones(2, 3))
tensor([[1., 1., 1.],
        [2., 2., 2.]])
"""

from __future__ import annotations

from ..eager import creation, devices
from ..eager.ops import as_tensor_arg
from ..eager.ops import mm as dense_mm
from ..eager.sparse import SparseTensor, make, matmul, sparse_sum
from ..eager.tensor import Tensor
from ..ir import dtypes

__all__ = ["FloatTensor", "DoubleTensor", "LongTensor", "mm", "sum"]


def sparse_coo_tensor(
    indices=None,
    values=None,
    size=None,
    *,
    dtype=None,
    device=None,
    pin_memory=False,
    requires_grad=False,
    check_invariants=None,
    is_coalesced=None,
) -> SparseTensor:
    """A sparse tensor holding ``values`` at ``indices`` (a row per sparse
    dimension, a column per entry); ``size`` None is the smallest that holds
    them. The indices are always checked (PyTorch checks them when asked)."""
    devices.check_device(device)
    if indices is None and values is None:
        return _empty(size, dtype)
    indices = creation.as_tensor(indices)
    if not isinstance(values, Tensor):
        values = creation.tensor(values, dtype=dtype)
    elif dtype is not None:
        values = values.to(dtype)
    return make(indices, values, size, requires_grad=requires_grad, is_coalesced=is_coalesced)


def _empty(size, dtype) -> SparseTensor:
    indices = creation.zeros((len(size), 0), dtype=dtypes.int64)
    return make(indices, creation.zeros(0, dtype=dtype), size)


def mm(mat1, mat2, reduce=None) -> Tensor:
    """``mat1 @ mat2`` with either of them sparse (or neither)."""
    mat1, mat2 = as_tensor_arg(mat1, "mat1"), as_tensor_arg(mat2, "mat2")
    if reduce is not None:
        raise NotImplementedError("fusegrad: torch.sparse.mm's reduce is not supported")
    if not (mat1.is_sparse or mat2.is_sparse):
        return dense_mm(mat1, mat2)
    if mat2.ndim != 2:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got 1)")
    return matmul(mat1, mat2)


def spmm(input, mat2) -> Tensor:
    """``torch.spmm``: ``input @ mat2``, either of them sparse."""
    return mm(input, mat2)


def sum(input, dim=None, dtype=None) -> Tensor:
    """The sum over every dimension (a dense 0-d tensor) or over ``dim``: a
    dense tensor once every sparse dimension is summed, else a sparse one."""
    if not input.is_sparse:
        raise RuntimeError("coalesce expected sparse coordinate tensor layout but got Strided")
    return sparse_sum(input, dim, dtype)


class _LegacyConstructor:
    """``torch.sparse.FloatTensor(indices, values, size)`` or ``(*sizes)``
    (an empty tensor), as old GCN code writes it."""

    def __init__(self, name: str, dtype):
        self.__name__, self.dtype = name, dtype

    def __repr__(self) -> str:
        return f"<class 'fusegrad.sparse.{self.__name__}'>"

    def __call__(self, *args) -> SparseTensor:
        if not args or not isinstance(args[0], Tensor):
            return _empty(args, self.dtype)
        indices, values, *size = args
        if indices.dtype is not dtypes.int64:
            raise RuntimeError("indices must be an int64 tensor")
        return sparse_coo_tensor(indices, values, *size)


FloatTensor = _LegacyConstructor("FloatTensor", dtypes.float32)
DoubleTensor = _LegacyConstructor("DoubleTensor", dtypes.float64)
LongTensor = _LegacyConstructor("LongTensor", dtypes.int64)
