"""``LayerNorm``, ``GroupNorm``, ``RMSNorm`` and the batch (synchronized
across processes too) and instance normalizations (which PyTorch keeps in
batchnorm.py and instancenorm.py: those modules re-export them)."""

from __future__ import annotations

from ... import distributed as dist
from ...eager import creation, ops
from ...eager.grad_mode import no_grad
from ...eager.ops import _named
from ...eager.tensor import Tensor
from ...ir import dtypes
from ...ir import primitives as P
from .. import functional as F
from .. import init
from ..parameter import Parameter, UninitializedBuffer, UninitializedParameter
from .lazy import LazyModuleMixin
from .module import Module, check_device


class LayerNorm(Module):
    """Normalizes over the trailing ``normalized_shape`` dimensions, then scales
    and shifts elementwise (``elementwise_affine``; ``bias=False`` scales only)."""

    def __init__(
        self,
        normalized_shape,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        check_device(device)
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
        self.normalized_shape = tuple(shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(creation.ones(self.normalized_shape, dtype=dtype))
            if bias:
                self.bias = Parameter(creation.zeros(self.normalized_shape, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )


class _NormBase(Module):
    """What batch and instance normalization share, as in PyTorch (where
    ``isinstance(m, _BatchNorm)`` tells the batch normalizations apart): the
    per-channel affine parameters and running statistics (buffers
    ``running_mean``, ``running_var``, ``num_batches_tracked``)."""

    expected_dims: tuple = ()

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ):
        super().__init__()
        check_device(device)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(creation.empty(num_features, dtype=dtype))
            if bias:
                self.bias = Parameter(creation.empty(num_features, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", creation.zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", creation.ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", creation.tensor(0, dtype=dtypes.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() not in self.expected_dims:
            wanted = " or ".join(f"{d}D" for d in self.expected_dims)
            raise ValueError(f"expected {wanted} input (got {input.dim()}D input)")

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, bias={self.bias is not None}, "
            f"track_running_stats={self.track_running_stats}"
        )


class _BatchNorm(_NormBase):
    """Normalizes each channel by the batch's statistics in training and by
    the running estimates of them in eval mode; ``momentum=None`` makes the
    estimates plain averages over the batches seen."""

    def _momentum(self):
        """The factor the running statistics move by this batch (a batch in
        training counted first)."""
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a tensor: under jit the count is no constant
                factor = 1.0 / self.num_batches_tracked.to(self.running_mean.dtype)
        return factor

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = self._momentum()
        batch_statistics = self.training or (self.running_mean is None and self.running_var is None)
        keep_running = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if keep_running else None,
            self.running_var if keep_running else None,
            self.weight,
            self.bias,
            batch_statistics,
            factor,
            self.eps,
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L)."""

    expected_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W)."""

    expected_dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalization of (N, C, D, H, W)."""

    expected_dims = (5,)


class _LazyNormBase(LazyModuleMixin, _NormBase):
    """A normalization whose ``num_features`` is its first input's channels."""

    def __init__(
        self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
        dtype=None,
    ):  # fmt: skip
        super().__init__(0, eps, momentum, False, False, device)
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = UninitializedParameter(dtype=dtype)
            self.bias = UninitializedParameter(dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(dtype=dtype)
            self.running_var = UninitializedBuffer(dtype=dtype)
            self.num_batches_tracked = creation.tensor(0, dtype=dtypes.int64)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        if not self.has_uninitialized_params():
            return
        self.num_features = input.shape[1]
        for tensor in (self.weight, self.bias, self.running_mean, self.running_var):
            if tensor is not None:
                tensor.materialize((self.num_features,))
        self.reset_parameters()


class LazyBatchNorm1d(_LazyNormBase, _BatchNorm):
    """A BatchNorm1d whose ``num_features`` is its first input's channels."""

    cls_to_become = BatchNorm1d
    expected_dims = BatchNorm1d.expected_dims


class LazyBatchNorm2d(_LazyNormBase, _BatchNorm):
    cls_to_become = BatchNorm2d
    expected_dims = BatchNorm2d.expected_dims


class LazyBatchNorm3d(_LazyNormBase, _BatchNorm):
    cls_to_become = BatchNorm3d
    expected_dims = BatchNorm3d.expected_dims


@_named("SyncBatchNormBackward")
def _synchronized_batch_norm(input, running_mean, running_var, weight, bias, momentum, eps, group):
    """Batch normalization by the statistics of the batches of every process
    of ``group``: counts and sums, then squared deviations from the mean,
    summed over the processes by all_reduce, which gradients flow through
    (its backward sums the processes' cotangents)."""
    channels = input.shape[1]
    axes = (0, *range(2, input.ndim))
    shape = (1, channels) + (1,) * (input.ndim - 2)
    count = creation.tensor([float(input.numel() // channels)], dtype=input.dtype)
    totals = P.all_reduce(ops.cat([count, ops.sum(input, axes)]), op="sum", group=group)
    count, mean = totals[0], totals[1:] / totals[0]
    centered = input - mean.reshape(shape)
    squares = P.all_reduce(ops.sum(centered * centered, axes), op="sum", group=group)
    if running_mean is not None and running_var is not None:
        with no_grad():
            running_mean.copy_(mean * momentum + running_mean * (1 - momentum))
            running_var.copy_(squares / (count - 1) * momentum + running_var * (1 - momentum))
    scale = ops.rsqrt(squares / count + eps)
    if weight is not None:
        scale = scale * weight
    out = centered * scale.reshape(shape)
    return out if bias is None else out + bias.reshape(shape)


class SyncBatchNorm(_BatchNorm):
    """Batch normalization of (N, C, ...) by the statistics of the global
    batch: in training, with an initialized process group (``process_group``,
    default the world) of more than one process, those of every process's
    batch together; otherwise (one process, eval mode) it is BatchNorm.
    (PyTorch synchronizes GPU tensors only and refuses CPU ones; fusegrad's
    are CPU tensors and its collectives MPI's, so it synchronizes them.)"""

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        process_group=None,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ):
        super().__init__(
            num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias
        )
        self.process_group = process_group

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def _synchronized_group(self):
        """The group whose batches make the statistics, or None for this
        process's batch alone."""
        if not self.training or not dist.is_initialized():
            return None
        group = dist.group.WORLD if self.process_group is None else self.process_group
        return group if dist.get_world_size(group) > 1 else None

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        if input.shape[1] == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        group = self._synchronized_group()
        if group is None:
            return super().forward(input)
        running = self.track_running_stats
        return _synchronized_batch_norm(
            input,
            self.running_mean if running else None,
            self.running_var if running else None,
            self.weight,
            self.bias,
            self._momentum(),
            self.eps,
            group,
        )

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group=None) -> Module:
        """``module`` with each batch normalization in it (``module`` itself
        too) replaced by a SyncBatchNorm holding its parameters, running
        statistics and mode."""
        converted = module
        if isinstance(module, _BatchNorm):
            converted = SyncBatchNorm(
                module.num_features,
                module.eps,
                module.momentum,
                module.affine,
                module.track_running_stats,
                process_group,
                bias=module.bias is not None,
            )
            if module.affine:
                converted.weight = module.weight
                converted.bias = module.bias
            converted.running_mean = module.running_mean
            converted.running_var = module.running_var
            converted.num_batches_tracked = module.num_batches_tracked
            converted.training = module.training
            if hasattr(module, "qconfig"):
                converted.qconfig = module.qconfig
        for name, child in module.named_children():
            converted.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return converted


class GroupNorm(Module):
    """Normalizes each sample over groups of channels (and the other
    dimensions), then scales and shifts per channel (``affine``)."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None):
        super().__init__()
        check_device(device)
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = (
            num_groups,
            num_channels,
            eps,
            affine,
        )
        if affine:
            self.weight = Parameter(creation.ones(num_channels, dtype=dtype))
            self.bias = Parameter(creation.zeros(num_channels, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _InstanceNorm(_NormBase):
    """Normalizes each sample's each channel over its own other dimensions;
    PyTorch's defaults: no affine parameters, no running statistics."""

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=False,
        track_running_stats=False,
        device=None,
        dtype=None,
        *,
        bias=True,
    ):
        super().__init__(
            num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias
        )

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        unbatched = input.dim() == self.expected_dims[0]
        channels = input.shape[0 if unbatched else 1]
        if self.affine and channels != self.num_features:
            raise ValueError(
                f"expected input's size at dim={0 if unbatched else 1} to match num_features "
                f"({self.num_features}), but got: {channels}."
            )
        if unbatched:
            input = input.unsqueeze(0)
        use_input_stats = self.training or not self.track_running_stats
        out = F.instance_norm(
            input,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            use_input_stats,
            0.1 if self.momentum is None else self.momentum,
            self.eps,
        )
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    expected_dims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    expected_dims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    expected_dims = (4, 5)


class RMSNorm(Module):
    def __init__(
        self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None
    ):
        super().__init__()
        check_device(device)
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
        self.normalized_shape, self.eps = tuple(shape), eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(creation.ones(self.normalized_shape, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, input: Tensor) -> Tensor:
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )
