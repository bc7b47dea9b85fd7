"""Running a graph: fused kernels through their launchers, the other
equations (matrix products as BLAS calls, gathers, primitives with no
lowering) through their numpy implementations.

The first run for a layout of the inputs goes step by step and notes the
layout of every value; it becomes a ``Plan`` that later runs with those
input layouts follow.
"""

from __future__ import annotations

from math import prod

from ..codegen.kernels import KernelCode
from ..codegen.lowering import can_lower, can_lower_per_row
from ..ir import primitives as P
from ..ir.fusion import Kernel, group_into_kernels, reductions_in_two_steps
from ..ir.graph import Const, Graph, Var
from ..ir.shapes import is_symbolic
from . import packed_gemm, routines, threads
from .launch import Launcher, layout_of
from .plan import Plan, step_inputs, step_results
from .routines import run_equation


def grouped(graph: Graph) -> list:
    """The graph's equations grouped into kernels (``ir/fusion.py``): what
    codegen can lower fused, the rest one equation a step."""
    return group_into_kernels(reductions_in_two_steps(graph), can_lower, per_row=can_lower_per_row)


def lowered(steps: list) -> tuple:
    """Each kernel's code (``codegen/kernels.py``) behind a launcher, and
    whether the program owns the cores (runs BLAS on one thread)."""
    # OpenBLAS's threads spin on the cores for a while after each matrix
    # product: beside products, a kernel's chunk on another core waits
    # for one, so only far more work is worth splitting. A program whose
    # products are mostly fusegrad's routines (a LeNet's convolutions)
    # runs BLAS on one thread instead, and splits routines and kernels.
    blas, own = _multiply_adds([s.eqn for s in steps if not isinstance(s, Kernel)])
    owns_cores = own > blas
    beside_blas = blas > 0 and not owns_cores
    launched = [
        Launcher(KernelCode(step), beside_blas) if isinstance(step, Kernel) else step.eqn
        for step in steps
    ]
    return launched, owns_cores


class Executor:
    """A graph's steps, run: the first run for a layout of the inputs goes
    step by step and makes that layout's ``Plan``."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.steps, self.owns_cores = lowered(grouped(graph))
        # An intermediate is dropped after the last step that reads it (or
        # at once, if none does), so its memory goes back while the program
        # runs rather than when it ends.
        self.last_reader: dict = {}
        for index, step in enumerate(self.steps):
            for v in step_inputs(step):
                if isinstance(v, Var):
                    self.last_reader[v] = index
            for v in step_results(step):
                self.last_reader.setdefault(v, index)
        self.outputs = {v for v in graph.outputs if isinstance(v, Var)}
        self.dead_after: list = [[] for _ in self.steps]
        for v, index in self.last_reader.items():
            if v not in self.outputs:
                self.dead_after[index].append(v)
        self.plans: dict = {}  # layouts of the inputs -> Plan

    @property
    def kernels(self) -> list:
        return [step.code for step in self.steps if isinstance(step, Launcher)]

    def run(self, inputs: list) -> list:
        if self.owns_cores:
            with threads.own_cores():
                return self._run(inputs)
        return self._run(inputs)

    def _run(self, inputs: list) -> list:
        key = tuple([layout_of(a) for a in inputs])
        plan = self.plans.get(key)
        if plan is not None:
            communicated: dict = {}
            outputs = plan.run(inputs, communicated)
            if outputs is not None:
                return outputs
            return self.run_steps(inputs, communicated=communicated)
        layouts: dict = {}
        outputs = self.run_steps(inputs, layouts)
        self.plans[key] = Plan(self, layouts)
        return outputs

    def plan_for(self, inputs: list):
        """The plan for inputs of these layouts; None before a run made one."""
        return self.plans.get(tuple([layout_of(a) for a in inputs]))

    def run_steps(
        self, inputs: list, layouts: dict | None = None, communicated: dict | None = None
    ) -> list:
        """Every step in turn; ``layouts`` records the layout of every value.
        ``communicated``: the results of collectives a plan ran before it
        stopped, which this run takes rather than communicate again (the
        other processes ran them once)."""
        env = dict(zip(self.graph.inputs, inputs))

        def read(v):
            return v.value if isinstance(v, Const) else env[v]

        if layouts is not None:
            layouts.update((v, layout_of(a)) for v, a in env.items())
        for step, dead in zip(self.steps, self.dead_after):
            if isinstance(step, Launcher):
                outputs = step([read(v) for v in step.args])
                env.update(zip(step.results, outputs))
            elif communicated and step in communicated:
                outputs = communicated[step]
                env[step.out] = outputs[0]
            else:
                outputs = [run_equation(step, [read(v) for v in step.inputs])]
                env[step.out] = outputs[0]
            if layouts is not None:
                layouts.update((v, layout_of(a)) for v, a in zip(step_results(step), outputs))
            for v in dead:
                env.pop(v, None)
        return [read(v) for v in self.graph.outputs]


def _multiply_adds(eqns: list) -> tuple:
    """The multiply-adds of the matrix products among ``eqns`` that BLAS
    computes, and of those fusegrad's routines compute (stacked small
    products, convolutions); BLAS's are taken as infinite where a size is
    symbolic."""
    blas = own = 0
    for eqn in eqns:
        if eqn.prim not in _PRODUCTS:
            continue
        *operands, out = shapes = [v.shape for v in (*eqn.inputs, eqn.out)]
        if any(is_symbolic(shape) for shape in shapes):
            blas = float("inf")
            continue
        if eqn.prim is P.matmul:
            work = prod(out) * operands[0][-1]
            per_matrix = work // max(prod(out[:-2]), 1)
            small = len(operands[1]) >= 3 and per_matrix <= routines.MAX_PRODUCT
            if not small and not packed_gemm.runs_packed(*operands):
                blas += work
                continue
        elif eqn.prim is P.windows_matmul:
            work = prod(out) * operands[0][1]
        elif eqn.prim is P.windows_dots:
            work = prod(operands[0]) * out[1]
        else:  # fold_matmul
            work = prod(operands[1]) * operands[0][1]
        own += work
    return blas, own


_PRODUCTS = frozenset([P.matmul, P.windows_matmul, P.windows_dots, P.fold_matmul])


def describe_layouts(key: tuple) -> str:
    """A plan's key (the inputs' dtypes, shapes and strides), for reading."""
    return ", ".join(f"{dtype}{list(shape)} strides {strides}" for dtype, shape, strides in key)
