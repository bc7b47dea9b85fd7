"""``torch.nn.modules.flatten``'s path: ``Flatten`` and ``Unflatten``, which
fusegrad keeps in linear.py."""

from .linear import (
    Flatten,
    Unflatten,
)

__all__ = [
    "Flatten",
    "Unflatten",
]
