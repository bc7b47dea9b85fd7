"""``fusegrad.cpu`` (``torch.cpu``): the device everything runs on; ``amp``
holds the deprecated CPU spellings of autocast and GradScaler."""

from . import amp


def is_available() -> bool:
    return True


def device_count() -> int:
    return 1


def current_device() -> str:
    return "cpu"


def synchronize(device=None) -> None:
    """A no-op, as PyTorch's: CPU operations are done when they return."""
