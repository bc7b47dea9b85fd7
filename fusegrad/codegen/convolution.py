"""Matrix products with the windows of images, read in place: convolutions
of stride 1 without dilation, and their filters' and images' gradients.

Copying every window out first (im2col) wrote LeNet's first layer's 5 MB of
windows, 25 times its image, and its products and filter gradient then read
them back: most of their time was that traffic. Here a window row is a
vector of an image row, so the products load it from the image itself:

- ``windows_matmul``: out[image, o, y, x] = the sum over (c, i, j) of
  w[o, (c, i, j)] * image[c, y + i, x + j]; blocks of a few filters by a few
  output rows, one vector of columns each, held in registers through every
  channel and tap (the matrix routine's ``rows`` form, codegen/gemm.py).
- ``windows_dots``: out[o, (c, i, j)] = the sum over images, rows and
  columns of dy[image, o, y, x] * image[c, y + i, x + j]; blocks of a few
  filters by the taps of a kernel row (which read one image row at
  constant offsets), vectors along the columns, summed across lanes once
  at the end (the ``dots`` form), the images summed in registers too.
- ``fold_matmul`` (the image's gradient): out[image, c, y, x] = the sum over
  (o, i, j) of w[o, (c, i, j)] * dy[image, o, y - i, x - j], the terms inside
  dy only: a row's kernel rows are the loop's bounds, its columns' taps
  masks. Blocks of channels, one output row and vector at a time, where
  copying the products' windows out and adding them back (col2im) moved
  LeNet's 3.8 MB of them twice.

A row's last vector is masked, so nothing past a row is read or written.
Sizes are arguments and the kernel is compiled in, so each routine compiles
once per dtype and kernel.
"""

from __future__ import annotations

import ctypes

from llvmlite import ir

from .gemm import _blocks
from .lowering import LLVM_TYPES
from .routines import I64, _add, _carried, _constant, _loop, _mul
from .target import compile_function, vector_registers
from .vectors import Vectors, lanes

# The routines' size arguments (int64s), in this order.
SIZES = ("images_begin", "images_end", "filters", "channels", "height", "width")


def accumulators() -> int:
    """Vectors a block accumulates in, leaving registers for the operands
    loaded per step (32 vector registers with AVX-512, 16 otherwise)."""
    _, registers = vector_registers()
    return 24 if registers >= 32 else 8


def filter_rows_block() -> tuple:
    """``windows_matmul``'s blocks: (filters, output rows). With AVX-512, 4 x 4
    measured faster than blocks of 24 accumulators (6 x 4 spilled the rows
    loaded ahead of their products; LeNet's layers: 0.127 and 0.266 ms
    against 0.153 and 0.337) and compiled faster."""
    _, registers = vector_registers()
    return (4, 4) if registers >= 32 else (2, 3)


def reads_windows_in_place() -> bool:
    """Whether convolutions should run by these routines rather than as the
    matrix routine's products with copied windows (im2col). In place needs
    AVX-512: masked loads and stores by mask register, and 32 vector
    registers for the blocks. With AVX2 (16 registers, masked loads and stores
    by vmaskmov) LeNet's products measured 2-6x slower in place than copied
    (on an AMD EPYC of 2017, Zen 1): its second layer's 6.4 ms against 1.2,
    that layer's filter gradient 7.9 against 1.9."""
    _, registers = vector_registers()
    return registers >= 32


def routine(name: str, dtype_name: str, kernel: tuple):
    """``name(a, image, out, sizes)`` for a 2-D ``kernel``, the images in
    [images_begin, images_end): "windows_matmul" (a: filters [o, c*taps],
    out: [image, o, *counts]), "windows_dots" (a: dy [image, o, *counts],
    out: [o, c*taps], the sum over those images) or "fold_matmul" (a:
    filters [o, c*taps], image: dy [image, o, *counts], out: [image, c,
    height, width]). C-contiguous arrays."""
    prototype = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 4)
    width = lanes(dtype_name)
    blocking = (accumulators(), filter_rows_block())
    description = f"routine {name} {dtype_name} lanes {width} kernel {kernel} blocks {blocking}"
    build = {
        "windows_matmul": _windows_matmul_ir,
        "windows_dots": _windows_dots_ir,
        "fold_matmul": _fold_matmul_ir,
    }[name]
    return compile_function(
        description, lambda symbol: build(_Routine(name, dtype_name, kernel, symbol)), prototype
    )


class _Routine:
    """A routine's function, its arguments and the sizes derived from them."""

    def __init__(self, name, dtype_name, kernel, symbol):
        element = LLVM_TYPES[dtype_name]
        self.module = ir.Module(name=name)
        arguments = [element.as_pointer()] * 3 + [I64.as_pointer()]
        function = ir.Function(self.module, ir.FunctionType(ir.VoidType(), arguments), symbol)
        for argument in function.args:
            argument.add_attribute("noalias")
        self.a, self.image, self.out, size_array = function.args
        self.b = b = ir.IRBuilder(function.append_basic_block("entry"))
        self.s = {n: b.load(b.gep(size_array, [_constant(k)])) for k, n in enumerate(SIZES)}
        self.vectors = Vectors(b, element, lanes(dtype_name))
        self.kernel = kernel
        kh, kw = kernel
        s = self.s
        self.rows = b.sub(s["height"], _constant(kh - 1))
        self.columns = b.sub(s["width"], _constant(kw - 1))
        self.plane = _mul(b, s["height"], s["width"])
        self.image_size = _mul(b, s["channels"], self.plane)
        self.taps = _mul(b, s["channels"], _constant(kh * kw))
        self.count = _mul(b, self.rows, self.columns)  # output positions per filter

    def over_columns(self, body, carried, split: bool):
        """``body(x0, mask, carried)`` over the vectors of an output row: with
        ``split``, whole vectors, then the last one masked (faster where the
        loop is short and simple); otherwise every vector masked to the
        columns it covers (half the code for a body that is large)."""
        b, width, columns = self.b, self.vectors.width, self.columns
        if not split:
            vector_count = b.sdiv(_add(b, columns, _constant(width - 1)), _constant(width))

            def masked(v, values):
                x0 = _mul(b, v, _constant(width))
                return body(x0, self.vectors.first(b.sub(columns, x0)), values)

            return _carried(b, _constant(0), vector_count, 1, carried, masked)[1]
        done, carried = _carried(
            b, _constant(0), columns, width, carried, lambda x0, values: body(x0, None, values)
        )
        before = b.block
        with b.if_then(b.icmp_signed("<", done, columns)):
            last = body(done, self.vectors.first(b.sub(columns, done)), carried)
            inside = b.block
        merged = []
        for value, other in zip(carried, last):
            phi = b.phi(value.type)
            phi.add_incoming(value, before)
            phi.add_incoming(other, inside)
            merged.append(phi)
        return merged

    def finish(self) -> str:
        self.b.ret_void()
        return str(self.module)


def _windows_matmul_ir(r: _Routine) -> str:
    b, s, vectors = r.b, r.s, r.vectors
    kh, kw = r.kernel
    filters_per_block, rows_per_block = filter_rows_block()

    def one_image(n):
        source = b.gep(r.image, [_mul(b, n, r.image_size)])
        target = b.gep(r.out, [_mul(b, n, _mul(b, s["filters"], r.count))])
        _blocks(
            b, s["filters"], filters_per_block, lambda o0, f: filter_block(source, target, o0, f)
        )

    def filter_block(source, target, o0, filters):
        weights = [b.gep(r.a, [_mul(b, _add(b, o0, _constant(f)), r.taps)]) for f in range(filters)]

        def row_block(y0, depth):
            def column_vector(x0, mask, _):
                def tap_row(t, sums):
                    """The taps of kernel row t (channel t // kh, row t % kh)."""
                    c, i = b.sdiv(t, _constant(kh)), b.srem(t, _constant(kh))
                    top = _add(b, _mul(b, c, r.plane), _mul(b, _add(b, y0, i), s["width"]))
                    starts = [_add(b, top, _mul(b, _constant(y), s["width"])) for y in range(depth)]
                    sums = list(sums)
                    for j in range(kw):
                        xv = [
                            vectors.load(
                                b.gep(source, [_add(b, start, _add(b, x0, _constant(j)))]), mask
                            )
                            for start in starts
                        ]
                        tap = _add(b, _mul(b, t, _constant(kw)), _constant(j))
                        for f, weight in enumerate(weights):
                            w = vectors.splat(b.load(b.gep(weight, [tap])))
                            for y in range(depth):
                                sums[f * depth + y] = vectors.fmuladd(w, xv[y], sums[f * depth + y])
                    return sums

                zeros = [vectors.zero] * (filters * depth)
                tap_rows = _mul(b, s["channels"], _constant(kh))
                _, sums = _carried(b, _constant(0), tap_rows, 1, zeros, tap_row)
                for f in range(filters):
                    for y in range(depth):
                        row = _mul(b, _add(b, o0, _constant(f)), r.count)
                        row = _add(b, row, _mul(b, _add(b, y0, _constant(y)), r.columns))
                        vectors.store(sums[f * depth + y], b.gep(target, [_add(b, row, x0)]), mask)
                return []

            r.over_columns(column_vector, [], split=False)

        _blocks(b, r.rows, rows_per_block, row_block)

    _loop(b, s["images_begin"], s["images_end"], one_image)
    return r.finish()


def _windows_dots_ir(r: _Routine) -> str:
    b, s, vectors = r.b, r.s, r.vectors
    kh, kw = r.kernel
    chunk = min(kw, vectors.width, 8)  # taps per block: at most a vector of sums
    filters_per_block = max(1, accumulators() // chunk)

    def filter_block(o0, filters):
        def tap_row(t):
            """The taps of kernel row t (channel t // kh, row t % kh)."""
            c, i = b.sdiv(t, _constant(kh)), b.srem(t, _constant(kh))
            top = _add(b, _mul(b, c, r.plane), _mul(b, i, s["width"]))
            for j0 in range(0, kw, chunk):
                breadth = min(chunk, kw - j0)
                sums = over_images(o0, filters, _add(b, top, _constant(j0)), breadth)
                first = _add(b, _mul(b, t, _constant(kw)), _constant(j0))
                for f in range(filters):
                    row = vectors.sums(sums[f * breadth : (f + 1) * breadth])
                    start = _add(b, _mul(b, _add(b, o0, _constant(f)), r.taps), first)
                    place = b.bitcast(b.gep(r.out, [start]), row.type.as_pointer())
                    b.store(row, place, align=vectors.bytes)

        _loop(b, _constant(0), _mul(b, s["channels"], _constant(kh)), tap_row)

    def over_images(o0, filters, offset, breadth):
        """Per filter and tap, the vectors of dy times those of the image
        read from ``offset`` on, over every image, row and column."""

        def one_image(n, sums):
            source = b.gep(r.image, [_add(b, _mul(b, n, r.image_size), offset)])
            gradient = b.gep(r.a, [_mul(b, n, _mul(b, s["filters"], r.count))])

            def output_row(y, sums):
                dy_rows = [
                    _add(b, _mul(b, _add(b, o0, _constant(f)), r.count), _mul(b, y, r.columns))
                    for f in range(filters)
                ]
                image_row = b.gep(source, [_mul(b, y, s["width"])])

                def column_vector(x0, mask, sums):
                    gv = [
                        vectors.load(b.gep(gradient, [_add(b, row, x0)]), mask) for row in dy_rows
                    ]
                    sums = list(sums)
                    for q in range(breadth):
                        xv = vectors.load(b.gep(image_row, [_add(b, x0, _constant(q))]), mask)
                        for f in range(filters):
                            sums[f * breadth + q] = vectors.fmuladd(
                                gv[f], xv, sums[f * breadth + q]
                            )
                    return sums

                return r.over_columns(column_vector, sums, split=True)

            return _carried(b, _constant(0), r.rows, 1, sums, output_row)[1]

        zeros = [vectors.zero] * (filters * breadth)
        return _carried(b, s["images_begin"], s["images_end"], 1, zeros, one_image)[1]

    _blocks(b, s["filters"], filters_per_block, filter_block)
    return r.finish()


def _fold_matmul_ir(r: _Routine) -> str:
    """The image is ``out`` here (``height`` by ``width``), dy the routine's
    ``image`` argument (``rows`` by ``columns``, r's sizes)."""
    b, s, width = r.b, r.s, r.vectors.width
    vector_count = b.sdiv(_add(b, s["width"], _constant(width - 1)), _constant(width))
    channels_per_block = accumulators() // 3  # each one vector of an output row

    def one_image(n):
        dy = b.gep(r.image, [_mul(b, n, _mul(b, s["filters"], r.count))])
        image = b.gep(r.out, [_mul(b, n, r.image_size)])

        def channel_block(c0, channels):
            block = _FoldChannels(r, dy, image, c0, channels)
            _loop(b, _constant(0), s["height"], lambda y: block.output_row(y, vector_count))

        _blocks(b, s["channels"], channels_per_block, channel_block, every_rest=True)

    _loop(b, s["images_begin"], s["images_end"], one_image)
    return r.finish()


class _FoldChannels:
    """A block of ``fold_matmul``'s channels of one image: each vector of an
    output row summed in registers over the filters and the kernel rows
    whose dy terms reach it, then stored."""

    def __init__(self, r: _Routine, dy, image, c0, channels):
        self.r, self.b, self.dy, self.image, self.c0 = r, r.b, dy, image, c0
        b, (kh, kw) = r.b, r.kernel
        self.weights = [
            b.gep(r.a, [_mul(b, _add(b, c0, _constant(c)), _constant(kh * kw))])
            for c in range(channels)
        ]

    def output_row(self, y, vector_count):
        b, r = self.b, self.r
        # the kernel rows i whose dy row y - i exists
        first = _max(b, b.sub(y, b.sub(r.rows, _constant(1))), _constant(0))
        last = _min(b, y, _constant(r.kernel[0] - 1))
        _loop(b, _constant(0), vector_count, lambda v: self._column_vector(y, first, last, v))

    def _column_vector(self, y, first, last, v):
        b, r, s = self.b, self.r, self.r.s
        x0 = _mul(b, v, _constant(r.vectors.width))
        inside, masks = self._lanes_reached(x0)

        def filter_(o, sums):
            def kernel_row(i, sums):
                return self._kernel_row_terms(o, i, y, x0, masks, sums)

            return _carried(b, first, _add(b, last, _constant(1)), 1, sums, kernel_row)[1]

        zeros = [r.vectors.zero] * len(self.weights)
        _, sums = _carried(b, _constant(0), s["filters"], 1, zeros, filter_)
        self._store(y, x0, sums, inside)

    def _lanes_reached(self, x0):
        """The lanes of the vector from column x0 inside the image's row, and
        for each kernel column j, those of them a dy term reaches."""
        b, r = self.b, self.r
        lane_numbers, splat = r.vectors.lane_numbers, r.vectors.splat_index
        inside = b.icmp_signed("<", lane_numbers, splat(b.sub(r.s["width"], x0)))
        masks = []
        for j in range(r.kernel[1]):  # lanes whose dy column x - j exists
            low = b.sub(_constant(j), x0)
            high = b.sub(_add(b, r.columns, _constant(j)), x0)
            reach = b.and_(
                b.icmp_signed(">=", lane_numbers, splat(low)),
                b.icmp_signed("<", lane_numbers, splat(high)),
            )
            masks.append(b.and_(reach, inside))
        return inside, masks

    def _kernel_row_terms(self, o, i, y, x0, masks, sums):
        """``sums`` plus the terms of filter o's kernel row i."""
        b, r = self.b, self.r
        kw = r.kernel[1]
        dy_row = _add(b, _mul(b, o, r.rows), b.sub(y, i))
        start = _add(b, _mul(b, dy_row, r.columns), x0)
        sums = list(sums)
        for j in range(kw):
            xv = r.vectors.load(b.gep(self.dy, [b.sub(start, _constant(j))]), masks[j])
            tap = _add(b, _mul(b, o, r.taps), _add(b, _mul(b, i, _constant(kw)), _constant(j)))
            for c, weight in enumerate(self.weights):
                w = r.vectors.splat(b.load(b.gep(weight, [tap])))
                # a lane with no such term adds nothing: the masked load's 0
                # times an inf or NaN weight would add NaN (AVX-512: one masked FMA)
                term = r.vectors.fmuladd(w, xv, sums[c])
                sums[c] = b.select(masks[j], term, sums[c])
        return sums

    def _store(self, y, x0, sums, inside):
        b, s = self.b, self.r.s
        for c, total in enumerate(sums):
            row = _add(b, _mul(b, _add(b, self.c0, _constant(c)), s["height"]), y)
            place = b.gep(self.image, [_add(b, _mul(b, row, s["width"]), x0)])
            self.r.vectors.store(total, place, inside)


def _max(b, x, y):
    return b.select(b.icmp_signed(">", x, y), x, y)


def _min(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)
