"""Running a graph as native kernels: fused elementwise kernels compiled with
LLVM, and the other equations (matrix products as BLAS calls, reductions,
gathers, not yet lowered primitives) through their numpy implementations.

The first run for a layout of the inputs goes step by step and records how
each kernel was launched; it becomes a plan. In a plan, consecutive kernels
that each run in one native call become one driver call, their buffers
planned once: values that leave the run get fresh arrays, the others live
at planned offsets of a workspace that is reused from call to call, where
values whose lifetimes do not overlap share bytes.
"""

from __future__ import annotations

from math import prod

import numpy as np

from ..codegen.driver import Call, Driver, Fill
from ..codegen.kernels import KernelCode
from ..codegen.lowering import can_lower, can_lower_per_row
from ..ir.fusion import Kernel, partition
from ..ir.graph import Const, Graph, Var, run_equation

ALIGNMENT = 64  # bytes: a cache line, and a whole vector register


class Executor:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.steps = [
            KernelCode(step) if isinstance(step, Kernel) else step.eqn
            for step in partition(graph, can_lower, per_row=can_lower_per_row)
        ]
        # An intermediate is dropped after the last step that reads it (or
        # at once, if none does), so its memory goes back while the program
        # runs rather than when it ends.
        self.last_reader: dict = {}
        for index, step in enumerate(self.steps):
            for v in _reads(step):
                self.last_reader[v] = index
            for v in _writes(step):
                self.last_reader.setdefault(v, index)
        self.outputs = {v for v in graph.outputs if isinstance(v, Var)}
        self.dead_after: list = [[] for _ in self.steps]
        for v, index in self.last_reader.items():
            if v not in self.outputs:
                self.dead_after[index].append(v)
        self.plans: dict = {}  # layouts of the inputs -> Plan

    @property
    def kernels(self) -> list:
        return [step for step in self.steps if isinstance(step, KernelCode)]

    def run(self, inputs: list) -> list:
        key = tuple([(a.dtype, a.shape, a.strides) for a in inputs])
        plan = self.plans.get(key)
        if plan is not None:
            outputs = plan.run(inputs)
            if outputs is not None:
                return outputs
            return self.run_steps(inputs)
        layouts: dict = {}
        outputs = self.run_steps(inputs, layouts)
        self.plans[key] = Plan(self, layouts)
        return outputs

    def run_steps(self, inputs: list, layouts: dict | None = None) -> list:
        """Every step in turn; ``layouts`` records the layout of every value."""
        env = dict(zip(self.graph.inputs, inputs))

        def read(v):
            return v.value if isinstance(v, Const) else env[v]

        for step, dead in zip(self.steps, self.dead_after):
            if isinstance(step, KernelCode):
                outputs = step([read(v) for v in step.args])
                env.update(zip(step.results, outputs))
            else:
                env[step.out] = run_equation(step, [read(v) for v in step.inputs])
            if layouts is not None:
                layouts.update((v, _layout(a)) for v, a in env.items() if v not in layouts)
                if isinstance(step, KernelCode):
                    layouts[step] = step.native_launch([read(v) for v in step.args])
            for v in dead:
                env.pop(v, None)
        return [read(v) for v in self.graph.outputs]


class Plan:
    """The steps for one layout of the inputs, consecutive native kernel
    launches merged into segments run by one driver call each, compiled to
    a Python function (``source``) so a run is straight-line code. Values
    are numbered when planning: inputs first, then constants, then what
    each step makes (a step's results side by side)."""

    def __init__(self, executor: Executor, layouts: dict):
        graph, steps = executor.graph, executor.steps
        self.slot = {v: k for k, v in enumerate(graph.inputs)}
        self.num_inputs = len(graph.inputs)
        self.constants: dict = {}  # slot -> value
        for v in [v for step in steps for v in _inputs_of(step)] + graph.outputs:
            if isinstance(v, Const) and v not in self.slot:
                self.constants[len(self.slot)] = v.value
                self._add_slot(v)
        self.items: list = []  # (step, slots read, slots written, slots dead after)
        run: list = []
        for index, step in enumerate(steps):
            if isinstance(step, KernelCode) and layouts.get(step) is not None:
                run.append(index)
                continue
            if run:
                self._add_segment(executor, run, layouts)
                run = []
            self._add(step, _inputs_of(step), _writes(step), executor.dead_after[index])
        if run:
            self._add_segment(executor, run, layouts)
        if self.items:
            step, reads, writes, _ = self.items[-1]
            self.items[-1] = (step, reads, writes, [])  # the list goes at the end anyway
        self.output_slots = [self.slot[v] for v in graph.outputs]
        self.run = self._compile()

    def __str__(self) -> str:
        """One line per call a run makes: a driver and the kernels it runs,
        a kernel launched on its own (in numpy when tiny, split across the
        cores when large), or a numpy step."""
        lines = []
        for step, *_ in self.items:
            if isinstance(step, Segment):
                names = ", ".join(k.name for k in step.kernels)
                lines.append(f"  one native call: {names} (workspace {step.workspace_bytes} B)")
            elif isinstance(step, KernelCode):
                lines.append(f"  kernel on its own: {step.name}")
            else:
                lines.append(f"  numpy: {step.prim.name}")
        return "\n".join(lines)

    def _add_slot(self, v) -> None:
        self.slot[v] = len(self.slot)

    def _add(self, step, reads: list, writes: list, dead: list) -> None:
        first = len(self.slot)
        for v in writes:
            self._add_slot(v)
        self.items.append(
            (
                step,
                [self.slot[v] for v in reads],
                slice(first, len(self.slot)),
                [self.slot[v] for v in dead if v in self.slot],
            )
        )

    def _add_segment(self, executor: Executor, indices: list, layouts: dict) -> None:
        # values of earlier segments are arrays made in the planned layout
        made = {v for step, *_ in self.items if type(step) is Segment for v in step.fresh}
        segment = Segment(executor, indices, layouts, made)
        dead = [v for index in indices for v in executor.dead_after[index]]
        self._add(segment, segment.reads, segment.fresh, dead)

    def _compile(self):
        """The plan as a Python function of the inputs: one statement per
        call, values in local variables, everything else bound in. Returns
        None when a value's layout or a range flag leaves the plan."""
        bound = {"empty": np.empty, "uint8": np.uint8, "run_equation": run_equation}
        bound.update((f"v{k}", value) for k, value in self.constants.items())
        inputs = "".join(f"v{k}, " for k in range(self.num_inputs))
        lines = ["def run(inputs):", f"    {inputs}= inputs" if inputs else "    pass"]
        for n, (step, reads, writes, dead) in enumerate(self.items):
            args = [f"v{k}" for k in reads]
            outputs = [f"v{k}" for k in range(writes.start, writes.stop)]
            listed, unpacked = ", ".join(args), "".join(o + ", " for o in outputs)
            if type(step) is Segment:
                lines += _segment_lines(step, n, args, outputs, bound)
            elif type(step) is KernelCode:
                bound[f"kernel{n}"] = step
                lines.append(f"    {unpacked}= kernel{n}([{listed}])")
            else:
                bound[f"eqn{n}"] = step
                lines.append(f"    {unpacked}= [run_equation(eqn{n}, [{listed}])]")
            if dead:
                lines.append(f"    del {', '.join(f'v{k}' for k in dead)}")
        lines.append(f"    return [{', '.join(f'v{k}' for k in self.output_slots)}]")
        self.source = "\n".join(lines)
        exec(compile(self.source, "<fusegrad plan>", "exec"), bound)
        return bound["run"]


def _segment_lines(segment, n: int, args: list, outputs: list, bound: dict) -> list:
    """A driver call: layout checks of values numpy steps made, a workspace
    from the segment's pool, fresh arrays for the values that leave it."""
    lines = []
    for k, expected in segment.checks:
        bound[f"layout{n}_{k}"] = expected
        a = args[k]
        lines.append(f"    if ({a}.dtype.char, {a}.shape, {a}.strides) != layout{n}_{k}:")
        lines.append("        return None")
    bound[f"free{n}"] = segment.free_workspaces
    bound[f"driver{n}"] = segment.driver.call
    lines += [
        "    try:  # a workspace per concurrent call",
        f"        workspace = free{n}.pop()",
        "    except IndexError:",
        f"        workspace = empty({segment.workspace_bytes}, uint8)",
        "    try:",
    ]
    for j, (output, (shape, dtype)) in enumerate(zip(outputs, segment.fresh_arrays)):
        bound[f"shape{n}_{j}"], bound[f"dtype{n}_{j}"] = shape, dtype
        lines.append(f"        {output} = empty(shape{n}_{j}, dtype{n}_{j})")
    operands = "".join(f"{a}, " for a in args + ["workspace"] + outputs)
    lines += [
        f"        raised = driver{n}(({operands}))",
        "    finally:",
        f"        free{n}.append(workspace)",
        "    if raised:",
        "        return None",
    ]
    return lines


class Segment:
    """Consecutive kernels run by one driver. The driver's arrays: the values
    read from before the segment, the workspace, then the fresh values."""

    def __init__(self, executor: Executor, indices: list, layouts: dict, made: set):
        kernels = [executor.steps[k] for k in indices]
        last = indices[-1]
        produced = {}  # value -> (shape, dtype) of its array
        for kernel in kernels:
            shapes, _ = kernel.fresh_arrays()
            produced.update(zip(_fresh_values(kernel), shapes))
        self.reads = list(
            dict.fromkeys(v for kernel in kernels for v in kernel.args if v not in produced)
        )
        # values numpy steps computed must have the layout they had when planned
        known = set(executor.graph.inputs) | made
        self.checks = [
            (k, layouts[v])
            for k, v in enumerate(self.reads)
            if isinstance(v, Var) and v not in known
        ]
        self.fresh = [
            v for v in produced if v in executor.outputs or executor.last_reader.get(v, last) > last
        ]
        self.fresh_arrays = [produced[v] for v in self.fresh]
        workspace = len(self.reads)
        items = self.reads + [None] + self.fresh
        place = {v: (k, 0) for k, v in enumerate(items) if v is not None}
        inside = [v for v in produced if v not in place]
        spans = _spans(kernels, inside)
        offsets, self.workspace_bytes = _pack(
            [(v, _nbytes(*produced[v]), spans[v]) for v in inside]
        )
        place.update((v, (workspace, offset)) for v, offset in offsets.items())
        calls, flags = [], []
        for kernel in kernels:
            function, head, end = layouts[kernel]
            fresh = _fresh_values(kernel)
            shapes, column_starts = kernel.fresh_arrays()
            fills = tuple(
                Fill(place[fresh[k]], fresh[k].dtype, prod(shapes[k][0]), start)
                for k, start in column_starts
            )
            operands = [place[v] for v in kernel.args + fresh]
            calls.append(Call(function, head, end, tuple(operands), fills))
            flags += [place[v] for v in _guard_flags(kernel)]
        self.driver = Driver(calls, flags)
        self.kernels = kernels
        self.free_workspaces: list = []


def _fresh_values(kernel: KernelCode) -> list:
    """The values of a kernel's fresh arrays, in operand order (spill rows
    and range flags are values only the kernel reads)."""
    return kernel.results + _guard_flags(kernel) + kernel.spills


def _guard_flags(kernel: KernelCode) -> list:
    return [r.eqn.out for r in kernel.reducers[kernel.num_reductions :]]


def _spans(kernels: list, values: list) -> dict:
    """For each value, the positions of the first and the last kernel that
    touches it; range flags are read at the end."""
    spans = {}
    flags = {v for kernel in kernels for v in _guard_flags(kernel)}
    for position, kernel in enumerate(kernels):
        for v in kernel.args + _fresh_values(kernel):
            first, _ = spans.get(v, (position, position))
            spans[v] = (first, len(kernels) if v in flags else position)
    return {v: spans[v] for v in values}


def _pack(wanted: list) -> tuple:
    """Byte offsets for (value, bytes, (first, last)) so that values alive at
    once never share bytes: largest first, each at the lowest offset free
    over its span. Returns (offsets, total bytes)."""
    offsets, placed, total = {}, [], 0
    for v, size, (first, last) in sorted(wanted, key=lambda w: -w[1]):
        size = _aligned(size)
        busy = sorted((start, end) for start, end, a, b in placed if a <= last and first <= b)
        offset = 0
        for start, end in busy:
            if offset + size <= start:
                break
            offset = max(offset, end)
        offsets[v] = offset
        placed.append((offset, offset + size, first, last))
        total = max(total, offset + size)
    return offsets, total


def describe_layouts(key: tuple) -> str:
    """A plan's key (the inputs' dtypes, shapes and strides), for reading."""
    return ", ".join(f"{dtype}{list(shape)} strides {strides}" for dtype, shape, strides in key)


def _layout(a) -> tuple:
    return (a.dtype.char, a.shape, a.strides)


def _nbytes(shape: tuple, dtype) -> int:
    return prod(shape) * np.dtype(dtype).itemsize


def _aligned(size: int) -> int:
    return -(-size // ALIGNMENT) * ALIGNMENT


def _inputs_of(step) -> list:
    return list(step.args if isinstance(step, KernelCode) else step.inputs)


def _reads(step) -> list:
    return [v for v in _inputs_of(step) if isinstance(v, Var)]


def _writes(step) -> list:
    return step.results if isinstance(step, KernelCode) else [step.out]
