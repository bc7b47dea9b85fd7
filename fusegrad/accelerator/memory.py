"""``fusegrad.accelerator.memory``: an accelerator's memory statistics, which
need an accelerator: each raises PyTorch's error for a build without one."""

from __future__ import annotations

from ..eager.devices import device as _device


def no_accelerator(device=None) -> RuntimeError:
    """PyTorch's error for a question about an accelerator device, when there
    is none; naming a device (``"cuda:0"``) fails sooner, as it does there."""
    if isinstance(device, (str, _device)):
        return RuntimeError("Accelerator expected")
    return RuntimeError("Cannot access accelerator device when none is available.")


# The statistics ask the allocator first, which needs the accelerator, before
# they look at the device they are given.


def empty_cache() -> None:
    raise no_accelerator()


def memory_stats(device_index=None, /):
    raise no_accelerator()


def memory_allocated(device_index=None, /) -> int:
    raise no_accelerator()


def max_memory_allocated(device_index=None, /) -> int:
    raise no_accelerator()


def memory_reserved(device_index=None, /) -> int:
    raise no_accelerator()


def max_memory_reserved(device_index=None, /) -> int:
    raise no_accelerator()


def reset_accumulated_memory_stats(device_index=None, /) -> None:
    raise no_accelerator(device_index)


def reset_peak_memory_stats(device_index=None, /) -> None:
    raise no_accelerator(device_index)


def get_memory_info(device_index=None, /) -> tuple:
    raise no_accelerator(device_index)
