"""Python numbers as inputs of a traced program.

A float or int argument of a jit function, ``tensor.item()`` inside it, and
a number the function reads that may change between calls (an optimizer's
learning rate) enter the trace as 0-d tensors (float64 or int64). The
function sees a ``TracedFloat`` or ``TracedInt`` holding this call's value:
its arithmetic with numbers and tensors is recorded, so ``x * lr`` reads the
input on every call (and with a float32 tensor computes in float32, as a
Python float would: weak typing); when returned, it is an output. What
decides something in Python becomes a guard, as Python control flow on
tensor values does: a comparison or ``bool()`` guards its outcome;
``float()``, ``int()``, an index, a shape or a C function such as
``math.cos`` (which calls ``float()``) guard the value itself, so the
program is reused only for that value.

They are not ``float`` and ``int`` subclasses on purpose: C code reads a
subclass's value directly, with no method of ours to see it (``np.full(3,
lr)``, ``math.cos(lr)``, ``x[:n]`` would silently bake in the traced value).
"""

from __future__ import annotations

import math
import numbers
import operator
import os
import sys

import numpy as np

from ..eager.tensor import TRACED_NUMBERS, NumberOperand, Tensor, recording
from ..ir import dtypes
from ..ir import primitives as P


class TracedNumber(NumberOperand):
    """``tensor``: the 0-d tensor the trace knows; ``origin``: where the number
    came from (for messages); ``sources``: the arguments it was computed
    from (their paths), which a guard on its value specializes the function
    on."""

    __slots__ = ("tensor", "origin", "sources")
    scalar_category: int  # promotes as a Python number of this category

    def __init__(self, tensor: Tensor, origin: str, sources: frozenset = frozenset()):
        self.tensor, self.origin, self.sources = tensor, origin, sources

    @property
    def value(self):
        """This call's value, as a plain Python number, with no guard."""
        return self.tensor._data.item()

    def operand(self, dtype) -> Tensor:
        """The number as a tensor operand of ``dtype`` (a Python number takes
        the dtype of the tensor it meets): beside a float16 or bfloat16
        tensor, float32 and unrounded, as an eager Python number is."""
        t = self.tensor
        if dtype.reduced and dtype.is_floating_point:
            wide = t if t._dtype is dtypes.float32 else t.to(dtypes.float32)
            return P.unrounded(wide, dtype=dtype)
        return t if t._dtype is dtype else t.to(dtype)

    def decided(self, what: str, tensor=None) -> None:
        """Python depends on this number here: ``tensor`` (the value by
        default) is guarded."""
        trace = recording.trace
        if trace is not None:
            keyed = tensor is None and bool(self.sources)
            trace.guard(
                self.tensor if tensor is None else tensor, f"{what} of {self.origin}", keyed
            )
            if tensor is None:
                trace.specialized.update(self.sources)

    # Text made from a number (printed, logged, returned) is its value:
    # the program holds for that value only.
    def __repr__(self) -> str:
        self.decided("repr()")
        return repr(self.value)

    def __str__(self) -> str:
        self.decided("str()")
        return str(self.value)

    def __format__(self, spec: str) -> str:
        self.decided("format()")
        return format(self.value, spec)

    def __array__(self, dtype=None, copy=None):  # numpy's functions read the value
        self.decided("a numpy function")
        return np.asarray(self.value, dtype)


PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # fusegrad's code


def _class_for(python_type):
    """``__class__`` as ``isinstance`` reads it: in the user's code a traced
    number is the float or int it stands for (``isinstance(v, float)``),
    in fusegrad's own code the traced class it is."""

    def seen(self):
        if sys._getframe(1).f_code.co_filename.startswith(PACKAGE_DIR):
            return type(self)
        return python_type

    return property(seen)


class TracedFloat(TracedNumber):
    __slots__ = ()
    scalar_category = dtypes.FLOATING
    __class__ = _class_for(float)


class TracedInt(TracedNumber):
    __slots__ = ()
    scalar_category = dtypes.INTEGER
    __class__ = _class_for(int)


def traced(tensor: Tensor, origin: str, sources: frozenset = frozenset()) -> TracedNumber:
    """A 0-d traced tensor as the Python number it holds."""
    cls = TracedFloat if tensor._dtype.is_floating_point else TracedInt
    return cls(tensor, origin, sources)


PYTHON_NUMBERS = (int, float, np.integer, np.floating, TracedNumber)  # bools are ints


def _operand(v):
    return v.tensor if isinstance(v, TracedNumber) else v


def _is_int(v) -> bool:
    if isinstance(v, TracedNumber):
        return isinstance(v, TracedInt)
    return isinstance(v, (int, np.integer))


def _wide(v):
    """``v`` where Python would compute with a float: a float64 tensor or a float."""
    if isinstance(v, TracedNumber):
        return v.tensor if isinstance(v, TracedFloat) else v.tensor.to(dtypes.float64)
    return float(v)


INT64_SAFE = 2**62  # sums and differences of ints within this stay within int64


def _int_bounds(op, a, b) -> tuple:
    """How large each of two int operands may be for ``op``'s int64 result
    to be Python's: (bound of a, bound of b), None for an operation whose
    result Python must compute (a power)."""
    if op in (operator.add, operator.sub):
        return INT64_SAFE, INT64_SAFE
    if op is operator.mul:
        if isinstance(a, TracedNumber) and isinstance(b, TracedNumber):
            return 2**31, 2**31
        constant = abs(int(b if isinstance(a, TracedNumber) else a)) or 1
        return (INT64_SAFE // constant,) * 2
    if op in (operator.floordiv, operator.mod):
        return INT64_SAFE, INT64_SAFE
    return None


def _within_int64(op, a, b) -> bool:
    """Whether int64 computes ``op`` on the two ints as Python would: a
    guard on each traced operand's size (decided now, checked on later
    calls); a power, or an operand too large, is decided by value."""
    bounds = _int_bounds(op, a, b)
    fits = bounds is not None
    if fits:
        for operand, bound in zip((a, b), bounds):
            if isinstance(operand, TracedNumber):
                fits = bool(abs(operand) <= bound) and fits
            elif abs(int(operand)) > bound:
                fits = False
    if not fits:
        for operand in (a, b):
            if isinstance(operand, TracedNumber):
                operand.decided("int arithmetic beyond int64")
    return fits


def _arithmetic(op, reflected=False, floating=False):
    """A Python operator on a traced number and a number: recorded on their
    tensors, in int64 for ints and float64 as soon as a float takes part (or
    for ``/``), as Python computes. An int result int64 may not hold is
    Python's own, for the operands' values."""

    def method(self, other):
        if not isinstance(other, PYTHON_NUMBERS):
            return NotImplemented  # a tensor's own operator takes it
        if floating or not (_is_int(self) and _is_int(other)):
            a, b = _wide(self), _wide(other)
        else:
            x, y = (other, self) if reflected else (self, other)
            if not _within_int64(op, x, y):
                return op(int(getattr(x, "value", x)), int(getattr(y, "value", y)))
            a, b = self.tensor, _operand(other)
        result = op(b, a) if reflected else op(a, b)
        return traced(result, self.origin, self.sources | getattr(other, "sources", frozenset()))

    return method


def _comparison(op):
    def method(self, other):
        if not isinstance(other, PYTHON_NUMBERS):
            return NotImplemented
        result = op(_wide(self), _wide(other))
        self.decided("a comparison", result)
        return bool(result._data)

    return method


def _deciding(what: str, convert, on_truth: bool = False):
    def method(self, *args):
        self.decided(what, (self.tensor != 0) if on_truth else None)
        return convert(self.value, *args)

    return method


_OPERATORS = {
    "__add__": _arithmetic(operator.add),
    "__radd__": _arithmetic(operator.add, reflected=True),
    "__sub__": _arithmetic(operator.sub),
    "__rsub__": _arithmetic(operator.sub, reflected=True),
    "__mul__": _arithmetic(operator.mul),
    "__rmul__": _arithmetic(operator.mul, reflected=True),
    "__truediv__": _arithmetic(operator.truediv, floating=True),
    "__rtruediv__": _arithmetic(operator.truediv, reflected=True, floating=True),
    "__floordiv__": _arithmetic(operator.floordiv),
    "__rfloordiv__": _arithmetic(operator.floordiv, reflected=True),
    "__mod__": _arithmetic(operator.mod),
    "__rmod__": _arithmetic(operator.mod, reflected=True),
    "__pow__": _arithmetic(operator.pow),
    "__rpow__": _arithmetic(operator.pow, reflected=True),
    "__neg__": lambda self: traced(-self.tensor, self.origin, self.sources),
    "__pos__": lambda self: self,
    "__abs__": lambda self: traced(abs(self.tensor), self.origin, self.sources),
    "__lt__": _comparison(operator.lt),
    "__le__": _comparison(operator.le),
    "__gt__": _comparison(operator.gt),
    "__ge__": _comparison(operator.ge),
    "__eq__": _comparison(operator.eq),
    "__ne__": _comparison(operator.ne),
    "__bool__": _deciding("the truth", bool, on_truth=True),
    "__float__": _deciding("float()", float),
    "__int__": _deciding("int()", int),
    "__hash__": _deciding("hash()", hash),
    "__round__": _deciding("round()", round),
    "__floor__": _deciding("floor()", math.floor),
    "__ceil__": _deciding("ceil()", math.ceil),
    "__trunc__": _deciding("trunc()", math.trunc),
}
for _name, _method in _OPERATORS.items():
    setattr(TracedNumber, _name, _method)
TracedInt.__index__ = _deciding("its use as an index or size", int)


numbers.Real.register(TracedFloat)
numbers.Integral.register(TracedInt)
TRACED_NUMBERS.update((TracedFloat, TracedInt))


def number_input(value, origin: str):
    """A fresh 0-d tensor for a number entering the trace (float64 for
    floats, int64 for ints), or None for what is no such number."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, PYTHON_NUMBERS[:4]):
        return None
    dtype = dtypes.int64 if isinstance(value, (int, np.integer)) else dtypes.float64
    return Tensor._make(np.array(value, dtype.np), dtype)
