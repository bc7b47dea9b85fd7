"""``torch.xpu``: Intel's GPUs, absent as in a PyTorch build without XPU:
the questions have answers, what needs a device raises PyTorch's error."""

from __future__ import annotations


def _not_compiled() -> AssertionError:
    return AssertionError("Torch not compiled with XPU enabled")


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def is_initialized() -> bool:
    return False


def manual_seed(seed: int) -> None:
    """Ignored: there is no XPU generator to seed."""


def manual_seed_all(seed: int) -> None:
    """Ignored: there is no XPU generator to seed."""


def empty_cache() -> None:
    """A no-op: XPU was never initialised, so there is no cache to release."""


def synchronize(device=None) -> None:
    raise _not_compiled()


def current_device() -> int:
    raise _not_compiled()


def set_device(device) -> None:
    raise _not_compiled()


def get_device_name(device=None) -> str:
    raise _not_compiled()
