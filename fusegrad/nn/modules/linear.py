"""``Linear``, ``LazyLinear``, ``Identity``, ``Flatten``, ``Unflatten``, ``Fold`` and ``Unfold``
(PyTorch keeps the last four in flatten.py and fold.py: those modules
re-export them)."""

from __future__ import annotations

import math

from ...eager import creation, ops
from ...eager.tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter, UninitializedParameter
from .lazy import LazyModuleMixin
from .module import Module, check_device


class Identity(Module):
    """Returns its input; it takes (and ignores) any arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x @ weight.T + bias, initialized as PyTorch does: weight by
    kaiming_uniform_ with a = sqrt(5), bias uniform in +-1/sqrt(in_features)."""

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None
    ):
        super().__init__()
        check_device(device)
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(creation.empty(out_features, in_features, dtype=dtype))
        if bias:
            self.bias = Parameter(creation.empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class LazyLinear(LazyModuleMixin, Linear):
    """A Linear whose ``in_features`` is its first input's last size: then
    it materializes and initializes its parameters and becomes a Linear."""

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__(0, 0, False, device)
        self.out_features = out_features
        self.weight = UninitializedParameter(dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        if self.has_uninitialized_params():
            self.in_features = input.shape[-1]
            self.weight.materialize((self.out_features, self.in_features))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()


class NonDynamicallyQuantizableLinear(Linear):
    """MultiheadAttention's output projection: a Linear, named as PyTorch names it."""


class Flatten(Module):
    """Flattens dimensions ``start_dim`` to ``end_dim`` into one."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return ops.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dimension ``dim`` into ``unflattened_size``."""

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError(
                "unflattened_size must be tuple of ints, but found type "
                + type(unflattened_size).__name__
            )
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input: Tensor) -> Tensor:
        return ops.unflatten(input, self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Unfold(Module):
    """im2col as a layer: (N, C, H, W) to (N, C k_h k_w, L)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = (
            kernel_size,
            dilation,
            padding,
            stride,
        )

    def forward(self, input: Tensor) -> Tensor:
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)


class Fold(Module):
    """col2im as a layer: columns (N, C k_h k_w, L) summed into (N, C, H, W)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return F.fold(
            input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride
        )
