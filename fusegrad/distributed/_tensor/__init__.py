"""``torch.distributed._tensor``: the older path of ``torch.distributed.tensor``."""

from ..tensor import (
    DeviceMesh,
    DTensor,
    Partial,
    Replicate,
    Shard,
    distribute_module,
    distribute_tensor,
    init_device_mesh,
)
from . import device_mesh

__all__ = [
    "DTensor",
    "DeviceMesh",
    "Partial",
    "Replicate",
    "Shard",
    "device_mesh",
    "distribute_module",
    "distribute_tensor",
    "init_device_mesh",
]
