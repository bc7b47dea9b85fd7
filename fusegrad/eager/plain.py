"""Plain values: what VJP rules compute on in a backward pass that records nothing.

A rule is written once, for any value type (``ir/graph.py``'s ``Operators``).
Eager autograd runs it on tensors when the gradients themselves need a graph
(``create_graph``) or a trace is watching; otherwise there is no node to
record, no version to count and no view to track, and the rule runs on these:
an array and its dtype, computed exactly as a tensor's would be (``computed``),
at a fraction of a tensor operation's cost.
"""

from __future__ import annotations

from ..ir import primitives as P
from ..ir.graph import Operators
from . import autograd, tensor
from .tensor import computed, constant, recording


class PlainValue(Operators):
    __slots__ = ("_data", "_dtype")

    def __init__(self, data, dtype):
        self._data = data
        self._dtype = dtype

    @property
    def shape(self) -> tuple:
        return self._data.shape

    @property
    def dtype(self):
        return self._dtype

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @staticmethod
    def usable() -> bool:
        """Whether rules may run on plain values now: not while a trace
        records, nor while forward AD may give the gradients tangents."""
        return recording.trace is None and tensor.dual_levels is None


def plain_bind(prim, args, params):
    for a in args:
        if a.__class__ is not PlainValue:
            dtype = P.number_dtype([a._dtype for a in args if a.__class__ is PlainValue])
            args = tuple(
                a if a.__class__ is PlainValue else PlainValue(constant(a, dtype)._data, dtype)
                for a in args
            )
            break
    return PlainValue(*computed(prim, args, params))


P.register_value_type(PlainValue, plain_bind)
autograd.register_plain_type(PlainValue)
