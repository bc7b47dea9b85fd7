"""``torch.ao``: PyTorch's architecture optimizations; here ``quantization``."""

from . import quantization

__all__ = ["quantization"]
