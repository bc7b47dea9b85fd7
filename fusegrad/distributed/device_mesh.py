"""``torch.distributed.device_mesh``: names only; fusegrad has no device meshes."""

from .tensor import DeviceMesh, init_device_mesh

__all__ = ["DeviceMesh", "init_device_mesh"]
