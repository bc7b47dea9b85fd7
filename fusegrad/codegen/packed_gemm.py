"""Large matrix products: packed, cache-blocked, register-blocked (the five
loops BLIS puts around its micro-kernel).

For C[m, n] = A[m, k] @ B[k, n] a part of C (a range of its rows and of its
columns, one per core) is computed in blocks sized for the caches:

    for each NC columns:                 B's block stays in the last-level cache
      for each KC of the depth:
        pack B[depth block, column block] into panels of NR columns
        for each MC rows:                A's block stays in L2
          pack A[row block, depth block] into panels of MR rows
          for each B panel:              one panel (KC x NR) stays in L1
            for each A panel:
              MR x NR sums in vector registers through the KC steps,
              added into C (or stored, on the first depth block;
              rounded to bfloat16 on the last, if asked, for bfloat16)

Packing copies each block once into the order the micro-kernel reads it:
consecutive, whatever the operands' strides (transposed operands, views
and any layout cost nothing more), with zeros past the matrix's edges, so
the micro-kernel always runs whole and only its store is masked. Rows of A
(or columns of B) that run along the depth, as A's do in x @ W, are loaded
a vector's width of them by a vector's width of steps and transposed in
registers; rows side by side are copied a vector at a time. At each
depth step it loads NR/lanes vectors of B's panel and multiplies each by
MR of A's elements splat, into MR x NR/lanes accumulators: as many as the
vector registers leave beside those operands.

Sizes and strides (in elements) are arguments, so the routine compiles once
per dtype and machine; the block sizes are constants of it. Products
stacked along two axes (any strides, 0 for a shared operand) are ``items``.

bfloat16 operands (held in float32, whose upper half is the bfloat16) are
packed as bfloat16 pairs along the depth, one 32-bit word per row or column
and two steps, the layout AVX512-BF16's ``vdpbf16ps`` reads: it multiplies
a vector of such pairs by another and adds both products into float32 sums,
twice float32's multiply-adds per instruction. Where the CPU lacks it the
same routine can be built with that instruction emulated (each half widened
to float32, two fused multiply-adds), so its packing and loops are checked
on any machine; products of float32 are as exact there.
"""

from __future__ import annotations

import ctypes
from typing import NamedTuple

from llvmlite import ir

from .lowering import LLVM_TYPES
from .routines import I64, _add, _carried, _constant, _loop, _mul
from .target import compile_function, cpu_features, vector_registers
from .vectors import Vectors, lanes

# The routine's size arguments (int64s), in this order: the part of C it
# computes (items, rows and columns, each [begin, end)), the depth, then
# strides in elements, then (bfloat16's routine) whether C is rounded to
# bfloat16, then whether the part walks A's row blocks and B's panels from
# the last (the parts beside it share the operand they do not split: each
# first reads a different end of it from memory, then finds the rest in the
# shared cache where the other brought it). Item i is product
# (i // inner_items, i % inner_items) of two stack axes, so a stack
# broadcast along one needs no copy.
SIZES = (
    "items_begin",
    "items_end",
    "rows_begin",
    "rows_end",
    "columns_begin",
    "columns_end",
    "depth",
    "inner_items",
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
    "rounded",
    "from_the_end",
)


class Blocking(NamedTuple):
    """The micro-kernel's rows and columns, and the cache blocks' rows,
    depth and columns."""

    mr: int
    nr: int
    mc: int
    kc: int
    nc: int
    pairs: bool = False  # packed as pairs along the depth, two steps a word

    def packed_a(self) -> int:
        """Elements (or words of pairs) of A's packed block."""
        return self.mc * self.kc // (2 if self.pairs else 1)

    def workspace(self) -> int:
        """Elements (or words) of packing space a part needs: A's block and B's."""
        packed_b = self.kc * self.nc // (2 if self.pairs else 1)
        return self.packed_a() + packed_b + 2 * 64  # and room to align both


def blocking(dtype_name: str) -> Blocking:
    """Block sizes for this machine: 12 rows of two vectors with 32
    registers (24 accumulators), 6 rows of two with 16 (12 accumulators);
    256 steps deep (B's micro-panel, 16-32 KB, stays in L1; bfloat16's 512,
    the same bytes) and A's block (MC x KC) 144 KB, about a third of L2, as
    BLIS sizes them for these cores. On the AVX2 machine measured, float64
    products ran 15-25% faster than with 384 steps; float32 ones alike
    within the noise."""
    width = lanes(_SUMS_DTYPE.get(dtype_name, dtype_name))
    _, registers = vector_registers()
    itemsize = ITEMSIZES[dtype_name]
    depth = DEPTH * 4 // min(itemsize, 4)
    mr, nr = (12 if registers >= 32 else 6), 2 * width
    mc = BLOCK_BYTES // (depth * itemsize) // mr * mr
    return Blocking(mr, nr, mc, depth, nr * (4096 // nr), pairs=itemsize == 2)


DEPTH = 256
# How far along the depth packing asks for the operands' lines ahead of
# where it reads (rows or columns contiguous along it: 32 elements, two
# lines; B's rows of a panel: 8 steps): products of operands out of the
# caches, as in a training step, ran 7% faster over W3's and W7's shapes
# (a GPT-mini step 2-3%); others alike.
A_AHEAD = 32
B_AHEAD = 8
BLOCK_BYTES = 144 * 1024
ITEMSIZES = {"float32": 4, "float64": 8, "bfloat16": 2}
_SUMS_DTYPE = {"bfloat16": "float32"}  # what a product of the dtype sums in


def has_bfloat16_dot() -> bool:
    """Whether this CPU has AVX512-BF16's bfloat16 dot product instruction."""
    return bool(cpu_features().get("avx512bf16"))


def matmul(dtype_name: str, emulated_dot: bool = False):
    """``gemm(a, b, c, sizes, workspace)``: the part of c = a @ b that
    ``sizes`` (as ``SIZES``) gives, packing into ``workspace`` (at least
    ``blocking(dtype).workspace`` elements of the sums' dtype, this part's
    own). a, b and c are float32 for bfloat16; ``emulated_dot`` builds its
    dot product instruction from float32 ones (needed where the CPU lacks
    it)."""
    if dtype_name == "bfloat16" and not (emulated_dot or has_bfloat16_dot()):
        raise RuntimeError("this CPU has no bfloat16 dot product (AVX512-BF16)")
    prototype = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * 5)
    sums = _SUMS_DTYPE.get(dtype_name, dtype_name)
    dot = " emulated dot" if emulated_dot else ""
    description = (
        f"routine packed gemm {dtype_name}{dot} lanes {lanes(sums)} {blocking(dtype_name)}"
    )
    return compile_function(
        description, lambda symbol: _Gemm(dtype_name, symbol, emulated_dot).build(), prototype
    )


class _Packing:
    """The routine's packing of A's and B's blocks into panels (a part of
    ``_Gemm``, whose builder, sizes, blocks and vectors it uses)."""

    def _pack_a(self, a, ic, mc, pc, kc):
        """A[ic:ic+mc, pc:pc+kc] as panels of MR rows, each [kc][MR] (of
        pairs, [kc/2][MR] words), zeros below the last row (``_by_layout``)."""
        b, s, mr = self.b, self.s, self.blocks.mr

        def panel(i):
            first_row = _add(b, ic, _mul(b, i, _constant(mr)))
            rows = b.sub(_add(b, ic, mc), first_row)
            out = b.gep(self.packed_a, [_mul(b, _mul(b, i, self._steps(kc)), _constant(mr))])

            def starts():
                return self._starts(a, first_row, rows, s["a_row"], mr)

            self._by_layout(
                s["a_row"],
                s["a_depth"],
                lambda: self._pack_a_panel_by_vectors(a, first_row, rows, out, pc, kc),
                lambda: self._pack_by_blocks(starts(), rows, out, mr, pc, kc),
                lambda: self._pack_by_elements(
                    starts(), rows, s["a_depth"], out, mr, pc, kc, ahead=True
                ),
            )

        _loop(b, _constant(0), _ceil_div(b, mc, mr), panel)

    def _by_layout(self, across, along, by_vectors, by_blocks, by_elements) -> None:
        """Packs a panel of A's rows or B's columns, whose strides in the
        operand are ``across`` them and ``along`` the depth: by vectors
        where they lie side by side, by blocks transposed in registers
        where each is contiguous along the depth, else an element at a
        time. Over W3's and W7's products, all of them an element at a
        time but B's contiguous columns took 9% longer; A's rows side by
        side so, 5-10% longer each. As bfloat16 pairs, A's rows contiguous
        along the depth an element at a time took 1.15-1.2x as long, B
        transposed so 1.2-1.6x."""
        b = self.b
        side_by_side = b.icmp_signed("==", across, _constant(1))
        contiguous = b.icmp_signed("==", along, _constant(1))
        with b.if_else(side_by_side) as (vectors, otherwise):
            with vectors:
                by_vectors()
            with otherwise:
                with b.if_else(contiguous) as (blocks, elements):
                    with blocks:
                        by_blocks()
                    with elements:
                        by_elements()

    def _starts(self, base, first, count, across, size: int) -> list:
        """Where each of a panel's ``size`` rows (A's) or columns (B's) from
        ``first`` starts, ``across`` elements apart; those past the ``count``
        in the operand start where the last does (in bounds; they are packed
        as zeros)."""
        b, last = self.b, self.b.sub(count, _constant(1))
        return [
            b.gep(base, [_mul(b, _add(b, first, _min(b, _constant(k), last)), across)])
            for k in range(size)
        ]

    def _pack_by_elements(self, starts, count, along, out, stride, pc, kc, ahead=False):
        """A panel of rows or columns from ``starts`` (``along`` elements a
        step of the depth; ``count`` of them in the operand), an element at
        a time; ``ahead``: asking for their lines ahead (A's rows)."""
        b = self.b

        def step(p):
            for start in starts if ahead else ():
                self._prefetch(start, along, _add(b, pc, _add(b, p, _constant(A_AHEAD))))
            for k, start in enumerate(starts):
                value = self._packed(start, along, pc, p, kc)
                if k:
                    keep = b.icmp_signed("<", _constant(k), count)
                    value = b.select(keep, value, ir.Constant(self.element, 0))
                place = _add(b, _mul(b, p, _constant(stride)), _constant(k))
                b.store(value, b.gep(out, [place]))

        _loop(b, _constant(0), self._steps(kc), step)

    def _pack_by_blocks(self, starts, count, out, stride, pc, kc):
        """A panel whose rows (A's) or columns (B's), from ``starts``, are
        contiguous along the depth: a vector's width of steps of a vector's
        width of them at a time, loaded along the depth (for pairs, twice as
        deep, each two neighbours made a word) and transposed in registers;
        the last steps by masked loads (in a loop of elements for them LLVM
        spilled registers). ``count`` of them lie in the operand; a step of
        the panel is ``stride`` elements (or words)."""
        b, vectors, width = self.b, self.vectors, self.vectors.width
        starts = starts + [None] * (-len(starts) % width)  # zeros to square a block
        pieces = range(0, len(starts), width)
        stores = [vectors.first(_constant(stride - v)) for v in pieces]
        per_step = 2 if self.pairs else 1  # the depth a step takes

        def block(p, depth_left=None):
            steps_left = None if depth_left is None else self._steps(depth_left)
            depth = _add(b, pc, _mul(b, p, _constant(per_step)))
            for v, store in zip(pieces, stores):
                loaded = [
                    self._along_depth(start, r, count, depth, depth_left)
                    for r, start in enumerate(starts[v : v + width], v)
                ]
                for i, vector in enumerate(vectors.transposed(loaded)):
                    step = _add(b, p, _constant(i))
                    place = _add(b, _mul(b, step, _constant(stride)), _constant(v))
                    if steps_left is None:
                        vectors.store(vector, b.gep(out, [place]), store)
                        continue
                    with b.if_then(b.icmp_signed("<", _constant(i), steps_left)):
                        vectors.store(vector, b.gep(out, [place]), store)

        def whole(p, carried):
            block(p)
            return carried

        whole_steps = b.sdiv(kc, _constant(per_step))  # a pair half past the block is not whole
        rest, _ = _carried(b, _constant(0), whole_steps, width, [], whole)
        depth_left = b.sub(kc, _mul(b, rest, _constant(per_step)))
        with b.if_then(b.icmp_signed(">", depth_left, _constant(0))):
            block(rest, depth_left)

    def _along_depth(self, start, r, count, depth, depth_left):
        """The vector of a row (or column) contiguous along the depth, from
        ``start`` at ``depth`` (of pairs, the words of the bfloat16 there and
        at each next depth: twice as deep); where ``depth_left`` is given,
        no element that far or farther is read, and it reads as zero. Zeros
        for the ``r``-th of ``count`` or later, or with no ``start``."""
        b, vectors, width = self.b, self.vectors, self.vectors.width
        if start is None:
            return vectors.zero
        halves = range(2 if self.pairs else 1)
        for h in halves if depth_left is None else ():
            self._prefetch(start, _constant(1), _add(b, depth, _constant(h * width + A_AHEAD)))
        masks = [
            None if depth_left is None else vectors.first(b.sub(depth_left, _constant(h * width)))
            for h in halves
        ]
        loads = [
            vectors.load(b.gep(start, [_add(b, depth, _constant(h * width))]), mask)
            for h, mask in zip(halves, masks)
        ]
        value = loads[0] if not self.pairs else _words_of_pairs(b, vectors, loads)
        if r == 0:  # a panel has a row or column at least
            return value
        return b.select(b.icmp_signed("<", _constant(r), count), value, vectors.zero)

    def _pack_a_panel_by_vectors(self, a, first_row, rows, out, pc, kc):
        """A panel whose MR rows lie side by side in memory, a vector (or
        as many as MR needs) a step; rows past the edge load as zeros."""
        b, s, mr, vectors = self.b, self.s, self.blocks.mr, self.vectors
        pieces = range(0, mr, vectors.width)
        loads = [
            vectors.first(_min(b, b.sub(rows, _constant(v)), _constant(mr - v))) for v in pieces
        ]
        stores = [vectors.first(_constant(mr - v)) for v in pieces]
        start = b.gep(a, [first_row])

        def step(p):
            for v, load, store in zip(pieces, loads, stores):
                value = self._packed(b.gep(start, [_constant(v)]), s["a_depth"], pc, p, kc, load)
                place = b.gep(out, [_add(b, _mul(b, p, _constant(mr)), _constant(v))])
                vectors.store(value, place, store)

        _loop(b, _constant(0), self._steps(kc), step)

    def _pack_b(self, bm, pc, kc, jc, nc):
        """B[pc:pc+kc, jc:jc+nc] as panels of NR columns, each [kc][NR] (of
        pairs, [kc/2][NR] words), zeros right of the last column (``_by_layout``)."""
        b, s, nr = self.b, self.s, self.nr

        def panel(j):
            first_column = _add(b, jc, _mul(b, j, _constant(nr)))
            columns = b.sub(_add(b, jc, nc), first_column)
            out = b.gep(self.packed_b, [_mul(b, _mul(b, j, self._steps(kc)), _constant(nr))])

            def starts():
                return self._starts(bm, first_column, columns, s["b_column"], nr)

            self._by_layout(
                s["b_column"],
                s["b_depth"],
                lambda: self._pack_b_panel_by_vectors(bm, first_column, columns, out, pc, kc),
                lambda: self._pack_by_blocks(starts(), columns, out, nr, pc, kc),
                lambda: self._pack_by_elements(starts(), columns, s["b_depth"], out, nr, pc, kc),
            )

        panels = _ceil_div(b, nc, nr)
        _loop(b, _constant(0), panels, lambda j: panel(self._walked(j, panels)))

    def _pack_b_panel_by_vectors(self, bm, first_column, columns, out, pc, kc):
        b, s, nr, vectors = self.b, self.s, self.nr, self.vectors
        masks = [
            vectors.first(b.sub(columns, _constant(v * vectors.width)))
            for v in range(self.nr_vectors)
        ]

        def step(p):
            ahead = _add(b, pc, _add(b, p, _constant(B_AHEAD)))
            for v, mask in enumerate(masks):
                start = b.gep(bm, [_add(b, first_column, _constant(v * vectors.width))])
                self._prefetch(start, s["b_depth"], ahead)
                value = self._packed(start, s["b_depth"], pc, p, kc, mask)
                place = _add(b, _mul(b, p, _constant(nr)), _constant(v * vectors.width))
                vectors.store(value, b.gep(out, [place]))

        _loop(b, _constant(0), self._steps(kc), step)

    def _prefetch(self, start, depth_stride, depth):
        """Asks for the operand's line at ``depth`` along its row or column
        from ``start``, to read."""
        self._ask_for(self.b.gep(start, [_mul(self.b, depth, depth_stride)]), write=False)

    def _ask_for(self, place, write: bool):
        """Asks the cache for the line at ``place``: a prefetch, which never
        faults, wherever it points."""
        b = self.b
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        prefetch = self.module.globals.get("llvm.prefetch.p0")
        if prefetch is None:
            kind = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
            prefetch = ir.Function(self.module, kind, "llvm.prefetch.p0")
        rw, locality, data = ir.Constant(i32, int(write)), ir.Constant(i32, 3), ir.Constant(i32, 1)
        b.call(prefetch, [b.bitcast(place, i8p), rw, locality, data])

    def _packed(self, start, depth_stride, pc, p, kc, mask=None):
        """What a panel holds at its row ``p`` of the block at depth ``pc``,
        from the operand's row or column at ``start``: the element at depth
        pc + p (with ``mask``, a vector of consecutive ones); or of pairs,
        the words of the bfloat16 at pc + 2p (low half) and the next (high
        half; zero past the block's ``kc``), truncated from float32, which
        holds bfloat16 values exactly."""
        b = self.b

        def load(depth):
            place = b.gep(start, [_mul(b, depth, depth_stride)])
            return b.load(place) if mask is None else self.vectors.load(place, mask)

        if not self.pairs:
            return load(_add(b, pc, p))
        first = _mul(b, p, _constant(2))
        second = _add(b, first, _constant(1))
        low = load(_add(b, pc, first))
        high = load(_add(b, pc, _min(b, second, b.sub(kc, _constant(1)))))
        high = b.select(b.icmp_signed("<", second, kc), high, ir.Constant(high.type, None))
        words, constant = _integers(low.type)
        low_half = b.lshr(b.bitcast(low, words), constant(16))
        high_half = b.and_(b.bitcast(high, words), constant(_HIGH_HALF))
        return b.bitcast(b.or_(low_half, high_half), low.type)


class _Gemm(_Packing):
    """The routine as it is built: its builder, sizes (loaded on entry),
    block sizes and vector instructions."""

    def __init__(self, dtype_name: str, symbol: str, emulated_dot: bool):
        self.pairs = dtype_name == "bfloat16"  # packed as bfloat16 pairs, summed in float32
        self.emulated_dot = emulated_dot
        dtype_name = _SUMS_DTYPE.get(dtype_name, dtype_name)
        element = LLVM_TYPES[dtype_name]
        pointer = element.as_pointer()
        self.module = ir.Module(name="packed_gemm")
        arguments = [pointer] * 3 + [I64.as_pointer(), pointer]
        function = ir.Function(self.module, ir.FunctionType(ir.VoidType(), arguments), symbol)
        for argument in function.args:
            argument.add_attribute("noalias")
        self.a_base, self.b_base, self.c_base, size_array, workspace = function.args
        self.b = b = ir.IRBuilder(function.append_basic_block("entry"))
        self.s = {
            name: b.load(b.gep(size_array, [_constant(k)]), name=name)
            for k, name in enumerate(SIZES)
        }
        self.vectors = Vectors(b, element, lanes(dtype_name))
        self.element = element
        self.blocks = blocking("bfloat16" if self.pairs else dtype_name)
        self.nr = self.blocks.nr
        self.nr_vectors = self.nr // self.vectors.width
        self.packed_a = self._aligned(workspace, 0)
        self.packed_b = self._aligned(workspace, self.blocks.packed_a() + 64)

    def _walked(self, k, count):
        """The k-th of ``count`` blocks or panels a part takes: from the last
        where the sizes say so (``from_the_end``)."""
        b = self.b
        from_the_end = b.icmp_signed("!=", self.s["from_the_end"], _constant(0))
        return b.select(from_the_end, b.sub(b.sub(count, _constant(1)), k), k)

    def _steps(self, kc):
        """The micro-kernel's steps through ``kc`` of the depth (pairs of
        bfloat16 take two at once); packed panels are as many rows deep."""
        if not self.pairs:
            return kc
        return self.b.sdiv(_add(self.b, kc, _constant(1)), _constant(2))

    def _aligned(self, base, offset: int):
        """``base + offset`` elements, rounded up to 64 bytes."""
        b = self.b
        address = b.ptrtoint(b.gep(base, [_constant(offset)]), I64)
        address = b.and_(_add(b, address, _constant(63)), _constant(-64))
        return b.inttoptr(address, base.type)

    def build(self) -> str:
        b, s = self.b, self.s

        def item(i):
            outer, inner = b.sdiv(i, s["inner_items"]), b.srem(i, s["inner_items"])
            operands = [
                b.gep(
                    base,
                    [_add(b, _mul(b, outer, s[f"{x}_outer"]), _mul(b, inner, s[f"{x}_inner"]))],
                )
                for base, x in ((self.a_base, "a"), (self.b_base, "b"), (self.c_base, "c"))
            ]
            self._product(*operands)

        _loop(b, s["items_begin"], s["items_end"], item)
        b.ret_void()
        return str(self.module)

    # ------------------------------------------------------------ the loops

    def _product(self, a, bm, c):
        b, s, blocks = self.b, self.s, self.blocks
        rows_begin, rows_end = s["rows_begin"], s["rows_end"]

        def column_block(jc, nc):
            def depth_block(pc, kc):
                self._pack_b(bm, pc, kc, jc, nc)
                first = b.icmp_signed("==", pc, _constant(0))
                last = None
                if self.pairs:
                    last = b.and_(
                        b.icmp_signed(">=", _add(b, pc, kc), s["depth"]),
                        b.icmp_signed("!=", s["rounded"], _constant(0)),
                    )

                def row_block(ic, mc):
                    self._pack_a(a, ic, mc, pc, kc)
                    self._macro_kernel(c, ic, mc, jc, nc, kc, first, last)

                _blocks_of(b, rows_begin, rows_end, blocks.mc, row_block, self._walked)

            _blocks_of(b, _constant(0), s["depth"], blocks.kc, depth_block)

        _blocks_of(b, s["columns_begin"], s["columns_end"], blocks.nc, column_block)

    def _macro_kernel(self, c, ic, mc, jc, nc, kc, first, last):
        """Every MR x NR tile of C's block from the packed panels."""
        b, mr, nr = self.b, self.blocks.mr, self.nr
        steps = self._steps(kc)

        def column_panel(j):
            b_panel = b.gep(self.packed_b, [_mul(b, _mul(b, j, steps), _constant(nr))])
            column = _mul(b, j, _constant(nr))
            columns = b.sub(nc, column)

            def row_panel(i):
                a_panel = b.gep(self.packed_a, [_mul(b, _mul(b, i, steps), _constant(mr))])
                row = _mul(b, i, _constant(mr))
                self._prefetch_tile(c, _add(b, ic, row), _add(b, jc, column), b.sub(mc, row))
                sums = self._tile_sums(a_panel, b_panel, steps)
                self._store(
                    c,
                    _add(b, ic, row),
                    _add(b, jc, column),
                    b.sub(mc, row),
                    columns,
                    sums,
                    first,
                    last,
                )

            _loop(b, _constant(0), _ceil_div(b, mc, mr), row_panel)

        _loop(b, _constant(0), _ceil_div(b, nc, nr), column_panel)

    def _prefetch_tile(self, c, row, column, rows):
        """Asks for C's tile (its rows in C) while the sums are computed: each
        row of a wide C lies in a page of its own, far from the cache."""
        b, s = self.b, self.s
        last = b.sub(rows, _constant(1))
        for r in range(self.blocks.mr):
            at = _add(b, _mul(b, _add(b, row, _min(b, _constant(r), last)), s["c_row"]), column)
            for line in range(0, self.nr * self.vectors.bytes, 64):
                self._ask_for(b.gep(c, [_add(b, at, _constant(line // self.vectors.bytes))]), True)

    def _tile_sums(self, a_panel, b_panel, steps):
        """The micro-kernel: MR x NR sums through ``steps`` rows of the panels."""
        b, vectors, mr, count = self.b, self.vectors, self.blocks.mr, self.nr_vectors
        if self.pairs:

            def multiply_add(x, y, sums):
                return _dot_of_pairs(b, vectors, x, y, sums, self.emulated_dot)
        else:
            multiply_add = vectors.fmuladd

        def step(p, sums):
            b_row = b.gep(b_panel, [_mul(b, p, _constant(self.nr))])
            a_column = b.gep(a_panel, [_mul(b, p, _constant(mr))])
            bv = [vectors.load(b.gep(b_row, [_constant(v * vectors.width)])) for v in range(count)]
            if self.pairs and self.emulated_dot:
                bv = [_halves(b, v) for v in bv]
            out = []
            for r in range(mr):
                av = vectors.splat(b.load(b.gep(a_column, [_constant(r)])))
                if self.pairs and self.emulated_dot:
                    av = _halves(b, av)
                out += [multiply_add(av, bv[v], sums[r * count + v]) for v in range(count)]
            return out

        return _carried(b, _constant(0), steps, 1, [vectors.zero] * (mr * count), step)[1]

    def _store(self, c, row, column, rows, columns, sums, first, last):
        """Adds a tile's sums into C at (row, column) (stores them on the
        first depth block; rounds them to bfloat16 on the ``last``, where
        that is asked); of the tile, ``rows`` x ``columns`` lie in C."""
        b, mr, count = self.b, self.blocks.mr, self.nr_vectors
        whole = b.and_(
            b.icmp_signed(">=", rows, _constant(mr)),
            b.icmp_signed(">=", columns, _constant(self.nr)),
        )

        def store(first: bool):
            with b.if_else(whole) as (inside, edge):
                with inside:
                    for r in range(mr):
                        for v in range(count):
                            value = sums[r * count + v]
                            self._store_vector(c, row, column, r, v, value, first, last)
                with edge:
                    for r in range(mr):
                        with b.if_then(b.icmp_signed("<", _constant(r), rows)):
                            for v in range(count):
                                left = b.sub(columns, _constant(v * self.vectors.width))
                                value = sums[r * count + v]
                                mask = self.vectors.first(left)
                                self._store_vector(c, row, column, r, v, value, first, last, mask)

        with b.if_else(first) as (on_first, later):
            with on_first:
                store(first=True)
            with later:
                store(first=False)

    def _store_vector(self, c, row, column, r, v, value, first, last, mask=None):
        b, s, vectors = self.b, self.s, self.vectors
        offset = _add(b, _mul(b, _add(b, row, _constant(r)), s["c_row"]), column)
        place = b.gep(c, [_add(b, offset, _constant(v * vectors.width))])
        if not first:
            value = b.fadd(vectors.load(place, mask), value)
        if last is not None:  # a few instructions beside KC steps: cheaper than a branch
            value = b.select(last, _rounded_to_bfloat16(b, value), value)
        vectors.store(value, place, mask)


# ------------------------------------------------------------ bfloat16


def _dot_of_pairs(b, vectors, x, y, sums, emulated: bool):
    """sums + each lane's two bfloat16 products of x's pair by y's; x and y
    are words of pairs as float32 vectors, or (``emulated``) the float32
    vectors of their halves (``_halves``)."""
    if emulated:
        # the high halves' product first, as the instruction's definition adds them
        (x_low, x_high), (y_low, y_high) = x, y
        return vectors.fmuladd(x_low, y_low, vectors.fmuladd(x_high, y_high, sums))
    pairs = ir.VectorType(_BFloat16(), 2 * vectors.width)
    name = f"llvm.x86.avx512bf16.dpbf16ps.{32 * vectors.width}"
    dot = vectors._intrinsic(name, vectors.type, [vectors.type, pairs, pairs])
    return b.call(dot, [sums, b.bitcast(x, pairs), b.bitcast(y, pairs)])


def _words_of_pairs(b, vectors, loads):
    """The words of pairs of two vectors of consecutive float32 (holding
    bfloat16 values): each word the bfloat16 of an even element (its low
    half) and of the odd one after it (its high half), as ``_Packing._packed``
    makes one."""
    evens, odds = vectors.deinterleave(loads, 2)
    integers, constant = _integers(evens.type)
    low = b.lshr(b.bitcast(evens, integers), constant(16))
    high = b.and_(b.bitcast(odds, integers), constant(_HIGH_HALF))
    return b.bitcast(b.or_(low, high), evens.type)


def _halves(b, words):
    """The float32 vectors of the low and the high bfloat16 of each word."""
    integers, constant = _integers(words.type)
    bits = b.bitcast(words, integers)
    low = b.shl(bits, constant(16))
    high = b.and_(bits, constant(_HIGH_HALF))
    return b.bitcast(low, words.type), b.bitcast(high, words.type)


def _rounded_to_bfloat16(b, value):
    """A vector of float32 rounded to the nearest bfloat16, ties to even
    (NaN: float32's quiet NaN), as ``dtypes.bfloat16.round``; in the store,
    it costs no pass over C (numpy's took a quarter of a product's time)."""
    integers, constant = _integers(value.type)
    bits = b.bitcast(value, integers)
    odd = b.and_(b.lshr(bits, constant(16)), constant(1))
    rounded = b.and_(b.add(bits, b.add(odd, constant(0x7FFF))), constant(_HIGH_HALF))
    rounded = b.select(b.fcmp_unordered("uno", value, value), constant(0x7FC00000), rounded)
    return b.bitcast(rounded, value.type)


def _integers(float_type):
    """The int32 type of ``float_type``'s shape (a float32 or a vector of
    them), and its constants."""
    if isinstance(float_type, ir.VectorType):
        integers = ir.VectorType(ir.IntType(32), float_type.count)
        return integers, lambda n: ir.Constant(integers, [n] * float_type.count)
    return ir.IntType(32), lambda n: ir.Constant(ir.IntType(32), n)


class _BFloat16(ir.types.Type):
    """LLVM's bfloat, which llvmlite does not name: the dot product
    instruction's operand type."""

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other) -> bool:
        return isinstance(other, _BFloat16)

    def __hash__(self) -> int:
        return hash("bfloat")


_HIGH_HALF = -(1 << 16)  # 0xFFFF0000 as an int32: a float32's bfloat16 half


def _blocks_of(b, begin, end, size: int, body, order=None) -> None:
    """``body(start, length)`` for blocks of ``size`` covering [begin, end),
    the k-th of n being ``order(k, n)`` (the k-th by default)."""
    count = _ceil_div(b, b.sub(end, begin), size)

    def block(k):
        start = _add(b, begin, _mul(b, k if order is None else order(k, count), _constant(size)))
        body(start, _min(b, _constant(size), b.sub(end, start)))

    _loop(b, _constant(0), count, block)


def _ceil_div(b, n, size: int):
    return b.sdiv(_add(b, n, _constant(size - 1)), _constant(size))


def _min(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)
