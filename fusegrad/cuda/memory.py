"""``torch.cuda.memory``: the caching allocator's statistics, as a PyTorch
build without CUDA gives them. CUDA is never initialised, so the counters are
0 and the statistics empty; resetting them calls the missing CUDA bindings."""

from __future__ import annotations

import collections
import warnings

from .devices import device_index, missing_binding


def empty_cache() -> None:
    """A no-op: CUDA was never initialised, so there is no cache to release."""


def memory_stats(device=None) -> collections.OrderedDict:
    return collections.OrderedDict()


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """Fails as PyTorch's does without CUDA: its table reads counters that
    ``memory_stats`` (empty) does not have."""
    raise KeyError("allocated_bytes.all.current")


def memory_allocated(device=None) -> int:
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None) -> int:
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None) -> int:
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None) -> int:
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def memory_cached(device=None) -> int:
    warnings.warn(
        "torch.cuda.memory_cached has been renamed to torch.cuda.memory_reserved",
        FutureWarning,
        stacklevel=2,
    )
    return memory_reserved(device)


def max_memory_cached(device=None) -> int:
    warnings.warn(
        "torch.cuda.max_memory_cached has been renamed to torch.cuda.max_memory_reserved",
        FutureWarning,
        stacklevel=2,
    )
    return max_memory_reserved(device)


def reset_peak_memory_stats(device=None) -> None:
    device_index(device, optional=True)
    raise missing_binding("_cuda_resetPeakMemoryStats")


def reset_accumulated_memory_stats(device=None) -> None:
    device_index(device, optional=True)
    raise missing_binding("_cuda_resetAccumulatedMemoryStats")


def reset_max_memory_allocated(device=None) -> None:
    warnings.warn(
        "torch.cuda.reset_max_memory_allocated now calls torch.cuda.reset_peak_memory_stats, "
        "which resets /all/ peak memory stats.",
        FutureWarning,
        stacklevel=2,
    )
    return reset_peak_memory_stats(device)


def reset_max_memory_cached(device=None) -> None:
    warnings.warn(
        "torch.cuda.reset_max_memory_cached now calls torch.cuda.reset_peak_memory_stats, "
        "which resets /all/ peak memory stats.",
        FutureWarning,
        stacklevel=2,
    )
    return reset_peak_memory_stats(device)
