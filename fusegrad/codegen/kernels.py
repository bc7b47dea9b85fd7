"""Fused elementwise kernels: LLVM IR for a loop nest over the iteration shape.

Every operand is addressed through element strides, so broadcast (stride 0),
transposed and sliced inputs are read in place. A kernel is compiled per
*variant* of its operands' layout: the number of merged dimensions, each
operand's innermost stride class (0, 1, a small step, or other), how many
dimensions a row reduction keeps, and whether every access is
bounds-checked. The innermost loop then has constant strides and
vectorizes. What a kernel's pointer arguments hold is its ``operands``; the
runtime owns their memory, works out the layouts and launches the compiled
function.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from .. import timing
from ..ir import dtypes
from ..ir import primitives as P
from ..ir.fusion import is_column_reduction, is_whole_reduction
from ..ir.graph import Const, Eqn, Var
from .lowering import BOOL, LOWERINGS, emit, llvm_type, round_to
from .target import compile_function

I64 = ir.IntType(64)
BYTE = ir.IntType(8)


def _memory_type(dtype):
    return BYTE if dtype.name == "bool" else llvm_type(dtype)


@dataclass(frozen=True)
class Operand:
    """One pointer argument of a kernel: the value its array holds, the
    array's shape, and how that shape sits in the kernel's iteration space
    (``before`` and ``after`` unit dimensions around it, then broadcast).
    Reductions and range flags say how they accumulate (``reduce``: sum,
    max or min; ``extent``: per row, per column or over everything); a
    column accumulator is filled with ``start`` before a launch."""

    role: str  # input, row input, output, row output, reduction, flag, spill
    value: object  # the Var or array Const the array holds
    shape: tuple
    before: int = 0
    after: int = 0
    reduce: str | None = None
    extent: str | None = None
    start: object = None

    @property
    def dtype(self):
        return self.value.dtype

    @property
    def view(self) -> tuple:
        """The array's shape in kernel coordinates (before broadcasting)."""
        return (1,) * self.before + tuple(self.shape) + (1,) * self.after


class KernelCode:
    """One fused kernel and its machine code for each layout variant.

    Its pointer arguments (``operands``), in order: the inputs (in kernel
    coordinates), the inputs read per row (in row coordinates), the
    elementwise outputs, the per-row outputs, the reductions' arrays (range
    flags last) and the spill rows (see ``_spills``)."""

    def __init__(self, kernel):
        self.kernel = kernel
        # one-element constants become LLVM constants; every other input is an argument
        inputs = [v for v in kernel.inputs if not _is_scalar_constant(v)]
        row_inputs = [v for v in kernel.row_inputs if not _is_scalar_constant(v)]
        self.args = inputs + row_inputs
        self.first_row_arg = len(inputs)
        guard_eqns, self.guards = _range_guards(kernel)
        self.phase = dict(kernel.phase)
        for eqn in guard_eqns:
            self.phase[eqn.out] = max(self.phase.get(v, 0) for v in eqn.inputs)
        self.body = kernel.eqns + guard_eqns
        self.reducers = [Reducer(r) for r in kernel.reductions + self.guards]
        for reducer in self.reducers:
            reducer.phase = self.phase.get(reducer.eqn.inputs[0], 0)
        # Row reductions (trailing axes, or everything) accumulate in registers
        # and are stored when a row ends; column reductions (leading axes:
        # gradients of broadcast operands) add every element into an
        # accumulator array. Both kinds split the dimensions at one place.
        # Reductions of everything accumulate like rows but, when rows or
        # columns set the split, are reset and stored once per launch.
        partial = bool(kernel.split)  # rows or columns, not only sums of everything
        if kernel.split is not None:
            self.split = kernel.split
        else:
            self.split = 0 if self.reducers else len(kernel.shape)
        self.wholes = [r for r in self.reducers if r.whole and partial]
        self.rows = [r for r in self.reducers if not r.column and not (r.whole and partial)]
        self.last_phase = kernel.last_phase
        self.ordered = kernel.ordered()
        outside = {v for e in kernel.row_eqns for v in e.inputs if not _is_scalar_constant(v)}
        self.read_per_row = [
            k
            for k, v in enumerate(self.args)
            if k >= self.first_row_arg or (v in outside and v not in kernel.phase)
        ]
        self.spills = self._spills()
        self.plans = [self._plan(p) for p in range(self.last_phase + 1)]
        self.operands = self._operands()
        self.variants: dict = {}  # (ndim, stride classes, first, checked) -> function
        self.modules: list = []

    @property
    def name(self) -> str:
        return self.kernel.name

    @property
    def eqns(self) -> list:
        """The IR equations fused into this kernel."""
        return self.ordered

    def __repr__(self) -> str:
        eqns = self.ordered
        ops = " ".join(e.prim.name for e in eqns)
        passes = f", {self.last_phase + 1} passes per row" if self.last_phase else ""
        return f"<kernel {self.name}: {len(eqns)} ops ({ops}) over {self.kernel.shape}{passes}>"

    def description(self) -> str:
        """Text that determines this kernel's LLVM IR for a layout: its
        operands (role, accumulation, placement in the iteration space), its
        equations with their passes, values numbered in order of appearance
        and one-element constants written out. The code reads sizes at run time, so
        sizes above 1 are written as classes of equal sizes (``n0``, ``n1``):
        kernels that differ only in such sizes share their machine code."""
        numbers: dict = {}
        classes: dict = {}

        def size(n):
            return str(n) if n < 2 else classes.setdefault(n, f"n{len(classes)}")

        def sizes(shape) -> str:
            return "[" + ",".join(map(size, shape)) + "]"

        def name(v):
            if _is_scalar_constant(v):
                return f"{v.value.item()!r}:{v.dtype.name}"
            number = numbers.setdefault(id(v), len(numbers))
            return f"%{number}:{v.dtype.name}{sizes(v.shape)}"

        def parameter(key, value) -> str:
            if key == "shape":  # read by no lowering; a size class like any other
                value = sizes(value)
            return f"{key}={value!r}"

        kernel = self.kernel
        lines = [
            " ".join(["args", *map(name, self.args), f"rows from {self.first_row_arg}"]),
            " ".join(["outputs", *map(name, kernel.outputs)]),
            " ".join(["row outputs", *map(name, kernel.row_outputs)]),
            f"split {self.split} last phase {self.last_phase}",
            " ".join(["spills", *map(name, self.spills)]),
        ]
        for op in self.operands:
            lines.append(
                f"operand {op.role} {name(op.value)} {sizes(op.shape)} "
                f"{op.before} {op.after} {op.reduce} {op.extent} {op.start!r}"
            )
        for part, eqns in (("", self.body), ("row ", kernel.row_eqns), ("", kernel.reductions)):
            for e in eqns:
                params = " ".join(parameter(k, v) for k, v in sorted(e.params.items()))
                operands = " ".join(map(name, e.inputs))
                phase = self.phase.get(e.out, 0)
                lines.append(f"{part}{name(e.out)} = {e.prim.name}[{params}] {operands} @{phase}")
        return "\n".join(lines)

    @property
    def llvm_ir(self) -> str:
        """The optimized LLVM IR of every layout compiled so far."""
        return "\n".join(m.optimized_ir for m in self.modules)

    @property
    def asm(self) -> str:
        return "\n".join(m.asm for m in self.modules)

    @property
    def approximates(self) -> bool:
        """Whether any equation's lowering is an approximation: numpy would
        compute other bits for it."""
        return any(_cost(e) > 1 for e in self.body + self.kernel.row_eqns)

    @property
    def work_per_element(self) -> int:
        """About how many instructions each element of the iteration shape
        costs, all passes over a row counted."""
        return (sum(_cost(e) for e in self.body) + 1) * (self.last_phase + 1)

    @property
    def results(self) -> list:
        """The values a launch returns: elementwise outputs, per-row outputs,
        then reductions."""
        kernel = self.kernel
        return kernel.outputs + kernel.row_outputs + [r.out for r in kernel.reductions]

    def _operands(self) -> list:
        kernel, shape, split = self.kernel, self.kernel.shape, self.split
        ndim, kept = len(shape), shape[:split]

        def row(role, v):  # a value per row, in row coordinates
            return Operand(role, v, v.shape, len(kept) - len(v.shape), ndim - len(kept))

        operands = [Operand("input", v, v.shape) for v in self.args[: self.first_row_arg]]
        operands += [row("row input", v) for v in self.args[self.first_row_arg :]]
        operands += [Operand("output", v, shape) for v in kernel.outputs]
        operands += [
            Operand("row output", v, v.shape, 0, ndim - len(v.shape)) for v in kernel.row_outputs
        ]
        for k, r in enumerate(self.reducers):
            role = "reduction" if k < len(kernel.reductions) else "flag"
            out = r.eqn.out
            if r.column:
                operand = Operand(role, out, shape[split:], split, 0, r.kind, "column", r.start)
            elif r in self.wholes:
                operand = Operand(role, out, (), 0, ndim, r.kind, "whole")
            else:  # rows, or everything when that is the one row
                operand = Operand(role, out, kept, 0, ndim - len(kept), r.kind, "row")
            assert operand.shape == out.shape, (operand, out)
            operands.append(operand)
        # a row's worth of memory, the same for every row
        operands += [Operand("spill", v, shape[split:], split) for v in self.spills]
        return operands

    def _spills(self) -> list:
        """Values computed in one pass over a row and read in a later one
        that would cost more to compute again than to store in a row-sized
        buffer (which stays in cache) and load back."""
        cost, spills = {}, []
        read_later = {
            v
            for eqn in self.body
            for v in eqn.inputs
            if isinstance(v, Var) and self.phase[eqn.out] > self.phase.get(v, 0)
        }
        for eqn in self.body:
            cost[eqn.out] = _cost(eqn) + sum(
                cost.get(v, 0) for v in eqn.inputs if isinstance(v, Var)
            )
            if eqn.out in read_later and cost[eqn.out] > SPILL_COST:
                spills.append(eqn.out)
                cost[eqn.out] = 1
        return spills

    def _plan(self, phase: int) -> tuple:
        """What one element of pass ``phase`` does: (inputs to load, spills to
        load, equations to compute, outputs to store, spills to store)."""
        defining = {eqn.out: eqn for eqn in self.body}
        spilled = set(self.spills)
        targets = [r.eqn.inputs[0] for r in self.reducers if r.phase == phase]
        outputs = [v for v in self.kernel.outputs if self.phase[v] == phase]
        spills = [v for v in self.spills if self.phase[v] == phase]
        needed, loads, spill_loads = set(), set(), set()
        stack = targets + outputs + spills
        while stack:
            v = stack.pop()
            if _is_scalar_constant(v) or v in needed:
                continue
            needed.add(v)
            if v in spilled and self.phase[v] < phase:
                spill_loads.add(v)
            elif v in defining:
                stack.extend(defining[v].inputs)
            elif v not in self.phase:
                loads.add(v)
        inputs = [k for k, v in enumerate(self.args[: self.first_row_arg]) if v in loads]
        return (
            inputs,
            [v for v in self.spills if v in spill_loads],
            [e for e in self.body if e.out in needed and e.out not in spill_loads],
            outputs,
            spills,
        )

    # ------------------------------------------------------------------ codegen

    def generate(self, variant: tuple, symbol: str = "kernel") -> str:
        """The LLVM IR of this kernel for one layout ``variant``: (merged
        dimensions, each operand's innermost stride class, how many
        dimensions a row reduction keeps, bounds-checked, precise: the C
        library's functions where a fast lowering holds only over a range)."""
        ndim, classes, first, checked, precise = variant
        module = ir.Module(name=self.name)
        pointer_types = [_memory_type(op.dtype).as_pointer() for op in self.operands]
        checks = [I64.as_pointer()] * 2 if checked else []
        signature = ir.FunctionType(
            ir.VoidType(), [I64.as_pointer(), I64.as_pointer(), I64, I64, *checks, *pointer_types]
        )
        function = ir.Function(module, signature, name=symbol)
        for arg in function.args:
            if isinstance(arg.type, ir.PointerType):
                arg.add_attribute("noalias")
        shape_ptr, stride_ptr, begin, end, *pointers = function.args
        b = ir.IRBuilder(function.append_basic_block("entry"))
        extents = error = None
        if checked:
            extents_ptr, error, *pointers = pointers
            extents = [
                [b.load(b.gep(extents_ptr, [ir.Constant(I64, 2 * k + j)])) for j in range(2)]
                for k in range(len(pointers))
            ]
        dims = [b.load(b.gep(shape_ptr, [ir.Constant(I64, d)])) for d in range(ndim)]
        stride = [
            [b.load(b.gep(stride_ptr, [ir.Constant(I64, k * ndim + d)])) for d in range(ndim)]
            for k in range(len(pointers))
        ]
        bounds = [(ir.Constant(I64, 0), d) for d in dims]
        bounds[0] = (begin, end)  # this launch's chunk of the outermost loop
        emitter = _Emitter(self, b, function, pointers, bounds, stride, classes, first)
        emitter.extents, emitter.error, emitter.precise = extents, error, precise
        for reducer in self.wholes:
            b.store(reducer.total_identity, emitter.totals[id(reducer)])
        emitter.nest(0, [ir.Constant(I64, 0)] * len(pointers), None if self.rows else 0, {})
        for reducer in self.wholes:
            total = b.load(emitter.totals[id(reducer)])
            k = emitter.position[id(reducer)]
            b.store(reducer.result(b, total), emitter.at(k, ir.Constant(I64, 0)))
        b.ret_void()
        return str(module)

    def compile(self, variant: tuple):
        """The native function for a layout variant (see ``generate``):
        ``(shape, strides, begin, end[, extents, error], *operands)``."""
        function = self.variants.get(variant)
        if function is None:

            def build_ir(symbol):
                with timing.phase("kernel IR"):
                    return self.generate(variant, symbol)

            pointers = 4 + len(self.operands) + (2 if variant[3] else 0)
            prototype = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * pointers)
            description = f"kernel\n{self.description()}\nlayout {variant}"
            function = compile_function(description, build_ir, prototype)
            self.modules.append(function.module)
            self.variants[variant] = function
        return function


class _Emitter:
    """Emits one layout of a kernel: the loop nest, the passes over each row,
    and the element code of each pass."""

    def __init__(self, code, b, function, pointers, bounds, stride, classes, first):
        self.code, self.b, self.function = code, b, function
        self.pointers, self.bounds, self.stride, self.classes = pointers, bounds, stride, classes
        self.first = first
        kernel = code.kernel
        self.first_output = len(code.args)
        self.first_row_output = self.first_output + len(kernel.outputs)
        first_reducer = self.first_row_output + len(kernel.row_outputs)
        self.position = {id(r): first_reducer + k for k, r in enumerate(code.reducers)}
        self.first_spill = first_reducer + len(code.reducers)
        # accumulated in registers, block by block
        self.totals = {id(r): b.alloca(r.total_type) for r in code.rows + code.wholes}

    def counted(self, name, start, stop, step, body):
        """for index in range(start, stop, step): body(index)"""
        b = self.b
        header = b.block
        loop_block = self.function.append_basic_block(name)
        after = self.function.append_basic_block(name + ".after")
        b.branch(loop_block)
        b.position_at_end(loop_block)
        index = b.phi(I64, name=name)
        index.add_incoming(start, header)
        body(index)
        following = b.add(index, step)
        index.add_incoming(following, b.block)
        b.cbranch(b.icmp_signed("<", following, stop), loop_block, after)
        b.position_at_end(after)

    def address(self, offsets, index, depth, k):
        """Where operand ``k``'s element at ``index`` of the innermost loop
        lives; its stride there is a constant (0, 1 or a small step) unless
        its class says otherwise."""
        b, cls = self.b, self.classes[k]
        if cls == 0:
            position = offsets[k]
        elif cls == 1:
            position = b.add(offsets[k], index)
        elif isinstance(cls, int):
            position = b.add(offsets[k], b.mul(index, ir.Constant(I64, cls)))
        else:
            position = b.add(offsets[k], b.mul(index, self.stride[k][depth]))
        return self.at(k, position)

    def at(self, k, position):
        """Operand ``k``'s element ``position``. Bounds-checked, a position
        outside the operand's extent records (1, k, position) in the error
        array and returns from the kernel instead of touching memory."""
        b = self.b
        if self.extents is not None:
            low, high = self.extents[k]
            outside = b.or_(b.icmp_signed("<", position, low), b.icmp_signed(">=", position, high))
            with b.if_then(outside, likely=False):
                for slot, value in enumerate((ir.Constant(I64, 1), ir.Constant(I64, k), position)):
                    b.store(value, b.gep(self.error, [ir.Constant(I64, slot)]))
                b.ret_void()
        return b.gep(self.pointers[k], [position])

    def nest(self, depth: int, offsets: list, phase, row_env: dict):
        """The loops from ``depth`` in; ``phase`` is None outside a row."""
        b = self.b
        if phase is None and depth == self.first:
            self.row(offsets)
        elif depth < len(self.bounds) - 1:

            def body(i):
                inner = [b.add(o, b.mul(i, s[depth])) for o, s in zip(offsets, self.stride)]
                self.nest(depth + 1, inner, phase, row_env)

            self.counted(f"i{depth}", *self.bounds[depth], ir.Constant(I64, 1), body)
        elif any(r.phase == phase for r in self.code.rows + self.code.wholes):
            start, stop = self.bounds[depth]
            self.counted(
                "block",
                start,
                stop,
                ir.Constant(I64, BLOCK),
                lambda block_start: self.block(offsets, block_start, stop, depth, phase, row_env),
            )
        else:

            def element(i):
                env = self.element(offsets, i, depth, phase, row_env)
                self.accumulate_columns(offsets, i, depth, phase, env)

            self.counted(f"i{depth}", *self.bounds[depth], ir.Constant(I64, 1), element)

    def row(self, offsets: list):
        """One row: a pass per phase, each followed by storing its totals and
        computing the row equations that read them."""
        code, b, kernel = self.code, self.b, self.code.kernel
        env = {}
        for k in code.read_per_row:
            env[id(code.args[k])] = _load(b, self.at(k, offsets[k]), code.args[k])
        for phase in range(code.last_phase + 1):
            running = [r for r in code.rows if r.phase == phase]
            for reducer in running:
                b.store(reducer.total_identity, self.totals[id(reducer)])
            self.nest(self.first, offsets, phase, env)
            for reducer in running:
                total = b.load(self.totals[id(reducer)])
                k = self.position[id(reducer)]
                b.store(reducer.result(b, total), self.at(k, offsets[k]))
                env[id(reducer.eqn.out)] = reducer.value(b, total)
            for eqn in kernel.row_eqns:
                if code.phase[eqn.out] == phase + 1:
                    env[id(eqn.out)] = _lower(b, eqn, env, self.precise)
            for k, v in enumerate(kernel.row_outputs):
                if code.phase[v] == phase + 1:
                    j = self.first_row_output + k
                    _store(b, env[id(v)], self.at(j, offsets[j]), v)

    def block(self, offsets, start, size, depth, phase, row_env):
        """One block of a reducing pass: vectorizable partial results in the
        element type (for sums, reassociation is allowed only here), combined
        into the totals once per block (float64 for float sums), so long sums
        stay accurate."""
        b, code = self.b, self.code
        reducers = [r for r in code.rows + code.wholes if r.phase == phase]
        end = b.add(start, ir.Constant(I64, BLOCK))
        stop = b.select(b.icmp_signed("<", end, size), end, size)
        header = b.block
        body = self.function.append_basic_block("element")
        after = self.function.append_basic_block("element.after")
        b.branch(body)
        b.position_at_end(body)
        index = b.phi(I64, name="i")
        index.add_incoming(start, header)
        partial, seen_nan = [], []
        for reducer in reducers:
            if reducer.extremum_of_floats:
                phi = b.phi(reducer.ordered_type)
                phi.add_incoming(reducer.ordered_identity, header)
            else:
                phi = b.phi(reducer.type)
                phi.add_incoming(reducer.identity, header)
            partial.append(phi)
            if reducer.extremum_of_floats:
                flag = b.phi(BOOL)
                flag.add_incoming(ir.Constant(BOOL, 0), header)
                seen_nan.append(flag)
            else:
                seen_nan.append(None)
        env = self.element(offsets, index, depth, phase, row_env)
        self.accumulate_columns(offsets, index, depth, phase, env)
        updated, updated_nan = [], []
        for reducer, phi, flag in zip(reducers, partial, seen_nan):
            value = env[id(reducer.eqn.inputs[0])]
            if flag is None:
                updated.append(reducer.combine(b, phi, value))
                updated_nan.append(None)
            else:
                # NaN is tracked apart so the extremum's loop vectorizes
                updated.append(reducer.combine_ordered(b, phi, reducer.ordered_key(b, value)))
                updated_nan.append(b.or_(flag, b.fcmp_unordered("uno", value, value)))
                flag.add_incoming(updated_nan[-1], b.block)
            phi.add_incoming(updated[-1], b.block)  # element code may have branched
        following = b.add(index, ir.Constant(I64, 1))
        index.add_incoming(following, b.block)
        b.cbranch(b.icmp_signed("<", following, stop), body, after)
        b.position_at_end(after)
        for reducer, value, flag in zip(reducers, updated, updated_nan):
            if flag is not None:
                value = reducer.from_ordered_key(b, value)
                value = b.select(flag, ir.Constant(reducer.type, float("nan")), value)
            total = self.totals[id(reducer)]
            b.store(reducer.combine_total(b, b.load(total), value), total)

    def accumulate_columns(self, offsets, index, depth, phase, env):
        """Column reductions: add this element into its column's accumulator
        (float64 for float sums), which lives in memory and stays in cache."""
        b = self.b
        for reducer in self.code.reducers:
            if not reducer.column or reducer.phase != phase:
                continue
            pointer = self.address(offsets, index, depth, self.position[id(reducer)])
            value = env[id(reducer.eqn.inputs[0])]
            if reducer.type == BOOL:
                stored = b.icmp_signed("!=", b.load(pointer), ir.Constant(BYTE, 0))
                b.store(b.zext(reducer.combine(b, stored, value), BYTE), pointer)
            else:
                b.store(reducer.combine_total(b, b.load(pointer), value), pointer)

    def element(self, offsets, index, depth, phase, row_env):
        """One element of pass ``phase``: loads what it reads, computes the
        equations it needs, stores its outputs and spills; the values by var,
        for the reductions."""
        b, code = self.b, self.code
        inputs, spill_loads, eqns, outputs, spills = code.plans[phase]
        env = dict(row_env)
        for k in inputs:
            env[id(code.args[k])] = _load(b, self.address(offsets, index, depth, k), code.args[k])
        spill_index = {id(v): self.first_spill + k for k, v in enumerate(code.spills)}
        for v in spill_loads:
            env[id(v)] = _load(b, self.address(offsets, index, depth, spill_index[id(v)]), v)
        for eqn in eqns:
            env[id(eqn.out)] = _lower(b, eqn, env, self.precise)
        for k, v in enumerate(code.kernel.outputs):
            if any(v is out for out in outputs):
                _store(b, env[id(v)], self.address(offsets, index, depth, self.first_output + k), v)
        for v in spills:
            _store(b, env[id(v)], self.address(offsets, index, depth, spill_index[id(v)]), v)
        return env


def _load(b, pointer, v):
    value = b.load(pointer)
    return b.icmp_signed("!=", value, ir.Constant(BYTE, 0)) if v.dtype.name == "bool" else value


def _store(b, value, pointer, v):
    b.store(b.zext(value, BYTE) if v.dtype.name == "bool" else value, pointer)


def _lower(b, eqn, env, precise: bool):
    """An equation on values already computed (one-element constants inline); a
    reshape between a row value's shapes changes nothing per row."""
    operands = [env[id(v)] if id(v) in env else _constant(v) for v in eqn.inputs]
    if eqn.prim is P.reshape:
        return operands[0]
    return emit(b, operands, eqn, precise)


def _is_scalar_constant(v) -> bool:
    """A constant of one element: inlined into the code (and written out in
    its description), whatever its shape, since a kernel's values are per
    element. Left as an operand, a row equation reading it inlined it anyway,
    and kernels that differed only in its value shared machine code."""
    return isinstance(v, Const) and v.value.size == 1


def _cost(eqn) -> int:
    """About how many arithmetic instructions an equation's lowering takes."""
    lowering = LOWERINGS.get(eqn.prim)
    return 10 if lowering is not None and lowering.approximated else 1


SPILL_COST = 4  # recomputing more than about this many operations costs more than a spill


BLOCK = 1024  # elements per partial sum in a reducing kernel


class Reducer:
    """How a fused reduction accumulates: sum, max or min, per element type."""

    def __init__(self, eqn):
        self.eqn = eqn
        self.kind = eqn.prim.name.removeprefix("reduce_")
        self.column = is_column_reduction(eqn)
        self.whole = is_whole_reduction(eqn)
        dtype = eqn.out.dtype
        self.type = llvm_type(dtype)
        self.floating = dtype.is_floating_point
        self.bytes = dtype.np.itemsize
        # Row totals of float sums are float64 (added once per block); column
        # accumulators stay in the element type, so their loop vectorizes
        # (numpy's own sums along a leading axis add rows in that type too).
        self.total_type = (
            ir.DoubleType()
            if self.kind == "sum" and self.floating and not self.column
            else self.type
        )
        self.identity = self._identity(self.type)
        self.total_identity = self._identity(self.total_type)
        self.start = self.total_identity.constant  # a column accumulator's first value

    def _identity(self, t):
        if self.kind == "sum":
            return ir.Constant(t, 0)
        if t == BOOL:
            return ir.Constant(t, 0 if self.kind == "max" else 1)
        if self.floating:
            return ir.Constant(t, float("-inf") if self.kind == "max" else float("inf"))
        bits = t.width - 1
        return ir.Constant(t, -(2**bits) if self.kind == "max" else 2**bits - 1)

    def combine(self, b, acc, value):
        if self.kind == "sum":
            # reassoc lets LLVM vectorize the sum; with nsz too, it also
            # cancelled x - x inside it, so a sum of x - x over inf or NaN gave 0
            return b.fadd(acc, value, flags=("reassoc",)) if self.floating else b.add(acc, value)
        if self.floating:  # NaN wins, as in numpy
            # a compare and a select: llvm.maximum's lowering for x86 was ten
            # times slower where the operands held infinities
            beyond = b.fcmp_ordered(">" if self.kind == "max" else "<", value, acc)
            beyond = b.or_(beyond, b.fcmp_unordered("uno", value, value))
            return b.select(beyond, value, acc)
        if acc.type == BOOL:
            return b.or_(acc, value) if self.kind == "max" else b.and_(acc, value)
        return b.select(b.icmp_signed(">" if self.kind == "max" else "<", value, acc), value, acc)

    @property
    def extremum_of_floats(self) -> bool:
        return self.floating and self.kind != "sum"

    # A float max or min that passes over NaN (which the caller tracks) runs
    # on integer keys ordered as the floats are, -0 below +0: LLVM vectorizes
    # an integer max's loop and ends it in a few shuffles, where
    # llvm.maximumnum's ended in a chain of sixteen scalar steps per row (most
    # of a short row's time, as in attention's softmax).

    @property
    def ordered_type(self):
        return ir.IntType(8 * self.bytes)

    @property
    def ordered_identity(self):
        infinity = np.array(-np.inf if self.kind == "max" else np.inf, f"f{self.bytes}")
        bits = int(infinity.view(f"i{self.bytes}"))
        flipped = bits ^ (1 << (8 * self.bytes - 1)) - 1 if bits < 0 else bits
        return ir.Constant(self.ordered_type, flipped)

    def ordered_key(self, b, value):
        """The float's bits with the magnitude bits of negatives flipped:
        signed integers in the floats' order (NaNs aside)."""
        return self._flip_negatives(b, b.bitcast(value, self.ordered_type))

    def from_ordered_key(self, b, key):
        return b.bitcast(self._flip_negatives(b, key), self.type)

    def _flip_negatives(self, b, bits):
        width = 8 * self.bytes
        sign = b.ashr(bits, ir.Constant(self.ordered_type, width - 1))
        return b.xor(bits, b.and_(sign, ir.Constant(self.ordered_type, (1 << (width - 1)) - 1)))

    def combine_ordered(self, b, acc, key):
        beyond = b.icmp_signed(">" if self.kind == "max" else "<", key, acc)
        return b.select(beyond, key, acc)

    def combine_total(self, b, total, partial):
        if self.kind == "sum" and self.floating:
            if partial.type != total.type:
                partial = b.fpext(partial, total.type)
            return b.fadd(total, partial)
        return self.combine(b, total, partial)

    def value(self, b, total):
        """The total in the element type (as later passes read it)."""
        value = b.fptrunc(total, self.type) if total.type != self.type else total
        dtype = self.eqn.out.dtype
        return round_to(b, value, dtype) if dtype.reduced else value

    def result(self, b, total):
        """The total as the output element is stored."""
        value = self.value(b, total)
        return b.zext(value, BYTE) if self.type == BOOL else value


def _constant(c):
    """A one-element constant operand as an LLVM constant."""
    value = c.value.item()
    if c.dtype.name in ("bool", "int64", "int32"):
        value = int(value)
    return ir.Constant(llvm_type(c.dtype), value)


def _range_guards(kernel) -> tuple:
    """For every equation whose fast lowering holds only over a range:
    equations computing whether its argument is beyond it, and their
    reductions over the whole kernel (a flag per launch)."""
    eqns, reductions = [], []
    for eqn in kernel.eqns:
        limit = LOWERINGS[eqn.prim].accurate_within
        if limit is None:
            continue
        (argument,) = eqn.inputs
        shape, dtype = argument.shape, argument.dtype
        magnitude, above, finite, beyond = (
            Var(shape, t) for t in (dtype, dtypes.bool_, dtypes.bool_, dtypes.bool_)
        )
        flag = Var((), dtypes.bool_)
        eqns += [  # the fast lowerings already give nan for inf
            Eqn(P.abs_, (argument,), {}, magnitude),
            Eqn(P.gt, (magnitude, Const(np.asarray(limit, dtype.np))), {}, above),
            Eqn(P.lt, (magnitude, Const(np.asarray(np.inf, dtype.np))), {}, finite),
            Eqn(P.logical_and, (above, finite), {}, beyond),
        ]
        reductions.append(
            Eqn(P.reduce_max, (beyond,), {"axes": tuple(range(len(argument.shape)))}, flag)
        )
    return eqns, reductions
