"""``torch.mps``: Apple's Metal backend, absent as in a PyTorch build
without it. The questions have answers (none available, seeding ignored);
what needs the backend raises the error PyTorch raises, naming the missing
call."""

from __future__ import annotations


def _no_backend(call: str) -> RuntimeError:
    return RuntimeError(f"Cannot execute {call}() without MPS backend.")


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def manual_seed(seed: int) -> None:
    """Ignored: there is no MPS generator to seed."""


def seed() -> None:
    raise _no_backend("getDefaultGenerator")


def get_rng_state(device="mps"):
    raise _no_backend("getDefaultGenerator")


def set_rng_state(new_state, device="mps") -> None:
    raise _no_backend("getDefaultGenerator")


def synchronize() -> None:
    raise _no_backend("deviceSynchronize")


def empty_cache() -> None:
    raise _no_backend("emptyCache")


def current_allocated_memory() -> int:
    raise _no_backend("getCurrentAllocatedMemory")


def driver_allocated_memory() -> int:
    raise _no_backend("getDriverAllocatedMemory")


def recommended_max_memory() -> int:
    raise _no_backend("getRecommendedMaxMemory")


def set_per_process_memory_fraction(fraction: float) -> None:
    raise _no_backend("setMemoryFraction")


class Event:
    def __init__(self, enable_timing: bool = False):
        raise _no_backend("acquireEvent")
