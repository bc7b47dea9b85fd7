"""``torch.nn.modules.padding``'s path: the padding layers, which fusegrad
keeps in pooling.py."""

from .pooling import (
    CircularPad1d,
    CircularPad2d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReplicationPad1d,
    ReplicationPad2d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)

__all__ = [
    "CircularPad1d",
    "CircularPad2d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
]
