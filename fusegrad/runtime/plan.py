"""Plans: a program's steps for one layout of its inputs, as straight-line
Python, with consecutive native kernel launches merged into one driver call.

Values are numbered when planning (inputs, constants, then each step's
results side by side) and live in local variables of the plan's function.
In a segment (a run of kernels one driver calls), values that leave the
segment get fresh arrays; the others, and each kernel's scratch (spill rows,
range flags), live at planned offsets of a workspace reused from call to
call, where what is never alive at once shares bytes. A plan checks itself
when it is built (every operand fits where it is placed, nothing alive at
once overlaps) and, at run time, that values numpy made still have the
layout it was planned for; when they do not, or a range flag rises, ``run``
returns None and the caller runs the steps one by one.
"""

from __future__ import annotations

import ctypes
from math import prod

import numpy as np

from ..codegen.driver import Call, Fill, compile_driver, driver_sizes
from ..ir.graph import Const, Var
from .addresses import DATA_OFFSET, ITEMS_OFFSET
from .launch import KernelBoundsError, Launcher, contiguous, layout_of
from .routines import run_equation

ALIGNMENT = 64  # bytes: a cache line, and a whole vector register
WRITTEN = ("output", "row output", "reduction")  # roles whose arrays hold values
SCRATCH = ("flag", "spill")  # roles whose arrays only the kernel itself reads


class PlanError(RuntimeError):
    """A plan broke one of its own invariants: a bug in fusegrad."""


class Plan:
    """The steps of ``executor`` for the input layouts its first run saw
    (``layouts``: the layout of every value that run made)."""

    def __init__(self, executor, layouts: dict):
        graph, steps = executor.graph, executor.steps
        self.slot = {v: k for k, v in enumerate(graph.inputs)}
        self.num_inputs = len(graph.inputs)
        # slots after the inputs' (one var is two inputs when a tensor was passed twice)
        self.slots_used = self.num_inputs
        self.constants: dict = {}  # slot -> value
        for v in [v for step in steps for v in step_inputs(step)] + graph.outputs:
            if isinstance(v, Const) and v not in self.slot:
                self.constants[self.slots_used] = v.value
                self.slot[v] = self.slots_used
                self.slots_used += 1
        # What the plan itself guarantees: the layouts of what its segments make.
        self.planned: dict = {}
        self.items: list = []  # (step, slots read, slots written, slots dead after)
        run: list = []  # consecutive steps that are native launches: (index, Launch)
        for index, step in enumerate(steps):
            if isinstance(step, Launcher):
                argument_layouts = tuple(self._layout(v, layouts) for v in step.args)
                launch = step.native(argument_layouts)
                if launch is not None:
                    run.append((index, launch))
                    for op in step.code.operands:
                        if op.role in WRITTEN:
                            self.planned[op.value] = contiguous(op.dtype.np, op.shape)
                    continue
            if run:
                self._add_segment(executor, run, layouts)
                run = []
            self._add(step, step_inputs(step), step_results(step), executor.dead_after[index])
        if run:
            self._add_segment(executor, run, layouts)
        if self.items:
            step, reads, writes, _ = self.items[-1]
            self.items[-1] = (step, reads, writes, [])  # the list goes at the end anyway
        self.output_slots = [self.slot[v] for v in graph.outputs]
        self.input_layouts = [layouts[v] for v in graph.inputs]
        self.tensor_functions: dict = {}  # see tensor_function
        self.run = self._compile()

    def __str__(self) -> str:
        """One line per call a run makes: a driver and the kernels it runs,
        a kernel launched on its own (in numpy when tiny, split across the
        cores when large), or a numpy step."""
        lines = []
        for step, *_ in self.items:
            if isinstance(step, Segment):
                names = ", ".join(k.name for k in step.launchers)
                lines.append(f"  one native call: {names} (workspace {step.workspace_bytes} B)")
            elif isinstance(step, Launcher):
                lines.append(f"  kernel on its own: {step.name}")
            else:
                lines.append(f"  numpy: {step.prim.name}")
        return "\n".join(lines)

    def _layout(self, v, layouts: dict) -> tuple:
        if isinstance(v, Const):
            return layout_of(v.value)
        return self.planned.get(v) or layouts[v]

    def _add(self, step, reads: list, writes: list, dead: list) -> None:
        first = self.slots_used
        for v in writes:
            self.slot[v] = self.slots_used
            self.slots_used += 1
        self.items.append(
            (
                step,
                [self.slot[v] for v in reads],
                slice(first, self.slots_used),
                [self.slot[v] for v in dead if v in self.slot],
            )
        )

    def _add_segment(self, executor, run: list, layouts: dict) -> None:
        indices = [index for index, _ in run]
        read_layouts = {
            v: self._layout(v, layouts) for index in indices for v in executor.steps[index].args
        }
        known = set(executor.graph.inputs) | set(self.planned)
        segment = Segment(executor, run, read_layouts, known)
        dead = [v for index in indices for v in executor.dead_after[index]]
        self._add(segment, segment.reads, segment.fresh, dead)

    def _compile(self):
        """The plan as a Python function of the inputs: one statement per
        call, values in local variables, everything else bound in. Returns
        None when a value's layout or a range flag leaves the plan; the
        results of the collectives it ran are then in ``communicated``."""
        bound: dict = {}
        inputs = "".join(f"v{k}, " for k in range(self.num_inputs))
        lines = [
            "def run(inputs, communicated):",
            f"    {inputs}= inputs" if inputs else "    pass",
            *self._body(bound),
            f"    return [{', '.join(f'v{k}' for k in self.output_slots)}]",
        ]
        self.source = "\n".join(lines)
        exec(compile(self.source, "<fusegrad plan>", "exec"), bound)
        return bound["run"]

    def tensor_function(self, arguments: list, output_dtypes: list, tensor_type):
        """The plan as a function of a call's arguments, for a program they
        alone decide: each must be a ``tensor_type`` (the caller's tensor
        class: the runtime knows arrays only) of the (dtype, requires_grad)
        in ``arguments`` whose array has the layout planned for; the
        outputs come back as tensors of ``output_dtypes``. It returns None
        for other arguments, or when a range flag stops the run (the caller
        then takes the checked path). Checks, launches and outputs are one
        function: a tiny program's call costs what its Python statements do.
        Made once per ``arguments``: calls that alternate between programs
        ask for it again on every hit."""
        key = (tuple(arguments), tuple(output_dtypes))
        function = self.tensor_functions.get(key)
        if function is None:
            function = self._tensor_function(arguments, output_dtypes, tensor_type)
            self.tensor_functions[key] = function
        return function

    def _tensor_function(self, arguments: list, output_dtypes: list, tensor_type):
        bound = {"Tensor": tensor_type, "make": tensor_type._make}
        n = self.num_inputs
        lines = ["def run(args):", f"    if len(args) != {n}:", "        return None"]
        if n:
            lines.append(f"    {''.join(f't{k}, ' for k in range(n))}= args")
        for k, ((dtype, requires_grad), layout) in enumerate(zip(arguments, self.input_layouts)):
            bound[f"dtype{k}"] = dtype
            bound[f"array_dtype{k}"], bound[f"shape{k}"], bound[f"strides{k}"] = layout
            lines += [
                f"    if not isinstance(t{k}, Tensor) or t{k}._dtype is not dtype{k}"
                f" or t{k}._requires_grad is not {requires_grad}:",
                "        return None",
                f"    v{k} = t{k}._data",
                f"    if v{k}.shape != shape{k} or v{k}.strides != strides{k}"
                f" or v{k}.dtype != array_dtype{k}:",
                "        return None",
            ]
        lines += self._body(bound, communicated=False)
        bound.update((f"output_dtype{j}", dtype) for j, dtype in enumerate(output_dtypes))
        slots = self.output_slots[: len(output_dtypes)]
        made = ", ".join(f"make(v{k}, output_dtype{j})" for j, k in enumerate(slots))
        lines.append(f"    return [{made}]")
        source = "\n".join(lines)
        exec(compile(source, "<fusegrad plan of tensors>", "exec"), bound)
        return bound["run"]

    def _body(self, bound: dict, communicated: bool = True) -> list:
        """The statements running the plan's steps on values v0, v1, ... (the
        inputs already bound): returning None where the plan stops. What
        they call is put in ``bound``. Without ``communicated``, the
        collectives' results are not kept for a run that continues step by
        step."""
        bound.update(empty=np.empty, uint8=np.uint8, run_equation=run_equation)
        bound.update((f"v{k}", value) for k, value in self.constants.items())
        lines = []
        for n, (step, reads, writes, dead) in enumerate(self.items):
            args = [f"v{k}" for k in reads]
            outputs = [f"v{k}" for k in range(writes.start, writes.stop)]
            listed, unpacked = ", ".join(args), "".join(o + ", " for o in outputs)
            if type(step) is Segment:
                lines += step.lines(n, args, outputs, bound)
            elif type(step) is Launcher:
                bound[f"kernel{n}"] = step
                lines.append(f"    {unpacked}= kernel{n}([{listed}])")
            elif step.prim.collective and communicated:  # kept for a run that goes on step by step
                bound[f"eqn{n}"] = step
                lines.append(
                    f"    {unpacked}= communicated[eqn{n}] = [run_equation(eqn{n}, [{listed}])]"
                )
            else:
                bound[f"eqn{n}"] = step
                lines.append(f"    {unpacked}= [run_equation(eqn{n}, [{listed}])]")
            if dead:
                lines.append(f"    del {', '.join(f'v{k}' for k in dead)}")
        return lines


class Segment:
    """Consecutive kernels run by one driver. The driver's arrays: the values
    read from before the segment, the workspace, then the fresh values."""

    def __init__(self, executor, run: list, read_layouts: dict, known: set):
        indices = [index for index, _ in run]
        self.launchers = [executor.steps[index] for index in indices]
        self.launches = [launch for _, launch in run]
        last = indices[-1]
        written = {}  # value -> its operand, for each value a kernel here writes
        for launcher in self.launchers:
            for op in launcher.code.operands:
                if op.role in WRITTEN:
                    written[op.value] = op
        self.reads = list(
            dict.fromkeys(v for k in self.launchers for v in k.args if v not in written)
        )
        # values numpy steps computed must have the layout they had when planned
        self.checks = [
            (k, read_layouts[v])
            for k, v in enumerate(self.reads)
            if isinstance(v, Var) and v not in known
        ]
        self.fresh = [
            v for v in written if v in executor.outputs or executor.last_reader.get(v, last) > last
        ]
        self.fresh_arrays = [(written[v].shape, written[v].dtype.np) for v in self.fresh]
        self._place(written)
        self._verify(read_layouts)
        self.checked = self.launches[0].checked
        if any(launch.checked != self.checked for launch in self.launches):
            raise PlanError("bounds-checked and unchecked kernels in one driver")
        self.error = np.zeros(4, np.int64)
        self.calls, flags = self._calls()
        table = [self.error.ctypes.data] if self.checked else []
        for launch in self.launches:
            table += [ctypes.cast(launch.function, ctypes.c_void_p).value, *launch.head]
        table += driver_sizes(self.calls, flags)
        self._table = (ctypes.c_void_p * len(table))(*table)
        self.table_address = ctypes.c_void_p(ctypes.addressof(self._table))
        self.driver = compile_driver(self.calls, flags, self.checked, ITEMS_OFFSET, DATA_OFFSET)
        self.free_workspaces: list = []

    def _place(self, written: dict) -> None:
        """Where each operand lives: ``place`` maps a value (or a kernel's
        scratch) to (driver array, byte offset)."""
        workspace = len(self.reads)
        place = {v: (k, 0) for k, v in enumerate(self.reads)}
        place.update((v, (workspace + 1 + k, 0)) for k, v in enumerate(self.fresh))
        self.inside = self._workspace_entries(written, place)
        offsets, self.workspace_bytes = _pack(self.inside)
        place.update((key, (workspace, offset)) for key, offset in offsets.items())
        self.place = place

    def _calls(self) -> tuple:
        """The driver's calls (operands, column accumulators to fill first)
        and where the range flags are."""
        calls, flags = [], []
        for position, (launcher, launch) in enumerate(zip(self.launchers, self.launches)):
            operands, fills = [], []
            for k, op in enumerate(launcher.code.operands):
                where = self.place[_key(position, k, op)]
                operands.append(where)
                if op.start is not None:
                    fills.append(Fill(where, op.dtype, prod(op.shape), op.start))
                if op.role == "flag":
                    flags.append(where)
            calls.append(Call(tuple(operands), launch.end, tuple(fills)))
        return calls, flags

    def _workspace_entries(self, written: dict, place: dict) -> list:
        """(key, bytes, (first, last) positions alive) of everything in the
        workspace: values that stay in the segment and each kernel's scratch
        (spill rows live during their kernel; range flags until the end,
        where the driver reads them)."""
        spans: dict = {}
        sizes: dict = {}
        for position, launcher in enumerate(self.launchers):
            for k, op in enumerate(launcher.code.operands):
                key = _key(position, k, op)
                if key in place or isinstance(key, Const):
                    continue
                first, _ = spans.get(key, (position, position))
                spans[key] = (first, len(self.launchers) if op.role == "flag" else position)
                sizes[key] = prod(op.shape) * op.dtype.np.itemsize
        return [(key, sizes[key], spans[key]) for key in spans]

    def _verify(self, read_layouts: dict) -> None:
        """Every operand fits where it is placed, and nothing in the
        workspace overlaps what is alive at the same time."""
        sizes = {key: size for key, size, _ in self.inside}
        for position, launcher in enumerate(self.launchers):
            for k, op in enumerate(launcher.code.operands):
                key = _key(position, k, op)
                item, offset = self.place[key]
                needed = prod(op.shape) * op.dtype.np.itemsize
                if key in sizes:
                    room = _aligned(sizes[key])
                    if offset % ALIGNMENT or offset + room > self.workspace_bytes:
                        raise PlanError(
                            f"{launcher.name}: operand {k} placed outside the workspace"
                        )
                elif item < len(self.reads):
                    dtype, shape, _ = read_layouts[key]
                    room = prod(shape) * dtype.itemsize
                    if shape != op.shape or dtype != op.dtype.np:
                        raise PlanError(f"{launcher.name}: operand {k} read with another layout")
                else:
                    shape, dtype = self.fresh_arrays[item - len(self.reads) - 1]
                    room = prod(shape) * dtype.itemsize
                if needed > room:
                    raise PlanError(f"{launcher.name}: operand {k} needs {needed} B of {room}")
        placed = [(self.place[key][1], size, span) for key, size, span in self.inside]
        for n, (start, size, (first, last)) in enumerate(placed):
            for other_start, other_size, (other_first, other_last) in placed[:n]:
                alive_together = first <= other_last and other_first <= last
                overlap = start < other_start + other_size and other_start < start + size
                if alive_together and overlap and size and other_size:
                    raise PlanError("two values alive at once share workspace bytes")

    def lines(self, n: int, args: list, outputs: list, bound: dict) -> list:
        """The plan's statements for this segment: layout checks of values
        numpy steps made, a workspace from the segment's pool, fresh arrays
        for the values that leave it, the driver call."""
        lines = []
        for k, expected in self.checks:
            bound[f"layout{n}_{k}"] = expected
            a = args[k]
            lines.append(f"    if ({a}.dtype, {a}.shape, {a}.strides) != layout{n}_{k}:")
            lines.append("        return None")
        bound[f"free{n}"] = self.free_workspaces
        bound[f"driver{n}"] = self.driver
        bound[f"table{n}"] = self.table_address
        bound[f"segment{n}"] = self
        if self.checked:
            lines.append(f"    segment{n}.error[:] = 0")
        lines += [
            "    try:  # a workspace per concurrent call",
            f"        workspace = free{n}.pop()",
            "    except IndexError:",
            f"        workspace = empty({self.workspace_bytes}, uint8)",
            "    try:",
        ]
        for j, (output, (shape, dtype)) in enumerate(zip(outputs, self.fresh_arrays)):
            bound[f"shape{n}_{j}"], bound[f"dtype{n}_{j}"] = shape, dtype
            lines.append(f"        {output} = empty(shape{n}_{j}, dtype{n}_{j})")
        operands = "".join(f"{a}, " for a in args + ["workspace"] + outputs)
        lines += [
            f"        status = driver{n}(table{n}, ({operands}))",
            "    finally:",
            f"        free{n}.append(workspace)",
            "    if status:",
            f"        return segment{n}.stopped(status)",
        ]
        return lines

    def stopped(self, status: int) -> None:
        """After a driver call that did not finish: None (a range flag rose:
        the steps run one by one), or the bounds error a kernel reported."""
        if status == 2:
            _, k, index, call = (int(x) for x in self.error)
            launcher, launch = self.launchers[call], self.launches[call]
            raise launcher.bounds_error(k, index, launch)
        return None

    @property
    def kernels(self) -> list:
        return [launcher.code for launcher in self.launchers]


def _key(position: int, k: int, op):
    """What an operand holds: its value, or this kernel's own scratch."""
    return (position, k) if op.role in SCRATCH else op.value


def _pack(wanted: list) -> tuple:
    """Byte offsets for (key, bytes, (first, last)) so that what is alive at
    once never shares bytes: largest first, each at the lowest offset free
    over its span. Returns (offsets, total bytes)."""
    offsets, placed, total = {}, [], 0
    for key, size, (first, last) in sorted(wanted, key=lambda w: -w[1]):
        size = _aligned(size)
        busy = sorted((start, end) for start, end, a, b in placed if a <= last and first <= b)
        offset = 0
        for start, end in busy:
            if offset + size <= start:
                break
            offset = max(offset, end)
        offsets[key] = offset
        placed.append((offset, offset + size, first, last))
        total = max(total, offset + size)
    return offsets, total


def _aligned(size: int) -> int:
    return -(-size // ALIGNMENT) * ALIGNMENT


def step_inputs(step) -> list:
    return list(step.args if isinstance(step, Launcher) else step.inputs)


def step_results(step) -> list:
    return step.results if isinstance(step, Launcher) else [step.out]


__all__ = ["KernelBoundsError", "Plan", "PlanError"]
