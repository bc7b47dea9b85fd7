"""``torch.nn.modules.fold``'s path: ``Fold`` and ``Unfold``, which fusegrad
keeps in linear.py."""

from .linear import (
    Fold,
    Unfold,
)

__all__ = [
    "Fold",
    "Unfold",
]
