"""``fusegrad.nn.parallel``: data-parallel training over processes."""

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
