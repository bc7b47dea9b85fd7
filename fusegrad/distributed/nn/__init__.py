"""``torch.distributed.nn``: the differentiable collectives of ``functional``."""

from . import functional
from .functional import all_gather, all_reduce, broadcast

__all__ = ["all_gather", "all_reduce", "broadcast", "functional"]
