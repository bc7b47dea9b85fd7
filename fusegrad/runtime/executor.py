"""Running a graph as native kernels: fused elementwise kernels compiled with
LLVM, and the other equations (matrix products as BLAS calls, reductions,
gathers, not yet lowered primitives) through their numpy implementations."""

from __future__ import annotations

from ..codegen.kernels import KernelCode
from ..codegen.lowering import can_lower, can_lower_per_row
from ..ir.fusion import Kernel, partition
from ..ir.graph import Const, Graph, Var, run_equation


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
        last_reader: dict = {}
        for index, step in enumerate(self.steps):
            for v in _reads(step):
                last_reader[v] = index
            for v in _writes(step):
                last_reader.setdefault(v, index)
        outputs = {v for v in graph.outputs if isinstance(v, Var)}
        self.dead_after: list = [[] for _ in self.steps]
        for v, index in last_reader.items():
            if v not in outputs:
                self.dead_after[index].append(v)

    @property
    def kernels(self) -> list:
        return [step for step in self.steps if isinstance(step, KernelCode)]

    def run(self, inputs: list) -> list:
        env = dict(zip(self.graph.inputs, inputs))

        def read(v):
            return v.value if isinstance(v, Const) else env[v]

        for step, dead in zip(self.steps, self.dead_after):
            if isinstance(step, KernelCode):
                outputs = step([read(v) for v in step.args])
                env.update(zip(step.results, outputs))
            else:
                env[step.out] = run_equation(step, [read(v) for v in step.inputs])
            for v in dead:
                env.pop(v, None)
        return [read(v) for v in self.graph.outputs]


def _reads(step) -> list:
    inputs = step.args if isinstance(step, KernelCode) else step.inputs
    return [v for v in inputs if isinstance(v, Var)]


def _writes(step) -> list:
    return step.results if isinstance(step, KernelCode) else [step.out]
