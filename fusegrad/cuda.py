"""``fusegrad.cuda``: there is no CUDA device, as in a CPU-only PyTorch build.

Scripts that ask (``device = "cuda" if torch.cuda.is_available() else "cpu"``)
choose the CPU; seeding CUDA is silently ignored, as PyTorch ignores it
without CUDA.
"""


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def is_initialized() -> bool:
    return False


def manual_seed(seed: int) -> None:
    """Ignored: there is no CUDA generator to seed."""


def manual_seed_all(seed: int) -> None:
    """Ignored: there is no CUDA generator to seed."""
