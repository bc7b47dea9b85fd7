"""Python reading values while a function is traced: a decision on a
tensor's value (``bool()``, ``item()`` of a bool) becomes a guard, the
value an extra output compared with what the trace saw; a number read from
a tensor (``item()``) is a traced number; Python values the function's
behaviour depends on are compared on every call.
"""

from __future__ import annotations

import numpy as np

from ..ir import dtypes
from .numbers import traced
from .tracing_error import user_line


class Guard:
    """A tensor value the function's Python control flow depended on."""

    __slots__ = ("var", "observed", "where", "how")

    def __init__(self, var, observed: np.ndarray, where: str, how: str):
        self.var, self.observed, self.where, self.how = var, observed, where, how


class ValueGuards:
    """The part of a ``Trace`` (trace.py) that records what Python read of
    the values it computes."""

    def __init__(self):
        super().__init__()
        self.guards: list = []
        self.python_guards: list = []  # (read, value, description)
        self.value_reads: list = []  # where Python read a floating tensor's value
        self.specialized: set = set()  # paths of number arguments whose value was guarded

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

    def indexes_by_tensor(self, tensor) -> bool:
        """Whether ``x[tensor]`` with a 0-d integer tensor indexes by the
        tensor (an index operand) rather than by its value read as a number."""
        return False

    def guard_python(self, read, how: str) -> None:
        """Python values the function's behaviour depends on (an optimizer's
        learning rate, a module's training flag): ``read()`` is compared on
        every call, and a change retraces."""
        self.python_guards.append((read, read(), f"{how} at {user_line()}"))

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
