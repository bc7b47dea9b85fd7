"""``fusegrad.backends.cuda``: not built. ``matmul.allow_tf32`` is PyTorch's
older spelling of the float32 matrix-product precision (True: "high", False:
"highest"), read and set through ``set_float32_matmul_precision``; fusegrad
computes every float32 product in full precision either way.

The scaled-dot-product-attention switches say which kernels
``scaled_dot_product_attention`` may use. On the CPU PyTorch has a math and
a flash kernel, which compute the same function; fusegrad's one kernel is
the math one and stands for both. With neither allowed there is no kernel
for the CPU, and the call fails as PyTorch's does."""

from __future__ import annotations

import contextlib
import warnings

from .. import _settings

# the kernels scaled_dot_product_attention may use, by torch.nn.attention.SDPBackend name
sdp_allowed = {"FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH", "CUDNN_ATTENTION"}
_CPU_SDP_KERNELS = {"FLASH_ATTENTION", "MATH"}


class _MatmulSettings:
    """``torch.backends.cuda.matmul``: its flags, and no others."""

    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self) -> bool:
        return _settings.get_float32_matmul_precision() != "highest"

    @allow_tf32.setter
    def allow_tf32(self, allow: bool) -> None:
        _settings.set_float32_matmul_precision("high" if allow else "highest")

    def __getattr__(self, name: str):
        raise AttributeError(f"Unknown attribute {name}")

    def __setattr__(self, name: str, value) -> None:
        if not hasattr(type(self), name):
            raise AttributeError(f"Unknown attribute {name}")
        object.__setattr__(self, name, value)


matmul = _MatmulSettings()


def is_built() -> bool:
    return False


def _allow_sdp(backend: str, enabled: bool) -> None:
    if enabled:
        sdp_allowed.add(backend)
    else:
        sdp_allowed.discard(backend)


def enable_flash_sdp(enabled: bool) -> None:
    _allow_sdp("FLASH_ATTENTION", enabled)


def enable_mem_efficient_sdp(enabled: bool) -> None:
    _allow_sdp("EFFICIENT_ATTENTION", enabled)


def enable_math_sdp(enabled: bool) -> None:
    _allow_sdp("MATH", enabled)


def enable_cudnn_sdp(enabled: bool) -> None:
    _allow_sdp("CUDNN_ATTENTION", enabled)


def flash_sdp_enabled() -> bool:
    return "FLASH_ATTENTION" in sdp_allowed


def mem_efficient_sdp_enabled() -> bool:
    return "EFFICIENT_ATTENTION" in sdp_allowed


def math_sdp_enabled() -> bool:
    return "MATH" in sdp_allowed


def cudnn_sdp_enabled() -> bool:
    return "CUDNN_ATTENTION" in sdp_allowed


def check_sdp_kernel_allowed() -> None:
    """Raises PyTorch's error when no kernel for the CPU is allowed."""
    if not sdp_allowed & _CPU_SDP_KERNELS:
        raise RuntimeError(
            "No viable backend for scaled_dot_product_attention was found. This is likely "
            "due to turning off both the math kernel and the fused kernels."
        )


@contextlib.contextmanager
def allowed_sdp_kernels(backends: set):
    """Within the block exactly ``backends`` (SDPBackend names) are allowed."""
    before = set(sdp_allowed)
    sdp_allowed.clear()
    sdp_allowed.update(backends)
    try:
        yield
    finally:
        sdp_allowed.clear()
        sdp_allowed.update(before)


def sdp_kernel(
    enable_flash: bool = True,
    enable_math: bool = True,
    enable_mem_efficient: bool = True,
    enable_cudnn: bool = True,
):
    """The deprecated spelling of ``torch.nn.attention.sdpa_kernel``."""
    warnings.warn(
        "`torch.backends.cuda.sdp_kernel()` is deprecated. In the future, this context "
        "manager will be removed. Please see `torch.nn.attention.sdpa_kernel()` for the new "
        "context manager, with updated signature.",
        FutureWarning,
        stacklevel=2,
    )
    flags = {
        "FLASH_ATTENTION": enable_flash,
        "MATH": enable_math,
        "EFFICIENT_ATTENTION": enable_mem_efficient,
        "CUDNN_ATTENTION": enable_cudnn,
    }
    return allowed_sdp_kernels({name for name, on in flags.items() if on})
