"""Vector instructions in LLVM IR for hand-written routines: loads and
stores of whole or partial vectors (masked: the lanes left out are not
touched, so a partial vector at the end of a row reads and writes nothing
past it), splats, fused multiply-adds, sums across lanes, the
(de)interleaving of consecutive vectors and the transposition of a square
block of them."""

from __future__ import annotations

from llvmlite import ir

from .target import vector_registers

I64 = ir.IntType(64)


def lanes(dtype_name: str) -> int:
    """Elements of ``dtype_name`` in a vector register."""
    width, _ = vector_registers()
    return width // (4 if dtype_name == "float32" else 8)


class Vectors:
    """Vector instructions on one element type and width, for a builder."""

    def __init__(self, b, element, width: int):
        self.b, self.element, self.width = b, element, width
        self.type = ir.VectorType(element, width)
        self.bytes = 4 if isinstance(element, ir.FloatType) else 8
        self.suffix = f"v{width}{'f32' if self.bytes == 4 else 'f64'}"
        self.zero = ir.Constant(self.type, None)
        i32 = ir.IntType(32)
        self.alignment = ir.Constant(i32, self.bytes)
        self.lane_numbers = ir.Constant(ir.VectorType(I64, width), list(range(width)))
        self.splat_mask = ir.Constant(ir.VectorType(i32, width), [0] * width)

    def _intrinsic(self, name, result, arguments):
        module = self.b.module
        function = module.globals.get(name)
        if function is None:
            function = ir.Function(module, ir.FunctionType(result, arguments), name)
        return function

    def pointer(self, address):
        return self.b.bitcast(address, self.type.as_pointer())

    def load(self, address, mask=None):
        if mask is None:
            return self.b.load(self.pointer(address), align=self.bytes)
        masks = ir.VectorType(ir.IntType(1), self.width)
        arguments = [self.type.as_pointer(), ir.IntType(32), masks, self.type]
        load = self._intrinsic(f"llvm.masked.load.{self.suffix}.p0", self.type, arguments)
        return self.b.call(load, [self.pointer(address), self.alignment, mask, self.zero])

    def store(self, value, address, mask=None):
        if mask is None:
            self.b.store(value, self.pointer(address), align=self.bytes)
            return
        masks = ir.VectorType(ir.IntType(1), self.width)
        arguments = [self.type, self.type.as_pointer(), ir.IntType(32), masks]
        store = self._intrinsic(f"llvm.masked.store.{self.suffix}.p0", ir.VoidType(), arguments)
        self.b.call(store, [value, self.pointer(address), self.alignment, mask])

    def first(self, count):
        """The mask of the first ``count`` lanes."""
        return self.b.icmp_signed("<", self.lane_numbers, self.splat_index(count))

    def splat_index(self, n):
        """A vector of int64 ``n`` in every lane (to compare lane numbers with)."""
        lanes = self.b.insert_element(
            ir.Constant(ir.VectorType(I64, self.width), ir.Undefined), n, _i32(0)
        )
        return self.b.shuffle_vector(lanes, lanes, self.splat_mask)

    def splat(self, x):
        vector = self.b.insert_element(ir.Constant(self.type, ir.Undefined), x, _i32(0))
        return self.b.shuffle_vector(vector, vector, self.splat_mask)

    def fmuladd(self, x, y, z):
        fmuladd = self._intrinsic(f"llvm.fmuladd.{self.suffix}", self.type, [self.type] * 3)
        return self.b.call(fmuladd, [x, y, z])

    def sums(self, vectors: list):
        """The sums of the lanes of each of ``vectors`` (at most a vector's
        width of them), in any order, as one short vector: vectors are added
        in pairs, each half of one beside a half of the other, until one is
        left, then neighbouring lanes are added. A block of a matrix product's
        dot products (24 of them) took a third of its time in one sum across
        lanes each; here they share most of the shuffles."""
        b, width, count = self.b, self.width, len(vectors)
        segment = width  # lanes holding each source vector's partial sums
        while len(vectors) > 1:
            if len(vectors) % 2:
                vectors = vectors + [self.zero]
            half = segment // 2
            firsts = [s + i for s in range(0, 2 * width, segment) for i in range(half)]
            seconds = [i + half for i in firsts]
            vectors = [
                b.fadd(_shuffle(b, x, y, firsts), _shuffle(b, x, y, seconds))
                for x, y in zip(vectors[::2], vectors[1::2])
            ]
            segment = half
        (vector,) = vectors
        step = segment // 2
        while step:
            # each lane gets its neighbour's value at ``step``; only every
            # segment's first lane is kept
            vector = b.fadd(
                vector, _shuffle(b, vector, vector, [(i + step) % width for i in range(width)])
            )
            step //= 2
        return _shuffle(b, vector, vector, [i * segment for i in range(count)])

    def transposed(self, rows: list) -> list:
        """The square block whose rows are ``rows`` (a vector's width of
        vectors) transposed: the i-th vector holds each row's i-th lane.
        Each of log2(width) rounds interleaves row k with row k + width/2,
        their first halves into one vector, their second into the next."""
        b, half = self.b, self.width // 2
        firsts = [lane + offset for lane in range(half) for offset in (0, self.width)]
        seconds = [lane + half for lane in firsts]
        for _ in range(self.width.bit_length() - 1):
            rows = [
                _shuffle(b, rows[k], rows[k + half], lanes)
                for k in range(half)
                for lanes in (firsts, seconds)
            ]
        return rows

    def deinterleave(self, vectors: list, count: int) -> list:
        """``count`` vectors from ``count`` consecutive ones: the k-th holds
        every count-th element, from element k on."""
        whole = _concatenated(self.b, vectors)
        return [
            _shuffle(self.b, whole, whole, list(range(k, count * self.width, count)))
            for k in range(count)
        ]

    def interleave(self, vectors: list) -> list:
        """The inverse of ``deinterleave``: consecutive vectors holding the
        first element of each of ``vectors``, then the second of each, ..."""
        count, width = len(vectors), self.width
        whole = _concatenated(self.b, vectors)
        lanes = [(q % count) * width + q // count for q in range(count * width)]
        return [
            _shuffle(self.b, whole, whole, lanes[v * width : (v + 1) * width]) for v in range(count)
        ]


def _shuffle(b, x, y, lanes: list):
    return b.shuffle_vector(x, y, ir.Constant(ir.VectorType(ir.IntType(32), len(lanes)), lanes))


def _concatenated(b, vectors: list):
    """One vector of all of ``vectors``' lanes in order (beyond them, zeros
    up to a power of two of vectors)."""
    while len(vectors) > 1:
        if len(vectors) % 2:
            vectors = vectors + [ir.Constant(vectors[0].type, None)]
        width = vectors[0].type.count
        vectors = [
            _shuffle(b, x, y, list(range(2 * width))) for x, y in zip(vectors[::2], vectors[1::2])
        ]
    return vectors[0]


def _i32(n):
    return ir.Constant(ir.IntType(32), n)
