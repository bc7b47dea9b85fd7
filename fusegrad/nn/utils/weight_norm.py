"""Weight normalization by a forward pre-hook (the API that
``parametrizations.weight_norm`` replaces): the weight kept as a magnitude
``<name>_g`` and a direction ``<name>_v``, and recomputed from them as
``g * v / ||v||`` before every forward."""

from __future__ import annotations

import warnings

from ...eager import ops
from ...eager.grad_mode import no_grad
from ...eager.ops import _named
from ...eager.tensor import Tensor
from ..modules.module import Module
from ..parameter import Parameter

__all__ = ["WeightNorm", "remove_weight_norm", "weight_norm"]


def norm_except_dim(weight: Tensor, dim: int) -> Tensor:
    """The 2-norm of each slice of ``weight`` along ``dim``, shaped to
    broadcast against it; for ``dim`` -1 the norm of the whole tensor."""
    if dim == -1:
        return ops.norm(weight)
    axis = dim % weight.ndim
    others = tuple(a for a in range(weight.ndim) if a != axis)
    return ops.norm(weight, 2, dim=others, keepdim=True)


@_named(
    lambda v, g, dim: "WeightNormInterfaceBackward0" if dim in (0, v.ndim - 1) else "MulBackward0"
)
def weight_norm_of(v: Tensor, g: Tensor, dim: int) -> Tensor:
    """``v`` scaled to the norms ``g`` (per slice along ``dim``, see norm_except_dim)."""
    return v * (g / norm_except_dim(v, dim))


class WeightNorm:
    """The hook weight_norm registers: before each forward it sets
    ``module.<name>`` to the weight ``<name>_g`` and ``<name>_v`` make."""

    def __init__(self, name: str, dim: int | None):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module: Module) -> Tensor:
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return weight_norm_of(v, g, self.dim)

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> WeightNorm:
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(
                    f"Cannot register two weight_norm hooks on the same parameter {name}"
                )
        hook = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, hook.dim).data))
        module.register_parameter(name + "_v", Parameter(weight.data))
        setattr(module, name, hook.compute_weight(module))
        module.register_forward_pre_hook(hook)
        return hook

    def remove(self, module: Module) -> None:
        with no_grad():
            weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Replaces the parameter ``name`` by its magnitude ``<name>_g`` (a norm
    per slice along ``dim``; None: one for the whole tensor) and its
    direction ``<name>_v``, the weight recomputed from them before every
    forward. Deprecated in favor of ``parametrizations.weight_norm``."""
    warnings.warn(
        "`torch.nn.utils.weight_norm` is deprecated in favor of "
        "`torch.nn.utils.parametrizations.weight_norm`.",
        FutureWarning,
        stacklevel=2,
    )
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Makes ``name`` a plain parameter again, of the weight's current value."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
