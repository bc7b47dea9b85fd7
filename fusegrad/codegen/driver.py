"""One native call for a run of kernels.

A driver is compiled for a run of consecutive kernel launches in a plan (a
program's steps for one layout of its inputs): it fills the column
accumulators, calls every kernel's loop for its recorded layout in order,
and returns whether any kernel's range flag was raised. It is given a
tuple of numpy arrays and reads their data addresses from the array
objects, where ctypes would spend a microsecond and a half per array to ask
numpy; every operand is a byte offset into one of those arrays (an
argument, an output, or the plan's workspace).

The layout of a tuple and of an ndarray object (where the item pointers
and the data pointer sit) is found once by looking for known addresses in
a probe's memory, not assumed.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from llvmlite import ir

from .. import timing
from .lowering import llvm_type
from .target import CompiledModule

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
BYTES = I8.as_pointer()
POINTER_SIZE = ctypes.sizeof(ctypes.c_void_p)


def _offset_of(address: int, obj) -> int:
    """Where in ``obj``'s memory (its fixed part and, for a tuple, its
    items) ``address`` is stored."""
    size = type(obj).__basicsize__ + type(obj).__itemsize__ * len(obj)
    words = (ctypes.c_size_t * (size // POINTER_SIZE)).from_address(id(obj))
    for k, word in enumerate(words):
        if word == address:
            return k * POINTER_SIZE
    raise RuntimeError("fusegrad: cannot find where this Python keeps tuple items or array data")


_PROBE = np.empty(3)
DATA_OFFSET = _offset_of(_PROBE.ctypes.data, _PROBE)  # PyArrayObject's data pointer
ITEMS_OFFSET = _offset_of(id(_PROBE), (_PROBE,))  # PyTupleObject's first item
del _PROBE


@dataclass(frozen=True)
class Fill:
    """``count`` elements of ``dtype`` set to ``value`` at an operand."""

    operand: tuple  # (array, byte offset)
    dtype: object  # the IR's DType
    count: int
    value: float


@dataclass(frozen=True)
class Call:
    """One kernel launch: its compiled function, the addresses of the shape
    and stride arrays of its layout, the end of its outermost loop, and its
    operands as (array, byte offset) pairs."""

    function: object  # a ctypes function
    head: tuple
    end: int
    operands: tuple
    fills: tuple = ()


class Driver:
    """``driver.call(arrays)`` runs the calls and returns nonzero when a range
    flag was raised."""

    def __init__(self, calls: list, flags: list):
        self.calls = calls
        table = []
        for call in calls:
            table += [ctypes.cast(call.function, ctypes.c_void_p).value, *call.head]
        self._table = (ctypes.c_void_p * len(table))(*table)
        description = _describe(calls, flags)
        function = _compile(description, lambda symbol: _generate(calls, flags, symbol))
        # the table's address bound in: a call is one ctypes call
        self.call = functools.partial(function, ctypes.c_void_p(ctypes.addressof(self._table)))


def _describe(calls: list, flags: list) -> str:
    lines = [f"driver {DATA_OFFSET} {ITEMS_OFFSET}"]
    for call in calls:
        lines.append(f"call {call.end} {call.operands}")
        lines += [f"fill {f.operand} {f.dtype.name} {f.count} {f.value!r}" for f in call.fills]
    lines.append(f"flags {flags}")
    return "\n".join(lines)


def _generate(calls: list, flags: list, symbol: str) -> str:
    module = ir.Module(name="driver")
    function = ir.Function(module, ir.FunctionType(I32, [BYTES.as_pointer(), BYTES]), name=symbol)
    table, arrays = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    data: dict = {}  # array index -> its data pointer, read once

    def address(operand):
        item, offset = operand
        if item not in data:
            slot = b.gep(arrays, [ir.Constant(I64, ITEMS_OFFSET + POINTER_SIZE * item)])
            array = b.load(b.bitcast(slot, BYTES.as_pointer()))
            pointer = b.gep(array, [ir.Constant(I64, DATA_OFFSET)])
            data[item] = b.load(b.bitcast(pointer, BYTES.as_pointer()))
        return b.gep(data[item], [ir.Constant(I64, offset)])

    slot = 0
    for call in calls:
        for fill in call.fills:
            _emit_fill(b, function, address(fill.operand), fill)
        pointer, shape, strides = (
            b.load(b.gep(table, [ir.Constant(I64, slot + k)])) for k in range(3)
        )
        slot += 3
        signature = ir.FunctionType(
            ir.VoidType(), [I64.as_pointer()] * 2 + [I64] * 2 + [BYTES] * len(call.operands)
        )
        kernel = b.bitcast(pointer, signature.as_pointer())
        b.call(
            kernel,
            [
                b.bitcast(shape, I64.as_pointer()),
                b.bitcast(strides, I64.as_pointer()),
                ir.Constant(I64, 0),
                ir.Constant(I64, call.end),
            ]
            + [address(operand) for operand in call.operands],
        )
    raised = ir.Constant(I8, 0)
    for flag in flags:
        raised = b.or_(raised, b.load(address(flag)))
    b.ret(b.zext(b.icmp_unsigned("!=", raised, ir.Constant(I8, 0)), I32))
    return str(module)


def _emit_fill(b, function, start, fill: Fill) -> None:
    element = I8 if fill.dtype.name == "bool" else llvm_type(fill.dtype)
    pointer = b.bitcast(start, element.as_pointer())
    value = ir.Constant(element, int(fill.value) if element is I8 else fill.value)
    before = b.block
    loop = function.append_basic_block("fill")
    after = function.append_basic_block("filled")
    b.cbranch(b.icmp_signed(">", ir.Constant(I64, fill.count), ir.Constant(I64, 0)), loop, after)
    b.position_at_end(loop)
    index = b.phi(I64)
    index.add_incoming(ir.Constant(I64, 0), before)
    b.store(value, b.gep(pointer, [index]))
    following = b.add(index, ir.Constant(I64, 1))
    index.add_incoming(following, loop)
    b.cbranch(b.icmp_signed("<", following, ir.Constant(I64, fill.count)), loop, after)
    b.position_at_end(after)


_compiled: dict = {}  # description -> ctypes function
_SOURCE = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
_PROTOTYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.py_object)


def _compile(description: str, build_ir):
    key = f"{_SOURCE}\n{description}"
    function = _compiled.get(key)
    if function is None:
        symbol = "driver_" + hashlib.sha256(key.encode()).hexdigest()[:24]

        def build():
            with timing.phase("kernel IR"):
                return build_ir(symbol)

        module = CompiledModule(build, key)
        function = _PROTOTYPE(module.address(symbol))
        function.module = module
        _compiled[key] = function
    return function
