"""Matrices: triangles (tril, triu and their indices), diagonals (diagonal,
diag, diag_embed, diagflat, trace), and matrices made of parts (block_diag,
vander)."""

from __future__ import annotations

import builtins
import operator

import numpy as np

from ...ir import dtypes
from ...ir import primitives as P
from ...ir.shapes import is_symbolic, normalize_dim
from .. import grad_mode
from ..tensor import Tensor, constant, constant_array
from .arguments import _cast, _promote_all, as_tensor_arg
from .composite import _named
from .copies import clone
from .index_tensors import positions
from .joining import cat, stack
from .pointwise import pow
from .reductions import sum
from .registry import public
from .shape import _lifted_shape, reshape

# ------------------------------------------------------------------- triangles


def _tri(input, diagonal, keep, name):
    input = as_tensor_arg(input)
    if input.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    diagonal = operator.index(diagonal)
    rows, cols = input.shape[-2:]
    if is_symbolic(rows) or is_symbolic(cols):
        # sizes that vary between calls: the mask is computed at run time
        offsets = P.reshape(positions(cols), shape=(1, cols)) - P.reshape(
            positions(rows), shape=(rows, 1)
        )
        mask = offsets <= diagonal if keep is np.tril else offsets >= diagonal
    else:
        mask = constant_array(keep(np.ones((rows, cols), np.bool_), diagonal), dtypes.bool_)
    return P.where(mask, input, 0)


@public(inplace=True, out=True)
@_named("TrilBackward0")
def tril(input, diagonal=0):
    """The lower triangle of the last two dimensions (at or below the
    ``diagonal``-th diagonal), zeros above."""
    return _tri(input, diagonal, np.tril, "tril")


@public(inplace=True, out=True)
@_named("TriuBackward0")
def triu(input, diagonal=0):
    """The upper triangle of the last two dimensions, zeros below."""
    return _tri(input, diagonal, np.triu, "triu")


def _triangle_indices(row, col, offset, lower, dtype, name):
    if row < 0 or col < 0:
        raise RuntimeError(f"{name} expects non-negative row and col, got {row} and {col}")
    rows, cols = np.tril_indices(row, offset, col) if lower else np.triu_indices(row, offset, col)
    dtype = dtypes.int64 if dtype is None else dtypes.as_dtype(dtype)
    return Tensor._new(np.stack([rows, cols]).astype(dtype.np), dtype)


@public(method=False)
def tril_indices(row, col, offset=0, *, dtype=None, device=None):
    return _triangle_indices(row, col, offset, True, dtype, "tril_indices")


@public(method=False)
def triu_indices(row, col, offset=0, *, dtype=None, device=None):
    return _triangle_indices(row, col, offset, False, dtype, "triu_indices")


# ------------------------------------------------------------------- diagonals


@public
def diagonal(input, offset=0, dim1=0, dim2=1):
    """A view of the diagonal of the (dim1, dim2) planes, as the last dimension."""
    input = as_tensor_arg(input)
    a, b = normalize_dim(dim1, input.ndim), normalize_dim(dim2, input.ndim)
    if a == b:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return P.diagonal(input, offset=operator.index(offset), dim1=a, dim2=b)


@public
@_named("DiagEmbedBackward0")
def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices (in dims dim1, dim2 of the result) with the last dimension of
    input on their ``offset``-th diagonal, zeros elsewhere."""
    input = as_tensor_arg(input)
    ndim = input.ndim + 1
    a, b = normalize_dim(dim1, ndim), normalize_dim(dim2, ndim)
    if a == b:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    if input.ndim == 0:
        input = P.reshape(input, shape=(1,))
    offset = operator.index(offset)
    side = input.shape[-1] + builtins.abs(offset)
    batch = iter(input.shape[:-1])
    shape = tuple(side if d in (a, b) else next(batch) for d in range(ndim))
    return P.embed_diagonal(input, shape, offset, a, b)


@public(out=True)
def diag(input, diagonal=0):
    """The diagonal of a matrix (a copy), or the square matrix with a vector
    on its ``diagonal``-th diagonal."""
    input = as_tensor_arg(input)
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim != 2:
        raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + f"{input.ndim}D")
    return clone(P.diagonal(input, offset=operator.index(diagonal), dim1=0, dim2=1))


@public(function=False)
def fill_diagonal_(input, fill_value, wrap=False):
    """``fill_value`` written where all indices are equal; with ``wrap``, a
    matrix taller than wide starts again every ``columns + 1`` rows, as
    numpy's fill_diagonal does."""
    shape = tuple(builtins.map(int, input.shape))  # the positions are constants: sizes are pinned
    if len(shape) < 2:
        raise RuntimeError("dimensions must larger than 1")
    if len(shape) > 2 and len(set(shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    if input.is_leaf and input.requires_grad and grad_mode.is_grad_enabled():
        # PyTorch fills a view of the diagonal, and words its error so
        raise RuntimeError(
            "a view of a leaf Variable that requires grad is being used in an in-place operation."
        )
    input._check_inplace()
    # (i, i, ..., i) lies i * step elements into the tensor, in C order
    step = builtins.sum(int(np.prod(shape[k + 1 :])) for k in range(len(shape)))
    end = int(np.prod(shape)) if wrap and len(shape) == 2 else min(shape) * step
    at = np.unravel_index(np.arange(0, end, step), shape)
    indices = [constant_array(i.astype(np.int64), dtypes.int64) for i in at]
    # a Scalar in PyTorch: a tensor given is read, not differentiated
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.detach()
    value = _cast(fill_value, input._dtype)
    spec = (("array",),) * len(shape)
    return input._commit_inplace(P.index_put(input, value, *indices, spec=spec))


@public
def diagflat(input, offset=0):
    return diag(reshape(as_tensor_arg(input), -1), offset)


@public
@_named("TraceBackward0")
def trace(input):
    input = as_tensor_arg(input)
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return sum(P.diagonal(input, offset=0, dim1=0, dim2=1))


# ------------------------------------------------------ matrices made of parts


@public(method=False)
def block_diag(*tensors):
    """The matrices (scalars and vectors as one row) along a diagonal, zeros elsewhere."""
    if not tensors:
        dtype = dtypes.default_float()
        return Tensor._new(np.zeros((1, 0), dtype.np), dtype)
    blocks = _promote_all(
        [reshape(t, _lifted_shape(as_tensor_arg(t).shape, 2)) for t in tensors], "block_diag"
    )
    for k, b in enumerate(blocks):
        if b.ndim != 2:
            raise RuntimeError(
                f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {k} has "
                f"{b.ndim} dimensions"
            )
    width = builtins.sum(b.shape[1] for b in blocks)
    rows, before = [], 0
    for b in blocks:
        after = width - before - b.shape[1]
        rows.append(P.pad(b, widths=((0, 0), (before, after)), value=0))
        before += b.shape[1]
    return cat(rows, 0)


@public(method=False)
def vander(x, N=None, increasing=False):
    """The powers x^0 .. x^(N-1) of each element, one row each (highest first
    unless ``increasing``)."""
    x = as_tensor_arg(x, "x")
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    count = x.shape[0] if N is None else N
    if count < 0:
        raise RuntimeError("N must be non-negative.")
    powers = range(count) if increasing else range(count - 1, -1, -1)
    columns = [
        pow(x, k) if k else P.broadcast_to(constant(1, x._dtype), shape=x.shape) for k in powers
    ]
    return stack(columns, 1) if columns else reshape(x, (x.shape[0], 0)) * 0
