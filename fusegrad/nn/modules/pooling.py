"""Pooling modules (max, average, power average and adaptive max and
average, in one to three dimensions) and padding modules."""

from __future__ import annotations

from ...eager.tensor import Tensor
from .. import functional as F
from .module import Module


class _MaxPoolNd(Module):
    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        dilation=1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class MaxPool1d(_MaxPoolNd):
    def forward(self, input: Tensor):
        return F.max_pool1d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )


class MaxPool2d(_MaxPoolNd):
    def forward(self, input: Tensor):
        return F.max_pool2d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )


class MaxPool3d(_MaxPoolNd):
    def forward(self, input: Tensor):
        return F.max_pool3d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )


class AvgPool1d(Module):
    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
    ):
        super().__init__()
        self.kernel_size = F._tuple(kernel_size, 1, "kernel_size")
        self.stride = F._tuple(stride if stride is not None else kernel_size, 1, "stride")
        self.padding = F._tuple(padding, 1, "padding")
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool1d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
        )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AvgPoolNd(Module):
    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override=None,
    ):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return self.pool(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(_AvgPoolNd):
    pool = staticmethod(F.avg_pool2d)


class AvgPool3d(_AvgPoolNd):
    pool = staticmethod(F.avg_pool3d)


class _AdaptiveAvgPoolNd(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return self.pool(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    pool = staticmethod(F.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    pool = staticmethod(F.adaptive_avg_pool2d)


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    pool = staticmethod(F.adaptive_avg_pool3d)


class _AdaptiveMaxPoolNd(Module):
    def __init__(self, output_size, return_indices: bool = False):
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input: Tensor):
        return self.pool(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    pool = staticmethod(F.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    pool = staticmethod(F.adaptive_max_pool2d)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    pool = staticmethod(F.adaptive_max_pool3d)


class _LPPoolNd(Module):
    """The ``norm_type``-norm of each window (power average pooling)."""

    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        norm_type = float(self.norm_type)
        return self.pool(input, norm_type, self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (
            f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
            f"ceil_mode={self.ceil_mode}"
        )


class LPPool1d(_LPPoolNd):
    pool = staticmethod(F.lp_pool1d)


class LPPool2d(_LPPoolNd):
    pool = staticmethod(F.lp_pool2d)


class LPPool3d(_LPPoolNd):
    pool = staticmethod(F.lp_pool3d)


class _Pad(Module):
    """F.pad as a layer: ``padding`` one int for every side, or (before,
    after) pairs from the last dimension back."""

    mode, dims, value = "constant", 1, 0.0

    def __init__(self, padding):
        super().__init__()
        self.padding = (padding,) * (2 * self.dims) if isinstance(padding, int) else tuple(padding)

    def forward(self, input: Tensor) -> Tensor:
        if self.mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}" + (f", value={self.value}" if self.mode == "constant" else "")


class _ConstantPad(_Pad):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value


class ZeroPad1d(_Pad):
    dims = 1


class ZeroPad2d(_Pad):
    dims = 2


class ZeroPad3d(_Pad):
    dims = 3


class ConstantPad1d(_ConstantPad):
    dims = 1


class ConstantPad2d(_ConstantPad):
    dims = 2


class ConstantPad3d(_ConstantPad):
    dims = 3


class ReflectionPad1d(_Pad):
    mode, dims = "reflect", 1


class ReflectionPad2d(_Pad):
    mode, dims = "reflect", 2


class ReplicationPad1d(_Pad):
    mode, dims = "replicate", 1


class ReplicationPad2d(_Pad):
    mode, dims = "replicate", 2


class CircularPad1d(_Pad):
    mode, dims = "circular", 1


class CircularPad2d(_Pad):
    mode, dims = "circular", 2


class Upsample(Module):
    def __init__(
        self, size=None, scale_factor=None, mode="nearest", align_corners=None,
        recompute_scale_factor=None,
    ):  # fmt: skip
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.interpolate(
            input, self.size, self.scale_factor, self.mode, self.align_corners,
            recompute_scale_factor=self.recompute_scale_factor,
        )  # fmt: skip

    def extra_repr(self) -> str:
        described = f"size={self.size}" if self.size is not None else (
            f"scale_factor={float(self.scale_factor)}"
        )  # fmt: skip
        return f"{described}, mode='{self.mode}'"


class UpsamplingNearest2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
