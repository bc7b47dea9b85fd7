"""Positions as index tensors: 0, 1, ..., n - 1 along a dimension
(``positions``), where a tensor is non-zero (``nonzero``, ``argwhere``), and
reading a tensor at index tensors or at a slice along one dimension."""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ...ir import primitives as P
from ...ir.shapes import is_symbolic
from ..tensor import Tensor, constant, constant_array, recording
from .arguments import as_tensor_arg
from .registry import public


def positions(n):
    """0, 1, ..., n - 1 as an int64 tensor; for a size that varies between
    calls, computed (a running count of ones) rather than a constant."""
    if is_symbolic(n):
        ones = P.broadcast_to(constant(1, dtypes.int64), shape=(n,))
        return P.cumsum(ones, axis=0, reverse=False) - 1
    return constant_array(np.arange(n), dtypes.int64)


def index_with_arrays(input, arrays):
    """input[arrays[0], arrays[1], ...] with integer tensors (numpy advanced indexing)."""
    return P.index(input, *arrays, spec=(("array",),) * len(arrays))


def _narrow_spec(ndim, axis, start, stop):
    return (("slice", None, None, None),) * axis + (("slice", start, stop, None),)


@public(out=True)
def nonzero(input, *, as_tuple=False):
    """The positions of the non-zero elements: one row each, or one tensor per
    dimension (``as_tuple``). Eager only: how many there are is a value."""
    input = as_tensor_arg(input)
    if recording.trace is not None:
        recording.trace.unsupported("nonzero (its result's shape depends on the input's values)")
    positions = np.nonzero(input._data.reshape(input.shape or (1,)))
    if as_tuple:
        return tuple(Tensor._new(p.astype(np.int64), dtypes.int64) for p in positions)
    rows = np.stack(positions, axis=1) if input.ndim else np.zeros((len(positions[0]), 0))
    return Tensor._new(rows.astype(np.int64), dtypes.int64)


@public(method=False)
def argwhere(input):
    return nonzero(input)
