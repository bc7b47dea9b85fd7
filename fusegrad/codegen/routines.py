"""Hand-written loop nests for primitives that fused kernels do not cover.

A fused kernel computes each element of its iteration shape from operands
read through strides; adding overlapping windows back into an image (col2im,
the ``fold`` primitive: a convolution's input gradient) scatters instead.
numpy does it as one strided add over the whole batch per kernel tap, each a
pass over memory; the loop nest here adds every tap of one image plane while
the plane stays in cache, in numpy's order (so the sums are bit for bit the
same). Copying the windows out (im2col, ``windows``) is the same nest the
other way; numpy's strided copy pays its loop overhead per window row, a
few elements long. Adding rows at row numbers (an embedding's gradient,
``scatter_add`` with an index array) is a loop over the rows, and Philox's
random words (``random_bits``) a loop over the counters. Max pooling over
tiles (``take_at_tile_max``, and ``put_at_tile_max`` for its gradient)
compares each tile's taps in order, a vector of tiles at a time, where as
strided views and concatenations it took several passes over memory. Sizes
are arguments, so each routine compiles once per dtype (the pooling's once
per kernel too).
"""

from __future__ import annotations

import ctypes
import itertools

from llvmlite import ir

from ..ir.primitives import PHILOX_KEY_STEPS, PHILOX_MULTIPLIERS, PHILOX_ROUNDS
from .lowering import LLVM_TYPES
from .target import compile_function
from .vectors import Vectors, lanes

I64 = ir.IntType(64)
SPATIAL = 3  # 1-D and 2-D windows run as 3-D with leading axes of size 1

# The routines' size arguments, in this order.
WINDOW_SIZES = (
    ("planes_begin", "planes_end")
    + tuple(f"kernel{a}" for a in range(SPATIAL))
    + tuple(f"count{a}" for a in range(SPATIAL))
    + tuple(f"size{a}" for a in range(SPATIAL))
    + tuple(f"stride{a}" for a in range(SPATIAL))
    + tuple(f"dilation{a}" for a in range(SPATIAL))
)


def fold(dtype_name: str):
    """``fold(cols, image, sizes)``: for each plane in [planes_begin, planes_end),
    image[plane] = the windows cols[plane] (kernel..., count...) added back into
    an image of ``size...`` (C-contiguous arrays; ``sizes`` holds int64s in
    the order of ``WINDOW_SIZES``)."""
    return _compiled("fold", dtype_name)


def windows(dtype_name: str):
    """``windows(image, cols, sizes)``: for each plane in [planes_begin,
    planes_end), cols[plane] = the windows (kernel..., count...) of
    image[plane] (arrays and sizes as ``fold``'s)."""
    return _compiled("windows", dtype_name)


def _compiled(name: str, dtype_name: str):
    prototype = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    return compile_function(
        f"routine {name} {dtype_name}",
        lambda symbol: _window_rows_ir(name, dtype_name, symbol),
        prototype,
    )


def _window_rows_ir(name: str, dtype_name: str, symbol: str) -> str:
    """A loop nest over every window row of every plane: ``fold`` adds each
    row into the image, ``windows`` copies it out of the image."""
    return _WindowRows(name, dtype_name, symbol).build()


class _WindowRows:
    """``fold`` or ``windows`` as it is built: the builder, the arrays and
    the sizes (``WINDOW_SIZES``, loaded on entry), per axis."""

    def __init__(self, name: str, dtype_name: str, symbol: str):
        element = LLVM_TYPES[dtype_name]
        pointer = element.as_pointer()
        self.name = name
        self.module = ir.Module(name=name)
        function = ir.Function(
            self.module,
            ir.FunctionType(ir.VoidType(), [pointer, pointer, I64.as_pointer()]),
            symbol,
        )
        for argument in function.args:
            argument.add_attribute("noalias")
        # the operand first, the result second, as every routine takes them
        first, second, size_array = function.args
        self.cols_base, self.image_base = (first, second) if name == "fold" else (second, first)
        self.b = b = ir.IRBuilder(function.append_basic_block("entry"))
        self.sizes = sizes = {
            setting: b.load(b.gep(size_array, [ir.Constant(I64, k)]), name=setting)
            for k, setting in enumerate(WINDOW_SIZES)
        }
        self.kernel = [sizes[f"kernel{a}"] for a in range(SPATIAL)]
        self.count = [sizes[f"count{a}"] for a in range(SPATIAL)]
        self.size = [sizes[f"size{a}"] for a in range(SPATIAL)]
        self.stride = [sizes[f"stride{a}"] for a in range(SPATIAL)]
        self.dilation = [sizes[f"dilation{a}"] for a in range(SPATIAL)]
        self.plane_size = _product(b, self.size)
        self.window_size = _product(b, self.kernel + self.count)
        self.zero = ir.Constant(element, 0.0)
        self.vectors = Vectors(b, element, lanes(dtype_name))

    def build(self) -> str:
        _loop(self.b, self.sizes["planes_begin"], self.sizes["planes_end"], self._plane)
        self.b.ret_void()
        return str(self.module)

    def _plane(self, index):
        b = self.b
        image = b.gep(self.image_base, [_mul(b, index, self.plane_size)])
        cols = b.gep(self.cols_base, [_mul(b, index, self.window_size)])
        if self.name == "fold":
            _loop(
                b,
                ir.Constant(I64, 0),
                self.plane_size,
                lambda k: b.store(self.zero, b.gep(image, [k])),
            )

        def rows_of_tap(tap):
            _nest(b, self.count[:-1], lambda at: self._row(image, cols, tap, at))

        # taps outermost, as numpy's one add per tap: each element's sum in the same order
        _nest(b, self.kernel, rows_of_tap)

    def _row(self, image, cols, tap, at):
        """The window row of kernel tap ``tap`` at window ``at`` (every axis
        but the last)."""
        b, stride, dilation = self.b, self.stride, self.dilation
        position = [
            _add(b, _mul(b, t, d), _mul(b, p, s)) for t, d, p, s in zip(tap, dilation, at, stride)
        ]
        in_image = _flat(b, position + [_mul(b, tap[-1], dilation[-1])], self.size)
        in_cols = _mul(b, _flat(b, tap + at, self.kernel + self.count[:-1]), self.count[-1])
        if self.name == "fold":
            # one by one: a partial vector's store, then the next tap's load
            # of an overlapping row, defeated store forwarding (2.3x slower)
            self._one_by_one(image, in_image, cols, in_cols)
            return
        # a row shorter than a vector (10 in LeNet's second convolution) as
        # one partial vector, where the image's row is contiguous: 1.5x
        # faster; longer rows as LLVM vectorizes them (partial vectors'
        # stores were slower there)
        length = self.count[-1]
        short = b.icmp_signed("<", length, ir.Constant(I64, self.vectors.width))
        contiguous = b.and_(short, b.icmp_signed("==", stride[-1], ir.Constant(I64, 1)))
        with b.if_else(contiguous) as (partial_vector, one_by_one):
            with partial_vector:
                lanes_used = self.vectors.first(length)
                row = self.vectors.load(b.gep(image, [in_image]), lanes_used)
                self.vectors.store(row, b.gep(cols, [in_cols]), lanes_used)
            with one_by_one:
                self._one_by_one(image, in_image, cols, in_cols)

    def _one_by_one(self, image, in_image, cols, in_cols):
        """The row's elements from ``in_image`` and ``in_cols`` on, added
        into the image (``fold``) or copied out of it."""
        b = self.b

        def move(p):
            pixel = b.gep(image, [_add(b, in_image, _mul(b, p, self.stride[-1]))])
            window = b.gep(cols, [_add(b, in_cols, p)])
            if self.name == "fold":
                b.store(b.fadd(b.load(pixel), b.load(window)), pixel)
            else:
                b.store(b.load(pixel), window)

        _loop(b, ir.Constant(I64, 0), self.count[-1], move)


def tile_max(name: str, dtype_name: str, kernel: tuple):
    """``tile_max(x, operand, out, sizes)`` for tiles of ``kernel`` (SPATIAL
    taps, leading ones 1) over C-contiguous planes of ``count * kernel``
    elements per axis. ``sizes`` (int64s): the tile rows to do, [begin, end)
    of planes x count0 x count1, then count1 and count2. With ``name``
    "take", out (planes, *counts) = operand (x's shape) at each tile's
    maximum of x; with "put", out (x's shape) = operand (planes, *counts)
    there, zeros elsewhere. A tile's maximum is found as
    ``P.take_at_tile_max`` finds it."""
    prototype = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 4)
    return compile_function(
        f"routine tile_max {name} {dtype_name} kernel {tuple(kernel)}",
        lambda symbol: _tile_max_ir(name, dtype_name, tuple(kernel), symbol),
        prototype,
    )


def _tile_max_ir(name: str, dtype_name: str, kernel: tuple, symbol: str) -> str:
    """A loop over tile rows, each a vector of tiles at a time: each tap row
    of the vector's tiles is loaded whole and split into one vector per tap
    of the row, so the taps are compared in order lane by lane; a "put"
    merges its tap vectors back the same way. The kernel is compiled in."""
    return _TileMax(name, dtype_name, kernel, symbol).build()


class _TileMax:
    """``tile_max`` as it is built: the builder, the arrays, the sizes and
    what follows from them: the tiles in whole vectors per row and the masks
    of the partial one after them."""

    def __init__(self, name: str, dtype_name: str, kernel: tuple, symbol: str):
        element = LLVM_TYPES[dtype_name]
        pointer = element.as_pointer()
        self.name = name
        self.module = ir.Module(name=f"tile_max_{name}")
        arguments = [pointer, pointer, pointer, I64.as_pointer()]
        function = ir.Function(self.module, ir.FunctionType(ir.VoidType(), arguments), symbol)
        for argument in function.args:
            argument.add_attribute("noalias")
        self.x_base, self.operand_base, self.out_base, size_array = function.args
        self.b = b = ir.IRBuilder(function.append_basic_block("entry"))
        self.rows_begin, self.rows_end, self.count1, self.count2 = (
            b.load(b.gep(size_array, [_constant(k)])) for k in range(4)
        )
        self.vectors = vectors = Vectors(b, element, lanes(dtype_name))
        self.width = width = vectors.width
        self.depth_taps, self.row_taps, self.column_taps = kernel
        column_taps = self.column_taps
        self.x_row = _mul(b, self.count2, _constant(column_taps))
        self.zero = ir.Constant(vectors.type, None)
        # which tap holds the maximum, by lane
        self.taps_type = ir.VectorType(ir.IntType(32), width)
        self.whole = b.sdiv(self.count2, _constant(width))
        self.done = _mul(b, self.whole, _constant(width))
        self.left = b.sub(self.count2, self.done)
        # the last, partial vector's masks: for its tiles, and for each x vector of a tap row
        self.tail_masks = (
            vectors.first(self.left),
            [
                vectors.first(
                    b.sub(_mul(b, self.left, _constant(column_taps)), _constant(v * width))
                )
                for v in range(column_taps)
            ],
        )

    def build(self) -> str:
        _loop(self.b, self.rows_begin, self.rows_end, self._tile_row)
        self.b.ret_void()
        return str(self.module)

    def _tile_row(self, r):
        b, width = self.b, self.width
        starts = self._tap_row_starts(r)
        tiles = _mul(b, r, self.count2)
        _loop(
            b,
            _constant(0),
            self.whole,
            lambda i: self._tile_vector(starts, tiles, _mul(b, i, _constant(width)), None),
        )
        with b.if_then(b.icmp_signed(">", self.left, _constant(0))):
            self._tile_vector(starts, tiles, self.done, self.tail_masks)

    def _tap_row_starts(self, r):
        """Tile row r: x's rows for its taps (r * row_taps + t1 where the
        depth has one tap, the leading axes' rows following each other)."""
        b, depth_taps, row_taps, x_row = self.b, self.depth_taps, self.row_taps, self.x_row
        if depth_taps == 1:
            return [
                _mul(b, _add(b, _mul(b, r, _constant(row_taps)), _constant(t)), x_row)
                for t in range(row_taps)
            ]
        depth, row = b.sdiv(r, self.count1), b.srem(r, self.count1)
        starts = []
        for t0, t1 in itertools.product(range(depth_taps), range(row_taps)):
            layer = _add(b, _mul(b, depth, _constant(depth_taps)), _constant(t0))
            at = _add(b, _mul(b, layer, self.count1), row)
            starts.append(_mul(b, _add(b, _mul(b, at, _constant(row_taps)), _constant(t1)), x_row))
        return starts

    def _tile_vector(self, starts, tiles, j, masks):
        """Tiles [j, j + width) of a row (``masks``: for the row's last, partial vector)."""
        b, take = self.b, self.name == "take"
        tile_mask, x_masks = masks or (None, [None] * self.column_taps)
        offset = _mul(b, j, _constant(self.column_taps))
        chosen = self._chosen_at_maximum(starts, offset, x_masks)
        here = b.gep(self.out_base if take else self.operand_base, [_add(b, tiles, j)])
        if take:
            self.vectors.store(chosen, here, tile_mask)
            return
        values = self.vectors.load(here, tile_mask)
        self._put(starts, offset, x_masks, chosen, values)

    def _in_tap_row(self, base, start, offset, v):
        """Where vector v of the tap row from ``start`` is, for the tiles
        from ``offset`` on."""
        b = self.b
        return b.gep(base, [_add(b, start, _add(b, offset, _constant(v * self.width)))])

    def _tap_row(self, base, start, offset, x_masks):
        """A tap row of the vector's tiles, one vector per tap of the row."""
        row = [
            self.vectors.load(self._in_tap_row(base, start, offset, v), mask)
            for v, mask in enumerate(x_masks)
        ]
        return self.vectors.deinterleave(row, self.column_taps)

    def _tap_number(self, k, t):
        """Tap t of tap row k, in every lane."""
        return ir.Constant(self.taps_type, [k * self.column_taps + t] * self.width)

    def _chosen_at_maximum(self, starts, offset, x_masks):
        """By lane, the candidate at its tile's maximum: for a "take", the
        operand's value there; for a "put", the number of the tap."""
        b = self.b
        best = chosen = None
        for k, start in enumerate(starts):
            if self.name == "take":
                candidates = self._tap_row(self.operand_base, start, offset, x_masks)
            else:
                candidates = [self._tap_number(k, t) for t in range(self.column_taps)]
            values = self._tap_row(self.x_base, start, offset, x_masks)
            for value, candidate in zip(values, candidates):
                if best is None:
                    best, chosen = value, candidate
                    continue
                wins = b.or_(
                    b.fcmp_ordered(">", value, best), b.fcmp_unordered("uno", value, value)
                )
                best, chosen = b.select(wins, value, best), b.select(wins, candidate, chosen)
        return chosen

    def _put(self, starts, offset, x_masks, chosen, values):
        """``values`` stored at the taps ``chosen``, zeros at the others."""
        b, vectors = self.b, self.vectors
        for k, start in enumerate(starts):
            placed = [
                b.select(b.icmp_signed("==", chosen, self._tap_number(k, t)), values, self.zero)
                for t in range(self.column_taps)
            ]
            for v, (vector, mask) in enumerate(zip(vectors.interleave(placed), x_masks)):
                vectors.store(vector, self._in_tap_row(self.out_base, start, offset, v), mask)


def scatter_rows(dtype_name: str):
    """``scatter_rows(values, rows, sums, sizes)``: for i in order,
    sums[rows[i]] += values[i], each a row of ``sizes[1]`` elements, for the
    ``sizes[0]`` int64 row numbers (all in range); sums are float64, as
    numpy's bincount adds them (so the results are bit for bit the same)."""
    prototype = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 4)
    return compile_function(
        f"routine scatter_rows {dtype_name}",
        lambda symbol: _scatter_rows_ir(dtype_name, symbol),
        prototype,
    )


def _scatter_rows_ir(dtype_name: str, symbol: str) -> str:
    element = LLVM_TYPES[dtype_name]
    total = ir.DoubleType()
    module = ir.Module(name="scatter_rows")
    arguments = [element.as_pointer(), I64.as_pointer(), total.as_pointer(), I64.as_pointer()]
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), arguments), symbol)
    for argument in function.args:
        argument.add_attribute("noalias")
    values, rows, sums, size_array = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    count, length = (b.load(b.gep(size_array, [ir.Constant(I64, k)])) for k in range(2))

    def add_row(i):
        target = _mul(b, b.load(b.gep(rows, [i])), length)
        source = _mul(b, i, length)

        def add(j):
            value = b.load(b.gep(values, [_add(b, source, j)]))
            if element != total:
                value = b.fpext(value, total)
            place = b.gep(sums, [_add(b, target, j)])
            b.store(b.fadd(b.load(place), value), place)

        _loop(b, ir.Constant(I64, 0), length, add)

    _loop(b, ir.Constant(I64, 0), count, add_row)
    b.ret_void()
    return str(module)


def random_bits():
    """``random_bits(out, sizes)``: out[i] = word i % 4 of Philox-4x32-10 at
    counter ``offset + i // 4`` under ``seed`` (``sizes``: count, seed,
    offset as int64s), as ``P.random_bits`` computes it in numpy."""
    prototype = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
    return compile_function("routine random_bits", _random_bits_ir, prototype)


def _random_bits_ir(symbol: str) -> str:
    i32 = ir.IntType(32)
    module = ir.Module(name="random_bits")
    function = ir.Function(
        module, ir.FunctionType(ir.VoidType(), [I64.as_pointer(), I64.as_pointer()]), symbol
    )
    for argument in function.args:
        argument.add_attribute("noalias")
    out, size_array = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    count, seed, offset = (b.load(b.gep(size_array, [ir.Constant(I64, k)])) for k in range(3))
    thirty_two = ir.Constant(I64, 32)

    def words(block):
        """The four words of counter block ``block``."""
        counter = b.add(offset, block)
        c = [b.trunc(counter, i32), b.trunc(b.lshr(counter, thirty_two), i32)]
        c += [ir.Constant(i32, 0), ir.Constant(i32, 0)]
        k = [b.trunc(seed, i32), b.trunc(b.lshr(seed, thirty_two), i32)]
        for _ in range(PHILOX_ROUNDS):
            p0 = b.mul(b.zext(c[0], I64), ir.Constant(I64, PHILOX_MULTIPLIERS[0]))
            p1 = b.mul(b.zext(c[2], I64), ir.Constant(I64, PHILOX_MULTIPLIERS[1]))
            high0, high1 = (b.trunc(b.lshr(p, thirty_two), i32) for p in (p0, p1))
            c = [
                b.xor(b.xor(high1, c[1]), k[0]),
                b.trunc(p1, i32),
                b.xor(b.xor(high0, c[3]), k[1]),
                b.trunc(p0, i32),
            ]
            k = [b.add(key, ir.Constant(i32, step)) for key, step in zip(k, PHILOX_KEY_STEPS)]
        return [b.zext(word, I64) for word in c]

    def whole(block):
        start = _mul(b, block, ir.Constant(I64, 4))
        for w, value in enumerate(words(block)):
            b.store(value, b.gep(out, [_add(b, start, ir.Constant(I64, w))]))

    full = b.sdiv(count, ir.Constant(I64, 4))
    _loop(b, ir.Constant(I64, 0), full, whole)
    # the last, partial block: its first count % 4 words
    start = _mul(b, full, ir.Constant(I64, 4))
    with b.if_then(b.icmp_signed("<", start, count)):
        values = words(full)
        for w, value in enumerate(values):
            position = _add(b, start, ir.Constant(I64, w))
            with b.if_then(b.icmp_signed("<", position, count)):
                b.store(value, b.gep(out, [position]))
    b.ret_void()
    return str(module)


def _constant(n):
    return ir.Constant(I64, n)


def _add(b, x, y):
    return b.add(x, y, flags=["nsw"])


def _mul(b, x, y):
    return b.mul(x, y, flags=["nsw"])


def _product(b, values):
    total = ir.Constant(I64, 1)
    for value in values:
        total = _mul(b, total, value)
    return total


def _flat(b, index, shape):
    """The flat offset of ``index`` in a C-contiguous array of ``shape``."""
    offset = index[0]
    for i, n in zip(index[1:], shape[1:]):
        offset = _add(b, _mul(b, offset, n), i)
    return offset


def _flat_constant(index, shape) -> int:
    offset = 0
    for i, n in zip(index, shape):
        offset = offset * n + i
    return offset


def _nest(b, ends, body, index=()):
    """``body(index)`` for every index below ``ends``, the last axis fastest."""
    if not ends:
        body(list(index))
        return
    _loop(b, ir.Constant(I64, 0), ends[0], lambda i: _nest(b, ends[1:], body, (*index, i)))


def _loop(b, start, stop, body):
    """``body(index)`` for index in [start, stop)."""

    def step(index, values):
        body(index)
        return values

    _carried(b, start, stop, 1, [], step)


def _carried(b, start, stop, step, initial, body):
    """A loop over k in [start, stop) by ``step`` (whole steps only) carrying
    values in registers: ``body(k, values)`` returns their next values.
    Returns the first k not run and the final values."""
    before = b.block
    header = b.append_basic_block("loop")
    inside = b.append_basic_block("body")
    after = b.append_basic_block("after")
    b.branch(header)
    b.position_at_end(header)
    k = b.phi(I64)
    k.add_incoming(start, before)
    values = []
    for value in initial:
        phi = b.phi(value.type)
        phi.add_incoming(value, before)
        values.append(phi)
    step_size = ir.Constant(I64, step)
    if step == 1:
        fits = b.icmp_signed("<", k, stop)
    else:
        fits = b.icmp_signed("<=", _add(b, k, step_size), stop)
    b.cbranch(fits, inside, after)
    b.position_at_end(inside)
    for phi, value in zip(values, body(k, values)):
        phi.add_incoming(value, b.block)
    k.add_incoming(_add(b, k, step_size), b.block)
    b.branch(header)
    b.position_at_end(after)
    return k, values
