"""``DataParallel`` and ``data_parallel``: replicas of a module on the GPUs,
in PyTorch. Without a GPU PyTorch's DataParallel runs the module itself, and
so do both here (``device_ids`` and ``output_device`` have nothing to name)."""

from __future__ import annotations

from ..modules.module import Module


class DataParallel(Module):
    """Wraps ``module`` (as ``self.module``, so its state_dict keys gain the
    ``module.`` prefix PyTorch's do) and calls it."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        self.module = module
        self.device_ids = []
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(
    module, inputs, device_ids=None, output_device=None, dim: int = 0, module_kwargs=None
):
    """``module(*inputs, **module_kwargs)``; ``inputs`` one tensor or a tuple."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return module(*inputs, **(module_kwargs or {}))
