"""Primitives run by a hand-written native loop (codegen/routines.py) where
numpy's implementation is slow: compiled plans and eager mode call the same
routine, so both compute the same values. Other primitives, and other dtypes,
run through their numpy implementation."""

from __future__ import annotations

import math

import numpy as np

from ..codegen import convolution, gemm, routines
from ..ir import graph
from ..ir import primitives as P
from .addresses import data_address

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


def windows_matmul(w: np.ndarray, x: np.ndarray, kernel) -> np.ndarray:
    """``P.windows_matmul`` (a convolution of stride 1) by the native routine,
    which reads each window from the image in place (codegen/convolution.py)."""
    layout = _unit_windows_layout(w, x, kernel, (w.shape[0], x.shape[1] * math.prod(kernel)))
    if layout is None:
        return P.windows_matmul.impl(w, x, kernel=kernel)
    out = np.empty((x.shape[0], w.shape[0]) + _unit_counts(x, kernel), x.dtype)
    _run_unit_windows("windows_matmul", w, out, *layout)
    return out


def windows_dots(dy: np.ndarray, x: np.ndarray, kernel) -> np.ndarray:
    """``P.windows_dots`` (a convolution's filter gradient) by the native routine."""
    dy_shape = (x.shape[0], dy.shape[1]) + _unit_counts(x, kernel) if dy.ndim > 1 else None
    layout = _unit_windows_layout(dy, x, kernel, dy_shape)
    if layout is None:
        return P.windows_dots.impl(dy, x, kernel=kernel)
    out = np.empty((dy.shape[1], x.shape[1] * math.prod(kernel)), x.dtype)
    _run_unit_windows("windows_dots", dy, out, *layout)
    return out


def _unit_counts(x, kernel) -> tuple:
    return tuple(n - k + 1 for n, k in zip(x.shape[2:], kernel))


def _unit_windows_layout(a, x, kernel, a_shape):
    """(images as 2-D planes, the routine's sizes, the 2-D kernel) where the
    routine covers ``a`` (of ``a_shape``) and x's windows exactly; None where
    numpy's implementation should run (and raise for what does not fit)."""
    if not 1 <= len(kernel) <= 2 or x.ndim != 2 + len(kernel) or a.dtype != x.dtype:
        return None
    if x.dtype not in _FLOATS or min(_unit_counts(x, kernel)) < 1 or a.shape != a_shape:
        return None
    images = x if len(kernel) == 2 else x[:, :, None, :]  # a row of one-row windows
    kernel2 = tuple(kernel) if len(kernel) == 2 else (1, kernel[0])
    filters = a_shape[0] if a.ndim == 2 else a_shape[1]
    sizes = np.array([0, x.shape[0], filters, *images.shape[1:]], np.int64)
    return images, sizes, kernel2


def _run_unit_windows(name, a, out, images, sizes, kernel2) -> None:
    a, images = np.ascontiguousarray(a), np.ascontiguousarray(images)
    native = convolution.routine(name, images.dtype.name, kernel2)
    native(a.ctypes.data, images.ctypes.data, out.ctypes.data, sizes.ctypes.data)


def take_at_tile_max(x: np.ndarray, source: np.ndarray, kernel) -> np.ndarray:
    """``P.take_at_tile_max`` (max pooling's values) by the native routine:
    LeNet's pooling ran as four strided views compared in a kernel, its
    gradient as three concatenations (0.4 ms of a 2.3 ms step)."""
    if not _tiles_fit(x, source, x.shape, kernel):
        return P.take_at_tile_max.impl(x, source, kernel=kernel)
    lead, counts = _tile_counts(x.shape, kernel)
    out = np.empty(lead + counts, source.dtype)
    _run_tiles("take", x, source, out, kernel, counts)
    return out


def put_at_tile_max(x: np.ndarray, values: np.ndarray, kernel) -> np.ndarray:
    """``P.put_at_tile_max`` (max pooling's gradient) by the native routine."""
    if not _tiles_fit(x, values, _tiled_shape(x.shape, kernel), kernel):
        return P.put_at_tile_max.impl(x, values, kernel=kernel)
    out = np.empty(x.shape, values.dtype)
    _run_tiles("put", x, values, out, kernel, _tile_counts(x.shape, kernel)[1])
    return out


def _tile_counts(shape, kernel) -> tuple:
    """(leading axes, tiles along each spatial axis)."""
    lead = tuple(shape[: len(shape) - len(kernel)])
    return lead, tuple(n // k for n, k in zip(shape[len(lead) :], kernel))


def _tiled_shape(shape, kernel) -> tuple | None:
    if len(shape) < len(kernel) or any(k < 1 or n % k for n, k in zip(shape[::-1], kernel[::-1])):
        return None
    return sum(_tile_counts(shape, kernel), ())


def _tiles_fit(x: np.ndarray, operand: np.ndarray, operand_shape, kernel) -> bool:
    """Whether the routine covers these arrays exactly (otherwise numpy's
    implementation raises or computes): x's trailing axes whole tiles, the
    operand of x's dtype and of the shape the primitive expects."""
    return (
        0 < len(kernel) <= routines.SPATIAL
        and _tiled_shape(x.shape, kernel) is not None
        and operand.dtype == x.dtype
        and operand.shape == operand_shape
    )


def _run_tiles(name, x, operand, out, kernel, counts) -> None:
    ones = (1,) * (routines.SPATIAL - len(kernel))
    counts = ones + tuple(counts)
    x, operand = np.ascontiguousarray(x), np.ascontiguousarray(operand)
    rows = math.prod(x.shape[: x.ndim - len(kernel)]) * counts[0] * counts[1]
    sizes = np.array([0, rows, counts[1], counts[2]], np.int64)
    native = routines.tile_max(name, x.dtype.name, ones + tuple(kernel))
    native(x.ctypes.data, operand.ctypes.data, out.ctypes.data, sizes.ctypes.data)


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


def matmul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``P.matmul`` of stacked matrices by the native routine, where numpy
    would make one BLAS call per matrix: a LeNet's convolutions ran 1.3-5x
    faster (codegen/gemm.py). One matrix, or stacked ones times one matrix
    (a single product of all their rows, see the primitive), goes to BLAS.
    The routine runs on this thread: split across two, LeNet's step took 10%
    longer (the other core holds BLAS's spinning thread)."""
    if y.ndim < 3:
        return P.matmul.impl(x, y)
    key = (x.shape, x.strides, y.shape, y.strides, x.dtype, y.dtype)
    call = _products.get(key, _UNSEEN)
    if call is _UNSEEN:
        call = _product_call(x, y)
        if len(_products) >= PRODUCTS_KEPT:
            _products.clear()
        _products[key] = call
    if call is None:
        return P.matmul.impl(x, y)
    native, shape, arguments = call
    out = np.empty(shape, x.dtype)
    native(data_address(x), data_address(y), data_address(out), data_address(arguments))
    return out


def _product_call(x: np.ndarray, y: np.ndarray):
    """The routine, result shape and size arguments for x @ y, or None."""
    layout = _stacked_product(x, y) if x.dtype == y.dtype else None
    if layout is None:
        return None
    form, shape, sizes = layout
    return gemm.matmul(form, x.dtype.name), shape, np.array(sizes, np.int64)


def _stacked_product(x: np.ndarray, y: np.ndarray):
    """How the routine computes x @ y: its form, the result's shape and the
    routine's sizes (``gemm.SIZES``). None where numpy should: a shape numpy
    rejects, an empty or single product, columns too few for vectors, a
    small or large product, stack axes that do not merge into two, or y's columns
    strided when the depth is short (copying y so its columns were
    contiguous made attention's q @ k^T slower than numpy's product)."""
    (rows, depth), columns = x.shape[-2:], y.shape[-1]
    if y.shape[-2] != depth or min(rows, depth) < 1 or columns < MIN_COLUMNS:
        return None
    if rows * columns * depth > MAX_PRODUCT:
        return None
    try:
        batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    except ValueError:
        return None
    count = math.prod(batch)
    x_strides, y_strides = _element_strides(x), _element_strides(y)
    if count < 2 or count * rows * columns * depth < MIN_WORK:
        return None
    if x_strides is None or y_strides is None:
        return None
    if y_strides[-1] == 1:
        form = "rows"
    elif x_strides[-1] == 1 and y_strides[-2] == 1 and depth >= 4 * gemm.lanes(x.dtype.name):
        form = "dots"
    else:
        return None
    stack_strides = [
        [s // a.itemsize for s in np.broadcast_to(a, batch + a.shape[-2:]).strides[:-2]]
        for a in (x, y)
    ]
    out_strides = [rows * columns]
    for n in reversed(batch[1:]):
        out_strides.insert(0, out_strides[0] * n)
    stack_strides.append(out_strides)
    groups = []  # (count, (x, y, out) strides of the innermost axis) of merged axes
    for axis, n in enumerate(batch):
        if n == 1:
            continue
        axis_strides = tuple(s[axis] for s in stack_strides)
        if groups and all(outer == inner * n for outer, inner in zip(groups[-1][1], axis_strides)):
            groups[-1] = (groups[-1][0] * n, axis_strides)
        else:
            groups.append((n, axis_strides))
    if len(groups) > 2:
        return None
    (_, outer), (inner_items, inner) = [(1, (0, 0, 0))] * (2 - len(groups)) + groups
    sizes = [0, count, inner_items, rows, columns, depth]
    sizes += [outer[0], inner[0], *x_strides[-2:], outer[1], inner[1], *y_strides[-2:]]
    sizes += [outer[2], inner[2], columns]
    return form, batch + (rows, columns), sizes


def _element_strides(a: np.ndarray):
    """``a``'s strides in elements; None if one is not a whole number of them."""
    if any(s % a.itemsize for s in a.strides):
        return None
    return [s // a.itemsize for s in a.strides]


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


MIN_COLUMNS = 4  # fewer: mostly masked-off lanes, where BLAS did better
# Layouts of products seen -> how to run them: deciding took 10 us a call.
PRODUCTS_KEPT = 1024
_products: dict = {}
_UNSEEN = object()
# Multiply-adds in all products below which numpy's call costs less than
# the routine's (at 8 x 16x16x16 they took the same 3.2 us).
MIN_WORK = 1 << 15
# Multiply-adds of one product beyond which BLAS's packing and cache
# blocking pay off (2 x 1024^3 took 14% longer here, 4 x 64x16384x64 70%).
MAX_PRODUCT = 1 << 22

ROUTINES = {
    P.matmul: matmul,
    P.fold: fold,
    P.windows: windows,
    P.scatter_add: scatter_add,
    P.windows_matmul: windows_matmul,
    P.windows_dots: windows_dots,
    P.take_at_tile_max: take_at_tile_max,
    P.put_at_tile_max: put_at_tile_max,
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
