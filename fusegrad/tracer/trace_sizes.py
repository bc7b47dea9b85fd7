"""Dynamic sizes in a trace (symbolic.py): argument dimensions traced as
symbols, the symbolic shape of every value that has one, what Python
decided on sizes, and the trace instantiated for one binding of its
symbols, as a trace of those sizes would have recorded it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from ..eager.tensor import Size, Tensor
from ..ir import dtypes
from ..ir.autodiff import CotangentHook, CustomVJP
from ..ir.graph import Const, Eqn, Var
from .symbolic import SymInt, evaluated, has_sizes, hinted, settled, symbol_poly
from .trace_guards import Guard
from .tracing_error import TracingError, user_line


@dataclass(frozen=True)
class SizeGuard:
    """What Python decided on sizes: ``difference`` (a polynomial in the
    symbols) compared with 0 by ``comparison`` gave ``outcome``. ``needed``:
    the decision was a size's value itself (``int()``, an index), which
    pins the symbols in it."""

    difference: tuple
    comparison: str
    outcome: bool
    where: str
    needed: bool


class NotDynamic(TracingError):
    """A trace with dynamic sizes met what it cannot express for every size;
    the call is traced again with its sizes fixed."""


class DynamicSizes:
    """The part of a ``Trace`` (trace.py) that keeps its sizes symbolic: it
    works on the trace's vars and equations."""

    def __init__(self):
        super().__init__()
        # each symbol's value in this call, the argument dimensions that give
        # it, what Python decided on sizes, the symbolic shape of every value
        # that has one, and the free vars standing for the symbols (fed when
        # the program is instantiated)
        self.symbol_hints: list = []
        self.binding = None  # an instantiated trace's value per symbol
        self.symbol_dims: list = []  # (argument position, dimension, symbol)
        self.size_guards: list = []  # SizeGuard
        self.sym_shapes: dict = {}  # Var -> shape holding SymInts
        self.size_vars: dict = {}  # symbol -> Var
        self.from_sizes: dict = {}  # Var computed from size vars -> their symbols
        self._size_tensors: dict = {}  # polynomial -> its 0-d int64 tensor

    def _symbolic_input(self, var, position: int, dynamic) -> None:
        """The argument at ``position`` gets symbols for its dimensions
        ``dynamic`` (one per size: dimensions of equal size share one, as the
        call they hold for requires)."""
        shape = list(var.shape)
        for d in dynamic:
            if shape[d] >= 2:
                shape[d] = SymInt(symbol_poly(self._symbol(shape[d])), shape[d])
                self.symbol_dims.append((position, d, shape[d].poly[0][0][0]))
        if any(isinstance(size, SymInt) for size in shape):
            self.sym_shapes[var] = tuple(shape)

    def _symbol(self, size: int) -> int:
        if size not in self.symbol_hints:
            self.symbol_hints.append(size)
        return self.symbol_hints.index(size)

    def _symbolic_shape(self, eqn) -> None:
        """The shape rule on the operands' symbolic shapes and the symbolic
        parameters: the result's shape for every size."""
        symbolic = [isinstance(v, Var) and v in self.sym_shapes for v in eqn.inputs]
        if not any(symbolic) and not has_sizes(eqn.params):
            return
        inputs = [
            _Shaped(Size(self.sym_shapes[v]), v.dtype) if s else v
            for v, s in zip(eqn.inputs, symbolic)
        ]
        shape, _ = eqn.prim.shape_rule(*inputs, **eqn.params)
        # a size no polynomial gives (a size // 4 where it need not divide)
        # is the plain int of this call, guarded
        shape = settled(tuple(shape))
        if hinted(shape) != eqn.out.shape:
            raise NotDynamic(
                f"{eqn.prim.name} at {user_line()}: its shape rule gives "
                f"{list(hinted(shape))} for this call, numpy {list(eqn.out.shape)}"
            )
        if any(isinstance(size, SymInt) for size in shape):
            self.sym_shapes[eqn.out] = tuple(shape)

    def settled(self, params: dict) -> dict:
        """Parameters as equations keep them: ints and sizes (see ``settled``)."""
        return settled(params)

    def hinted(self, params: dict) -> dict:
        return hinted(params)

    def symbolic_shape(self, tensor):
        """A tensor's shape holding SymInts where it depends on the call, or None."""
        var = self.vars.get(id(tensor))
        return None if var is None else self.sym_shapes.get(var)

    def size_tensor(self, poly: tuple):
        """A size as a 0-d int64 tensor of this trace, from the symbols' vars."""
        tensor = self._size_tensors.get(poly)
        if tensor is None:
            if len(poly) == 1 and poly[0][1] == 1 and len(poly[0][0]) == 1:
                (((symbol,), _),) = poly
                tensor = Tensor._make(np.array(self.symbol_hints[symbol], np.int64), dtypes.int64)
                self.size_vars[symbol] = Var((), dtypes.int64)
                self.from_sizes[self.size_vars[symbol]] = frozenset([symbol])
                self._bind(tensor, self.size_vars[symbol])
            else:
                tensor = None
                for monomial, coefficient in poly:
                    term = None
                    for symbol in monomial:
                        factor = self.size_tensor(symbol_poly(symbol))
                        term = factor if term is None else term * factor
                    term = coefficient if term is None else term * coefficient
                    tensor = term if tensor is None else tensor + term
            self._size_tensors[poly] = tensor
        return tensor

    def size_guard(self, difference, comparison: str, outcome: bool, what: str, needed: bool):
        """Python decided on sizes: ``difference`` (a polynomial) compared
        with 0 gave ``outcome``; later sizes must give it too. ``needed``:
        Python needed a size's value (an int(), an index)."""
        self.size_guards.append(
            SizeGuard(difference, comparison, outcome, f"{what} at {user_line()}", needed)
        )

    def instantiated(self, binding: tuple):
        """This trace for sizes ``binding`` (a value per symbol): its values
        and equations with those shapes, the symbols' vars as constants, as
        a trace of those sizes would have recorded."""
        at = _AtSizes(self, binding)
        value = at.value
        eqns = {eqn: at.eqn(eqn) for eqn in self.eqns}
        trace = copy.copy(self)
        trace.eqns = list(eqns.values())
        # (hooks' and custom calls' stand-in backward equations are no equations of it)
        trace.stopped = {eqns[e] for e in self.stopped if e in eqns}
        trace.checkpointed = {eqns[e] for e in self.checkpointed if e in eqns}
        trace.inputs = [value(v) for v in self.inputs]
        trace.captured_vars = [value(v) for v in self.captured_vars]
        # (lists first: a traced tensor dying meanwhile shrinks the tables)
        trace.vars = {k: value(v) for k, v in list(self.vars.items())}
        trace.by_storage = {k: value(v) for k, v in list(self.by_storage.items())}
        trace.initial_vars = {k: (t, value(v)) for k, (t, v) in self.initial_vars.items()}
        for guard in self.guards:
            if guard.var in self.sym_shapes:
                raise NotDynamic(f"{guard.how} at {guard.where} reads a value whose shape varies")
        trace.guards = [Guard(value(g.var), g.observed, g.where, g.how) for g in self.guards]
        trace.customs = [at.custom_vjp(c) for c in self.customs]
        trace.hooks = [at.cotangent_hook(h) for h in self.hooks]
        if self._written_grads is not None:
            trace._written_grads = [None if v is None else value(v) for v in self._written_grads]
        trace.symbol_hints, trace.sym_shapes, trace.size_vars = [], {}, {}
        trace.binding = binding
        trace.from_sizes = {}
        return trace


class _AtSizes:
    """A trace's vars and equations for one binding of its symbols: a var
    of symbolic shape becomes one of that binding's shape (the same one
    wherever it is met), a symbol's var a constant."""

    def __init__(self, trace: DynamicSizes, binding: tuple):
        self.sym_shapes, self.binding = trace.sym_shapes, binding
        self.renamed: dict = {}
        for symbol, var in trace.size_vars.items():
            self.renamed[var] = Const(np.array(binding[symbol], np.int64), dtypes.int64)

    def value(self, v):
        if not isinstance(v, Var):
            return v
        new = self.renamed.get(v)
        if new is None:
            shape = self.sym_shapes.get(v)
            new = self.renamed[v] = (
                v if shape is None else Var(evaluated(shape, self.binding), v.dtype)
            )
        return new

    def eqn(self, e) -> Eqn:
        value = self.value
        return Eqn(
            e.prim,
            tuple(value(v) for v in e.inputs),
            evaluated(e.params, self.binding),
            value(e.out),
        )

    def custom_vjp(self, c: CustomVJP) -> CustomVJP:
        value = self.value
        return CustomVJP(
            inputs=[value(v) for v in c.inputs],
            outputs=[value(v) for v in c.outputs],
            cotangents=[value(v) for v in c.cotangents],
            eqns=[self.eqn(e) for e in c.eqns],
            grads=[value(v) for v in c.grads],
        )

    def cotangent_hook(self, h: CotangentHook) -> CotangentHook:
        value = self.value
        return CotangentHook(
            value(h.var),
            value(h.cotangent),
            [self.eqn(e) for e in h.eqns],
            value(h.result),
            h.function,
        )


class _Shaped:
    """A value's shape and dtype, for a shape rule: a symbolic shape."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: tuple, dtype):
        self.shape, self.dtype = shape, dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)
