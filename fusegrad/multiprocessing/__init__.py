"""``fusegrad.multiprocessing``: the standard library's ``multiprocessing``
with PyTorch's additions, as ``torch.multiprocessing``: ``spawn`` and
``start_processes`` (``fn(i, *args)`` in each of ``nprocs`` processes, a
child's failure raised in the parent) and the sharing strategies.

Tensors pass between processes (queues, pipes, arguments) by pickling, as
copies of their values: fusegrad has no shared-memory tensors, so the
sharing strategy names what PyTorch would do and changes nothing here.
"""

import multiprocessing
import sys
from multiprocessing import *  # noqa: F403

from .spawn import (
    ProcessContext,
    ProcessException,
    ProcessExitedException,
    ProcessRaisedException,
    SpawnContext,
    spawn,
    start_processes,
)

__all__ = [
    "get_all_sharing_strategies",
    "get_sharing_strategy",
    "set_sharing_strategy",
    *multiprocessing.__all__,
]

_all_sharing_strategies = (
    {"file_system"} if sys.platform in ("darwin", "win32") else {"file_descriptor", "file_system"}
)
_sharing_strategy = "file_system" if sys.platform in ("darwin", "win32") else "file_descriptor"


def set_sharing_strategy(new_strategy: str) -> None:
    """How PyTorch would share tensors' memory with other processes: one of
    ``get_all_sharing_strategies()``."""
    global _sharing_strategy
    if new_strategy not in _all_sharing_strategies:
        raise AssertionError(
            f"invalid sharing strategy {new_strategy!r}, expected one of {_all_sharing_strategies}"
        )
    _sharing_strategy = new_strategy


def get_sharing_strategy() -> str:
    return _sharing_strategy


def get_all_sharing_strategies() -> set:
    return _all_sharing_strategies
