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
    launches merged into segments run by one driver call each. Values live
    in a list, at slots numbered when planning: inputs first, then
    constants, then what each step makes (a step's results side by side)."""

    def __init__(self, executor: Executor, layouts: dict):
        graph, steps = executor.graph, executor.steps
        self.slot = {v: k for k, v in enumerate(graph.inputs)}
        self.rest: list = []  # the slots after the inputs, as a run starts them
        for v in [v for step in steps for v in _inputs_of(step)] + graph.outputs:
            if isinstance(v, Const) and v not in self.slot:
                self._add_slot(v, v.value)
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

    def _add_slot(self, v, value=None) -> None:
        self.slot[v] = len(self.slot)
        self.rest.append(value)

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

    def run(self, inputs: list):
        """The outputs, or None when a value's layout or a range flag leaves the plan."""
        env = inputs + self.rest
        for step, reads, writes, dead in self.items:
            arrays = [env[k] for k in reads]
            if type(step) is Segment:
                results = step.run(arrays)
                if results is None:
                    return None
            elif type(step) is KernelCode:
                results = step(arrays)
            else:
                results = [run_equation(step, arrays)]
            env[writes] = results
            for k in dead:
                env[k] = None
        return [env[k] for k in self.output_slots]


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
                Fill(place[fresh[k]], fresh[k].dtype, _count(shapes[k][0]), start)
                for k, start in column_starts
            )
            operands = [place[v] for v in kernel.args + fresh]
            calls.append(Call(function, head, end, tuple(operands), fills))
            flags += [place[v] for v in _guard_flags(kernel)]
        self.driver = Driver(calls, flags)
        self.kernels = kernels
        self.free_workspaces: list = []

    def run(self, reads: list):
        """The fresh values, or None when planned layouts no longer hold or
        a range flag was raised."""
        for k, expected in self.checks:
            if _layout(reads[k]) != expected:
                return None
        free = self.free_workspaces
        try:  # a workspace per concurrent call
            workspace = free.pop()
        except IndexError:
            workspace = np.empty(self.workspace_bytes, np.uint8)
        try:
            fresh = [np.empty(shape, dtype) for shape, dtype in self.fresh_arrays]
            raised = self.driver.call((*reads, workspace, *fresh))
        finally:
            free.append(workspace)
        return None if raised else fresh


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
    return _count(shape) * np.dtype(dtype).itemsize


def _count(shape: tuple) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _aligned(size: int) -> int:
    return -(-size // ALIGNMENT) * ALIGNMENT


def _inputs_of(step) -> list:
    return list(step.args if isinstance(step, KernelCode) else step.inputs)


def _reads(step) -> list:
    return [v for v in _inputs_of(step) if isinstance(v, Var)]


def _writes(step) -> list:
    return step.results if isinstance(step, KernelCode) else [step.out]
