"""``fusegrad.backends.cuda``: not built; ``matmul.allow_tf32`` may be set and
changes nothing (CPU matrix products are float32 throughout)."""

from types import SimpleNamespace

matmul = SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True)


def is_built() -> bool:
    return False
