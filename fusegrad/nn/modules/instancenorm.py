"""``torch.nn.modules.instancenorm``'s path: the instance normalizations (and
their base class), which fusegrad keeps in normalization.py."""

from .normalization import (
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    _InstanceNorm,  # noqa: F401
)

__all__ = [
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
]
