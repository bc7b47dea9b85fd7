"""Running a graph as native kernels: fused elementwise kernels compiled with
LLVM, and the other equations (matrix products as BLAS calls, reductions,
gathers, not yet lowered primitives) through their numpy implementations."""

from __future__ import annotations

from ..codegen.kernels import KernelCode
from ..codegen.lowering import can_lower, can_lower_per_row
from ..ir.fusion import Kernel, partition
from ..ir.graph import Const, Graph, run_equation


class Executor:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.steps = [
            KernelCode(step) if isinstance(step, Kernel) else step.eqn
            for step in partition(graph, can_lower, per_row=can_lower_per_row)
        ]

    @property
    def kernels(self) -> list:
        return [step for step in self.steps if isinstance(step, KernelCode)]

    def run(self, inputs: list) -> list:
        env = dict(zip(self.graph.inputs, inputs))

        def read(v):
            return v.value if isinstance(v, Const) else env[v]

        for step in self.steps:
            if isinstance(step, KernelCode):
                outputs = step([read(v) for v in step.args])
                env.update(zip(step.results, outputs))
            else:
                env[step.out] = run_equation(step, [read(v) for v in step.inputs])
        return [read(v) for v in self.graph.outputs]
