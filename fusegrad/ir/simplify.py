"""Simplification passes. Each takes a graph and returns an equivalent one
whose every value is bit-for-bit what the original computes.

- ``fold_constants``: equations whose operands are all (small) constants
  become constants.
- ``algebraic``: identities exact in IEEE arithmetic (x*1, x/1, x-0, x+(-0),
  --x, with constants of any shape that leave x's shape alone; not x+0,
  which turns -0 into +0) and shape canonicalization
  (reshape/transpose/broadcast that change nothing, a copy of a copy,
  reshape of reshape, transpose of transpose); an elementwise operand that
  is a constant array of one repeated value becomes that value when the
  other operands set the shape.
- ``cse``: one equation per distinct (primitive, operands, parameters).
- ``dce``: equations no output depends on are dropped.

``without_stop_gradients`` is for graphs that only run (the forward and
backward programs, once the adjoint is derived): it makes ``stop_gradient``
the identity it computes, so no kernel copies a value to detach it.
"""

from __future__ import annotations

import numpy as np

from . import primitives as P
from .fusion import is_elementwise
from .graph import Const, Eqn, Graph, Var

FOLD_LIMIT = 4096  # elements; larger constants are not materialized


def _substitute(graph: Graph, rewrite) -> Graph:
    """Rebuilds ``graph``; ``rewrite(eqn)`` returns a replacement value, or
    None to keep the equation (with its operands renamed)."""
    renamed: dict = {}

    def read(v):
        return renamed.get(v, v) if isinstance(v, Var) else v

    eqns = []
    for eqn in graph.eqns:
        eqn = Eqn(eqn.prim, tuple(read(v) for v in eqn.inputs), eqn.params, eqn.out)
        replacement = rewrite(eqn)
        if replacement is None:
            eqns.append(eqn)
        else:
            renamed[eqn.out] = replacement
    return Graph(graph.inputs, eqns, [read(v) for v in graph.outputs])


def dce(graph: Graph) -> Graph:
    live = {v for v in graph.outputs if isinstance(v, Var)}
    kept = []
    for eqn in reversed(graph.eqns):
        if eqn.out in live:
            kept.append(eqn)
            live.update(v for v in eqn.inputs if isinstance(v, Var))
    return Graph(graph.inputs, kept[::-1], graph.outputs)


def _operand_key(v):
    if isinstance(v, Const):
        return ("const", v.dtype.name, v.value.shape, v.value.tobytes())
    return id(v)


def _param_key(params: dict):
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


def cse(graph: Graph) -> Graph:
    seen: dict = {}

    def rewrite(eqn):
        key = (eqn.prim.name, tuple(_operand_key(v) for v in eqn.inputs), _param_key(eqn.params))
        if key in seen:
            return seen[key]
        seen[key] = eqn.out
        return None

    return _substitute(graph, rewrite)


def fold_constants(graph: Graph) -> Graph:
    def rewrite(eqn):
        if not all(isinstance(v, Const) for v in eqn.inputs) or np.prod(eqn.out.shape) > FOLD_LIMIT:
            return None
        value = eqn.prim.impl(*[v.value for v in eqn.inputs], **eqn.params)
        return Const(np.asarray(value, eqn.out.dtype.np), eqn.out.dtype)

    return _substitute(graph, rewrite)


def _all_equal_to(v, value, negative_zero=False) -> bool:
    """A floating constant, of any shape (folded seeds are arrays of ones),
    every element of which is ``value`` (with the sign bit, if asked)."""
    if not isinstance(v, Const) or v.value.size == 0 or not v.dtype.is_floating_point:
        return False
    return bool(np.all(v.value == value)) and (
        not negative_zero or bool(np.all(np.signbit(v.value)))
    )


def _rewrite(eqn: Eqn, producer: dict):
    """Returns (value replacing eqn.out, None), (None, equation replacing eqn) or (None, None)."""
    prim, ins, out = eqn.prim, eqn.inputs, eqn.out

    def same(v):  # v may stand for out only if it has out's exact type
        return (v, None) if v.shape == out.shape and v.dtype is out.dtype else (None, None)

    def produced_by(v, p):
        return isinstance(v, Var) and v in producer and producer[v].prim is p

    def constant(v):
        """The constant ``v`` is, or is a broadcast or reshape of (a
        gradient's seed, ones broadcast to the output's shape)."""
        if produced_by(v, P.broadcast_to) or produced_by(v, P.reshape):
            return producer[v].inputs[0]
        return v

    first, second = (constant(v) for v in ins[:2]) if len(ins) == 2 else (None, None)
    if prim is P.mul and _all_equal_to(second, 1.0):
        return same(ins[0])
    if prim is P.mul and _all_equal_to(first, 1.0):
        return same(ins[1])
    if prim is P.div and _all_equal_to(second, 1.0):
        return same(ins[0])
    if prim is P.sub and _all_equal_to(second, 0.0):
        return same(ins[0])
    if prim is P.add and _all_equal_to(second, 0.0, negative_zero=True):
        return same(ins[0])
    if prim is P.add and _all_equal_to(first, 0.0, negative_zero=True):
        return same(ins[1])
    if prim is P.neg and produced_by(ins[0], P.neg):
        return same(producer[ins[0]].inputs[0])
    if prim in (P.reshape, P.broadcast_to) and ins[0].shape == out.shape:
        return same(ins[0])
    if prim is P.convert and ins[0].dtype is out.dtype and produced_by(ins[0], P.convert):
        return same(ins[0])  # a copy of a fresh copy
    if prim is P.transpose and eqn.params["perm"] == tuple(range(len(out.shape))):
        return same(ins[0])
    if prim is P.broadcast_to and produced_by(ins[0], P.reshape):
        inner = producer[ins[0]].inputs[0]
        padding = len(ins[0].shape) - len(inner.shape)
        if padding >= 0 and ins[0].shape == (1,) * padding + tuple(inner.shape):
            # the reshape only added leading ones, which broadcasting adds itself
            return None, Eqn(P.broadcast_to, (inner,), eqn.params, out)
    if prim is P.reshape and produced_by(ins[0], P.reshape):
        return None, Eqn(P.reshape, producer[ins[0]].inputs, eqn.params, out)
    if prim is P.transpose and produced_by(ins[0], P.transpose):
        inner = producer[ins[0]]
        perm = tuple(inner.params["perm"][p] for p in eqn.params["perm"])
        return None, Eqn(P.transpose, inner.inputs, {"perm": perm}, out)
    uniform = [k for k, v in enumerate(ins) if _is_uniform_array(v)]
    if uniform and is_elementwise(eqn):
        # a constant array of one repeated value, where the other operands
        # set the shape anyway, becomes that value (no array to read)
        others = [v.shape for k, v in enumerate(ins) if k not in uniform]
        if prim is P.broadcast_to or (others and np.broadcast_shapes(*others) == out.shape):
            scalars = tuple(
                Const(v.value.reshape(-1)[:1].reshape(()).copy(), v.dtype) if k in uniform else v
                for k, v in enumerate(ins)
            )
            return None, Eqn(prim, scalars, eqn.params, out)
    return None, None


def _is_uniform_array(v) -> bool:
    return (
        isinstance(v, Const)
        and v.value.size > 1
        and bool(np.all(v.value == v.value.reshape(-1)[0]))
    )


def algebraic(graph: Graph) -> Graph:
    renamed: dict = {}
    producer: dict = {}
    eqns = []

    def read(v):
        return renamed.get(v, v) if isinstance(v, Var) else v

    for eqn in graph.eqns:
        eqn = Eqn(eqn.prim, tuple(read(v) for v in eqn.inputs), eqn.params, eqn.out)
        value, replacement = _rewrite(eqn, producer)
        if value is not None:
            renamed[eqn.out] = value
            continue
        eqn = replacement or eqn
        producer[eqn.out] = eqn
        eqns.append(eqn)
    return Graph(graph.inputs, eqns, [read(v) for v in graph.outputs])


def without_stop_gradients(graph: Graph) -> Graph:
    return _substitute(graph, lambda eqn: eqn.inputs[0] if eqn.prim is P.stop_gradient else None)


def simplify(graph: Graph) -> Graph:
    return dce(cse(algebraic(fold_constants(graph))))
