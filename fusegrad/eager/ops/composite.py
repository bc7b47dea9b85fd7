"""Composite ops as PyTorch shows them. A composite op (softmax, gelu, var,
...) is a composition of primitives with no derivative code of its own;
``_named`` gives the node it ends in PyTorch's name for the op, which is what
``grad_fn`` prints, and on float16 and bfloat16 tensors computes in float32,
rounding once, as PyTorch's kernel does; ``_rounded_once`` does the latter
alone."""

from __future__ import annotations

import builtins
import functools
import math

from ...ir import dtypes
from ...ir import primitives as P
from .. import autograd, saved_attributes
from ..tensor import Tensor

_INDICES = (dtypes.INTEGER, dtypes.BOOL)  # tensors without gradients


def _named(backward_name):
    """Gives the node a composite op ends in the PyTorch name of the op (for
    grad_fn; a function of the arguments may give None: the composite's own
    nodes are PyTorch's). On float16 and bfloat16 tensors the op computes in
    float32 and rounds its result once, as PyTorch's kernel for it does."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            mark = autograd.sequence_mark()
            reduced = _reduced_result(args, kwargs)
            out = fn(*args, **kwargs) if reduced is None else _in_float32(fn, reduced, args, kwargs)
            node, label = getattr(out, "grad_fn", None), None
            if node is not None and node.sequence_nr > mark:
                label = backward_name(*args, **kwargs) if callable(backward_name) else backward_name
            if label is not None:
                node.label = label
                if node.label in saved_attributes.READS_CALL:
                    saved_attributes.record_call(node, fn, args, kwargs, out, Tensor)
                for inner, _ in node.edges:  # a loop, not any(): this runs on every call
                    # (a leaf's accumulator, numbered infinity, is no inner step)
                    if inner is not None and mark < inner.sequence_nr < math.inf:
                        # inner steps: shown as one node, as PyTorch's, on the op's
                        # inputs that can have gradients (not a class index's)
                        node.shown_edges = tuple(
                            autograd.gradient_edge(a) if a.requires_grad else (None, 0)
                            for a in args
                            if isinstance(a, Tensor) and a._dtype.category not in _INDICES
                        )
                        break
            return out

        return wrapper

    return decorate


def _reduced_result(args, kwargs):
    """The float16 or bfloat16 dtype the tensors among an op's arguments
    promote to, if they promote to one (and no ``dtype=`` asks for another)."""
    for a in args:
        if a.__class__ is Tensor and a._dtype.reduced and a._dtype.is_floating_point:
            break
    else:
        if not kwargs or not builtins.any(isinstance(v, Tensor) for v in kwargs.values()):
            return None
    if kwargs.get("dtype") is not None:
        return None
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
    dtype = dtypes.result_type(*tensors)
    return dtype if dtype.reduced and dtype.is_floating_point else None


def _in_float32(fn, dtype, args, kwargs):
    """fn on the tensors of ``dtype`` converted to float32, its float32 results rounded back."""

    def up(a):
        return (
            P.convert(a, dtype=dtypes.float32) if isinstance(a, Tensor) and a._dtype is dtype else a
        )

    def down(t):
        return (
            P.convert(t, dtype=dtype) if isinstance(t, Tensor) and t._dtype is dtypes.float32 else t
        )

    out = fn(*[up(a) for a in args], **{k: up(v) for k, v in kwargs.items()})
    return _rebuilt(out, [down(t) for t in out]) if isinstance(out, tuple) else down(out)


def _rebuilt(result: tuple, items: list) -> tuple:
    """A tuple of ``items`` of the type of ``result`` (a named one or a plain one)."""
    return type(result)(*items) if hasattr(result, "_fields") else tuple(items)


def _rounded_once(fn):
    """fn with ``_named``'s float32 computation on float16 and bfloat16
    tensors, for a composite op whose node keeps the name of its last step."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        reduced = _reduced_result(args, kwargs)
        return fn(*args, **kwargs) if reduced is None else _in_float32(fn, reduced, args, kwargs)

    return wrapper
