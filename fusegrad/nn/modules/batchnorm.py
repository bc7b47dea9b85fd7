"""``torch.nn.modules.batchnorm``'s path: the batch normalizations, which
fusegrad keeps in normalization.py; their base classes too, by which code
tells batch normalizations apart."""

from .normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    LazyBatchNorm1d,
    LazyBatchNorm2d,
    LazyBatchNorm3d,
    SyncBatchNorm,
    _BatchNorm,  # noqa: F401
    _NormBase,  # noqa: F401
)

__all__ = [
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "LazyBatchNorm1d",
    "LazyBatchNorm2d",
    "LazyBatchNorm3d",
    "SyncBatchNorm",
]
