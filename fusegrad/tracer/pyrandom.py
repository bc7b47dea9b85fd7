"""Python's ``random`` module and numpy's global generator inside a traced
function.

Their draws are not tensor operations, so a trace cannot record them; frozen
at their traced values, every compiled call would repeat them. Instead,
while a trace runs, the module-level functions (``random.randint``,
``np.random.rand``, ...) are wrapped: each draw is noted (which function,
with which arguments) and its result becomes an input of the program when it
is a number (a traced number, see numbers.py: guarded where Python decides
something with it), or a guard when it is anything else (a choice, a
shuffled list, an array: the program is reused only when a later call draws
the same). Every compiled call draws again, in the traced order, with the
same functions and arguments, so it consumes the generators exactly as the
eager call does; the draws of one call are made once (``Draws``) and shared
by every program the call tries, and by a trace if it comes to one.

Draws through names bound before (``from random import randint``) escape the
wrappers; a trace notices that the generators moved further than the draws
it saw, and refuses to compile the function.
"""

from __future__ import annotations

import contextlib
import random
import threading

import numpy as np

from ..eager.tensor import recording

PYTHON_FUNCTIONS = (
    "random uniform randint randrange gauss normalvariate lognormvariate expovariate "
    "vonmisesvariate gammavariate betavariate paretovariate weibullvariate triangular "
    "getrandbits choice choices sample shuffle"
).split()
NUMPY_FUNCTIONS = (
    "random random_sample rand randn randint uniform normal standard_normal choice "
    "permutation shuffle exponential poisson binomial beta gamma"
).split()
_ORIGINALS = {("random", name): getattr(random, name) for name in PYTHON_FUNCTIONS}
_ORIGINALS.update({("numpy", name): getattr(np.random, name) for name in NUMPY_FUNCTIONS})
_MODULES = {"random": random, "numpy": np.random}
_patching = threading.Lock()
_patched = 0  # how many traces have the wrappers installed


class Divergence(Exception):
    """A call's draws went another way than a program (or trace) expects."""


def _same(a, b) -> bool:
    """Arguments of draws compare by value when they are plain values, else
    by identity (a list of tensors to choose from)."""
    if isinstance(a, (int, float, str, bytes, type(None))) and type(a) is type(b):
        return a == b
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return all(_same(x, y) for x, y in zip(a, b))
    return a is b


def same_draw(spec, other) -> bool:
    (source, args, kwargs), (other_source, other_args, other_kwargs) = spec, other
    return (
        source == other_source
        and _same(args, other_args)
        and kwargs.keys() == other_kwargs.keys()
        and all(_same(kwargs[k], other_kwargs[k]) for k in kwargs)
    )


def same_result(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(x is y or _same(x, y) for x, y in zip(a, b))
    return a is b or _same(a, b)


class Draws:
    """The draws of one call, in order: each made once, on first demand. A
    program that turns out not to apply (its guards fail, perhaps after it
    drew further than the eager call would have) hands them back with
    ``reset``: the generators return to their states before the first draw,
    and a shuffled list to its order, so the next program (or a trace) draws
    the same again and the call consumes what the eager call consumes."""

    def __init__(self):
        self.made: list = []  # (spec, result)
        self.states = None  # the generators' states before the first draw
        self.shuffled: list = []  # (list, its order before a shuffle)

    def reset(self) -> None:
        if self.states is not None:
            random.setstate(self.states[0])
            np.random.set_state(self.states[1])
        for items, order in reversed(self.shuffled):
            items[:] = order
        self.made, self.states, self.shuffled = [], None, []

    def get(self, k: int, spec):
        """Draw ``k`` of this call, which must be ``spec`` (source, args, kwargs)."""
        if k < len(self.made):
            made, result = self.made[k][:2]
            if not same_draw(made, spec):
                raise Divergence
            return result
        if k > len(self.made):
            raise Divergence
        (module, name), args, kwargs = spec
        if self.states is None:
            self.states = generator_states()
        if name == "shuffle":
            self.shuffled.append((args[0], list(args[0])))
        result = _ORIGINALS[(module, name)](*args, **kwargs)
        if name == "shuffle":  # in place: the shuffled order is what was drawn
            result = list(args[0])
        self.made.append((spec, result))
        return result


def _wrapper(source):
    original = _ORIGINALS[source]

    def draw(*args, **kwargs):
        trace = recording.trace
        if trace is None:  # another thread, running eagerly
            return original(*args, **kwargs)
        return trace.draw((source, args, kwargs))

    draw.__wrapped__ = original
    return draw


@contextlib.contextmanager
def drawing():
    """The module-level draw functions wrapped, for the length of a trace."""
    global _patched
    with _patching:
        if _patched == 0:
            for module, name in _ORIGINALS:
                setattr(_MODULES[module], name, _wrapper((module, name)))
        _patched += 1
    try:
        yield
    finally:
        with _patching:
            _patched -= 1
            if _patched == 0:
                for (module, name), function in _ORIGINALS.items():
                    setattr(_MODULES[module], name, function)


def generator_states() -> tuple:
    """The states of Python's and numpy's global generators."""
    return random.getstate(), np.random.get_state()


def same_states(a: tuple, b: tuple) -> bool:
    (python_a, numpy_a), (python_b, numpy_b) = a, b
    return (
        python_a == python_b
        and np.array_equal(numpy_a[1], numpy_b[1])
        and numpy_a[2:] == numpy_b[2:]
    )


def replayed_states(before: tuple, specs: list) -> tuple:
    """The generators' states after ``specs`` drawn from ``before``; the
    generators are left as they were."""
    after = generator_states()
    random.setstate(before[0])
    np.random.set_state(before[1])
    try:
        for (module, name), args, kwargs in specs:
            if name == "shuffle":  # on a copy: the user's list holds the drawn order
                args = (list(args[0]), *args[1:])
            _ORIGINALS[(module, name)](*args, **kwargs)
        return generator_states()
    finally:
        random.setstate(after[0])
        np.random.set_state(after[1])
