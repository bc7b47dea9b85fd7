"""Running a graph on a batch (vmap): each equation on values that carry a
batch axis in front, by its primitive's batching rule (``Primitive.defbatch``).

The graph is one element's computation, traced once; ``run_batched``
evaluates it again with the caller's values (of any type ``bind`` takes),
some of them batched, so what it computes is recorded by whatever
interprets those values: eager autograd, a trace being compiled, an outer
vmap. Equations none of whose operands is batched run as they are, once for
the whole batch.
"""

from __future__ import annotations

import warnings
from contextlib import nullcontext

from . import primitives as P
from .graph import Const

RANDOMNESS = ("error", "different", "same")


class Batch:
    """What batching rules read of the batch: its ``size``, and
    ``constant(array, dtype)``, the caller's way to make a value."""

    def __init__(self, size: int, constant):
        self.size = size
        self.constant = constant


def needed_eqns(graph, outputs: list) -> list:
    """The graph's equations the ``outputs`` depend on, in order."""
    wanted = {id(v) for v in outputs}
    kept = []
    for eqn in reversed(graph.eqns):
        if id(eqn.out) in wanted:
            kept.append(eqn)
            wanted.update(id(v) for v in eqn.inputs)
    return kept[::-1]


def run_batched(eqns, inputs: dict, batch: Batch, randomness: str, without_grad) -> dict:
    """Evaluates ``eqns``: ``inputs`` maps each input var to (value, whether
    its batch axis is in front). Returns that map, with every equation's
    output added. ``without_grad(eqn)``: a context to run an equation in
    (those the trace recorded no gradient for run without one)."""
    env = dict(inputs)
    for eqn in eqns:
        args, batched = [], []
        for operand in eqn.inputs:
            if isinstance(operand, Const):
                args.append(batch.constant(operand.value, operand.dtype))
                batched.append(False)
            else:
                value, is_batched = env[operand]
                args.append(value)
                batched.append(is_batched)
        with without_grad(eqn) or nullcontext():
            if eqn.prim is P.random_bits and randomness == "different":
                shape = (batch.size, *eqn.params["shape"])
                env[eqn.out] = (P.random_bits(*args, shape=shape), True)
            elif True in batched:
                env[eqn.out] = (batched_apply(eqn.prim, batch, args, batched, eqn.params), True)
            else:
                env[eqn.out] = (eqn.prim(*args, **eqn.params), False)
    return env


_WARNED: set = set()  # primitives computed one element at a time, warned about once


def batched_apply(prim, batch: Batch, args: list, batched: list, params: dict):
    """``prim`` on operands of which those ``batched`` marks carry the batch in front."""
    rule = prim.batch_rule
    if rule is None:
        if prim not in _WARNED:
            _WARNED.add(prim)
            warnings.warn(
                f"vmap: {prim.name} has no batching rule; it is computed for one batch "
                "element at a time",
                stacklevel=2,
            )
        rule = P.batch_by_loop
    return rule(prim, batch, args, batched, params)
