"""``torch._dynamo.explain(f)(*args)``: what compiling ``f`` for these
arguments makes, from ``fusegrad.jit``'s own trace (``lower``). fusegrad
compiles a call whole or not at all: one graph, its guards (what would make
it trace again) listed as ``out_guards``; or, where the trace cannot be
made, no graph and the reason, for the call runs eagerly."""

from __future__ import annotations

import dataclasses
import functools

from ..nn.modules.module import Module
from ..tracer.jit import JitFunction, jit
from ..tracer.trace import TracingError


@dataclasses.dataclass
class ExplainOutput:
    graphs: list  # the programs, as fusegrad.jit's lower() gives them
    graph_count: int
    graph_break_count: int
    break_reasons: list  # why a call runs eagerly
    op_count: int
    ops_per_graph: list  # each graph's operations, by primitive name
    out_guards: list  # what each graph's reuse depends on

    def __str__(self) -> str:
        lines = [
            f"Graph Count: {self.graph_count}",
            f"Graph Break Count: {self.graph_break_count}",
            f"Op Count: {self.op_count}",
            "Break Reasons:",
        ]
        for k, reason in enumerate(self.break_reasons, 1):
            lines += [f"  Break Reason {k}:", f"    Reason: {reason}"]
        lines.append("Ops per Graph:")
        for k, ops in enumerate(self.ops_per_graph, 1):
            lines += [f"  Ops {k}:"] + [f"    {op}" for op in ops]
        lines.append("Out Guards:")
        lines += [f"  Guard {k}: {guard}" for k, guard in enumerate(self.out_guards, 1)]
        return "\n".join(lines) + "\n"


def explain(f, *extra_args, **extra_kwargs):
    """A function of the arguments, returning their ``ExplainOutput``;
    ``f``, the arguments, captured tensors and ``.grad`` are left as they were."""

    @functools.wraps(f)
    def explain_call(*args, **kwargs) -> ExplainOutput:
        function = (
            f if isinstance(f, JitFunction) else jit(f.__call__ if isinstance(f, Module) else f)
        )
        try:
            lowered = function.lower(*args, *extra_args, **kwargs, **extra_kwargs)
        except TracingError as error:
            return ExplainOutput([], 0, 1, [str(error)], 0, [], [])
        ops = [eqn.prim.name for eqn in lowered.program.forward.eqns]
        guards = lowered.program.guard_reasons()
        return ExplainOutput([lowered], 1, 0, [], len(ops), [ops], guards)

    return explain_call
