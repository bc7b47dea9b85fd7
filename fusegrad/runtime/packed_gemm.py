"""Large matrix products by fusegrad's packed GEMM (codegen/packed_gemm.py)
rather than numpy's BLAS: which products, and how one splits across the
cores (fusegrad's thread team, so no second pool of threads spins beside
its kernels)."""

from __future__ import annotations

import math
import threading

import numpy as np

from ..codegen import packed_gemm
from ..ir import dtypes
from . import threads
from .addresses import data_address

_FLOATS = frozenset([np.dtype(np.float32), np.dtype(np.float64)])

# Multiply-adds from which a product runs packed: OpenBLAS runs smaller
# ones on the calling thread, so no thread of its own spins beside
# fusegrad's (which made a W3 step, eager, 1.7x as long where products of
# 10 columns still went to BLAS); 64x64x64 took 13 us here, numpy's 14.
MIN_WORK = 1 << 18
# Rows and columns below which a product is a matrix times a vector:
# bound by memory, which BLAS's routine for it reads once.
MIN_SIDE = 2
# Multiply-adds from which a product splits across the cores: handing a part
# to another costs some 10 us.
SPLIT_WORK = 1 << 20

# Whether bfloat16 products run as such (pairs of bfloat16 by AVX512-BF16's
# dot product, twice float32's multiply-adds per instruction); elsewhere as
# the float32 products they are exactly (the products of two bfloat16 are
# exact in float32, both sum in float32).
BFLOAT16_PAIRS = packed_gemm.has_bfloat16_dot()

_workspaces = threading.local()  # per calling thread: routine's dtype -> packing space of each part


def product(
    x: np.ndarray, y: np.ndarray, pairs: bool = False, rounded: bool = False
) -> np.ndarray | None:
    """x @ y (numpy's matmul of two arrays of at least two dimensions) by the
    packed GEMM; None where BLAS should compute it. ``pairs``: x and y are
    float32 holding bfloat16 values, so may run as bfloat16 pairs;
    ``rounded``: their product's float32 sums rounded to bfloat16."""
    key = (x.shape, x.strides, y.shape, y.strides, x.dtype, y.dtype, pairs, rounded)
    call = _calls.get(key, _UNSEEN)
    if call is _UNSEEN:
        layout = _layout(x, y)
        routine = "bfloat16" if pairs and BFLOAT16_PAIRS else x.dtype.name
        call = None if layout is None else _Call(routine, layout, rounded)
        if len(_calls) >= CALLS_KEPT:
            _calls.clear()
        _calls[key] = call
    if call is None:  # asking the cores only here: the question is a system call
        return None
    sizes = call.sizes(threads.count())
    out = np.empty(call.shape, x.dtype)
    spaces = _workspace(call.routine, len(sizes))
    addresses = (data_address(x), data_address(y), data_address(out))
    threads.run(call.native, [(*addresses, s, w) for s, w in zip(sizes, spaces)])
    if rounded and call.routine != "bfloat16":  # that routine rounds as it stores
        return dtypes.bfloat16.round(out)
    return out


CALLS_KEPT = 1024
_calls: dict = {}  # operands' layouts -> _Call, or None for BLAS
_UNSEEN = object()


class _Call:
    """How a product of one layout runs: the routine, the result's shape and
    each part's sizes per count of cores, made once (looking all that up
    took 70 us a call)."""

    def __init__(self, routine: str, layout: tuple, rounded: bool):
        self.shape, self.items, self.mkn, strides = layout
        self.arguments = [*strides, int(rounded)]  # the routine's sizes after the depth
        self.routine = routine
        emulated_dot = routine == "bfloat16" and not packed_gemm.has_bfloat16_dot()
        self.native = packed_gemm.matmul(routine, emulated_dot)
        self.blocks = packed_gemm.blocking(routine)
        self.by_cores: dict = {}  # cores -> (addresses of the parts' sizes, those int64 arrays)

    def sizes(self, cores: int) -> list:
        made = self.by_cores.get(cores)
        if made is None:
            m, k, n = self.mkn
            splits = cores if self.items * m * k * n >= SPLIT_WORK else 1
            parts = _parts(self.items, m, n, splits, self.blocks)
            arrays = [
                np.array([*part, k, *self.arguments, index % 2], np.int64)  # odd: from the end
                for index, part in enumerate(parts)
            ]
            made = self.by_cores[cores] = ([data_address(a) for a in arrays], arrays)
        return made[0]


def runs_packed(x_shape: tuple, y_shape: tuple) -> bool:
    """Whether a product of float operands of these shapes is large enough
    to run packed (whatever their strides: the operands' axes may still
    fail to merge, leaving it to BLAS)."""
    if min(len(x_shape), len(y_shape)) < 2:
        return False
    (m, k), n = x_shape[-2:], y_shape[-1]
    if min(m, n) < MIN_SIDE:
        return False
    return math.prod(np.broadcast_shapes(x_shape[:-2], y_shape[:-2])) * m * k * n >= MIN_WORK


def _layout(x: np.ndarray, y: np.ndarray):
    """(result shape, items, (m, k, n), the routine's ``SIZES`` from
    inner_items on) for x @ y; None where the packed GEMM should not
    compute it."""
    if x.dtype != y.dtype or x.dtype not in _FLOATS or min(x.ndim, y.ndim) < 2:
        return None
    (m, k), n = x.shape[-2:], y.shape[-1]
    if y.shape[-2] != k or min(m, k, n) < 1:
        return None
    x_strides, y_strides = element_strides(x), element_strides(y)
    if x_strides is None or y_strides is None:
        return None
    if y.ndim == 2:  # a stack of matrices times one: all their rows at once
        rows = merged_axes(x.shape[:-1], x_strides[:-1])
        if rows is None or not runs_packed(x.shape, y.shape):
            return None
        rows_count, row_stride = rows
        sizes = [1, 0, 0, row_stride, x_strides[-1], 0, 0, *y_strides, 0, 0, n]
        return x.shape[:-1] + (n,), 1, (rows_count, k, n), sizes
    try:
        batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    except ValueError:
        return None
    items = math.prod(batch)
    stacks = two_stack_axes(x, y, batch, m * n)
    if stacks is None or not runs_packed(x.shape, y.shape):
        return None
    inner_items, outer, inner = stacks
    sizes = [inner_items, outer[0], inner[0], *x_strides[-2:], outer[1], inner[1]]
    sizes += [*y_strides[-2:], outer[2], inner[2], n]
    return batch + (m, n), items, (m, k, n), sizes


def two_stack_axes(x: np.ndarray, y: np.ndarray, batch: tuple, result_size: int):
    """The stack axes of x @ y (broadcast to ``batch``) merged into an outer
    and an inner one: (inner count, (x, y, result) strides of the outer,
    the same of the inner), in elements, for a result whose matrices are
    ``result_size`` apart; None where they do not merge into two."""
    stack_strides = [
        [s // a.itemsize for s in np.broadcast_to(a, batch + a.shape[-2:]).strides[:-2]]
        for a in (x, y)
    ]
    out_strides = [result_size]
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
    return inner_items, outer, inner


def merged_axes(shape: tuple, strides: list):
    """(count, stride) when the axes of ``shape`` step through memory as one
    axis does; else None."""
    count, stride = 1, 0
    for n, s in zip(reversed(shape), reversed(strides)):
        if n == 1:
            continue
        if count > 1 and s != stride * count:
            return None
        if count == 1:
            stride = s
        count *= n
    return count, stride


def element_strides(a: np.ndarray):
    """``a``'s strides in elements; None if one is not a whole number of them."""
    if any(s % a.itemsize for s in a.strides):
        return None
    return [s // a.itemsize for s in a.strides]


def _parts(items: int, m: int, n: int, cores: int, blocks) -> list:
    """Each core's part of the products, as (items, rows, columns) ranges:
    whole products where there are as many, else each product's columns
    (or, when it is taller than wide, its rows) in panels of the
    micro-kernel's size."""
    if items >= cores or cores == 1:
        return [
            (begin, min(begin + -(-items // cores), items), 0, m, 0, n)
            for begin in range(0, items, -(-items // cores))
        ]
    by_columns = n >= m
    length, panel = (n, blocks.nr) if by_columns else (m, blocks.mr)
    panels = -(-length // panel)
    step = -(-panels // cores) * panel
    parts = []
    for begin in range(0, length, step):
        end = min(begin + step, length)
        if by_columns:
            parts.append((0, items, 0, m, begin, end))
        else:
            parts.append((0, items, begin, end, 0, n))
    return parts


def _workspace(routine: str, count: int) -> list:
    """The addresses of packing space for ``count`` parts of the routine for
    ``routine`` (a dtype's name), kept by the calling thread (another
    thread's product must not share it)."""
    spaces = getattr(_workspaces, "by_routine", None)
    if spaces is None:
        spaces = _workspaces.by_routine = {}
    kept = spaces.get(routine)
    if kept is None or len(kept[0]) < count:
        size = packed_gemm.blocking(routine).workspace()
        dtype = np.float64 if routine == "float64" else np.float32  # bfloat16's pairs: 4 bytes
        arrays = [np.empty(size, dtype) for _ in range(count)]
        kept = spaces[routine] = (arrays, [data_address(a) for a in arrays])
    return kept[1]
