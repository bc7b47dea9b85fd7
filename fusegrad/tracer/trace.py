"""Recording a graph while a function runs eagerly.

While a ``Trace`` is active, every primitive the eager handler runs is also
appended to the trace's graph, over IR vars that stand for the tensors
involved. So tracing executes the function with real values, and the first
call is correct by construction. What a later call must reproduce beyond the
returned values is recorded too:

- tensors the function reads but did not receive (a module's parameters,
  globals) become graph inputs ("captured"), read afresh on every call, and
  so do numbers the runtime reads for it (``read_number``: an optimizer's
  learning rate); numbers among the arguments are inputs too (numbers.py);
- in-place changes to inputs and captured tensors, and assignments to a
  leaf's ``.grad``, become extra outputs the runtime writes back;
- Python decisions on tensor values (``bool()``, ``item()``, ...) become
  guards: the value is an extra output, compared with what the trace saw.

``Trace`` here maps tensors to vars and records the equations; each of its
other jobs is a base class of its own: its program's inputs
(trace_inputs.py), guards (trace_guards.py), write-backs and ``.grad``
(trace_writebacks.py), the user's backward code (trace_backwards.py) and
dynamic sizes (trace_sizes.py).
"""

from __future__ import annotations

import functools
import weakref

import numpy as np

from ..eager.autograd import next_sequence_number
from ..eager.tensor import recording
from ..ir.graph import Const, Eqn, Graph, Var
from .trace_backwards import UserBackwards
from .trace_guards import ValueGuards
from .trace_inputs import Captured, TraceInputs
from .trace_sizes import DynamicSizes
from .trace_writebacks import WriteBacks
from .tracing_error import TracingError, user_line


def _forget(key: int, tables: tuple, ids: set, _) -> None:
    """The object whose id is ``key`` is being freed: no table may give its
    id's next owner what it recorded for it."""
    for table in tables:
        table.pop(key, None)
    ids.discard(key)


class Trace(TraceInputs, ValueGuards, WriteBacks, UserBackwards, DynamicSizes):
    """The graph a function records as it runs: the var of every tensor it
    meets and the equations of the primitives it runs."""

    def __init__(self):
        super().__init__()
        self.vars: dict = {}  # id(tensor) -> Var
        # id(storage array) -> Var: the engine rebuilds saved outputs as new
        # tensors around the same array, which must read as the same value
        self.by_storage: dict = {}
        # A traced tensor or array that dies is forgotten as it dies, before
        # Python can give its id to another object. (Keeping every traced
        # value alive instead, so that ids stay unique, held all of a step's
        # intermediates until the trace ended: each new array was fresh
        # memory, faulted in page by page, and the trace of a GPT-mini step
        # took three times its eager run.)
        self.watched: dict = {}  # id -> weakref whose callback forgets the id
        self.created: set = set()  # ids of tensors created inside the function (constants)
        self.eqns: list = []
        self.stopped: set = set()  # equations eager autograd recorded no gradient for
        # equations of checkpointed calls (utils/checkpoint.py): a backward
        # may compute them again rather than have the forward save them
        self.checkpointed: set = set()
        self.first_node = next_sequence_number()  # autograd nodes above it were traced

    # -- tensors to vars

    def _new_var(self, tensor) -> Var:
        var = Var(tensor._data.shape, tensor._dtype)
        self._bind(tensor, var)
        return var

    def _bind(self, tensor, var) -> None:
        self.vars[id(tensor)] = var
        self.by_storage[id(tensor._data)] = var
        self._watch(tensor)
        self._watch(tensor._data)

    def _watch(self, obj) -> None:
        key = id(obj)
        if key not in self.watched:
            # the callback holds the tables, not the trace, which it would keep alive
            tables = (self.watched, self.vars, self.by_storage, self.aliases, self.grad_sources)
            forget = functools.partial(_forget, key, tables, self.created)
            self.watched[key] = weakref.ref(obj, forget)

    def var_of(self, tensor):
        var = self.vars.get(id(tensor))
        if var is not None:
            if self.written and tensor._base is not None:
                return self.current_view(tensor, var)
            return var
        var = self.by_storage.get(id(tensor._data))
        if var is not None and var.shape == tensor._data.shape:
            self._bind(tensor, var)
            return var
        if tensor.__dict__.get("_constant") or id(tensor) in self.created:
            value = Const(np.array(tensor._data), tensor._dtype)
            self.vars[id(tensor)] = value
            self._watch(tensor)
            return value
        var = self._new_var(tensor)
        self.initial_vars[id(tensor)] = (tensor, var)
        leaf = self.grad_sources.get(id(tensor))
        if leaf is None:
            self.captured.append(Captured(tensor, ref=self.ref(tensor)))
        else:
            self.captured.append(Captured(tensor, grad_of=self.ref(leaf)))
        self.captured_vars.append(var)
        return var

    def created_tensor(self, tensor) -> None:
        self.created.add(id(tensor))
        self._watch(tensor)

    # -- what eager mode does, recorded

    def record(self, prim, args, params, out) -> None:
        eqn = Eqn(prim, tuple(self.var_of(a) for a in args), params, self._new_var(out))
        if out.grad_fn is None:
            self.stopped.add(eqn)
        self.eqns.append(eqn)
        if self.symbol_hints:
            self._symbolic_shape(eqn)
            symbols = frozenset().union(*(self.from_sizes.get(v, ()) for v in eqn.inputs))
            if symbols:
                self.from_sizes[eqn.out] = symbols

    def unsupported(self, what: str):
        raise TracingError(
            f"{what} at {user_line()} cannot be compiled by fusegrad.jit; "
            "run the function eagerly (jit(fn, eager=True)) or restructure it"
        )

    def graph(self, outputs: list) -> Graph:
        return Graph(self.inputs + self.captured_vars, self.eqns, outputs)


class active:
    """Context manager making ``trace`` the one eager operations record into."""

    def __init__(self, trace: Trace):
        self.trace = trace

    def __enter__(self):
        self.outer = recording.trace
        recording.trace = self.trace
        return self.trace

    def __exit__(self, *exc):
        recording.trace = self.outer
        return False
