"""``torch.utils.mobile_optimizer``: fusegrad makes no TorchScript modules
for PyTorch Mobile, so there is nothing to optimize for it."""

from __future__ import annotations


def optimize_for_mobile(
    script_module, optimization_blocklist=None, preserved_methods=None, backend="CPU"
):
    raise RuntimeError(
        "torch.utils.mobile_optimizer.optimize_for_mobile: fusegrad cannot optimize for "
        "PyTorch Mobile (it has no TorchScript modules or mobile runtime); export the model "
        "with PyTorch"
    )
