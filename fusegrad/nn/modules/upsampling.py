"""``torch.nn.modules.upsampling``'s path: the upsampling layers, which
fusegrad keeps in pooling.py."""

from .pooling import (
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
)

__all__ = [
    "Upsample",
    "UpsamplingBilinear2d",
    "UpsamplingNearest2d",
]
