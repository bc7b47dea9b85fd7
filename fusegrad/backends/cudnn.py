"""``fusegrad.backends.cudnn``: not available; ``benchmark`` and ``deterministic``
may be set, and change nothing (fusegrad's CPU kernels are deterministic)."""

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    return False
