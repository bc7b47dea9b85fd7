"""One native call for a run of kernels: a driver.

A driver calls a planned run's kernels in order. It is given a table of
addresses (per call: the kernel's function, its shape and stride arrays and,
bounds-checked, its extents; bounds-checked, the error array first)
followed by sizes (``driver_sizes``: each call's loop end and byte offsets,
the fills' counts), and a tuple of numpy arrays, whose data addresses it
reads from the array objects themselves, where ctypes would spend a
microsecond and a half per array to ask numpy. Every operand is a byte
offset into one of those arrays. Before each kernel it fills that
kernel's column accumulators; at the end it returns 1 if a range flag was
raised, and bounds-checked, 2 as soon as a kernel reports an access
outside its operands (with the call's number added to the kernel's error
record).

Where a tuple keeps its items and an array its data pointer is the caller's
to say (``items_offset``, ``data_offset``): the runtime finds them. The
machine code depends on the calls' structure only, not on the sizes, so a
plan for other sizes of the same program reuses it.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from llvmlite import ir

from .. import timing
from .lowering import llvm_type
from .target import compile_function

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
BYTES = I8.as_pointer()
POINTER_SIZE = ctypes.sizeof(ctypes.c_void_p)
PROTOTYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.py_object)


@dataclass(frozen=True)
class Fill:
    """``count`` elements of ``dtype`` set to ``value`` at an operand."""

    operand: tuple  # (array index, byte offset)
    dtype: object  # the IR's DType
    count: int
    value: float


@dataclass(frozen=True)
class Call:
    """One kernel launch: its operands as (array index, byte offset) pairs,
    the end of its outermost loop, and the fills that come before it."""

    operands: tuple
    end: int
    fills: tuple = ()


def compile_driver(calls: list, flags: list, checked: bool, items_offset: int, data_offset: int):
    """The driver's function: ``(table address, arrays tuple) -> int32``.
    ``flags`` are the (array index, byte offset) of the range flags."""
    lines = [f"driver {items_offset} {data_offset} checked={checked}"]
    for call in calls:
        lines.append(f"call {[item for item, _ in call.operands]}")
        lines += [f"fill {f.operand[0]} {f.dtype.name} {f.value!r}" for f in call.fills]
    lines.append(f"flags {[item for item, _ in flags]}")

    def build_ir(symbol):
        with timing.phase("kernel IR"):
            return _generate(calls, flags, checked, items_offset, data_offset, symbol)

    return compile_function("\n".join(lines), build_ir, PROTOTYPE)


def driver_sizes(calls: list, flags: list) -> list:
    """The sizes the driver reads from its table, after the addresses, in
    the order it reads them."""
    sizes = []
    for call in calls:
        sizes.append(call.end)
        sizes += [offset for _, offset in call.operands]
        for fill in call.fills:
            sizes += [fill.operand[1], fill.count]
    return sizes + [offset for _, offset in flags]


def _generate(calls, flags, checked, items_offset, data_offset, symbol) -> str:
    module = ir.Module(name="driver")
    function = ir.Function(module, ir.FunctionType(I32, [BYTES.as_pointer(), BYTES]), name=symbol)
    table, arrays = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    data: dict = {}  # array index -> its data pointer, read once
    per_call = 4 if checked else 3
    first_size = int(checked) + per_call * len(calls)  # the sizes follow the addresses
    read_sizes = iter(range(first_size, first_size + len(driver_sizes(calls, flags))))

    def entry(slot):
        return b.load(b.gep(table, [ir.Constant(I64, slot)]))

    def next_size():
        return b.ptrtoint(entry(next(read_sizes)), I64)

    def address(operand):
        item, _ = operand
        if item not in data:
            slot = b.gep(arrays, [ir.Constant(I64, items_offset + POINTER_SIZE * item)])
            array = b.load(b.bitcast(slot, BYTES.as_pointer()))
            pointer = b.gep(array, [ir.Constant(I64, data_offset)])
            data[item] = b.load(b.bitcast(pointer, BYTES.as_pointer()))
        return b.gep(data[item], [next_size()])

    slot = 0
    if checked:
        error = b.bitcast(entry(0), I64.as_pointer())
        slot = 1
    for number, call in enumerate(calls):
        end = next_size()
        operands = [address(operand) for operand in call.operands]
        for fill in call.fills:
            start = address(fill.operand)
            _emit_fill(b, function, start, fill, next_size())
        pointer, *tables = (entry(slot + k) for k in range(per_call))
        slot += per_call
        if checked:
            tables.append(error)
        tables = [b.bitcast(t, I64.as_pointer()) for t in tables]
        signature = ir.FunctionType(
            ir.VoidType(),
            [I64.as_pointer()] * 2
            + [I64] * 2
            + [I64.as_pointer()] * (len(tables) - 2)
            + [BYTES] * len(call.operands),
        )
        arguments = [*tables[:2], ir.Constant(I64, 0), end, *tables[2:]]
        kernel = b.bitcast(pointer, signature.as_pointer())
        b.call(kernel, arguments + operands)
        if checked:
            with b.if_then(b.icmp_signed("!=", b.load(error), ir.Constant(I64, 0)), likely=False):
                b.store(ir.Constant(I64, number), b.gep(error, [ir.Constant(I64, 3)]))
                b.ret(ir.Constant(I32, 2))
    raised = ir.Constant(I8, 0)
    for flag in flags:
        raised = b.or_(raised, b.load(address(flag)))
    b.ret(b.zext(b.icmp_unsigned("!=", raised, ir.Constant(I8, 0)), I32))
    return str(module)


def _emit_fill(b, function, start, fill: Fill, count) -> None:
    element = I8 if fill.dtype.name == "bool" else llvm_type(fill.dtype)
    pointer = b.bitcast(start, element.as_pointer())
    value = ir.Constant(element, int(fill.value) if element is I8 else fill.value)
    before = b.block
    loop = function.append_basic_block("fill")
    after = function.append_basic_block("filled")
    b.cbranch(b.icmp_signed(">", count, ir.Constant(I64, 0)), loop, after)
    b.position_at_end(loop)
    index = b.phi(I64)
    index.add_incoming(ir.Constant(I64, 0), before)
    b.store(value, b.gep(pointer, [index]))
    following = b.add(index, ir.Constant(I64, 1))
    index.add_incoming(following, loop)
    b.cbranch(b.icmp_signed("<", following, count), loop, after)
    b.position_at_end(after)
