"""The inputs of a trace's program: the arguments; the tensors the function
read without receiving them (a module's parameters, globals: "captured")
and where later calls find them; numbers read afresh on every call (an
optimizer's learning rate, Python state's numbers); and draws from Python's
random module and numpy's global generator.
"""

from __future__ import annotations

from ..ir.graph import Var
from .numbers import TracedNumber, number_input, traced
from .pyrandom import Draws
from .tracing_error import user_line


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


class TraceInputs:
    """The part of a ``Trace`` (trace.py) that keeps its program's inputs;
    the trace's ``var_of`` makes a tensor it meets for the first time a
    captured one."""

    def __init__(self):
        super().__init__()
        self.inputs: list = []  # Vars of the arguments
        self.arg_positions: dict = {}  # id(argument tensor) -> its position
        self.captured: list = []  # Captured, in input order after the arguments
        self.captured_vars: list = []
        self.initial_vars: dict = {}  # id(tensor) -> (tensor, Var at entry) for inputs/captured
        self.refs: dict = {}  # id(tensor) -> its Ref
        self.lookup = None  # where the tensors the function did not receive live now
        self.numbers_read: dict = {}  # key -> the traced number read_number made for it
        self.input_places: set = set()  # (id(container), key) of the numbers read_number read
        # (id(container), key) -> what the walk of Python state put there
        # before the function ran (python_state.Walk.install_numbers)
        self.installed: dict = {}
        self.draws = Draws()  # this call's draws from Python's random and numpy's generator
        self.draw_specs: list = []  # (function, args, kwargs) of each draw, in order
        self.draw_guards: list = []  # (position, result) of draws that are no numbers

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
                self._symbolic_input(var, len(self.inputs), dynamic)
        self.inputs.append(var)
        return var

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
