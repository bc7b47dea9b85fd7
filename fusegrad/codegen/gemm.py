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

from llvmlite import ir

from .lowering import LLVM_TYPES
from .routines import I64, _add, _carried, _loop, _mul
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


def _constant(n):
    return ir.Constant(I64, n)


def _matmul_ir(form: str, dtype_name: str, symbol: str) -> str:
    element = LLVM_TYPES[dtype_name]
    pointer = element.as_pointer()
    module = ir.Module(name="matmul")
    arguments = [pointer] * 3 + [I64.as_pointer()]
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), arguments), symbol)
    for argument in function.args:
        argument.add_attribute("noalias")
    a_base, b_base, c_base, size_array = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    s = {name: b.load(b.gep(size_array, [_constant(k)]), name=name) for k, name in enumerate(SIZES)}
    vectors = Vectors(b, element, lanes(dtype_name))

    def at(base, index, stride):
        return b.gep(base, [_mul(b, index, stride)])

    def matrix(item):
        outer, inner = b.sdiv(item, s["inner_items"]), b.srem(item, s["inner_items"])
        a, bm, c = (
            b.gep(base, [_add(b, _mul(b, outer, s[f"{x}_outer"]), _mul(b, inner, s[f"{x}_inner"]))])
            for base, x in ((a_base, "a"), (b_base, "b"), (c_base, "c"))
        )
        if form == "dots":
            dots(a, bm, c)
        else:
            rows(a, bm, c)

    def rows(a, bm, c):
        width = vectors.width

        def block(n0, count, tallest, mask=None, every_rest=False):
            """Columns [n0, n0 + count vectors) of every row, ``tallest`` rows
            at a time; ``mask``: the lanes of the last, partial vector."""

            def row_block(m0, height):
                a_rows = [at(a, _add(b, m0, _constant(i)), s["a_row"]) for i in range(height)]

                def step(k, sums):
                    b_row = b.gep(at(bm, k, s["b_depth"]), [n0])
                    bv = [
                        vectors.load(b.gep(b_row, [_constant(v * width)]), mask)
                        for v in range(count)
                    ]
                    av = [vectors.splat(b.load(at(row, k, s["a_depth"]))) for row in a_rows]
                    return [vectors.fmuladd(x, y, z) for x, (y, z) in _pairs(av, bv, sums)]

                zeros = [vectors.zero] * (height * count)
                _, sums = _carried(b, _constant(0), s["depth"], 1, zeros, step)
                for i in range(height):
                    c_row = b.gep(at(c, _add(b, m0, _constant(i)), s["c_row"]), [n0])
                    for v in range(count):
                        place = b.gep(c_row, [_constant(v * width)])
                        vectors.store(sums[i * count + v], place, mask)

            _blocks(b, s["rows"], tallest, row_block, every_rest)

        def phase(start, count, tallest, every_rest):
            """Blocks of ``count`` vectors from column ``start``, while they fit;
            returns the column after them."""
            wide = _constant(count * width)
            whole = b.sdiv(b.sub(s["columns"], start), wide)

            def one(j):
                block(_add(b, start, _mul(b, j, wide)), count, tallest, every_rest=every_rest)

            _loop(b, _constant(0), whole, one)
            return _add(b, start, _mul(b, whole, wide))

        # most columns go through the first phase: there, rows left over
        # (a filter bank of 6 rows by blocks of 8) make one block
        start = _constant(0)
        for k, (count, tallest) in enumerate(blocks(form)):
            start = phase(start, count, tallest, every_rest=k == 0)
        rest = b.sub(s["columns"], start)
        with b.if_then(b.icmp_signed(">", rest, _constant(0))):
            block(start, 1, tallest, vectors.first(rest))

    def dots(a, bm, c):
        width = vectors.width

        def row_block(m0, height):
            def column_block(n0, breadth):
                a_rows = [at(a, _add(b, m0, _constant(i)), s["a_row"]) for i in range(height)]
                b_columns = [
                    at(bm, _add(b, n0, _constant(j)), s["b_column"]) for j in range(breadth)
                ]

                def step(k, sums, mask=None):
                    av = [vectors.load(b.gep(row, [k]), mask) for row in a_rows]
                    bv = [vectors.load(b.gep(column, [k]), mask) for column in b_columns]
                    return [vectors.fmuladd(x, y, z) for x, (y, z) in _pairs(av, bv, sums)]

                zeros = [vectors.zero] * (height * breadth)
                k, sums = _carried(b, _constant(0), s["depth"], width, zeros, step)
                rest = b.sub(s["depth"], k)
                before = b.block
                with b.if_then(b.icmp_signed(">", rest, _constant(0))):
                    tail = step(k, sums, vectors.first(rest))
                    inside = b.block
                sums = [_merge(b, x, before, y, inside) for x, y in zip(sums, tail)]
                for i in range(height):
                    c_row = at(c, _add(b, m0, _constant(i)), s["c_row"])
                    row = vectors.sums(sums[i * breadth : (i + 1) * breadth])
                    place = b.bitcast(b.gep(c_row, [n0]), row.type.as_pointer())
                    b.store(row, place, align=vectors.bytes)

            _blocks(b, s["columns"], breadth, column_block)

        height, breadth = blocks(form)
        _blocks(b, s["rows"], height, row_block, every_rest=True)

    _loop(b, s["items_begin"], s["items_end"], matrix)
    b.ret_void()
    return str(module)


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
