"""Vector instructions in LLVM IR for hand-written routines: loads and
stores of whole or partial vectors (masked: the lanes left out are not
touched, so a partial vector at the end of a row reads and writes nothing
past it), splats, fused multiply-adds and sums across lanes."""

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
        lanes = self.b.insert_element(
            ir.Constant(ir.VectorType(I64, self.width), ir.Undefined), count, _i32(0)
        )
        lanes = self.b.shuffle_vector(lanes, lanes, self.splat_mask)
        return self.b.icmp_signed("<", self.lane_numbers, lanes)

    def splat(self, x):
        vector = self.b.insert_element(ir.Constant(self.type, ir.Undefined), x, _i32(0))
        return self.b.shuffle_vector(vector, vector, self.splat_mask)

    def fmuladd(self, x, y, z):
        fmuladd = self._intrinsic(f"llvm.fmuladd.{self.suffix}", self.type, [self.type] * 3)
        return self.b.call(fmuladd, [x, y, z])

    def sum(self, vector):
        """The sum of the lanes, in any order."""
        add = self._intrinsic(
            f"llvm.vector.reduce.fadd.{self.suffix}", self.element, [self.element, self.type]
        )
        return self.b.call(add, [ir.Constant(self.element, 0.0), vector], fastmath=("reassoc",))


def _i32(n):
    return ir.Constant(ir.IntType(32), n)
