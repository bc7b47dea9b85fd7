"""``fusegrad.backends``: the flags PyTorch scripts read and set. There is no
CUDA, cuDNN or MPS backend (``is_available()`` is False); their switches are
module attributes scripts may set, and they change nothing."""

from . import cuda, cudnn, mps

__all__ = ["cuda", "cudnn", "mps"]
