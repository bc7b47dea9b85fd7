"""Primitives run by a hand-written native loop (codegen/routines.py) where
numpy's implementation is slow: compiled plans and eager mode call the same
routine, so both compute the same values. Other primitives, and other dtypes,
run through their numpy implementation."""

from __future__ import annotations

import math

import numpy as np

from ..codegen import convolution, gemm, routines
from ..codegen import packed_gemm as codegen_packed_gemm
from ..ir import dtypes, graph
from ..ir import primitives as P
from . import packed_gemm, threads
from .addresses import data_address

_FLOATS = frozenset([np.dtype(np.float32), np.dtype(np.float64)])


def fold(cols: np.ndarray, size, kernel, stride, dilation) -> np.ndarray:
    """``P.fold`` (col2im) by the native routine, on this thread unless a
    program owns the cores: a fold is a convolution's input gradient, beside
    matrix products, whose OpenBLAS threads hold the other cores (on two
    threads LeNet's took 0.6 ms, on one 0.27)."""
    return _by_routine(
        P.fold, _fold_call, cols, size=size, kernel=kernel, stride=stride, dilation=dilation
    )


def _fold_call(cols, size, kernel, stride, dilation):
    if not _fits(cols.shape, size, kernel, stride, dilation) or cols.dtype not in _FLOATS:
        return None  # the loops would stray
    lead = cols.shape[: cols.ndim - 2 * len(kernel)]
    sizes = _window_sizes(lead, size, kernel, stride, dilation)
    return routines.fold(cols.dtype.name), lead + tuple(size), cols.dtype, sizes


def windows(x: np.ndarray, kernel, stride, dilation) -> np.ndarray:
    """``P.windows`` (im2col) by the native routine, threaded as ``fold``."""
    return _by_routine(P.windows, _windows_call, x, kernel=kernel, stride=stride, dilation=dilation)


def _windows_call(x, kernel, stride, dilation):
    spatial = len(kernel)
    if x.ndim < spatial or min((*stride, *dilation), default=1) < 1 or x.dtype not in _FLOATS:
        return None
    size = x.shape[x.ndim - spatial :]
    counts = tuple(map(P.window_count, size, kernel, stride, dilation))
    if min(counts, default=1) < 1:  # no window fits: numpy's implementation raises
        return None
    lead = x.shape[: x.ndim - spatial]
    sizes = _window_sizes(lead, size, kernel, stride, dilation)
    return routines.windows(x.dtype.name), lead + tuple(kernel) + counts, x.dtype, sizes


def windows_matmul(w: np.ndarray, x: np.ndarray, kernel) -> np.ndarray:
    """``P.windows_matmul`` (a convolution of stride 1) by the native routine,
    which reads each window from the image in place (codegen/convolution.py),
    or where that is slower, by the matrix routine on copied windows."""
    if convolution.reads_windows_in_place():
        return _by_routine(P.windows_matmul, _windows_matmul_call, w, x, kernel=kernel)
    if _unit_windows_layout("windows_matmul", w, x, kernel) is None:
        return P.windows_matmul.impl(w, x, kernel=kernel)
    cols, counts = _copied_windows(x, kernel)
    images = x.shape[0]
    products = matmul(np.broadcast_to(w, (images, *w.shape)), cols)
    return products.reshape((images, w.shape[0]) + counts)


def windows_dots(dy: np.ndarray, x: np.ndarray, kernel) -> np.ndarray:
    """``P.windows_dots`` (a convolution's filter gradient) by the native
    routine, or by the matrix routine on copied windows (as ``windows_matmul``):
    each image's product, summed over the images a group at a time, so the
    products held at once stay within ``PRODUCTS_HELD`` bytes."""
    if convolution.reads_windows_in_place():
        return _by_routine(P.windows_dots, _windows_dots_call, dy, x, kernel=kernel)
    if _unit_windows_layout("windows_dots", dy, x, kernel) is None:
        return P.windows_dots.impl(dy, x, kernel=kernel)
    cols, _ = _copied_windows(x, kernel)
    images, filters = dy.shape[:2]
    taps, positions = cols.shape[1:]
    gradient = dy.reshape(images, filters, positions)
    vector = gemm.lanes(dy.dtype.name)
    # Each filter's dot with each tap's windows runs along the positions,
    # summed across lanes at its end: with few positions that sum is much
    # of the work, and the product the other way round (the taps' windows
    # times the gradient transposed, vectors along the filters) is faster
    # (LeNet's second layer, 100 positions and 16 filters: 1.6 -> 0.9 ms).
    across_filters = filters >= 2 * vector and positions < 32 * vector
    if across_filters:
        gradient = np.ascontiguousarray(gradient.transpose(0, 2, 1))
    image_products = filters * taps * dy.itemsize  # bytes; none without filters or taps
    group = max(1, PRODUCTS_HELD // max(image_products, 1))
    total = np.zeros((taps, filters) if across_filters else (filters, taps), dy.dtype)
    for start in range(0, images, group):
        part = slice(start, start + group)
        if across_filters:
            left, right = cols[part], gradient[part]
        else:
            left, right = gradient[part], cols[part].transpose(0, 2, 1)
        total += matmul(left, right).sum(0)
    return np.ascontiguousarray(total.T) if across_filters else total


def fold_matmul(w: np.ndarray, dy: np.ndarray, size, kernel) -> np.ndarray:
    """``P.fold_matmul`` (a convolution's image gradient) by the native
    routine: each image row summed from dy's rows in registers, where the
    products' windows were written out and added back; or where that is
    slower, by the matrix routine and then ``fold``."""
    if convolution.reads_windows_in_place():
        return _by_routine(P.fold_matmul, _fold_matmul_call, w, dy, size=size, kernel=kernel)
    if _fold_matmul_layout(w, dy, size, kernel) is None:
        return P.fold_matmul.impl(w, dy, size=size, kernel=kernel)
    images, filters = dy.shape[:2]
    counts = tuple(dy.shape[2:])
    gradient = dy.reshape(images, filters, math.prod(counts))
    products = matmul(np.broadcast_to(w.T, (images, w.shape[1], filters)), gradient)
    channels = w.shape[1] // math.prod(kernel)
    cols = products.reshape((images, channels) + tuple(kernel) + counts)
    ones = (1,) * len(kernel)
    return fold(cols, tuple(size), tuple(kernel), ones, ones)


def _copied_windows(x: np.ndarray, kernel) -> tuple:
    """(images, channels x taps, positions): x's windows of stride 1, copied
    out (im2col); and the positions' counts."""
    ones = (1,) * len(kernel)
    cols = windows(x, tuple(kernel), ones, ones)
    counts = cols.shape[cols.ndim - len(kernel) :]
    return cols.reshape(x.shape[0], x.shape[1] * math.prod(kernel), math.prod(counts)), counts


# Bytes of per-image products ``windows_dots`` holds before summing them.
PRODUCTS_HELD = 1 << 23


def _fold_matmul_call(w, dy, size, kernel):
    layout = _fold_matmul_layout(w, dy, size, kernel)
    if layout is None:
        return None
    kernel, out_shape, sizes = layout
    return convolution.routine("fold_matmul", w.dtype.name, kernel), out_shape, w.dtype, sizes


def _fold_matmul_layout(w, dy, size, kernel):
    """The routine's 2-D kernel, the result's shape and the routine's sizes
    where it covers these arrays exactly; None where numpy's implementation
    should run (and raise for what does not fit)."""
    if not 1 <= len(kernel) <= 2 or len(size) != len(kernel) or w.dtype != dy.dtype:
        return None
    counts = tuple(n - k + 1 for n, k in zip(size, kernel))
    taps = math.prod(kernel)
    if w.dtype not in _FLOATS or min(counts) < 1 or w.ndim != 2 or w.shape[1] % taps:
        return None
    if dy.ndim != 2 + len(kernel) or dy.shape[1] != w.shape[0] or tuple(dy.shape[2:]) != counts:
        return None
    channels = w.shape[1] // taps
    planes = tuple(size) if len(kernel) == 2 else (1, *size)
    kernel = tuple(kernel) if len(kernel) == 2 else (1, *kernel)
    sizes = np.array([0, dy.shape[0], w.shape[0], channels, *planes], np.int64)
    return kernel, (dy.shape[0], channels) + tuple(size), sizes


def _windows_matmul_call(w, x, kernel):
    return _unit_windows_call("windows_matmul", w, x, kernel)


def _windows_dots_call(dy, x, kernel):
    return _unit_windows_call("windows_dots", dy, x, kernel)


def _unit_windows_call(name, a, x, kernel):
    layout = _unit_windows_layout(name, a, x, kernel)
    if layout is None:
        return None
    kernel, out_shape, sizes = layout
    return convolution.routine(name, x.dtype.name, kernel), out_shape, x.dtype, sizes


def _unit_windows_layout(name, a, x, kernel):
    """For ``a`` (filters or dy) and x's windows: the routine's 2-D kernel,
    the result's shape and the routine's sizes where it covers them exactly;
    None where numpy's implementation should run (and raise for what does
    not fit)."""
    if not 1 <= len(kernel) <= 2 or x.ndim != 2 + len(kernel) or a.dtype != x.dtype:
        return None
    counts = tuple(n - k + 1 for n, k in zip(x.shape[2:], kernel))
    if x.dtype not in _FLOATS or min(counts) < 1 or a.ndim < 2:
        return None
    taps = x.shape[1] * math.prod(kernel)
    if name == "windows_matmul":
        a_shape, out_shape = (a.shape[0], taps), (x.shape[0], a.shape[0]) + counts
    else:
        a_shape, out_shape = (x.shape[0], a.shape[1]) + counts, (a.shape[1], taps)
    if a.shape != a_shape:
        return None
    planes = x.shape[2:] if len(kernel) == 2 else (1, *x.shape[2:])  # a row of one-row windows
    kernel = tuple(kernel) if len(kernel) == 2 else (1, *kernel)
    filters = out_shape[1] if name == "windows_matmul" else out_shape[0]
    sizes = np.array([0, x.shape[0], filters, x.shape[1], *planes], np.int64)
    return kernel, out_shape, sizes


def take_at_tile_max(x: np.ndarray, source: np.ndarray, kernel) -> np.ndarray:
    """``P.take_at_tile_max`` (max pooling's values) by the native routine:
    LeNet's pooling ran as four strided views compared in a kernel, its
    gradient as three concatenations (0.4 ms of a 2.3 ms step)."""
    return _by_routine(P.take_at_tile_max, _take_call, x, source, kernel=kernel)


def put_at_tile_max(x: np.ndarray, values: np.ndarray, kernel) -> np.ndarray:
    """``P.put_at_tile_max`` (max pooling's gradient) by the native routine."""
    return _by_routine(P.put_at_tile_max, _put_call, x, values, kernel=kernel)


def _tiled_shape(shape, kernel) -> tuple | None:
    """(*lead, *counts): the tiles of the trailing axes; None unless whole."""
    if len(shape) < len(kernel) or any(k < 1 or n % k for n, k in zip(shape[::-1], kernel[::-1])):
        return None
    lead = tuple(shape[: len(shape) - len(kernel)])
    return lead + tuple(n // k for n, k in zip(shape[len(lead) :], kernel))


def _take_call(x, source, kernel):
    return _tiles_call("take", x, source, x.shape, kernel)


def _put_call(x, values, kernel):
    return _tiles_call("put", x, values, _tiled_shape(x.shape, kernel), kernel)


def _tiles_call(name, x, operand, operand_shape, kernel):
    """The routine where it covers these arrays exactly (otherwise numpy's
    implementation raises or computes): x's trailing axes whole tiles, the
    operand of x's dtype and of the shape the primitive expects."""
    tiled = _tiled_shape(x.shape, kernel)
    if not 0 < len(kernel) <= routines.SPATIAL or tiled is None or x.dtype not in _FLOATS:
        return None
    if operand.dtype != x.dtype or operand.shape != operand_shape:
        return None
    ones = (1,) * (routines.SPATIAL - len(kernel))
    counts = ones + tiled[len(tiled) - len(kernel) :]
    rows = math.prod(tiled[: len(tiled) - len(kernel)]) * counts[0] * counts[1]
    sizes = np.array([0, rows, counts[1], counts[2]], np.int64)
    out_shape = tiled if name == "take" else x.shape
    return routines.tile_max(name, x.dtype.name, ones + tuple(kernel)), out_shape, x.dtype, sizes


# Layouts of a routine's operands -> how to run it (see ``_prepared``).
CALLS_KEPT = 4096
_calls: dict = {}
_UNSEEN = object()


def _prepared(key, prepare):
    """How to run a routine on operands of these layouts (``prepare()``: the
    native function, the result's shape and dtype, the int64 sizes; None for
    numpy's implementation), decided once: checking them and looking the
    routine up took 10 us a call."""
    call = _calls.get(key, _UNSEEN)
    if call is _UNSEEN:
        call = prepare()
        if len(_calls) >= CALLS_KEPT:
            _calls.clear()
        _calls[key] = call
    return call


def _by_routine(prim, prepare, *operands, **params) -> np.ndarray:
    """``prim`` on ``operands`` by the routine ``prepare(*operands, **params)``
    finds for their shapes and dtypes, else by its numpy implementation."""
    key = (prim, *[(a.shape, a.dtype) for a in operands], *params.values())
    call = _prepared(key, lambda: prepare(*operands, **params))
    if call is None:
        return prim.impl(*operands, **params)
    return _run(call, *operands, split=prim is not P.windows_dots)  # it sums over the images


def _run(call, *operands, split=True) -> np.ndarray:
    """A prepared routine on C-contiguous copies of ``operands`` (where they
    are not), into a new result; its items split across the cores while a
    program owns them, unless ``split`` is False (items summed into one
    result)."""
    native, shape, dtype, sizes = call
    arrays = [a if a.flags.c_contiguous else np.ascontiguousarray(a) for a in operands]
    out = np.empty(shape, dtype)
    addresses = (*map(data_address, arrays), data_address(out))
    if split:
        _over_items(native, addresses, sizes, out.size)
    else:
        native(*addresses, data_address(sizes))
    return out


# Result elements from which a routine's items split across the cores (when
# a program owns them): handing a part to a worker and joining it costs some
# 15-20 us (threads.py); LeNet's step took 11% less than splitting from 32k
# elements, when a Python thread pool's handoff cost 60-140 us.
SPLIT_ELEMENTS = 1 << 13


def _over_items(native, addresses: tuple, sizes: np.ndarray, elements: int) -> None:
    """``native(*addresses, sizes)``, whose sizes begin with the range of
    items it computes (each its own part of the result), in parts across
    the cores when there are ``elements`` enough."""
    begin, end = int(sizes[0]), int(sizes[1])
    parts = min(threads.routines_split(), end - begin) if elements >= SPLIT_ELEMENTS else 1
    if parts < 2:
        native(*addresses, data_address(sizes))
        return
    step = -(-(end - begin) // parts)
    ranges = [sizes.copy() for _ in range(begin, end, step)]  # alive until the parts finish
    for start, part in zip(range(begin, end, step), ranges):
        part[0], part[1] = start, min(start + step, end)
    threads.run(native, [(*addresses, data_address(part)) for part in ranges])


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


def matmul(x: np.ndarray, y: np.ndarray, operands=None, rounded: bool = False) -> np.ndarray:
    """``P.matmul`` by fusegrad's routines where they do better than numpy's
    BLAS: stacked small matrices by the register-blocked routine, where
    numpy would make one BLAS call per matrix (a LeNet's convolutions ran
    1.3-5x faster, codegen/gemm.py), which runs on this thread unless a
    program owns the cores (see ``threads.own_cores``: split beside BLAS's
    spinning thread, LeNet's step took 10% longer); one product by the same
    routine where it is too small or too thin for packing to pay
    (``_unpacked_call``); large products by the
    packed GEMM on fusegrad's threads (runtime/packed_gemm.py), as bfloat16
    pairs where ``operands`` (``P.matmul``'s parameter) says x and y hold
    bfloat16 values. ``rounded``: the result rounded to bfloat16 (by the
    packed GEMM as it stores it)."""
    threads.adapt_blas_to_load()
    if y.ndim >= 3:
        key = (P.matmul, x.shape, x.strides, y.shape, y.strides, x.dtype, y.dtype)
        call = _prepared(key, lambda: _product_call(x, y))
        if call is not None:
            native, shape, arguments, copied = call
            if copied:
                y = np.ascontiguousarray(y)
            out = np.empty(shape, x.dtype)
            addresses = (data_address(x), data_address(y), data_address(out))
            _over_items(native, addresses, arguments, out.size)
            return dtypes.bfloat16.round(out) if rounded else out
    pairs = operands is dtypes.bfloat16
    if y.ndim == 2 and x.ndim >= 2 and not (pairs and packed_gemm.BFLOAT16_PAIRS):
        key = (P.matmul, "unpacked", x.shape, x.strides, y.shape, y.strides, x.dtype, y.dtype)
        call = _prepared(key, lambda: _unpacked_call(x, y))
        if call is not None:
            out = _unpacked_product(call, x, y)
            return dtypes.bfloat16.round(out) if rounded else out
    if x.ndim >= 2 and y.ndim >= 2:
        out = packed_gemm.product(x, y, pairs, rounded)
        if out is not None:
            return out
    out = P.matmul.impl(x, y)
    return dtypes.bfloat16.round(out) if rounded else out


def _unpacked_call(x: np.ndarray, y: np.ndarray):
    """(routine, result shape, itemsize, sizes, whether it splits, its parts
    per count of cores, made on first use) for x @ y, x's rows
    (perhaps stacked) times one matrix, where the packed GEMM would compute
    it but the register-blocked routine, reading the operands in place, is
    faster: a small product (packing and the micro-kernel's whole panels
    cost more than they save: 64x120x84 took 31 us packed, 19 unpacked,
    OpenBLAS 15 on one core) or a thin one (columns for half the
    micro-kernel's panel or fewer: 256x512x10 took 119 us packed, 31
    unpacked, both on two cores; OpenBLAS 29). None otherwise."""
    if x.dtype != y.dtype or x.dtype not in _FLOATS:
        return None
    if not packed_gemm.runs_packed(x.shape, y.shape):
        return None
    (depth, columns), x_strides = y.shape, packed_gemm.element_strides(x)
    y_strides = packed_gemm.element_strides(y)
    if x.shape[-1] != depth or columns < MIN_COLUMNS or x_strides is None or y_strides is None:
        return None
    rows = packed_gemm.merged_axes(x.shape[:-1], x_strides[:-1])
    if rows is None:
        return None
    thin = columns <= codegen_packed_gemm.blocking(x.dtype.name).nr // 2
    small = rows[0] * depth * columns < packed_gemm.SPLIT_WORK and x_strides[-1] == 1
    if not (thin or small):  # a small x read across its rows was as fast packed
        return None
    form = _form(x_strides, y_strides, depth, x.dtype.name)
    if form is None:
        return None
    sizes = [0, 1, 1, rows[0], columns, depth, 0, 0, rows[1], x_strides[-1], 0, 0, *y_strides]
    sizes += [0, 0, columns]
    split = rows[0] * depth * columns >= packed_gemm.SPLIT_WORK  # where the packed GEMM splits
    return gemm.matmul(form, x.dtype.name), x.shape[:-1] + (columns,), x.itemsize, sizes, split, {}


def _unpacked_product(call, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``_unpacked_call``'s product, its rows split across the cores where
    the packed GEMM would split them."""
    native, shape, itemsize, sizes, split, by_cores = call
    cores = threads.count() if split else 1
    parts = by_cores.get(cores)
    if parts is None:
        parts = by_cores[cores] = _row_parts(sizes, itemsize, cores)
    out = np.empty(shape, x.dtype)
    a, b, c = data_address(x), data_address(y), data_address(out)
    threads.run(native, [(a + x_at, b, c + out_at, at) for x_at, out_at, at, _ in parts])
    return out


def _row_parts(sizes: list, itemsize: int, cores: int) -> list:
    """One product's rows in a part per core: (x's and the result's offsets
    in bytes, the address of the part's sizes, those sizes)."""
    rows, columns, row_stride = sizes[3], sizes[4], sizes[8]
    step = -(-rows // cores)
    parts = []
    for begin in range(0, rows, step):
        part = np.array(sizes, np.int64)
        part[3] = min(step, rows - begin)
        offsets = begin * row_stride * itemsize, begin * columns * itemsize
        parts.append((*offsets, data_address(part), part))
    return parts


def _form(x_strides: list, y_strides: list, depth: int, dtype_name: str):
    """The register-blocked routine's form for operands of these element
    strides (their last two axes): ``rows`` where y's columns are
    contiguous, ``dots`` where both run contiguous along a depth of four
    vectors or more; else None."""
    if y_strides[-1] == 1:
        return "rows"
    if x_strides[-1] == 1 and y_strides[-2] == 1 and depth >= 4 * gemm.lanes(dtype_name):
        return "dots"
    return None


def _product_call(x: np.ndarray, y: np.ndarray):
    """The routine, result shape, size arguments and whether y is copied
    C-contiguous first, for x @ y; or None. The ``dots`` form sums each
    result element across lanes at its end: with a short depth that sum
    is much of the work, and where there are rows enough to share the
    copy, copying y so its columns are contiguous and taking the ``rows``
    form is faster (attention's q @ k^T over 64 positions, heads of 32:
    1.0 -> 0.58 ms with the copy; of 64: 1.67 -> 1.28)."""
    layout = _stacked_product(x, y) if x.dtype == y.dtype else None
    if layout is None:
        return None
    form, shape, sizes = layout
    (rows, depth), columns, vector = x.shape[-2:], y.shape[-1], gemm.lanes(x.dtype.name)
    copied = form == "dots" and min(rows, columns) >= 2 * vector and depth < 32 * vector
    if copied:  # the layout of the copy each call makes
        form, shape, sizes = _stacked_product(x, np.ascontiguousarray(y))
    return gemm.matmul(form, x.dtype.name), shape, np.array(sizes, np.int64), copied


def _stacked_product(x: np.ndarray, y: np.ndarray):
    """How the routine computes x @ y: its form, the result's shape and the
    routine's sizes (``gemm.SIZES``). None where the packed GEMM or numpy
    should: a shape numpy rejects, an empty or single product, columns too few for vectors, a
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
    x_strides, y_strides = packed_gemm.element_strides(x), packed_gemm.element_strides(y)
    if count < 2 or count * rows * columns * depth < MIN_WORK:
        return None
    if x_strides is None or y_strides is None:
        return None
    form = _form(x_strides, y_strides, depth, x.dtype.name)
    if form is None:
        return None
    stacks = packed_gemm.two_stack_axes(x, y, batch, rows * columns)
    if stacks is None:
        return None
    inner_items, outer, inner = stacks
    sizes = [0, count, inner_items, rows, columns, depth]
    sizes += [outer[0], inner[0], *x_strides[-2:], outer[1], inner[1], *y_strides[-2:]]
    sizes += [outer[2], inner[2], columns]
    return form, batch + (rows, columns), sizes


def _window_sizes(lead, size, kernel, stride, dilation) -> np.ndarray:
    """``fold``'s and ``windows``' sizes (``routines.WINDOW_SIZES``) over every plane."""
    counts = tuple(map(P.window_count, size, kernel, stride, dilation))
    ones = [1] * (routines.SPATIAL - len(kernel))
    settings = [n for sizes in (kernel, counts, size, stride, dilation) for n in (*ones, *sizes)]
    return np.array([0, math.prod(lead), *settings], np.int64)


def _fits(shape, size, kernel, stride, dilation) -> bool:
    """Whether windows of ``shape`` are those of an image of ``size``: the
    routine writes where they came from, so anything else goes to numpy's
    implementation, which raises."""
    if min((*stride, *dilation), default=1) < 1 or len(shape) < 2 * len(kernel):
        return False
    counts = tuple(map(P.window_count, size, kernel, stride, dilation))
    return tuple(shape[len(shape) - 2 * len(kernel) :]) == tuple(kernel) + counts


MIN_COLUMNS = 4  # fewer: mostly masked-off lanes, where BLAS did better
# Multiply-adds in all products below which numpy's call costs less than
# the routine's (at 8 x 16x16x16 they took the same 3.2 us).
MIN_WORK = 1 << 15
# Multiply-adds of one product beyond which packing and cache blocking pay
# off, the packed GEMM's (2 x 1024^3 took 14% longer here than BLAS's,
# 4 x 64x16384x64 70%).
MAX_PRODUCT = 1 << 22

ROUTINES = {
    P.matmul: matmul,
    P.fold: fold,
    P.windows: windows,
    P.scatter_add: scatter_add,
    P.windows_matmul: windows_matmul,
    P.windows_dots: windows_dots,
    P.fold_matmul: fold_matmul,
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
    """One equation on numpy arrays: by its routine where it has one (see
    ``run_reduced`` for float16 and bfloat16)."""
    if runs_natively(eqn.prim, values[0]):
        if eqn.out.dtype.reduced:
            operand_dtypes = [v.dtype for v in eqn.inputs]
            return run_reduced(eqn.prim, values, operand_dtypes, eqn.out.dtype, eqn.params)
        return ROUTINES[eqn.prim](*values, **eqn.params)
    return graph.run_equation(eqn, values)


def run_reduced(prim, values: list, operand_dtypes: list, out_dtype, params: dict) -> np.ndarray:
    """A routine with a float16 or bfloat16 result, on its operands' float32
    storage, the result rounded once (as ``Primitive.compute``); a product of
    bfloat16 matrices as such (``matmul``). Eager mode and compiled programs
    both run reduced routines here, so both compute the same bits."""
    if prim is P.matmul and all(d is dtypes.bfloat16 for d in operand_dtypes):
        return matmul(*values, operands=dtypes.bfloat16, rounded=True)
    return out_dtype.round(ROUTINES[prim](*values, **params))
