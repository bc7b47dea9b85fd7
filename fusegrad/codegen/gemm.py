"""Batched matrix products of small matrices, register-blocked.

numpy multiplies a stack of matrices with one BLAS call per matrix; for the
products of a convolution (a 6x25 filter bank times each image's 25x784
windows) or of attention heads (64x32 times 32x64), OpenBLAS's set-up per
call and its blocking for large matrices held it to 30-100 GFLOP/s on the
cores measured. Here each product is computed in blocks of the result kept
in vector registers through the whole depth of the product, the way BLAS
micro-kernels are written, without packing or cache blocking: small
operands stay in cache anyway.

Two forms, chosen by the operands' layout:

- ``rows``: C[m, n0:n0+w] += A[m, k] * B[k, n0:n0+w], vectors along the
  columns of B (which must be contiguous), A read one element at a time at
  any strides. Blocks are a few rows by a few vectors (``blocks``); the
  last columns use masked loads and stores.
- ``dots``: C[m, n] = A[m, :] . B[:, n] with both contiguous along the depth
  (a weight gradient: an image's output gradient times its windows,
  transposed): vectors along the depth, summed across lanes at the end.

Sizes and strides (in elements) are arguments, so each form compiles once per
dtype. The matrices are numbered ``outer * inner_items + inner`` so two
batch axes of any strides (one of them broadcast) need no copy, and a range
of them is one call.
"""

from __future__ import annotations

import ctypes
from typing import NamedTuple

from llvmlite import ir

from .lowering import LLVM_TYPES
from .routines import I64, _add, _carried, _constant, _loop, _mul
from .target import compile_function, vector_registers
from .vectors import Vectors, lanes

# The routine's size arguments (int64s), in this order. Strides are in
# elements; C's columns are contiguous.
SIZES = (
    "items_begin",
    "items_end",
    "inner_items",
    "rows",
    "columns",
    "depth",
    "a_outer",
    "a_inner",
    "a_row",
    "a_depth",
    "b_outer",
    "b_inner",
    "b_depth",
    "b_column",
    "c_outer",
    "c_inner",
    "c_row",
)


def blocks(form: str) -> tuple:
    """The blocks of C, as many accumulators as leave registers for the
    operands loaded per step (32 vector registers with AVX-512, 16
    otherwise): for ``dots`` (rows, columns); for the ``rows`` forms, from
    the widest, (vectors of columns, rows) pairs, each used while the
    columns left fill its width."""
    _, registers = vector_registers()
    if form == "dots":
        return (6, 4) if registers >= 32 else (4, 2)
    return ((3, 8), (2, 12), (1, 16)) if registers >= 32 else ((2, 6), (1, 8))


def matmul(form: str, dtype_name: str):
    """``matmul(a, b, c, sizes)``: c[i] = a[i] @ b[i] for the matrices i in
    [items_begin, items_end) (``sizes`` as ``SIZES``)."""
    prototype = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 4)
    width = lanes(dtype_name)
    description = f"routine matmul {form} {dtype_name} lanes {width} blocks {blocks(form)}"
    return compile_function(
        description, lambda symbol: _matmul_ir(form, dtype_name, symbol), prototype
    )


def _matmul_ir(form: str, dtype_name: str, symbol: str) -> str:
    return _Matmul(form, dtype_name, symbol).build()


class _Matrices(NamedTuple):
    """One product's operands: where its A, B and C start."""

    a: ir.Value
    bm: ir.Value
    c: ir.Value


class _Matmul:
    """The routine's function as it is built: its builder, its sizes (as
    ``SIZES``, loaded on entry) and vector instructions, shared by the steps
    of both forms."""

    def __init__(self, form: str, dtype_name: str, symbol: str):
        element = LLVM_TYPES[dtype_name]
        pointer = element.as_pointer()
        self.form = form
        self.module = ir.Module(name="matmul")
        arguments = [pointer] * 3 + [I64.as_pointer()]
        function = ir.Function(self.module, ir.FunctionType(ir.VoidType(), arguments), symbol)
        for argument in function.args:
            argument.add_attribute("noalias")
        self.a_base, self.b_base, self.c_base, size_array = function.args
        self.b = b = ir.IRBuilder(function.append_basic_block("entry"))
        self.s = {
            name: b.load(b.gep(size_array, [_constant(k)]), name=name)
            for k, name in enumerate(SIZES)
        }
        self.vectors = Vectors(b, element, lanes(dtype_name))

    def build(self) -> str:
        _loop(self.b, self.s["items_begin"], self.s["items_end"], self._product)
        self.b.ret_void()
        return str(self.module)

    def _at(self, base, index, stride):
        return self.b.gep(base, [_mul(self.b, index, stride)])

    def _product(self, item):
        """Matrix ``item``'s product, its operands found from its outer and
        inner batch indices."""
        b, s = self.b, self.s
        outer, inner = b.sdiv(item, s["inner_items"]), b.srem(item, s["inner_items"])
        matrices = _Matrices(
            *(
                b.gep(
                    base,
                    [_add(b, _mul(b, outer, s[f"{x}_outer"]), _mul(b, inner, s[f"{x}_inner"]))],
                )
                for base, x in ((self.a_base, "a"), (self.b_base, "b"), (self.c_base, "c"))
            )
        )
        if self.form == "dots":
            self._dots(matrices)
        else:
            self._rows(matrices)

    # ------------------------------------------------------------ the rows form

    def _rows(self, m: _Matrices):
        b, columns = self.b, self.s["columns"]
        # most columns go through the first phase: there, rows left over
        # (a filter bank of 6 rows by blocks of 8) make one block
        start = _constant(0)
        for k, (count, tallest) in enumerate(blocks(self.form)):
            start = self._phase(m, start, count, tallest, every_rest=k == 0)
        rest = b.sub(columns, start)
        with b.if_then(b.icmp_signed(">", rest, _constant(0))):
            self._column_block(m, start, 1, tallest, self.vectors.first(rest))

    def _phase(self, m: _Matrices, start, count, tallest, every_rest):
        """Blocks of ``count`` vectors from column ``start``, while they fit;
        returns the column after them."""
        b = self.b
        wide = _constant(count * self.vectors.width)
        whole = b.sdiv(b.sub(self.s["columns"], start), wide)

        def one(j):
            self._column_block(
                m, _add(b, start, _mul(b, j, wide)), count, tallest, every_rest=every_rest
            )

        _loop(b, _constant(0), whole, one)
        return _add(b, start, _mul(b, whole, wide))

    def _column_block(self, m: _Matrices, n0, count, tallest, mask=None, every_rest=False):
        """Columns [n0, n0 + count vectors) of every row, ``tallest`` rows
        at a time; ``mask``: the lanes of the last, partial vector."""

        def row_block(m0, height):
            a_rows = [
                self._at(m.a, _add(self.b, m0, _constant(i)), self.s["a_row"])
                for i in range(height)
            ]
            sums = self._row_sums(m.bm, a_rows, n0, count, mask)
            self._store_rows(m.c, m0, n0, sums, count, mask)

        _blocks(self.b, self.s["rows"], tallest, row_block, every_rest)

    def _row_sums(self, bm, a_rows, n0, count, mask):
        """The block's accumulators through the whole depth: at each step, a
        vector of B's row times each of A's elements splat."""
        b, s, vectors = self.b, self.s, self.vectors

        def step(k, sums):
            b_row = b.gep(self._at(bm, k, s["b_depth"]), [n0])
            bv = [
                vectors.load(b.gep(b_row, [_constant(v * vectors.width)]), mask)
                for v in range(count)
            ]
            av = [vectors.splat(b.load(self._at(row, k, s["a_depth"]))) for row in a_rows]
            return [vectors.fmuladd(x, y, z) for x, (y, z) in _pairs(av, bv, sums)]

        zeros = [vectors.zero] * (len(a_rows) * count)
        return _carried(b, _constant(0), s["depth"], 1, zeros, step)[1]

    def _store_rows(self, c, m0, n0, sums, count, mask):
        b, vectors = self.b, self.vectors
        for i in range(len(sums) // count):
            c_row = b.gep(self._at(c, _add(b, m0, _constant(i)), self.s["c_row"]), [n0])
            for v in range(count):
                place = b.gep(c_row, [_constant(v * vectors.width)])
                vectors.store(sums[i * count + v], place, mask)

    # ------------------------------------------------------------ the dots form

    def _dots(self, m: _Matrices):
        height, breadth = blocks(self.form)

        def row_block(m0, rows):
            _blocks(
                self.b,
                self.s["columns"],
                breadth,
                lambda n0, columns: self._dots_block(m, m0, rows, n0, columns),
            )

        _blocks(self.b, self.s["rows"], height, row_block, every_rest=True)

    def _dots_block(self, m: _Matrices, m0, height, n0, breadth):
        """The dot products of rows [m0, m0 + height) of A with columns
        [n0, n0 + breadth) of B."""
        b, s = self.b, self.s
        a_rows = [self._at(m.a, _add(b, m0, _constant(i)), s["a_row"]) for i in range(height)]
        b_columns = [
            self._at(m.bm, _add(b, n0, _constant(j)), s["b_column"]) for j in range(breadth)
        ]
        sums = self._dot_sums(a_rows, b_columns)
        self._store_dots(m.c, m0, n0, sums, breadth)

    def _dot_sums(self, a_rows, b_columns):
        """The block's accumulators through the whole depth, a vector of it
        at a time, the last one masked: lanes still to be summed."""
        b, s, vectors = self.b, self.s, self.vectors

        def step(k, sums, mask=None):
            av = [vectors.load(b.gep(row, [k]), mask) for row in a_rows]
            bv = [vectors.load(b.gep(column, [k]), mask) for column in b_columns]
            return [vectors.fmuladd(x, y, z) for x, (y, z) in _pairs(av, bv, sums)]

        zeros = [vectors.zero] * (len(a_rows) * len(b_columns))
        k, sums = _carried(b, _constant(0), s["depth"], vectors.width, zeros, step)
        rest = b.sub(s["depth"], k)
        before = b.block
        with b.if_then(b.icmp_signed(">", rest, _constant(0))):
            tail = step(k, sums, vectors.first(rest))
            inside = b.block
        return [_merge(b, x, before, y, inside) for x, y in zip(sums, tail)]

    def _store_dots(self, c, m0, n0, sums, breadth):
        """Each row's accumulators summed across lanes, as one short vector of C's row."""
        b, vectors = self.b, self.vectors
        for i in range(len(sums) // breadth):
            c_row = self._at(c, _add(b, m0, _constant(i)), self.s["c_row"])
            row = vectors.sums(sums[i * breadth : (i + 1) * breadth])
            place = b.bitcast(b.gep(c_row, [n0]), row.type.as_pointer())
            b.store(row, place, align=vectors.bytes)


def _pairs(av, bv, sums):
    """(a, (b, sum)) for each accumulator of a block, row-major."""
    return [(x, (y, sums[i * len(bv) + j])) for i, x in enumerate(av) for j, y in enumerate(bv)]


def _merge(b, value, before, other, inside):
    phi = b.phi(value.type)
    phi.add_incoming(value, before)
    phi.add_incoming(other, inside)
    return phi


def _blocks(b, count, size, body, every_rest=False):
    """``body(start, size)`` over [0, count) in blocks of ``size``, then
    ``body(start, rest)`` for the rest (``every_rest``) or the rest in
    blocks of the powers of two it adds up to. A block of each size is code
    of its own: a block for every rest in every phase took the routine
    three times as long to compile."""
    whole = b.sdiv(count, _constant(size))
    _loop(b, _constant(0), whole, lambda i: body(_mul(b, i, _constant(size)), size))
    start = _mul(b, whole, _constant(size))
    rest = b.sub(count, start)
    if every_rest:
        for height in range(1, size):
            with b.if_then(b.icmp_signed("==", rest, _constant(height))):
                body(start, height)
        return
    height = 1 << (size - 1).bit_length() - 1 if size > 1 else 0
    while height:
        before = b.block
        with b.if_then(b.icmp_signed("!=", b.and_(rest, _constant(height)), _constant(0))):
            body(start, height)
            later = _add(b, start, _constant(height))
            inside = b.block
        start = _merge(b, start, before, later, inside)
        height //= 2
