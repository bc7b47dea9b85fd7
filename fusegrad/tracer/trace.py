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
"""

from __future__ import annotations

import copy
import functools
import os
import traceback
import weakref
from dataclasses import dataclass

import numpy as np

from ..eager import grad_mode
from ..eager.autograd import Node, gradient_edge
from ..eager.tensor import Size, Tensor, recording
from ..ir import dtypes
from ..ir import primitives as P
from ..ir.autodiff import CotangentHook, CustomVJP
from ..ir.graph import Const, Eqn, Graph, Var
from .numbers import PACKAGE_DIR, TracedNumber, number_input, traced
from .pyrandom import Draws
from .symbolic import SymInt, evaluated, has_sizes, hinted, settled, symbol_poly


class TracingError(RuntimeError):
    """Something a traced function did cannot be compiled; the message names the line."""


def user_line() -> str:
    """``file:line`` of the innermost frame outside fusegrad (the user's code)."""
    for frame in reversed(traceback.extract_stack()):
        if not os.path.abspath(frame.filename).startswith(PACKAGE_DIR):
            return f"{frame.filename}:{frame.lineno}"
    return "<unknown>"


class Guard:
    """A tensor value the function's Python control flow depended on."""

    __slots__ = ("var", "observed", "where", "how")

    def __init__(self, var, observed: np.ndarray, where: str, how: str):
        self.var, self.observed, self.where, self.how = var, observed, where, how


class Ref:
    """How a later call finds a tensor the trace saw: the argument at a
    position; else the object now at the place it was found (``index``
    into what the trace's ``lookup`` returns, see python_state.py); else the
    same object."""

    __slots__ = ("position", "tensor", "index")

    def __init__(self, position=None, tensor=None):
        self.position, self.tensor, self.index = position, tensor, None

    def resolve(self, args, located):
        if self.position is not None:
            return args[self.position]
        return located[self.index] if self.index is not None else self.tensor


class Captured:
    """A tensor the function read without receiving it. ``grad_of`` is set
    when the tensor was found as a leaf's ``.grad``, which is then re-read
    from the leaf on every call (so a fresh gradient tensor is no stale read).
    A number the function read (``read``: how to read it again) is an input
    too, read on every call; ``tensor`` is then its 0-d tensor of the trace."""

    __slots__ = ("tensor", "ref", "grad_of", "read", "draw")

    def __init__(self, tensor, ref=None, grad_of=None, read=None, draw=None):
        self.tensor, self.ref, self.grad_of = tensor, ref, grad_of  # Refs
        self.read, self.draw = read, draw

    def current(self, args, located, drawn=()):
        """The tensor now, or for a number, its value now (None if it is no
        number any more); for a random draw (``draw``: its position among the
        call's draws), this call's."""
        if self.draw is not None:
            return drawn[self.draw]
        if self.read is not None:
            value = self.read()
            return value if number_input(value, "") is not None else None
        if self.grad_of is not None:
            return self.grad_of.resolve(args, located)._grad
        return self.ref.resolve(args, located)


def _forget(key: int, tables: tuple, ids: set, _) -> None:
    """The object whose id is ``key`` is being freed: no table may give its
    id's next owner what it recorded for it."""
    for table in tables:
        table.pop(key, None)
    ids.discard(key)


class Trace:
    def __init__(self):
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
        self.inputs: list = []  # Vars of the arguments
        self.arg_positions: dict = {}  # id(argument tensor) -> its position
        self.captured: list = []  # Captured, in input order after the arguments
        self.captured_vars: list = []
        self.initial_vars: dict = {}  # id(tensor) -> (tensor, Var at entry) for inputs/captured
        self.created: set = set()  # ids of tensors created inside the function (constants)
        self.eqns: list = []
        self.stopped: set = set()  # equations eager autograd recorded no gradient for
        self.guards: list = []
        self.python_guards: list = []  # (read, value, description)
        self.grad_reads: dict = {}  # id(leaf) -> (leaf, grad was None) at first read
        self.grad_sources: dict = {}  # id(grad tensor) -> leaf it was read from
        self.grad_writes: dict = {}  # id(leaf) -> leaf whose .grad the function assigned
        self.snapshots: dict = {}  # id(tensor) -> (tensor, data before the first change)
        self.aliases: dict = {}  # id(detached alias) -> the tensor whose storage it shares
        self.numbers_read: dict = {}  # key -> the traced number read_number made for it
        self.input_places: set = set()  # (id(container), key) of the numbers read_number read
        # (id(container), key) -> what the walk of Python state put there
        # before the function ran (python_state.Walk.install_numbers)
        self.installed: dict = {}
        self.value_reads: list = []  # where Python read a floating tensor's value
        self.retained: dict = {}  # id -> tensor retain_grad() was called on (kept: ids unique)
        self.specialized: set = set()  # paths of number arguments whose value was guarded
        self.draws = Draws()  # this call's draws from Python's random and numpy's generator
        self.draw_specs: list = []  # (function, args, kwargs) of each draw, in order
        self.draw_guards: list = []  # (position, result) of draws that are no numbers
        self.customs: list = []  # CustomVJP: calls of custom autograd.Functions
        self.hooks: list = []  # CotangentHook: register_hook on values the function made
        self._written_grads = None  # see written_grads
        self.refs: dict = {}  # id(tensor) -> its Ref
        self.lookup = None  # where the tensors the function did not receive live now
        self.undo: list = []  # callables taking back Python side effects (state an optimizer made)
        # dynamic sizes (symbolic.py): each symbol's value in this call, the
        # argument dimensions that give it, what Python decided on sizes, the
        # symbolic shape of every value that has one, and the free vars
        # standing for the symbols (fed when the program is instantiated)
        self.symbol_hints: list = []
        self.binding = None  # an instantiated trace's value per symbol
        self.symbol_dims: list = []  # (argument position, dimension, symbol)
        self.size_guards: list = []  # SizeGuard
        self.sym_shapes: dict = {}  # Var -> shape holding SymInts
        self.size_vars: dict = {}  # symbol -> Var
        self.from_sizes: dict = {}  # Var computed from size vars -> their symbols
        self._size_tensors: dict = {}  # polynomial -> its 0-d int64 tensor

    # -- tensors to vars

    def add_input(self, tensor, dynamic=()) -> Var:
        """An argument; ``dynamic``: its dimensions that get symbols (one per
        size: dimensions of equal size share one, as the call they hold
        for requires)."""
        var = self.vars.get(id(tensor))
        if var is None:
            var = self._new_var(tensor)
            self.initial_vars[id(tensor)] = (tensor, var)
            self.arg_positions[id(tensor)] = len(self.inputs)
            if dynamic:
                shape = list(var.shape)
                for d in dynamic:
                    if shape[d] >= 2:
                        shape[d] = SymInt(symbol_poly(self._symbol(shape[d])), shape[d])
                        self.symbol_dims.append((len(self.inputs), d, shape[d].poly[0][0][0]))
                if any(isinstance(size, SymInt) for size in shape):
                    self.sym_shapes[var] = tuple(shape)
        self.inputs.append(var)
        return var

    def _symbol(self, size: int) -> int:
        if size not in self.symbol_hints:
            self.symbol_hints.append(size)
        return self.symbol_hints.index(size)

    def ref(self, tensor) -> Ref:
        ref = self.refs.get(id(tensor))
        if ref is None:
            position = self.arg_positions.get(id(tensor))
            ref = Ref(position=position) if position is not None else Ref(tensor=tensor)
            self.refs[id(tensor)] = ref
        return ref

    def locate(self, find) -> None:
        """Finds where the tensors the function did not receive lived before
        the call (``find``: python_state.State.lookup), so later calls read
        them from there."""
        refs = [ref for ref in self.refs.values() if ref.position is None]
        self.lookup, found = find([ref.tensor for ref in refs])
        for k, (ref, here) in enumerate(zip(refs, found)):
            ref.index = k if here else None

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

    # -- dynamic sizes

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
        if hinted(tuple(shape)) != eqn.out.shape:
            raise NotDynamic(
                f"{eqn.prim.name} at {user_line()}: its shape rule gives "
                f"{list(hinted(tuple(shape)))} for this call, numpy {list(eqn.out.shape)}"
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

    def instantiated(self, binding: tuple) -> Trace:
        """This trace for sizes ``binding`` (a value per symbol): its values
        and equations with those shapes, the symbols' vars as constants, as
        a trace of those sizes would have recorded."""
        renamed: dict = {}
        for symbol, var in self.size_vars.items():
            renamed[var] = Const(np.array(binding[symbol], np.int64), dtypes.int64)

        def value(v):
            if not isinstance(v, Var):
                return v
            new = renamed.get(v)
            if new is None:
                shape = self.sym_shapes.get(v)
                new = renamed[v] = v if shape is None else Var(evaluated(shape, binding), v.dtype)
            return new

        eqns = {}
        for eqn in self.eqns:
            eqns[eqn] = Eqn(
                eqn.prim,
                tuple(value(v) for v in eqn.inputs),
                evaluated(eqn.params, binding),
                value(eqn.out),
            )
        trace = copy.copy(self)
        trace.eqns = list(eqns.values())
        # (hooks' and custom calls' stand-in backward equations are no equations of it)
        trace.stopped = {eqns[e] for e in self.stopped if e in eqns}
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

        def instantiated_eqns(eqns):
            return [
                Eqn(
                    e.prim,
                    tuple(value(v) for v in e.inputs),
                    evaluated(e.params, binding),
                    value(e.out),
                )
                for e in eqns
            ]

        trace.customs = [
            CustomVJP(
                inputs=[value(v) for v in c.inputs],
                outputs=[value(v) for v in c.outputs],
                cotangents=[value(v) for v in c.cotangents],
                eqns=instantiated_eqns(c.eqns),
                grads=[value(v) for v in c.grads],
            )
            for c in self.customs
        ]
        trace.hooks = [
            CotangentHook(
                value(h.var),
                value(h.cotangent),
                instantiated_eqns(h.eqns),
                value(h.result),
                h.function,
            )
            for h in self.hooks
        ]
        if self._written_grads is not None:
            trace._written_grads = [None if v is None else value(v) for v in self._written_grads]
        trace.symbol_hints, trace.sym_shapes, trace.size_vars = [], {}, {}
        trace.binding = binding
        trace.from_sizes = {}
        return trace

    def rebind(self, tensor, result) -> None:
        """``tensor`` now holds ``result``'s value (an in-place operation)."""
        if tensor._base is not None:
            raise TracingError(
                f"in-place modification of a view at {user_line()} cannot be "
                "compiled; modify the base tensor instead"
            )
        self.var_of(tensor)  # a captured tensor is read before it is overwritten
        if id(tensor) in self.initial_vars and id(tensor) not in self.snapshots:
            self.snapshots[id(tensor)] = (tensor, tensor._data.copy())
        self._bind(tensor, self.var_of(result))
        base = self.aliases.get(id(tensor))
        if base is not None:  # x.data.add_(...) changes x
            if base.grad_fn is not None:
                # eagerly its values change and its graph stays: no one value
                # of the program is both
                self.unsupported("changing a computed tensor's values through .data or detach()")
            self.rebind(base, result)

    def requires_grad_set(self, tensor) -> None:
        """A leaf's flag changes: of the caller's tensor, or of a constant the
        function made (a new leaf on every call, ``zeros(3, requires_grad=True)``),
        no program output can carry it; a value the function computed from its
        inputs may become a leaf (what ``grad(f)`` does with its arguments)."""
        if self._existed(tensor) or id(tensor) in self.created:
            self.unsupported("setting requires_grad of a tensor the function did not compute")

    def detach_in_place(self, tensor) -> None:
        """``tensor.detach_()``: from now on the value passes no gradient. Of a
        tensor the caller holds, its flags would change, which a program
        cannot do on later calls."""
        if self._existed(tensor) and tensor._requires_grad:
            self.unsupported("detach_() of a tensor the function did not make")
        self._bind(tensor, self.var_of(P.stop_gradient(tensor)))

    def rebind_view(self, view, value) -> None:
        """``view``, changed in place through its base, now holds ``value``."""
        self._bind(view, self.var_of(value))

    def alias(self, alias, tensor) -> None:
        """``alias`` (from detach() or .data) shares ``tensor``'s storage."""
        self.aliases[id(alias)] = tensor

    def read_number(self, key, read, origin: str, place=None):
        """A number the function reads that may change between calls (an
        optimizer's learning rate): an input of the program, read again on
        every call by ``read()``. The same ``key`` gives the same number.
        ``place``: (container, key) where it is, which the guard on Python
        state then leaves to the program."""
        if place is not None:
            self.input_places.add((id(place[0]), place[1]))
        number = self.numbers_read.get(key)
        if number is None:
            value = read()
            if isinstance(value, TracedNumber):  # installed there (install_number)
                self.numbers_read[key] = value
                return value
            tensor = number_input(value, origin)
            if tensor is None:
                return value
            self.captured.append(Captured(tensor, read=read))
            self.captured_vars.append(self._new_var(tensor))
            number = self.numbers_read[key] = traced(tensor, origin)
        return number

    def number_of(self, tensor):
        """``tensor.item()`` while tracing: the traced number it holds (a
        bool is decided at once, and guarded)."""
        where = f"item() at {user_line()}"
        if tensor._dtype is dtypes.bool_:
            self.guard(tensor, where)
            return bool(tensor._data.reshape(()))
        wide = dtypes.float64 if tensor._dtype.is_floating_point else dtypes.int64
        # a Python number carries no gradient
        return traced(tensor.detach().reshape(()).to(wide), where)

    def draw(self, spec):
        """A draw from Python's random module or numpy's global generator (see
        pyrandom.py): a number becomes an input of the program, anything else
        a guard."""
        k = len(self.draw_specs)
        result = self.draws.get(k, spec)
        self.draw_specs.append(spec)
        (_, name), args, _ = spec
        if name == "shuffle":
            args[0][:] = result  # in place, as the call did
            self.draw_guards.append((k, result))
            return None
        tensor = number_input(result, f"{name}() at {user_line()}")
        if tensor is None:
            self.draw_guards.append((k, result))
            return result
        self.captured.append(Captured(tensor, draw=k))
        self.captured_vars.append(self._new_var(tensor))
        return traced(tensor, f"{name}() at {user_line()}")

    def custom_vjp(self, node, input_vars, outputs) -> None:
        """A custom autograd.Function's call: its forward was recorded (passing
        no gradient); its backward is traced now, on cotangents standing for
        the outputs', and becomes the VJP the adjoint pass uses for them."""
        placeholders = [  # at this call's sizes; the symbolic ones are noted below
            None if dtype is None else Tensor._make(np.zeros(out._data.shape, dtype.np), dtype)
            for out, (_, dtype) in zip(outputs, node._output_meta)
        ]
        cotangents = [None if p is None else self._new_var(p) for p in placeholders]
        for out, cotangent in zip(outputs, cotangents):
            shape = self.symbolic_shape(out) if isinstance(out, Tensor) else None
            if cotangent is not None and shape is not None:
                self.sym_shapes[cotangent] = shape
        grads, eqns = self._traced_apart(
            lambda: node.apply(placeholders), f"the backward of {node.name()} at {user_line()}"
        )
        self.customs.append(
            CustomVJP(
                inputs=input_vars,
                outputs=[
                    self.var_of(o) if isinstance(o, Tensor) and o.grad_fn is node else None
                    for o in outputs
                ],
                cotangents=cotangents,
                eqns=eqns,
                grads=[None if g is None else self.var_of(g) for g in grads],
            )
        )

    def _traced_apart(self, backward, what: str) -> tuple:
        """``backward()`` run on stand-in cotangents, its equations kept apart
        from the function's: (its result, its equations). What it decides on
        the stand-ins' values is an error: later calls' gradients differ."""
        recorded, guards = self.eqns, len(self.guards)
        self.eqns = []
        try:
            result = backward()
        finally:
            eqns, self.eqns = self.eqns, recorded
        if len(self.guards) != guards:
            raise TracingError(
                f"{what} decides something on the values of its gradients, which a "
                "compiled program cannot know in advance"
            )
        return result, eqns

    def cotangent_hook(self, tensor, hook) -> None:
        """``tensor.register_hook(hook)`` on a value the function made: the
        hook is traced now, on a cotangent standing for the value's, and
        changes that cotangent in every backward derived from this trace."""
        var = self.vars.get(id(tensor))
        if var is None or var not in {e.out for e in self.eqns}:
            raise TracingError(
                f"register_hook at {user_line()} on a tensor the function did not make "
                "cannot be compiled (its gradient is computed outside the program); "
                "register it before calling the function"
            )
        placeholder = Tensor._make(np.zeros(tensor._data.shape, tensor._dtype.np), tensor._dtype)
        cotangent = self._new_var(placeholder)
        shape = self.sym_shapes.get(var)
        if shape is not None:
            self.sym_shapes[cotangent] = shape
        result, eqns = self._traced_apart(
            lambda: hook(placeholder), f"the hook registered at {user_line()}"
        )
        if result is None:
            raise TracingError(
                f"the hook registered at {user_line()} returns nothing: a hook that only "
                "reads the gradient (to print or keep it) would see the trace's stand-in; "
                "return the gradient, or run the function eagerly"
            )
        if not isinstance(result, Tensor) or result._data.shape != placeholder._data.shape:
            raise RuntimeError(
                f"hook returned a value of shape {getattr(result, 'shape', type(result))} "
                f"for a gradient of shape {tuple(placeholder.shape)}"
            )
        self.hooks.append(CotangentHook(var, cotangent, eqns, self.var_of(result), hook))

    def custom_replay(self, custom: CustomVJP, read) -> None:
        """A custom call of a graph being run again on traced tensors (``read``
        gives a var's tensor): the same call for this trace, its backward
        run again on new cotangent stand-ins."""
        placeholders = {}
        for var in custom.cotangents:
            if var is not None:
                placeholders[var] = Tensor._make(np.zeros(var.shape, var.dtype.np), var.dtype)
                self._new_var(placeholders[var])  # stand-ins, no inputs of the program
        values: dict = {}

        def value(v):
            if isinstance(v, Var) and v in placeholders:
                return placeholders[v]
            return values[v] if isinstance(v, Var) and v in values else read(v)

        recorded, self.eqns = self.eqns, []
        try:
            for eqn in custom.eqns:
                values[eqn.out] = eqn.prim(*[value(v) for v in eqn.inputs], **eqn.params)
        finally:
            eqns, self.eqns = self.eqns, recorded
        replayed = CustomVJP(
            inputs=[None if v is None else self.var_of(read(v)) for v in custom.inputs],
            outputs=[None if v is None else self.var_of(read(v)) for v in custom.outputs],
            cotangents=[
                None if v is None else self.var_of(placeholders[v]) for v in custom.cotangents
            ],
            eqns=eqns,
            grads=[None if g is None else self.var_of(value(g)) for g in custom.grads],
        )
        self.customs.append(replayed)
        inputs = [None if v is None else read(v) for v in custom.inputs]
        if grad_mode.is_grad_enabled() and any(t is not None and t.requires_grad for t in inputs):
            node = ReplayedFunctionBackward(custom, read, inputs)
            for nr, v in enumerate(custom.outputs):
                if v is not None:
                    output = read(v)
                    output.grad_fn, output._output_nr, output._requires_grad = node, nr, True

    def guard(self, tensor, how: str, keyed: bool = False) -> None:
        """``keyed``: the value is an argument's, which later calls are keyed by."""
        var = self.var_of(tensor)
        if tensor._dtype.is_floating_point and not keyed and var not in self.from_sizes:
            # a float computed from data is rarely the same twice: a program
            # kept for it would be traced again on nearly every call
            self.value_reads.append(f"{how} at {user_line()}")
        self.guards.append(Guard(var, np.array(tensor._data), user_line(), how))
        for symbol in self.from_sizes.get(var, ()):
            # a value computed from sizes decided something (a size of its
            # own, an index): the program holds for this call's sizes only
            hint = self.symbol_hints[symbol]
            difference = (((), -hint), ((symbol,), 1))  # s - hint, sorted
            self.size_guard(difference, "==", True, how, needed=True)

    def guard_python(self, read, how: str) -> None:
        """Python values the function's behaviour depends on (an optimizer's
        learning rate, a module's training flag): ``read()`` is compared on
        every call, and a change retraces."""
        self.python_guards.append((read, read(), f"{how} at {user_line()}"))

    def read_grad(self, leaf, grad) -> None:
        if id(leaf) not in self.grad_reads and id(leaf) not in self.grad_writes:
            self.grad_reads[id(leaf)] = (leaf, grad is None)
        if grad is not None and id(grad) not in self.vars:
            self.grad_sources[id(grad)] = leaf
            self._watch(grad)

    def write_grad(self, leaf) -> None:
        if id(leaf) not in self.grad_writes:
            self.grad_writes[id(leaf)] = (leaf, leaf._grad)
            if self._existed(leaf):
                self.ref(leaf)  # found again on later calls (zero_grad of an unused parameter)

    def _existed(self, tensor) -> bool:
        """Whether ``tensor`` existed before the call: an input, a captured
        tensor, or one the function never computed with (tensors it makes
        have vars or are constants it created)."""
        key = id(tensor)
        return key in self.initial_vars or (key not in self.vars and key not in self.created)

    def unsupported(self, what: str):
        raise TracingError(
            f"{what} at {user_line()} cannot be compiled by fusegrad.jit; "
            "run the function eagerly (jit(fn, eager=True)) or restructure it"
        )

    # -- the result

    def mutations(self) -> list:
        """(Ref, new var) for the arguments and captured tensors changed in place."""
        changed = []
        for tensor, var in self.initial_vars.values():
            if self.vars[id(tensor)] is not var:
                changed.append((self.ref(tensor), self.vars[id(tensor)]))
        return changed

    def written_grads(self) -> list:
        """The var of the ``.grad`` each leaf of ``leaves(grad_writes)`` holds
        when the trace ends (None where it was set to None). Read once: a
        program made later for other sizes takes the trace's, not what the
        leaves hold by then."""
        if self._written_grads is None:
            self._written_grads = [
                None if leaf._grad is None else self.var_of(leaf._grad)
                for leaf, _ in self.grad_writes.values()
                if self._existed(leaf)
            ]
        return self._written_grads

    def leaves(self, table: dict) -> list:
        """The leaves in ``grad_reads``/``grad_writes`` a later call can reach
        (those that existed before it), with what was recorded for them."""
        return [(self.ref(leaf), info) for leaf, info in table.values() if self._existed(leaf)]

    def restore(self, python_too: bool) -> None:
        """Undoes the function's side effects on inputs, captured tensors and
        ``.grad``, which the program applies when it runs; with
        ``python_too``, also what ``undo`` lists (Python state such as an
        optimizer's first state: for ``lower``, which traces without applying
        the call, and for a trace that failed)."""
        for tensor, data in self.snapshots.values():
            np.copyto(tensor._data, data)
        for leaf, grad in self.grad_writes.values():
            leaf._grad = grad
        if python_too:
            for undo in reversed(self.undo):
                undo()

    def graph(self, outputs: list) -> Graph:
        return Graph(self.inputs + self.captured_vars, self.eqns, outputs)


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


class _Shaped:
    """A value's shape and dtype, for a shape rule: a symbolic shape."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: tuple, dtype):
        self.shape, self.dtype = shape, dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)


class ReplayedFunctionBackward(Node):
    """A custom Function's call in a graph run again on traced tensors: what
    follows it records a gradient as it did after the call itself, and its
    backward is the recorded backward, run on the tensors of this run."""

    __slots__ = ("custom", "read", "num_outputs")

    def __init__(self, custom: CustomVJP, read, inputs: list):
        super().__init__(
            tuple(
                gradient_edge(t) if t is not None and t.requires_grad else (None, 0) for t in inputs
            )
        )
        self.custom, self.read = custom, read
        self.num_outputs = len(custom.outputs)

    def apply(self, grads):
        values = {}
        for var, g in zip(self.custom.cotangents, grads):
            if var is not None:
                zeros = Tensor._make(np.zeros(var.shape, var.dtype.np), var.dtype)
                values[var] = zeros if g is None else g

        def value(v):
            return values[v] if isinstance(v, Var) and v in values else self.read(v)

        for eqn in self.custom.eqns:
            values[eqn.out] = eqn.prim(*[value(v) for v in eqn.inputs], **eqn.params)
        return [None if g is None else value(g) for g in self.custom.grads]


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
