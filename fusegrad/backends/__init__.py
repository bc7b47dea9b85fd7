"""``fusegrad.backends``: the flags PyTorch scripts read and set. There is no
CUDA, cuDNN or MPS backend (``is_available()`` is False); their switches are
attributes scripts may set, and they change nothing (``cuda.matmul.allow_tf32``
is ``set_float32_matmul_precision``'s setting, which computes no differently)."""

from . import cuda, cudnn, mps

__all__ = ["cuda", "cudnn", "mps"]
