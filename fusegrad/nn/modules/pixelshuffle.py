"""``torch.nn.modules.pixelshuffle``'s path: ``PixelShuffle`` and
``PixelUnshuffle``, which fusegrad keeps in activation.py."""

from .activation import (
    PixelShuffle,
    PixelUnshuffle,
)

__all__ = [
    "PixelShuffle",
    "PixelUnshuffle",
]
