"""Primitives run by a hand-written native loop (codegen/routines.py) where
numpy's implementation is slow: compiled plans and eager mode call the same
routine, so both compute the same values. Other primitives, and other dtypes,
run through their numpy implementation."""

from __future__ import annotations

import math

import numpy as np

from ..codegen import routines
from ..ir import graph
from ..ir import primitives as P

_FLOATS = frozenset([np.dtype(np.float32), np.dtype(np.float64)])


def fold(cols: np.ndarray, size, kernel, stride, dilation) -> np.ndarray:
    """``P.fold`` (col2im) by the native routine, on this thread: a fold is a
    convolution's input gradient, beside matrix products, whose OpenBLAS
    threads hold the other cores (on two threads LeNet's took 0.6 ms, on one
    0.27)."""
    if not _fits(cols.shape, size, kernel, stride, dilation):  # the loops would stray
        return P.fold.impl(cols, size=size, kernel=kernel, stride=stride, dilation=dilation)
    cols = np.ascontiguousarray(cols)
    lead = cols.shape[: cols.ndim - 2 * len(kernel)]
    image = np.empty(lead + tuple(size), cols.dtype)
    _run(routines.fold, cols, image, kernel, stride, dilation)
    return image


def windows(x: np.ndarray, kernel, stride, dilation) -> np.ndarray:
    """``P.windows`` (im2col) by the native routine, on this thread (as ``fold``)."""
    spatial = len(kernel)
    if x.ndim < spatial or min((*stride, *dilation), default=1) < 1:
        return P.windows.impl(x, kernel=kernel, stride=stride, dilation=dilation)
    size = x.shape[x.ndim - spatial :]
    counts = tuple(map(P.window_count, size, kernel, stride, dilation))
    if min(counts, default=1) < 1:  # no window fits: numpy's implementation raises
        return P.windows.impl(x, kernel=kernel, stride=stride, dilation=dilation)
    image = np.ascontiguousarray(x)
    cols = np.empty(x.shape[: x.ndim - spatial] + tuple(kernel) + counts, x.dtype)
    _run(routines.windows, cols, image, kernel, stride, dilation)
    return cols


def scatter_add(v: np.ndarray, *indices, spec, shape) -> np.ndarray:
    """``P.scatter_add`` by the native routine when it adds whole rows at an
    index array's row numbers (an embedding's gradient): numpy's bincount
    (the primitive's implementation) made a row number for every element,
    took 1.3 ms for a GPT-mini's 1024 rows of 128 where the routine takes
    0.03, with the same float64 sums in the same order."""
    rows = _row_numbers(spec, indices, shape)
    if rows is None or v.shape != rows.shape + tuple(shape[1:]):
        return P.scatter_add.impl(v, *indices, spec=spec, shape=shape)
    length = math.prod(shape[1:])
    sums = np.zeros(shape, np.float64)
    values = np.ascontiguousarray(v)
    sizes = np.array([rows.size, length], np.int64)
    native = routines.scatter_rows(v.dtype.name)
    native(values.ctypes.data, rows.ctypes.data, sums.ctypes.data, sizes.ctypes.data)
    return sums.astype(v.dtype, copy=False)


def _row_numbers(spec, indices, shape):
    """The rows ``spec`` (an index array, then whole axes) takes of ``shape``,
    as C-contiguous int64s in [0, rows); None for any other index, or a row
    number out of range (numpy's implementation raises)."""
    whole = ("slice", None, None, None)
    if len(indices) != 1 or not shape or spec[0] != ("array",):
        return None
    if any(entry not in (whole, ("ellipsis",)) for entry in spec[1:]):
        return None
    if indices[0].dtype.kind != "i" or indices[0].size == 0 or 0 in shape:
        return None
    rows = np.ascontiguousarray(indices[0], np.int64)
    lowest = rows.min()
    if lowest < -shape[0] or rows.max() >= shape[0]:
        return None
    return np.where(rows < 0, rows + shape[0], rows) if lowest < 0 else rows


def random_bits(seed: np.ndarray, offset: np.ndarray, shape) -> np.ndarray:
    """``P.random_bits`` by the native routine: the same Philox words, which
    numpy's rounds over uint64 arrays made in 4.5 ms for a 16x64x512 dropout
    mask (0.1 ms here)."""
    out = np.empty(shape, np.int64)
    sizes = np.array([out.size, int(seed), int(offset)], np.int64)
    routines.random_bits()(out.ctypes.data, sizes.ctypes.data)
    return out


def _run(routine, cols: np.ndarray, image: np.ndarray, kernel, stride, dilation) -> None:
    """``routine`` over every plane of C-contiguous ``cols`` and ``image``."""
    spatial = len(kernel)
    lead = image.shape[: image.ndim - spatial]
    size = image.shape[image.ndim - spatial :]
    counts = cols.shape[cols.ndim - spatial :]
    ones = [1] * (routines.SPATIAL - spatial)
    settings = [n for sizes in (kernel, counts, size, stride, dilation) for n in (*ones, *sizes)]
    arguments = np.array([0, math.prod(lead), *settings], np.int64)
    routine(cols.dtype.name)(cols.ctypes.data, image.ctypes.data, arguments.ctypes.data)


def _fits(shape, size, kernel, stride, dilation) -> bool:
    """Whether windows of ``shape`` are those of an image of ``size``: the
    routine writes where they came from, so anything else goes to numpy's
    implementation, which raises."""
    if min((*stride, *dilation), default=1) < 1 or len(shape) < 2 * len(kernel):
        return False
    counts = tuple(map(P.window_count, size, kernel, stride, dilation))
    return tuple(shape[len(shape) - 2 * len(kernel) :]) == tuple(kernel) + counts


ROUTINES = {
    P.fold: fold,
    P.windows: windows,
    P.scatter_add: scatter_add,
    P.random_bits: random_bits,
}


def runs_natively(prim, x: np.ndarray) -> bool:
    """Whether ``prim`` on ``x`` (its first operand) runs by a routine."""
    if prim is P.random_bits:
        return x.dtype == np.int64
    return prim in ROUTINES and x.dtype in _FLOATS


def run_equation(eqn, values: list) -> np.ndarray:
    """One equation on numpy arrays: by its routine where it has one."""
    if runs_natively(eqn.prim, values[0]):
        return ROUTINES[eqn.prim](*values, **eqn.params)
    return graph.run_equation(eqn, values)
