"""``torch.distributed.nn.functional``: the collectives as functions
returning new tensors, their inputs untouched. fusegrad's collectives are
differentiable already, so these are them applied to a copy."""

from __future__ import annotations

from ...eager.creation import zeros_like
from .. import collectives
from ..process_group import ReduceOp


def all_reduce(tensor, op=ReduceOp.SUM, group=None):
    result = tensor.clone()
    collectives.all_reduce(result, op, group)
    return result


def broadcast(tensor, src, group=None):
    result = tensor.clone()
    collectives.broadcast(result, src, group)
    return result


def all_gather(tensor, group=None) -> tuple:
    gathered = [zeros_like(tensor) for _ in range(collectives.resolve(group).size())]
    collectives.all_gather(gathered, tensor, group)
    return tuple(gathered)
