"""``Conv1d``, ``Conv2d``, ``Conv3d``, ``ConvTranspose1d``, ``ConvTranspose2d``,
``ConvTranspose3d``, and their lazy forms (``LazyConv2d``, ...), which take
their input's channels from the first input."""

from __future__ import annotations

import math

from ...eager import creation
from ...eager.tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter, UninitializedParameter
from .lazy import LazyModuleMixin
from .module import Module, check_device

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    """A convolution's settings and parameters: weight (out, in/groups, *kernel)
    and bias (out), initialized as PyTorch does."""

    dims = 0

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ):
        super().__init__()
        check_device(device)
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(
                f"padding_mode must be one of {set(_PADDING_MODES)}, but got "
                f"padding_mode='{padding_mode}'"
            )
        n = self.dims
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = F._tuple(kernel_size, n, "kernel_size")
        self.stride = F._tuple(stride, n, "stride")
        self.dilation = F._tuple(dilation, n, "dilation")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(
                    f"Invalid padding string {padding!r}, should be one of {{'same', 'valid'}}"
                )
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = F._tuple(padding, n, "padding")
        self.groups, self.padding_mode = groups, padding_mode
        self.weight = Parameter(
            creation.empty(out_channels, in_channels // groups, *self.kernel_size, dtype=dtype)
        )
        if bias:
            self.bias = Parameter(creation.empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _padding_widths(self) -> tuple:
        """F.pad's widths (the last dimension first) for a padding_mode other than zeros."""
        if self.padding == "valid":
            pairs = ((0, 0),) * self.dims
        elif self.padding == "same":
            pairs = F._same_padding(self.kernel_size, self.dilation)
        else:
            pairs = tuple((p, p) for p in self.padding)
        return tuple(width for pair in reversed(pairs) for width in pair)

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        conv = (F.conv1d, F.conv2d, F.conv3d)[self.dims - 1]
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._padding_widths(), mode=self.padding_mode)
            return conv(padded, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        n = self.dims
        text = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        if self.padding != (0,) * n:
            text += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            text += f", dilation={self.dilation}"
        output_padding = getattr(self, "output_padding", (0,) * n)  # a transposed convolution's
        if output_padding != (0,) * n:
            text += f", output_padding={output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text


class Conv1d(_ConvNd):
    """1-D convolution over (N, C, L) or (C, L)."""

    dims = 1


class Conv2d(_ConvNd):
    """2-D convolution over (N, C, H, W) or (C, H, W)."""

    dims = 2


class Conv3d(_ConvNd):
    """3-D convolution over (N, C, D, H, W) or (C, D, H, W)."""

    dims = 3


class _ConvTransposeNd(_ConvNd):
    """A transposed convolution: weight (in, out/groups, *kernel), the
    gradient of a convolution in its input as a layer."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups: int = 1,
        bias: bool = True,
        dilation=1,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        if isinstance(padding, str):
            raise ValueError(f"padding={padding!r} is not supported for transposed convolutions")
        super().__init__(
            out_channels, in_channels, kernel_size, stride, padding, dilation, groups, bias,
            padding_mode, device, dtype,
        )  # fmt: skip
        # the base made the weight (in, out/groups, ...) from the swapped
        # roles; the bias is one per output channel
        self.in_channels, self.out_channels = in_channels, out_channels
        self.output_padding = F._tuple(output_padding, self.dims, "output_padding")
        if bias:
            self.bias = Parameter(creation.empty(out_channels, dtype=dtype))
            self.reset_parameters()

    def _output_padding(self, input: Tensor, output_size) -> tuple:
        if output_size is None:
            return self.output_padding
        wanted = tuple(output_size)[-self.dims :]
        spatial = input.shape[-self.dims :]
        least = tuple(
            (n - 1) * s - 2 * p + d * (k - 1) + 1
            for n, s, p, d, k in zip(
                spatial, self.stride, self.padding, self.dilation, self.kernel_size
            )
        )
        extra = tuple(w - m for w, m in zip(wanted, least))
        if any(e < 0 or e >= max(s, d) for e, s, d in zip(extra, self.stride, self.dilation)):
            raise ValueError(
                f"requested an output size of {list(wanted)}, but valid sizes range from "
                f"{list(least)} to "
                f"{[m + max(s, d) - 1 for m, s, d in zip(least, self.stride, self.dilation)]} "
                f"(for an input of {list(spatial)})"
            )
        return extra

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        transpose = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[self.dims - 1]
        return transpose(
            input, self.weight, self.bias, self.stride, self.padding,
            self._output_padding(input, output_size), self.groups, self.dilation,
        )  # fmt: skip


class ConvTranspose1d(_ConvTransposeNd):
    dims = 1


class ConvTranspose2d(_ConvTransposeNd):
    dims = 2


class ConvTranspose3d(_ConvTransposeNd):
    dims = 3


class _LazyConvMixin(LazyModuleMixin):
    """A convolution whose ``in_channels`` is its first input's channels."""

    def _lazy_init(self, out_channels: int, bias: bool, dtype) -> None:
        """The settings the module was made with, its parameters uninitialized."""
        self.out_channels = out_channels
        self.weight = UninitializedParameter(dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor, *args, **kwargs) -> None:
        if not self.has_uninitialized_params():
            return
        if input.dim() not in (self.dims + 1, self.dims + 2):
            raise RuntimeError(
                f"Expected {self.dims + 1}D (unbatched) or {self.dims + 2}D (batched) input to "
                f"{type(self).__name__}, but got input of size: {input.shape}"
            )
        self.in_channels = input.shape[0 if input.dim() == self.dims + 1 else 1]
        if self.in_channels % self.groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if isinstance(self, _ConvTransposeNd):
            rows, columns = self.in_channels, self.out_channels // self.groups
        else:
            rows, columns = self.out_channels, self.in_channels // self.groups
        self.weight.materialize((rows, columns, *self.kernel_size))
        if self.bias is not None:
            self.bias.materialize((self.out_channels,))
        self.reset_parameters()


class _LazyConvNd(_LazyConvMixin, _ConvNd):
    def __init__(
        self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1,
        bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None,
    ):  # fmt: skip
        super().__init__(
            0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode, device
        )
        self._lazy_init(out_channels, bias, dtype)


class _LazyConvTransposeNd(_LazyConvMixin, _ConvTransposeNd):
    def __init__(
        self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
        groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros",
        device=None, dtype=None,
    ):  # fmt: skip
        super().__init__(
            0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation,
            padding_mode, device,
        )  # fmt: skip
        self._lazy_init(out_channels, bias, dtype)


class LazyConv1d(_LazyConvNd, Conv1d):
    cls_to_become = Conv1d


class LazyConv2d(_LazyConvNd, Conv2d):
    cls_to_become = Conv2d


class LazyConv3d(_LazyConvNd, Conv3d):
    cls_to_become = Conv3d


class LazyConvTranspose1d(_LazyConvTransposeNd, ConvTranspose1d):
    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTransposeNd, ConvTranspose2d):
    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTransposeNd, ConvTranspose3d):
    cls_to_become = ConvTranspose3d
