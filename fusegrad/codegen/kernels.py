"""Fused elementwise kernels: LLVM IR for a loop nest over the iteration shape.

Every operand is addressed through element strides, so broadcast (stride 0),
transposed and sliced inputs are read in place. Before a launch the operands
are checked (dtype, broadcastable shape, strides in whole elements) and
adjacent dimensions that are contiguous for every operand are merged. A
kernel is compiled per layout: the number of merged dimensions and, for each
operand, whether its innermost stride is 0, 1 or something else; the
innermost loop then has constant strides and vectorizes.
"""

from __future__ import annotations

import ctypes
import hashlib
from pathlib import Path

import numpy as np
from llvmlite import ir

from .. import timing
from ..ir import dtypes
from ..ir import primitives as P
from ..ir.fusion import is_column_reduction, is_whole_reduction
from ..ir.graph import Const, Eqn, Var, run_equation
from . import parallel
from .lowering import APPROXIMATED, BOOL, FAST_RANGE, LOWERINGS, llvm_type
from .target import CompiledModule

I64 = ir.IntType(64)
BYTE = ir.IntType(8)


def _memory_type(dtype):
    return BYTE if dtype.name == "bool" else llvm_type(dtype)


def layout(shape: tuple, arrays: list, split: int | None = None) -> tuple:
    """(merged shape, element strides per operand, stride classes, how many
    merged dimensions come before ``split``) for a launch. Dimensions merge
    when contiguous for every operand, never across ``split`` (the boundary
    between a reduction's kept and reduced dimensions). Raises ValueError
    when an operand does not fit the iteration shape."""
    ndim = len(shape)
    split = ndim if split is None else split
    strides = []
    for a in arrays:
        if a.ndim > ndim or any(s not in (1, t) for s, t in zip(a.shape[::-1], shape[::-1])):
            raise ValueError(f"operand of shape {a.shape} does not broadcast to {shape}")
        padded = (0,) * (ndim - a.ndim) + tuple(
            0 if s == 1 and t != 1 else st // a.itemsize
            for s, t, st in zip(a.shape, shape[ndim - a.ndim :], a.strides)
        )
        strides.append(padded)
    merged_shape, merged, before_split = [], [[] for _ in arrays], 0
    for region_index, region in enumerate((range(split), range(split, ndim))):
        start = len(merged_shape)
        for d in region:
            if shape[d] == 1:
                continue
            if len(merged_shape) > start and all(
                m[-1] == s[d] * shape[d] for m, s in zip(merged, strides)
            ):
                merged_shape[-1] *= shape[d]
                for m, s in zip(merged, strides):
                    m[-1] = s[d]
                continue
            merged_shape.append(shape[d])
            for m, s in zip(merged, strides):
                m.append(s[d])
        if region_index == 0:
            before_split = len(merged_shape)
    if (split < ndim and len(merged_shape) == before_split) or not merged_shape:
        # an inner loop of one: all the dimensions to reduce (or all) were size 1
        merged_shape.append(1)
        for m in merged:
            m.append(0)
    classes = tuple(m[-1] if m[-1] in (0, 1) else "s" for m in merged)
    return tuple(merged_shape), merged, classes, before_split


class KernelCode:
    """One fused kernel, compiled for each operand layout it meets.

    A launch's pointer arguments, in order: the inputs (in kernel
    coordinates), the inputs read per row (in row coordinates), the
    elementwise outputs, the per-row outputs, the reductions' arrays (range
    flags last) and the spill rows (see ``_spills``)."""

    def __init__(self, kernel):
        self.kernel = kernel
        # 0-d constants become LLVM constants; every other input is an argument
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
        outside = {v for e in kernel.row_eqns for v in e.inputs if isinstance(v, Var)}
        self.read_per_row = [
            k
            for k, v in enumerate(self.args)
            if k >= self.first_row_arg or (v in outside and v not in kernel.phase)
        ]
        self.spills = self._spills()
        self.plans = [self._plan(p) for p in range(self.last_phase + 1)]
        self.num_reductions = len(kernel.reductions)
        self._arena = self._plan_arena()
        self._layouts: list = []  # shape and stride arrays launches point into
        self.variants: dict = {}  # (ndim, stride classes) -> compiled function
        self.launches: dict = {}  # operand layouts -> how to launch
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
        operands and equations, with values numbered in order of appearance
        and 0-d constants written out."""
        numbers: dict = {}

        def name(v):
            if _is_scalar_constant(v):
                return f"{v.value.item()!r}:{v.dtype.name}"
            number = numbers.setdefault(id(v), len(numbers))
            return f"%{number}:{v.dtype.name}{list(v.shape)}"

        kernel = self.kernel
        lines = [
            " ".join(["args", *map(name, self.args), f"rows from {self.first_row_arg}"]),
            " ".join(["outputs", *map(name, kernel.outputs)]),
            " ".join(["row outputs", *map(name, kernel.row_outputs)]),
        ]
        for part, eqns in (("", kernel.eqns), ("row ", kernel.row_eqns), ("", kernel.reductions)):
            for e in eqns:
                params = sorted(e.params.items())
                operands = " ".join(map(name, e.inputs))
                lines.append(f"{part}{name(e.out)} = {e.prim.name}{params} {operands}")
        return "\n".join(lines)

    @property
    def llvm_ir(self) -> str:
        """The optimized LLVM IR of every layout compiled so far."""
        return "\n".join(m.optimized_ir for m in self.modules)

    @property
    def asm(self) -> str:
        return "\n".join(m.asm for m in self.modules)

    @property
    def results(self) -> list:
        """The values a launch returns: elementwise outputs, per-row outputs,
        then reductions."""
        kernel = self.kernel
        return kernel.outputs + kernel.row_outputs + [r.out for r in kernel.reductions]

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

    def _allocate(self, empty: bool = False):
        """Output arrays, the reductions' arrays and the spill rows, and
        their addresses. When they are small they share one allocation, so
        one address is asked of numpy instead of one per array (a ctypes
        address costs about a microsecond, as much as a small kernel). For a
        launch over nothing (``empty``) the reductions' arrays hold their
        starting values: nothing will store into them."""
        kernel, shape = self.kernel, self.kernel.shape
        if self._arena is not None and not empty:
            total, places, fills = self._arena
            buffer = np.empty(total, np.uint8)
            base = buffer.ctypes.data
            fresh = [np.ndarray(shape, dtype, buffer, offset) for shape, dtype, offset in places]
            for k, value in fills:
                fresh[k].fill(value)
            addresses = [base + offset for _, _, offset in places]
        else:
            fresh = [np.empty(shape, v.dtype.np) for v in kernel.outputs]
            fresh += [np.empty(v.shape, v.dtype.np) for v in kernel.row_outputs]
            fresh += self._reduction_arrays() + self._spill_rows()
            addresses = [a.ctypes.data for a in fresh]
        outputs = len(kernel.outputs) + len(kernel.row_outputs)
        sums = outputs + len(self.reducers)
        return fresh[:outputs], fresh[outputs:sums], fresh[sums:], addresses

    def fresh_arrays(self) -> tuple:
        """(shape, dtype) of every array a launch writes, in operand order
        (outputs, per-row outputs, the reductions' arrays, spill rows), and
        (index, first value) of the column accumulators among them."""
        kernel, shape, split = self.kernel, self.kernel.shape, self.split
        wanted = [(shape, v.dtype.np) for v in kernel.outputs]
        wanted += [(v.shape, v.dtype.np) for v in kernel.row_outputs]
        fills = []
        for r, (dims, dtype, start) in zip(self.reducers, self._reduction_specs()):
            if r.column:
                fills.append((len(wanted), start))
            wanted.append((dims, dtype))
        wanted += [(shape[split:], v.dtype.np) for v in self.spills]
        return wanted, fills

    def _plan_arena(self):
        """(bytes, (shape, dtype, offset) per fresh array, (index, first
        value) per column accumulator), or None when they are too big to share
        one allocation usefully."""
        wanted, fills = self.fresh_arrays()
        places, total = [], 0
        for dims, dtype in wanted:
            places.append((dims, dtype, total))
            total += -(-int(np.prod(dims)) * dtype.itemsize // 64) * 64  # whole cache lines
        return (total, places, fills) if total <= ARENA_BYTES else None

    def _reduction_specs(self) -> list:
        """(shape, dtype, first value) of each reduction's array: results
        for row and whole reductions; for column reductions accumulators
        starting at the identity, which the kernel adds every row into."""
        shape, split = self.kernel.shape, self.split
        return [
            (
                shape[split:] if r.column else () if r.whole else shape[:split],
                r.eqn.out.dtype.np,
                r.start if r.column else 0,
            )
            for r in self.reducers
        ]

    def _reduction_arrays(self) -> list:
        return [np.full(dims, start, dtype) for dims, dtype, start in self._reduction_specs()]

    def _spill_rows(self) -> list:
        return [np.empty(self.kernel.shape[self.split :], v.dtype.np) for v in self.spills]

    def __call__(self, arrays: list) -> list:
        key = tuple([(a.dtype.char, a.shape, a.strides) for a in arrays])
        launch = self.launches.get(key)
        if launch is None:
            launch = self.launches[key] = self._prepare(arrays)
        if launch is _SMALL:
            return self._numpy(arrays)
        outputs, sums, spills, addresses = self._allocate(empty=launch is _EMPTY)
        if launch is not _EMPTY:
            self._launch(launch, arrays, outputs, sums, spills, addresses)
        reductions = sums[: self.num_reductions]
        if self.guards and any(sums[self.num_reductions :]):
            return self._numpy(arrays)  # an argument beyond a fast lowering's range
        return outputs + reductions

    def _launch(self, launch, arrays, outputs, sums, spills, addresses) -> None:
        """Runs every chunk of the outermost loop, each on a core. Reductions
        that chunks would share (columns, sums of everything) get fresh
        arrays per chunk, combined afterwards; spill rows are per chunk."""
        function, head, chunks, private = launch
        inputs = [a.ctypes.data for a in arrays]
        if len(chunks) == 1:
            function(*head, *chunks[0], *inputs, *addresses)
            return
        shared = inputs + addresses[: len(outputs)]
        calls, partials, buffers = [], [], []  # buffers: alive until the calls return
        for n, (begin, end) in enumerate(chunks):
            own = sums
            if n:
                fresh = self._reduction_arrays()
                own = [f if p else a for f, a, p in zip(fresh, sums, private)]
                partials.append(own)
                spills = self._spill_rows()
            buffers.append(spills)
            mine = [a.ctypes.data for a in own + spills]
            calls.append((*head, begin, end, *shared, *mine))
        parallel.run(function, calls)
        for own in partials:
            for reducer, total, partial, p in zip(self.reducers, sums, own, private):
                if p:
                    reducer.merge(total, partial)
        if partials and self.kernel.row_eqns and all(private):  # its one row was split
            self._rows_from_totals(arrays + outputs, sums)

    def _rows_from_totals(self, shared: list, sums: list) -> None:
        """The row equations of a kernel whose one row was split into
        chunks: each chunk computed them from its partial totals, so they
        are computed again, in numpy, from the combined ones."""
        kernel = self.kernel
        env = {id(v): a for v, a in zip(self.args, shared)}
        env.update((id(r.out), a) for r, a in zip(kernel.reductions, sums))
        _run_in_numpy(kernel.row_eqns, env)
        for v, a in zip(kernel.row_outputs, shared[len(self.args) + len(kernel.outputs) :]):
            a[...] = env[id(v)]

    def native_launch(self, arrays: list):
        """(function, layout addresses, end of the outermost loop): how one
        native call runs this layout, or None when it runs otherwise (in
        numpy, over nothing, or in chunks on several cores)."""
        launch = self.launches.get(tuple([(a.dtype.char, a.shape, a.strides) for a in arrays]))
        if launch is None or launch is _SMALL or launch is _EMPTY:
            return None
        function, head, chunks, _ = launch
        return (function, head, chunks[0][1]) if len(chunks) == 1 else None

    def _prepare(self, arrays: list):
        """Checks the operands once per layout and picks how to run it."""
        kernel = self.kernel
        for v, a in zip(self.args, arrays):
            if a.dtype != v.dtype.np:
                raise TypeError(
                    f"{self.name}: operand of dtype {a.dtype} where {v.dtype.name} was compiled"
                )
            if any(s % a.itemsize for s in a.strides):
                raise ValueError(f"{self.name}: operand strides {a.strides} are not whole elements")
        outputs, sums, spills, _ = self._allocate()
        kept, ndim = kernel.shape[: self.split], len(kernel.shape)

        def per_row(a):  # row coordinates -> kernel coordinates
            leading = len(kept) - a.ndim
            if leading < 0:
                raise ValueError(f"{self.name}: per-row operand of shape {a.shape} for rows {kept}")
            return a.reshape((1,) * leading + a.shape + (1,) * (ndim - len(kept)))

        arrays = arrays[: self.first_row_arg] + [per_row(a) for a in arrays[self.first_row_arg :]]
        in_rows = kept + (1,) * (ndim - len(kept))  # a per-row value in kernel coordinates
        outputs = outputs[: len(kernel.outputs)] + [
            a.reshape(in_rows) for a in outputs[len(kernel.outputs) :]
        ]
        sums = [
            a if r.column else a.reshape((1,) * ndim if r.whole else in_rows)
            for a, r in zip(sums, self.reducers)
        ]
        shape, strides, classes, first = layout(
            kernel.shape, arrays + outputs + sums + spills, self.split
        )
        if any(s == 0 for s in kernel.shape):
            return _EMPTY
        eqns = len(self.ordered)
        if eqns <= SMALL_EQNS and int(np.prod(kernel.shape)) * (eqns + 1) < SMALL_WORK:
            return _SMALL
        variant = (len(shape), classes, first)
        function = self.variants.get(variant)
        if function is None:
            function = self.variants[variant] = self._compile(*variant)
        # Chunks split the outermost loop; rows kept there are each one
        # chunk's, anything summed across it is per chunk and combined.
        private = [r.column or r.whole or first == 0 for r in self.reducers]
        per_element = sum(_cost(e) for e in self.body) + 1
        work = int(np.prod(kernel.shape)) * per_element * (self.last_phase + 1)
        chunks = [(0, shape[0])]
        if work >= PARALLEL_WORK and not (first == 0 and self.last_phase):  # a pass needs all
            count = min(parallel.thread_count(), shape[0])
            step = -(-shape[0] // count)
            if len(shape) == 1:  # whole cache lines and blocks per chunk
                step = -(-step // BLOCK) * BLOCK
            chunks = [(s, min(s + step, shape[0])) for s in range(0, shape[0], step)]
        self._layouts.append((np.array(shape, np.int64), np.array(strides, np.int64)))
        head = tuple(a.ctypes.data for a in self._layouts[-1])
        return function, head, chunks, private

    def _numpy(self, arrays: list) -> list:
        """The kernel's equations one by one in numpy: cheaper than a launch
        when there is this little to compute."""
        env = {id(v): a for v, a in zip(self.args, arrays)}
        _run_in_numpy(self.ordered, env)
        return [env[id(v)] for v in self.results]

    # ------------------------------------------------------------------ codegen

    def generate(self, ndim: int, classes: tuple, first: int, symbol: str = "kernel") -> str:
        """The LLVM IR of this kernel for one operand layout: ``ndim`` merged
        dimensions, each operand's innermost stride class, and how many
        dimensions a row reduction keeps (``first``)."""
        kernel = self.kernel
        module = ir.Module(name=self.name)
        operands = (
            self.args
            + kernel.outputs
            + kernel.row_outputs
            + [r.eqn.out for r in self.reducers]
            + self.spills
        )
        pointer_types = [_memory_type(v.dtype).as_pointer() for v in operands]
        signature = ir.FunctionType(
            ir.VoidType(), [I64.as_pointer(), I64.as_pointer(), I64, I64] + pointer_types
        )
        function = ir.Function(module, signature, name=symbol)
        for arg in function.args:
            if isinstance(arg.type, ir.PointerType):
                arg.add_attribute("noalias")
        shape_ptr, stride_ptr, begin, end, *pointers = function.args
        b = ir.IRBuilder(function.append_basic_block("entry"))
        dims = [b.load(b.gep(shape_ptr, [ir.Constant(I64, d)])) for d in range(ndim)]
        stride = [
            [b.load(b.gep(stride_ptr, [ir.Constant(I64, k * ndim + d)])) for d in range(ndim)]
            for k in range(len(operands))
        ]
        bounds = [(ir.Constant(I64, 0), d) for d in dims]
        bounds[0] = (begin, end)  # this launch's chunk of the outermost loop
        emitter = _Emitter(self, b, function, pointers, bounds, stride, classes, first)
        for reducer in self.wholes:
            b.store(reducer.total_identity, emitter.totals[id(reducer)])
        emitter.nest(0, [ir.Constant(I64, 0)] * len(operands), None if self.rows else 0, {})
        for reducer in self.wholes:
            total = b.load(emitter.totals[id(reducer)])
            b.store(reducer.result(b, total), pointers[emitter.position[id(reducer)]])
        b.ret_void()
        return str(module)

    def _compile(self, ndim: int, classes: tuple, first: int):
        arity = len(self.args) + len(self.results) + len(self.guards) + len(self.spills)

        def build_ir(symbol):
            with timing.phase("kernel IR"):
                return self.generate(ndim, classes, first, symbol)

        description = f"{self.description()}\nlayout {ndim} {classes} {first}"
        function = compile_kernel(build_ir, description, arity)
        self.modules.append(function.module)
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
        lives; its stride there is a constant 0 or 1 unless its class says
        otherwise."""
        b, cls = self.b, self.classes[k]
        if cls == 0:
            position = offsets[k]
        elif cls == 1:
            position = b.add(offsets[k], index)
        else:
            position = b.add(offsets[k], b.mul(index, self.stride[k][depth]))
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
            env[id(code.args[k])] = _load(b, b.gep(self.pointers[k], [offsets[k]]), code.args[k])
        for phase in range(code.last_phase + 1):
            running = [r for r in code.rows if r.phase == phase]
            for reducer in running:
                b.store(reducer.total_identity, self.totals[id(reducer)])
            self.nest(self.first, offsets, phase, env)
            for reducer in running:
                total = b.load(self.totals[id(reducer)])
                k = self.position[id(reducer)]
                b.store(reducer.result(b, total), b.gep(self.pointers[k], [offsets[k]]))
                env[id(reducer.eqn.out)] = reducer.value(b, total)
            for eqn in kernel.row_eqns:
                if code.phase[eqn.out] == phase + 1:
                    env[id(eqn.out)] = _lower(b, eqn, env)
            for k, v in enumerate(kernel.row_outputs):
                if code.phase[v] == phase + 1:
                    j = self.first_row_output + k
                    _store(b, env[id(v)], b.gep(self.pointers[j], [offsets[j]]), v)

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
        partial = []
        for reducer in reducers:
            phi = b.phi(reducer.type)
            phi.add_incoming(reducer.identity, header)
            partial.append(phi)
        env = self.element(offsets, index, depth, phase, row_env)
        self.accumulate_columns(offsets, index, depth, phase, env)
        updated = []
        for reducer, phi in zip(reducers, partial):
            updated.append(reducer.combine(b, phi, env[id(reducer.eqn.inputs[0])]))
            phi.add_incoming(updated[-1], b.block)  # element code may have branched
        following = b.add(index, ir.Constant(I64, 1))
        index.add_incoming(following, b.block)
        b.cbranch(b.icmp_signed("<", following, stop), body, after)
        b.position_at_end(after)
        for reducer, value in zip(reducers, updated):
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
            env[id(eqn.out)] = _lower(b, eqn, env)
        for k, v in enumerate(code.kernel.outputs):
            if any(v is out for out in outputs):
                _store(b, env[id(v)], self.address(offsets, index, depth, self.first_output + k), v)
        for v in spills:
            _store(b, env[id(v)], self.address(offsets, index, depth, spill_index[id(v)]), v)
        return env


def _run_in_numpy(eqns: list, env: dict) -> None:
    """Each equation on the arrays in ``env`` (by id of value), adding its result."""
    for eqn in eqns:
        env[id(eqn.out)] = run_equation(
            eqn, [env[id(v)] if id(v) in env else v.value for v in eqn.inputs]
        )


def _load(b, pointer, v):
    value = b.load(pointer)
    return b.icmp_signed("!=", value, ir.Constant(BYTE, 0)) if v.dtype.name == "bool" else value


def _store(b, value, pointer, v):
    b.store(b.zext(value, BYTE) if v.dtype.name == "bool" else value, pointer)


def _lower(b, eqn, env):
    """An equation on values already computed (0-d constants inline); a
    reshape between a row value's shapes changes nothing per row."""
    operands = [env[id(v)] if id(v) in env else _constant(v) for v in eqn.inputs]
    return operands[0] if eqn.prim is P.reshape else LOWERINGS[eqn.prim](b, operands, eqn)


def _is_scalar_constant(v) -> bool:
    return isinstance(v, Const) and v.value.ndim == 0


def _cost(eqn) -> int:
    """About how many arithmetic instructions an equation's lowering takes."""
    return 10 if eqn.prim in APPROXIMATED else 1


SPILL_COST = 4  # recomputing more than about this many operations costs more than a spill


BLOCK = 1024  # elements per partial sum in a reducing kernel
ARENA_BYTES = 1 << 20  # a launch's fresh arrays up to this size share one allocation
# From this many element-operations on (see _cost), a launch is split across
# the cores: handing a chunk to another thread costs some 50-60 us here, so
# a split pays from about 0.3 ms of work on one core (measured: a tanh kernel
# of 131k elements, 1.8M operations, was slower on two cores, one of 262k
# faster; a multiply-add broke even at 524k elements, 1.5M operations).
PARALLEL_WORK = 1 << 21
# A launch costs about as much Python work as SMALL_EQNS numpy calls on small
# arrays: a kernel with no more equations, below SMALL_WORK element-operations,
# runs them in numpy.
SMALL_EQNS = 4
SMALL_WORK = 2048
_EMPTY, _SMALL = object(), object()


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
            return (
                b.fadd(acc, value, flags=("reassoc", "nsz")) if self.floating else b.add(acc, value)
            )
        if self.floating:  # NaN wins, as in numpy
            name = "llvm.maximum" if self.kind == "max" else "llvm.minimum"
            signature = ir.FunctionType(acc.type, [acc.type, acc.type])
            return b.call(b.module.declare_intrinsic(name, [acc.type], signature), [acc, value])
        if acc.type == BOOL:
            return b.or_(acc, value) if self.kind == "max" else b.and_(acc, value)
        return b.select(b.icmp_signed(">" if self.kind == "max" else "<", value, acc), value, acc)

    def combine_total(self, b, total, partial):
        if self.kind == "sum" and self.floating:
            if partial.type != total.type:
                partial = b.fpext(partial, total.type)
            return b.fadd(total, partial)
        return self.combine(b, total, partial)

    def merge(self, total, partial) -> None:
        """Combines another chunk's result into ``total`` (numpy arrays)."""
        if self.kind == "sum":
            np.add(total, partial, out=total)
        elif self.kind == "max":
            np.maximum(total, partial, out=total)
        else:
            np.minimum(total, partial, out=total)

    def value(self, b, total):
        """The total in the element type (as later passes read it)."""
        return b.fptrunc(total, self.type) if total.type != self.type else total

    def result(self, b, total):
        """The total as the output element is stored."""
        value = self.value(b, total)
        return b.zext(value, BYTE) if self.type == BOOL else value


def _constant(c):
    """A 0-d constant operand as an LLVM constant."""
    value = c.value.item()
    if c.dtype.name in ("bool", "int64", "int32"):
        value = int(value)
    return ir.Constant(llvm_type(c.dtype), value)


_compiled: dict = {}  # description -> function: identical kernels compile once
# What machine code depends on beside a kernel's description: the generator.
_GENERATOR = hashlib.sha256(
    b"".join(
        (Path(__file__).parent / name).read_bytes()
        for name in ("kernels.py", "lowering.py", "mathfns.py")
    )
).hexdigest()


def compile_kernel(build_ir, description: str, arity: int):
    """The kernel's function: (shape, strides, chunk begin, chunk end, and
    ``arity`` operand pointers). ``build_ir`` returns the kernel's LLVM IR,
    which ``description`` determines: it is called only when neither this
    process nor the disk cache has the machine code."""
    key = f"{_GENERATOR}\n{description}"
    function = _compiled.get(key)
    if function is None:
        symbol = "kernel_" + hashlib.sha256(key.encode()).hexdigest()[:24]
        module = CompiledModule(lambda: build_ir(symbol), key)
        chunk = [ctypes.c_int64] * 2
        prototype = ctypes.CFUNCTYPE(
            None, *([ctypes.c_void_p] * 2 + chunk + [ctypes.c_void_p] * arity)
        )
        function = prototype(module.address(symbol))
        function.module = module  # keeps the machine code alive with the function
        _compiled[key] = function
    return function


def _range_guards(kernel) -> tuple:
    """For every equation whose fast lowering holds only over a range:
    equations computing whether its argument is beyond it, and their
    reductions over the whole kernel (a flag per launch)."""
    eqns, reductions = [], []
    for eqn in kernel.eqns:
        limit = FAST_RANGE.get(eqn.prim)
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
