"""Programs for every size of a dynamic dimension, from one trace.

A trace with dynamic dimensions (tracer/symbolic.py) records, beside this
call's equations, each value's shape and each size parameter as polynomials
in symbols, and what Python decided on sizes (size guards). A call reads its
sizes from its arguments, checks the size guards, and runs the program made
for those sizes: made from the trace (its shapes and parameters evaluated,
then the adjoint, the passes and the kernels as for any trace) the first
time the sizes occur, without running the Python function again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..ir.graph import Eqn, format_graph
from ..runtime import threads
from .compiled import Program
from .symbolic import COMPARISONS, SymInt, evaluate_poly, format_poly, map_sizes

SIZES_KEPT = 16  # programs, one per binding of the symbols; the least recently used go first


class DynamicProgram:
    """The programs of one trace with dynamic sizes, one per binding of its
    symbols. ``symbol_dims``: (argument position, dimension, symbol);
    ``size_guards``: (polynomial, comparison with 0, outcome, description)."""

    state = None  # python_state.State: what a call checks and redoes of Python state

    def __init__(self, trace, args: list, output_tensors: list, jit):
        self.trace, self.args, self.output_tensors, self.jit = trace, args, output_tensors, jit
        self.symbol_dims = trace.symbol_dims
        self.size_guards = trace.size_guards
        self.symbol_count = len(trace.symbol_hints)
        self._fixed_leaves: list = []
        self.failure = None
        self._programs: OrderedDict = OrderedDict()  # binding -> Program
        self._lock = threading.Lock()
        threads.renew_in_forked_child(self)
        trace.written_grads()  # now, while the leaves hold what the trace wrote
        self.traced = self.program_for(tuple(trace.symbol_hints))
        self.draw_specs = self.traced.draw_specs

    @property
    def pinned(self) -> set:
        """The symbols whose value Python needed (an ``int()`` of a size, an
        index): for them the program holds at this call's value alone."""
        return {
            symbol
            for guard in self.size_guards
            if guard.needed
            for monomial, _ in guard.difference
            for symbol in monomial
        }

    @property
    def pinned_because(self) -> str:
        """Where Python needed sizes' values, for the recompile log."""
        places = dict.fromkeys(guard.where for guard in self.size_guards if guard.needed)
        return "; ".join(list(places)[:3])

    def binding(self, args: list):
        """The symbols' values in this call, or None (``failure`` says why)."""
        values = [None] * self.symbol_count
        for position, dim, symbol in self.symbol_dims:
            size = args[position]._data.shape[dim]
            if values[symbol] is None:
                if size < 2:
                    self.failure = f"argument {position} dimension {dim} is {size}"
                    return None
                values[symbol] = size
            elif values[symbol] != size:
                self.failure = (
                    f"argument {position} dimension {dim} is {size}, no longer the size "
                    f"s{symbol} = {values[symbol]} it equalled when traced"
                )
                return None
        for guard in self.size_guards:
            value = evaluate_poly(guard.difference, values)
            if COMPARISONS[guard.comparison](value, 0) != guard.outcome:
                self.failure = f"{guard.where}: {_shown(guard)} is no longer {guard.outcome}"
                return None
        return tuple(values)

    def forked_in_child(self) -> None:
        self._lock = threading.Lock()

    def program_for(self, binding: tuple) -> Program:
        with self._lock:
            program = self._programs.get(binding)
            if program is None:
                program = Program(
                    self.trace.instantiated(binding), self.args, self.output_tensors, self.jit
                )
                program.fixed_leaves = self._fixed_leaves
                self._programs[binding] = program
                if len(self._programs) > SIZES_KEPT:
                    self._programs.popitem(last=False)
            else:
                self._programs.move_to_end(binding)
            return program

    @property
    def fixed_leaves(self) -> list:
        return self._fixed_leaves

    @fixed_leaves.setter
    def fixed_leaves(self, leaves: list) -> None:
        """Number arguments keyed by value (see ``Program``), for every size."""
        self._fixed_leaves = leaves
        for program in self._programs.values():
            program.fixed_leaves = leaves

    def run(self, args: list, draws=None, call=((), {})):
        leaves = args
        if self._fixed_leaves:
            leaves = list(args)
            for position, number in self._fixed_leaves:
                leaves.insert(position, number)
        binding = self.binding(leaves)
        if binding is None:
            return None
        program = self.program_for(binding)
        outputs = program.run(args, draws, call)
        if outputs is None:
            self.failure = program.failure
        return outputs

    # what jit and Lowered read: the program of the traced sizes

    def guard_reasons(self) -> list:
        return [g.where for g in self.size_guards] + self.traced.guard_reasons()

    def python_guards_hold(self) -> bool:
        return self.traced.python_guards_hold()

    def warm_up(self, args: list, call=((), {})) -> None:
        self.traced.warm_up(args, call)

    @property
    def traced_ir(self) -> str:
        """The function as traced, its shapes and size parameters in the
        symbols (``f32[s0,784]``): what every size's program is made from."""
        trace = self.trace
        graph = trace.graph([trace.var_of(t) for t in self.output_tensors])
        graph.inputs += trace.size_vars.values()  # the sizes, as 0-d int64 inputs
        graph.eqns = [
            Eqn(e.prim, e.inputs, map_sizes(e.params, _Written), e.out) for e in graph.eqns
        ]
        sizes = {
            v: tuple(format_poly(n.poly) if isinstance(n, SymInt) else str(n) for n in shape)
            for v, shape in trace.sym_shapes.items()
        }
        return format_graph(graph, "traced", sizes)

    def describe(self, verbose: bool = False) -> str:
        sizes = ", ".join(
            f"s{symbol} = argument {position} dimension {dim}"
            for position, dim, symbol in self.symbol_dims
        )
        guards = "".join(f"\n  {_shown(g)} is {g.outcome} ({g.where})" for g in self.size_guards)
        hints = ", ".join(f"s{k}={v}" for k, v in enumerate(self.trace.symbol_hints))
        return (
            f"dynamic sizes: {sizes}{guards}\n{self.traced_ir}\n\n"
            f"the program for {hints}:\n{self.traced.describe(verbose)}"
        )

    @property
    def forward(self):
        return self.traced.forward

    @property
    def backward(self):
        return self.traced.backward

    @property
    def kernels(self) -> list:
        return self.traced.kernels

    @property
    def saved_bytes(self) -> int:
        return self.traced.saved_bytes


class _Written:
    """A size parameter printed as its polynomial (``s0 * 784``)."""

    def __init__(self, size: SymInt):
        self.text = format_poly(size.poly)

    def __repr__(self) -> str:
        return self.text


def _shown(guard) -> str:
    return f"{format_poly(guard.difference)} {guard.comparison} 0"
