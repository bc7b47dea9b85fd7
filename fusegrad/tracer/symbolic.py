"""Sizes that vary between calls: a dynamic dimension as a symbol.

When a jit function is traced with a dynamic dimension, the tensors that
depend on it report ``SymInt`` sizes: a polynomial in the symbols (``s0``,
``s0 * 784``) with this call's value as its hint. Their arithmetic with
ints stays symbolic, so ``x.view(x.size(0), -1)`` records a reshape to
``(s0, 784)`` that holds for every size; with floats and tensors a size is
an input of the program (``loss / x.size(0)``).

What Python decides on a size becomes a size guard, checked on every call
before the program runs: a comparison guards its outcome (unless the symbols'
range decides it: a symbol is at least 2, as sizes 0 and 1 are never
dynamic), and what needs a plain int (``int()``, an index, a hash, a C
function) guards the value itself, so the program holds for that size only.

Like ``TracedInt``, and for the same reason, ``SymInt`` is no ``int``
subclass: C code would read a subclass's value with no method of ours to
see it.
"""

from __future__ import annotations

import operator
from collections import defaultdict

import numpy as np

from ..eager.tensor import TRACED_NUMBERS, recording
from ..ir.shapes import register_symbolic_size
from .numbers import TracedInt, TracedNumber

# ---------------------------------------------------------------- polynomials
# A polynomial is a tuple of (monomial, coefficient) pairs, sorted; a
# monomial is a sorted tuple of symbol numbers (s0 * s0 * s1 is (0, 0, 1)).


def _poly(terms: dict) -> tuple:
    return tuple(sorted((m, c) for m, c in terms.items() if c))


def constant_poly(value: int) -> tuple:
    return _poly({(): value})


def symbol_poly(symbol: int) -> tuple:
    return (((symbol,), 1),)


def _add(p: tuple, q: tuple, sign: int = 1) -> tuple:
    terms = dict(p)
    for m, c in q:
        terms[m] = terms.get(m, 0) + sign * c
    return _poly(terms)


def _multiply(p: tuple, q: tuple) -> tuple:
    terms: dict = {}
    for m1, c1 in p:
        for m2, c2 in q:
            m = tuple(sorted(m1 + m2))
            terms[m] = terms.get(m, 0) + c1 * c2
    return _poly(terms)


def evaluate_poly(p: tuple, binding) -> int:
    total = 0
    for monomial, coefficient in p:
        term = coefficient
        for symbol in monomial:
            term *= binding[symbol]
        total += term
    return total


def _constant_of(p: tuple):
    """The value of a constant polynomial, else None."""
    if not p:
        return 0
    if len(p) == 1 and p[0][0] == ():
        return p[0][1]
    return None


def _sign_everywhere(p: tuple):
    """-1, 0 or 1 when ``p`` has that sign for every binding of its symbols
    to sizes >= 2, else None. Decided when every non-constant term's
    coefficient has one sign: then ``p`` is monotone, its extreme at 2."""
    constant = _constant_of(p)
    if constant is not None:
        return (constant > 0) - (constant < 0)
    signs = {c > 0 for m, c in p if m}
    if len(signs) != 1:
        return None
    at_two = evaluate_poly(p, _ALL_TWO)
    increasing = signs.pop()
    if increasing and at_two > 0:
        return 1
    if not increasing and at_two < 0:
        return -1
    return None


_ALL_TWO = defaultdict(lambda: 2)  # every symbol at its least value


def format_poly(p: tuple) -> str:
    constant = _constant_of(p)
    if constant is not None:
        return str(constant)
    parts = []
    for monomial, coefficient in p:
        factors = [f"s{s}" for s in monomial]
        if coefficient != 1 or not factors:
            factors.insert(0, str(coefficient))
        parts.append("*".join(factors))
    return " + ".join(parts).replace("+ -", "- ")


# ---------------------------------------------------------------- SymInt

COMPARISONS = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class SymInt(TracedInt):
    """A size of this trace: ``poly`` over the trace's symbols, ``hint`` its
    value in this call."""

    __slots__ = ("poly", "hint", "_tensor")

    def __init__(self, poly: tuple, hint: int):
        self.poly, self.hint, self._tensor = poly, hint, None
        self.origin, self.sources = f"size {format_poly(poly)}", frozenset()

    @property
    def tensor(self):
        """The size as a 0-d int64 tensor of the trace, computed from the
        program's size inputs (when it meets floats and tensors)."""
        if self._tensor is None:
            self._tensor = recording.trace.size_tensor(self.poly)
        return self._tensor

    @property
    def value(self) -> int:
        return self.hint

    def _decide(self, op: str, other_poly: tuple, other_hint: int) -> bool:
        """``self op other``: decided by the symbols' range when it can be,
        else this call's outcome, guarded."""
        difference = _add(self.poly, other_poly, -1)
        outcome = COMPARISONS[op](self.hint - other_hint, 0)
        sign = _sign_everywhere(difference)
        if sign is None or COMPARISONS[op](sign, 0) != outcome:
            recording.trace.size_guard(difference, op, outcome, "a comparison", needed=False)
        return outcome

    def specialize(self, what: str) -> int:
        """Python needs the plain int: the program holds for this size only."""
        difference = _add(self.poly, constant_poly(self.hint), -1)
        recording.trace.size_guard(difference, "==", True, what, needed=True)
        return self.hint

    def __repr__(self) -> str:
        return repr(self.hint)

    def __str__(self) -> str:
        return str(self.hint)

    def __format__(self, spec: str) -> str:
        return format(self.hint, spec)


def as_poly(value):
    """A size's polynomial: a SymInt's own, an int's constant one (numpy's
    integers too); None for anything else."""
    if isinstance(value, SymInt):
        return value.poly
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return constant_poly(int(value))
    return None


def make_size(poly: tuple, hint: int):
    """A SymInt, or the plain int when ``poly`` is a constant."""
    constant = _constant_of(poly)
    return constant if constant is not None else SymInt(poly, hint)


def _arithmetic(combine, hint_op, reflected=False):
    """+, - and * with ints and sizes stay sizes; with anything else the size
    is a traced int (``TracedInt``'s operator, on its tensor)."""
    fallback = getattr(TracedInt, f"__{'r' if reflected else ''}{hint_op.__name__}__")

    def method(self, other):
        other_poly = as_poly(other)
        if other_poly is None:
            return fallback(self, other)
        other_hint = other.hint if isinstance(other, SymInt) else int(other)
        if reflected:
            return make_size(combine(other_poly, self.poly), hint_op(other_hint, self.hint))
        return make_size(combine(self.poly, other_poly), hint_op(self.hint, other_hint))

    return method


def _exact_quotient(p: tuple, q: tuple):
    """``p / q`` as a polynomial when ``q`` is one term dividing every term
    of ``p`` (``s0 * 784`` by 784 or by ``s0``), else None."""
    if len(q) != 1 or q[0][1] <= 0:
        return None
    divisor, coefficient = q[0]
    terms = {}
    for monomial, c in p:
        rest = list(monomial)
        for symbol in divisor:
            if symbol not in rest:
                return None
            rest.remove(symbol)
        if c % coefficient:
            return None
        terms[tuple(rest)] = c // coefficient
    return _poly(terms)


def _dividing(exact, fallback: str):
    """// and % by a size that divides exactly stay sizes (the quotient, 0);
    any other is a traced int (``TracedInt``'s operator)."""

    def method(self, other):
        other_poly = as_poly(other)
        quotient = None if other_poly is None else _exact_quotient(self.poly, other_poly)
        if quotient is None:
            return getattr(TracedInt, fallback)(self, other)
        other_hint = other.hint if isinstance(other, SymInt) else int(other)
        return exact(quotient, self.hint, other_hint)

    return method


def _comparison(op: str):
    def method(self, other):
        other_poly = as_poly(other)
        if other_poly is None:
            return getattr(TracedInt, f"__{_NAMES[op]}__")(self, other)
        other_hint = other.hint if isinstance(other, SymInt) else operator.index(other)
        return self._decide(op, other_poly, other_hint)

    return method


_NAMES = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}


def _specializing(what: str, convert):
    def method(self, *args):
        return convert(self.specialize(what), *args)

    return method


_OPERATORS = {
    "__add__": _arithmetic(lambda p, q: _add(p, q), operator.add),
    "__radd__": _arithmetic(lambda p, q: _add(p, q), operator.add, reflected=True),
    "__sub__": _arithmetic(lambda p, q: _add(p, q, -1), operator.sub),
    "__rsub__": _arithmetic(lambda p, q: _add(p, q, -1), operator.sub, reflected=True),
    "__mul__": _arithmetic(_multiply, operator.mul),
    "__rmul__": _arithmetic(_multiply, operator.mul, reflected=True),
    "__floordiv__": _dividing(lambda q, a, b: make_size(q, a // b), "__floordiv__"),
    "__mod__": _dividing(lambda q, a, b: 0, "__mod__"),
    "__neg__": lambda self: make_size(_add((), self.poly, -1), -self.hint),
    "__pos__": lambda self: self,
    "__bool__": lambda self: self._decide("!=", (), 0),
    "__index__": _specializing("an index", int),
    "__int__": _specializing("int()", int),
    "__float__": _specializing("float()", float),
    "__hash__": _specializing("hash()", hash),
    "__round__": _specializing("round()", round),
    "__floor__": _specializing("floor()", int),
    "__ceil__": _specializing("ceil()", int),
    "__trunc__": _specializing("trunc()", int),
}
_OPERATORS.update({f"__{name}__": _comparison(op) for op, name in _NAMES.items()})
for _name, _method in _OPERATORS.items():
    setattr(SymInt, _name, _method)

TRACED_NUMBERS.add(SymInt)
register_symbolic_size(SymInt)


def map_sizes(value, size, kind=SymInt):
    """``value`` (a parameter: a size, or tuples, lists, dicts and slices of
    them) with every ``kind`` replaced by ``size(it)``."""
    if isinstance(value, kind):
        return size(value)
    if isinstance(value, tuple):
        return tuple(map_sizes(v, size, kind) for v in value)
    if isinstance(value, list):
        return [map_sizes(v, size, kind) for v in value]
    if isinstance(value, dict):
        return {k: map_sizes(v, size, kind) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(*(map_sizes(v, size, kind) for v in (value.start, value.stop, value.step)))
    return value


def settled(params):
    """A primitive's parameters with every traced number that is no size as
    the plain number it holds (guarded: the program holds for that value),
    so equations keep numbers and sizes only."""

    def plain(number):
        if isinstance(number, SymInt):
            return number
        return operator.index(number) if isinstance(number, TracedInt) else float(number)

    return map_sizes(params, plain, TracedNumber)


def hinted(value):
    """``value`` with this call's sizes (for numpy, which runs now)."""
    return map_sizes(value, lambda s: s.hint)


def evaluated(value, binding):
    """``value`` with the sizes of ``binding`` (a value per symbol)."""
    return map_sizes(value, lambda s: evaluate_poly(s.poly, binding))


def has_sizes(value) -> bool:
    found = []
    map_sizes(value, found.append)
    return bool(found)
