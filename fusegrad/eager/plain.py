"""Plain values: what VJP rules compute on in a backward pass that records nothing.

A rule is written once, for any value type (``ir/graph.py``'s ``Operators``).
Eager autograd runs it on tensors when the gradients themselves need a graph
(``create_graph``) or a trace is watching; otherwise there is no node to
record, no version to count and no view to track, and the rule runs on these:
an array and its dtype, computed exactly as a tensor's would be (``computed``),
at a fraction of a tensor operation's cost.
"""

from __future__ import annotations

from ..ir import dtypes
from ..ir import primitives as P
from ..ir.graph import Operators
from . import autograd, tensor
from .tensor import computed, constant, recording


class PlainValue(Operators):
    __slots__ = ("_data", "_dtype", "_bfloat16")

    def __init__(self, data, dtype, bfloat16: bool = False):
        self._data = data
        self._dtype = dtype
        self._bfloat16 = bfloat16  # float32 holding bfloat16 values (as Tensor._holds_bfloat16)

    @property
    def shape(self) -> tuple:
        return self._data.shape

    @property
    def dtype(self):
        return self._dtype

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def _holds_bfloat16(self) -> bool:
        return self._bfloat16

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
    first = args[0]
    if prim is P.matmul and first._bfloat16 and args[1]._bfloat16:
        params = tensor.BFLOAT16_OPERANDS
    out = PlainValue(*computed(prim, args, params))
    if (prim is P.convert or prim in P.MOVING) and out._dtype is dtypes.float32:
        out._bfloat16 = tensor.holds_bfloat16_after(prim, first)
    return out


P.register_value_type(PlainValue, plain_bind)
autograd.register_plain_type(PlainValue)
