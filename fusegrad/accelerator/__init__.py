"""``fusegrad.accelerator``: there is no accelerator, as in a CPU-only PyTorch
build. The questions get that build's answers, so that the usual choice

    accelerator = torch.accelerator
    device = accelerator.current_accelerator().type if accelerator.is_available() else "cpu"

picks the CPU; what needs an accelerator device raises PyTorch's error.
"""

from __future__ import annotations

import warnings

from .memory import (
    empty_cache,
    get_memory_info,
    max_memory_allocated,
    max_memory_reserved,
    memory_allocated,
    memory_reserved,
    memory_stats,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)
from .memory import no_accelerator as _no_accelerator

__all__ = [
    "current_accelerator",
    "current_device_idx",
    "current_device_index",
    "current_stream",
    "device_count",
    "device_index",
    "empty_cache",
    "get_memory_info",
    "is_available",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
    "set_device_idx",
    "set_device_index",
    "set_stream",
    "synchronize",
]


def device_count() -> int:
    return 0


def is_available() -> bool:
    return False


def current_accelerator(check_available: bool = False):
    """The accelerator's device type, or None when there is none: None."""
    return None


def current_device_index() -> int:
    raise _no_accelerator()


def current_device_idx() -> int:
    """PyTorch's deprecated name of ``current_device_index``."""
    warnings.warn("Use `current_device_index` instead.", FutureWarning, stacklevel=2)
    return current_device_index()


def set_device_index(device, /) -> None:
    """A negative index is a no-op, as in PyTorch; any device is an error."""
    if isinstance(device, int) and device < 0:
        return
    raise _no_accelerator(device)


def set_device_idx(device, /) -> None:
    """PyTorch's deprecated name of ``set_device_index``."""
    warnings.warn("Use `set_device_index` instead.", FutureWarning, stacklevel=2)
    set_device_index(device)


def current_stream(device=None, /):
    raise _no_accelerator(device)


def set_stream(stream) -> None:
    raise _no_accelerator()


def synchronize(device=None, /) -> None:
    raise _no_accelerator(device)


class device_index:
    """Makes ``device`` the current accelerator device within a ``with``
    block; ``device_index(None)`` changes nothing, and works without one."""

    def __init__(self, device: int | None, /):
        self.index = device

    def __enter__(self) -> None:
        if self.index is not None:
            raise _no_accelerator()

    def __exit__(self, *exc) -> None:
        return None
