"""Spectral normalization by a forward pre-hook (the API that
``parametrizations.spectral_norm`` replaces): the weight divided by its
largest singular value, estimated by power iteration whose vectors
``<name>_u`` and ``<name>_v`` are buffers, one iteration step (or more) per
forward in training."""

from __future__ import annotations

from ...eager import creation, ops
from ...eager.grad_mode import no_grad
from ...eager.tensor import Tensor
from .. import functional as F
from ..modules.conv import ConvTranspose1d, ConvTranspose2d
from ..modules.module import Module
from ..parameter import Parameter

__all__ = ["SpectralNorm", "remove_spectral_norm", "spectral_norm"]


def weight_as_matrix(weight: Tensor, dim: int) -> Tensor:
    """``weight`` as a matrix whose rows run along ``dim``."""
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.ndim) if d != dim))
    return weight.reshape(weight.shape[0], -1)


class SpectralNorm:
    """The hook spectral_norm registers: before each forward it sets
    ``module.<name>`` to ``<name>_orig`` over its estimated spectral norm,
    improving the estimate first in training."""

    def __init__(
        self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12
    ):
        if n_power_iterations <= 0:
            raise ValueError(
                "Expected n_power_iterations to be positive, but got "
                f"n_power_iterations={n_power_iterations}"
            )
        self.name = name
        self.dim = dim
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        matrix = weight_as_matrix(weight, self.dim)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(ops.mv(matrix.t(), u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(ops.mv(matrix, v), dim=0, eps=self.eps))
            # copies: the next iteration updates the buffers the gradient reads
            u, v = u.clone(), v.clone()
        sigma = ops.dot(u, ops.mv(matrix, v))
        return weight / sigma

    @staticmethod
    def apply(
        module: Module, name: str, n_power_iterations: int, dim: int, eps: float
    ) -> SpectralNorm:
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(
                    f"Cannot register two spectral_norm hooks on the same parameter {name}"
                )
        hook = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        with no_grad():
            rows, columns = weight_as_matrix(weight, dim).shape
            draw = {"dtype": weight.dtype}
            u = F.normalize(creation.randn(rows, **draw), dim=0, eps=eps)
            v = F.normalize(creation.randn(columns, **draw), dim=0, eps=eps)
        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        # a plain attribute until the first forward sets it
        setattr(module, name, weight.data)
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(hook)
        return hook

    def remove(self, module: Module) -> None:
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module, module.training))


def default_dim(module: Module) -> int:
    """The dimension of the output channels: 1 for a transposed convolution's weight."""
    return 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d)) else 0


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """Divides the parameter ``name`` by its spectral norm before every
    forward (kept as ``<name>_orig``; the power iteration's vectors as the
    buffers ``<name>_u`` and ``<name>_v``, which eval mode leaves as they are)."""
    SpectralNorm.apply(
        module, name, n_power_iterations, default_dim(module) if dim is None else dim, eps
    )
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Makes ``name`` a plain parameter again, the normalized weight's value."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
