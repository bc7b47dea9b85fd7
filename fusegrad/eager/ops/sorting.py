"""Sorting and searching: sort, argsort, msort, topk, kthvalue,
searchsorted, bucketize; and sets of values: unique, unique_consecutive,
isin."""

from __future__ import annotations

import operator

import numpy as np

from ...ir import dtypes
from ...ir import primitives as P
from ...ir.shapes import normalize_dim, reduced_shape
from ..tensor import Tensor, constant, constant_array
from .arguments import _eager_only, as_tensor_arg
from .gather_scatter import gather, take_along_dim
from .index_tensors import _narrow_spec
from .joining import narrow
from .reductions import _return_type, any, sum
from .registry import public
from .shape import reshape, unsqueeze

# --------------------------------------------------------------------- sorting


SortResult = _return_type("sort")
TopkResult = _return_type("topk")


def _order(input, dim, descending):
    """(input as at least 1-d, its sorting axis, the positions sorting it)."""
    input = as_tensor_arg(input)
    axis = normalize_dim(dim, input.ndim)
    x = input if input.ndim else P.reshape(input, shape=(1,))
    return x, axis, P.argsort(x, axis=axis, descending=bool(descending))


@public(out=True)
def sort(input, dim=-1, descending=False, stable=False):
    """Always stable (``stable`` only promises it): equal elements keep their order."""
    x, axis, order = _order(input, dim, descending)
    values = gather(x, axis, order)
    if input.ndim == 0:
        values, order = P.reshape(values, shape=()), P.reshape(order, shape=())
    if values.grad_fn is not None:
        values.grad_fn.label = "SortBackward0"
    return SortResult(values, order)


@public(out=True)
def argsort(input, dim=-1, descending=False, stable=False):
    x, _, order = _order(input, dim, descending)
    return order if x is input else P.reshape(order, shape=())


@public
def msort(input):
    return sort(input, 0).values


@public(out=True)
def topk(input, k, dim=None, largest=True, sorted=True):
    """The k largest (or smallest) elements along dim, in order; of equal
    elements the first ones (as JAX: PyTorch leaves ties' order unspecified).
    ``sorted=False`` allows any order; this is the sorted one."""
    x, axis, order = _order(input, -1 if dim is None else dim, largest)
    k = operator.index(k)
    if not 0 <= k <= x.shape[axis]:
        raise RuntimeError("selected index k out of range")
    indices = P.index(order, spec=_narrow_spec(x.ndim, axis, 0, k))
    values = gather(x, axis, indices)
    if input.ndim == 0 and k:
        values, indices = P.reshape(values, shape=()), P.reshape(indices, shape=())
    if values.grad_fn is not None:
        values.grad_fn.label = "TopkBackward0"
    return TopkResult(values, indices)


KthvalueResult = _return_type("kthvalue")


@public
def kthvalue(input, k, dim=-1, keepdim=False):
    """The k-th smallest value along ``dim`` (k from 1) and where it is."""
    input = as_tensor_arg(input)
    x, axis, order = _order(input, dim, False)
    if not 1 <= k <= x.shape[axis]:
        raise IndexError(f"kthvalue(): selected number k out of range for dimension {axis}")
    indices = narrow(order, axis, k - 1, 1)
    values = gather(x, axis, indices)
    if not keepdim or input.ndim == 0:
        shape = input.shape if input.ndim == 0 else reduced_shape(x.shape, (axis,), False)
        values, indices = P.reshape(values, shape=shape), P.reshape(indices, shape=shape)
    if values.grad_fn is not None:
        values.grad_fn.label = "KthvalueBackward0"
    return KthvalueResult(values, indices)


# ------------------------------------------------------------------- searching


@public(method=False)
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """For each value, how many of the sorted sequence's last-dim values lie
    below it (at or below it for ``right``): compares every pair, so it
    compiles, with memory the product of the two sizes."""
    sequence = as_tensor_arg(sorted_sequence, "sorted_sequence")
    values = input if isinstance(input, Tensor) else constant(input, sequence._dtype)
    if sorter is not None:
        sequence = take_along_dim(sequence, sorter, -1)
    right = right or side == "right"
    if sequence.ndim > 1 and sequence.shape[:-1] != values.shape[:-1]:
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
            "dimensions of boundaries tensor and input value tensor must match, but we got "
            f"boundaries tensor {list(sequence.shape)} and input value tensor {list(values.shape)}"
        )
    rows = sequence if sequence.ndim == 1 else unsqueeze(sequence, -2)
    columns = unsqueeze(values, -1)
    below = rows <= columns if right else rows < columns
    return sum(below, -1, dtype=dtypes.int32 if out_int32 else dtypes.int64)


@public
def bucketize(input, boundaries, *, out_int32=False, right=False):
    if as_tensor_arg(boundaries, "boundaries").ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


# ------------------------------------------------------------------------ sets


@public
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values (slices along ``dim``), sorted, with where each
    element went and how often each value occurs. Eager only, no gradient."""
    input = as_tensor_arg(input)
    _eager_only("unique")
    data = (
        input._data if dim is None else np.moveaxis(input._data, normalize_dim(dim, input.ndim), 0)
    )
    values, inverse, counts = np.unique(
        data.reshape(-1) if dim is None else data.reshape(data.shape[0], -1),
        return_inverse=True,
        return_counts=True,
        axis=None if dim is None else 0,
    )
    if dim is None:
        inverse = inverse.reshape(input.shape)
    else:
        values = np.moveaxis(
            values.reshape((-1,) + data.shape[1:]), 0, normalize_dim(dim, input.ndim)
        )
    result = [Tensor._new(np.ascontiguousarray(values), input._dtype)]
    if return_inverse:
        result.append(Tensor._new(inverse.astype(np.int64), dtypes.int64))
    if return_counts:
        result.append(Tensor._new(counts.astype(np.int64), dtypes.int64))
    return result[0] if len(result) == 1 else tuple(result)


@public
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Each run of equal consecutive values (slices along ``dim``) once. Eager only."""
    input = as_tensor_arg(input)
    _eager_only("unique_consecutive")
    axis = 0 if dim is None else normalize_dim(dim, input.ndim)
    data = input._data.reshape(-1) if dim is None else np.moveaxis(input._data, axis, 0)
    rows = data.reshape(data.shape[0], -1)
    starts = np.ones(len(rows), bool)
    starts[1:] = np.any(rows[1:] != rows[:-1], axis=1)
    values = data[starts]
    if dim is not None:
        values = np.moveaxis(values, 0, axis)
    result = [Tensor._new(np.ascontiguousarray(values), input._dtype)]
    if return_inverse:
        inverse = np.cumsum(starts) - 1
        result.append(
            Tensor._new(
                inverse.reshape(input.shape if dim is None else -1).astype(np.int64), dtypes.int64
            )
        )
    if return_counts:
        result.append(
            Tensor._new(
                np.diff(np.append(np.flatnonzero(starts), len(rows))).astype(np.int64), dtypes.int64
            )
        )
    return result[0] if len(result) == 1 else tuple(result)


@public
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    elements = as_tensor_arg(elements, "elements")
    tests = (
        test_elements
        if isinstance(test_elements, Tensor)
        else constant_array(np.atleast_1d(np.asarray(test_elements)), elements._dtype)
    )
    found = any(unsqueeze(elements, -1) == reshape(tests, -1), -1)
    return P.logical_not(found) if invert else found
