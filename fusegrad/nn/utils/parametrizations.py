"""``nn.utils.parametrizations``: weight and spectral normalization as
parametrizations (see parametrize.py): the weight computed from the tensors
it is kept as on every read, the forward hooks of the older API
(``nn.utils.weight_norm``, ``nn.utils.spectral_norm``) not needed."""

from __future__ import annotations

from ...eager import creation, ops
from ...eager.grad_mode import no_grad
from ...eager.tensor import Tensor
from .. import functional as F
from ..modules.module import Module
from . import parametrize
from .spectral_norm import default_dim, weight_as_matrix
from .weight_norm import norm_except_dim, weight_norm_of

__all__ = ["spectral_norm", "weight_norm"]


class _WeightNorm(Module):
    """The weight from its magnitude (``original0``, a norm per slice along
    ``dim``) and its direction (``original1``)."""

    def __init__(self, dim: int | None = 0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_norm_of(weight_v, weight_g, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple:
        return norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Keeps the parameter ``name`` as its magnitude
    (``parametrizations.<name>.original0``, a norm per slice along ``dim``;
    None: one for the whole tensor) and its direction (``original1``)."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


class _SpectralNorm(Module):
    """The weight over its largest singular value, estimated by power
    iteration on the weight as a matrix (rows along ``dim``): its vectors
    the buffers ``_u`` and ``_v``, improved at every read in training. A
    vector is normalized instead."""

    def __init__(
        self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12
    ):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but "
                f"got {dim})"
            )
        if n_power_iterations <= 0:
            raise ValueError(
                "Expected n_power_iterations to be positive, but got "
                f"n_power_iterations={n_power_iterations}"
            )
        self.dim = dim % ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            matrix = weight_as_matrix(weight, self.dim)
            rows, columns = matrix.shape
            u = creation.randn(rows, dtype=weight.dtype)
            v = creation.randn(columns, dtype=weight.dtype)
            self.register_buffer("_u", F.normalize(u, dim=0, eps=eps))
            self.register_buffer("_v", F.normalize(v, dim=0, eps=eps))
            # a good estimate from the start
            self._power_method(matrix, 15)

    @no_grad()
    def _power_method(self, matrix: Tensor, n_power_iterations: int) -> None:
        for _ in range(n_power_iterations):
            self._u.copy_(F.normalize(ops.mv(matrix, self._v), dim=0, eps=self.eps))
            self._v.copy_(F.normalize(ops.mv(matrix.t(), self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        matrix = weight_as_matrix(weight, self.dim)
        if self.training:
            self._power_method(matrix, self.n_power_iterations)
        # copies: the next iteration updates the buffers the gradient reads
        u, v = self._u.clone(), self._v.clone()
        sigma = ops.dot(u, ops.mv(matrix, v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """Divides the parameter ``name`` by its spectral norm at every read,
    estimated by ``n_power_iterations`` steps of power iteration per read
    in training (none in eval mode)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = default_dim(module)
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps)
    )
    return module
