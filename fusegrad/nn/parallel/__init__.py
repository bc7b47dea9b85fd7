"""``fusegrad.nn.parallel``: data-parallel training over processes; and
``DataParallel``/``data_parallel``, which on the CPU run the module itself."""

from .data_parallel import DataParallel, data_parallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]
