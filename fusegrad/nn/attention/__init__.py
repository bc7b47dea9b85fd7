"""``torch.nn.attention``: which kernels ``scaled_dot_product_attention``
may use. fusegrad's CPU kernel is the math one, standing also for PyTorch's
CPU flash kernel (the same function); allowing only CUDA's kernels leaves
none, and the call fails as it does in PyTorch on the CPU."""

from __future__ import annotations

import contextlib
import enum

from ...backends import cuda as _backends_cuda

__all__ = ["SDPBackend", "sdpa_kernel"]


class SDPBackend(enum.IntEnum):
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


def sdpa_kernel(backends, set_priority: bool = False) -> contextlib.AbstractContextManager:
    """Within the ``with`` block only ``backends`` (one SDPBackend or a list)
    may run ``scaled_dot_product_attention``."""
    if isinstance(backends, SDPBackend):
        backends = [backends]
    if not isinstance(backends, list) or not all(isinstance(b, SDPBackend) for b in backends):
        raise AssertionError(
            "Backend must be an instance of SDPBackend or a list of SDPBackend instances, "
            f"got {type(backends).__name__}"
        )
    return _backends_cuda.allowed_sdp_kernels({backend.name for backend in backends})
