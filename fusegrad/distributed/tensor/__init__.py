"""``torch.distributed.tensor``: names only; fusegrad has no distributed
tensors (DTensor) or device meshes."""

from .._unsupported import unsupported_class, unsupported_function
from . import parallel

__all__ = [
    "DTensor",
    "DeviceMesh",
    "Partial",
    "Replicate",
    "Shard",
    "distribute_module",
    "distribute_tensor",
    "init_device_mesh",
    "parallel",
]

DTensor = unsupported_class("tensor.DTensor", "tensor", __name__)
DeviceMesh = unsupported_class("tensor.DeviceMesh", "tensor", __name__)
Shard = unsupported_class("tensor.Shard", "tensor", __name__)
Replicate = unsupported_class("tensor.Replicate", "tensor", __name__)
Partial = unsupported_class("tensor.Partial", "tensor", __name__)
distribute_tensor = unsupported_function("tensor.distribute_tensor", "tensor")
distribute_module = unsupported_function("tensor.distribute_module", "tensor")
init_device_mesh = unsupported_function("device_mesh.init_device_mesh", "tensor")
