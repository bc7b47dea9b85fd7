"""``fusegrad.nn.functional``: neural-network functions, all compositions of ops
and primitives. Convolution and pooling take the windows of their input
(``windows``, im2col) and then multiply or reduce them; a convolution of
stride 1 multiplies them where they lie (``windows_matmul``) and max pooling
over tiles has primitives of its own; see primitives.py."""

from __future__ import annotations

import functools
import itertools
import math
import numbers
import warnings

import numpy as np

from ..backends import cuda as backends_cuda
from ..eager import creation, ops
from ..eager.autocast_policy import autocasts
from ..eager.grad_mode import no_grad
from ..eager.ops import (
    _named,
    _rounded_once,
    gelu,
    index_tensors,
    log_softmax,
    sigmoid,
    softmax,
    tanh,
)
from ..eager.ops.linear import check_added_dtype
from ..eager.random import bernoulli_mask
from ..eager.tensor import Tensor, constant_array
from ..ir import dtypes
from ..ir import primitives as P

__all__ = [
    "relu",
    "relu6",
    "leaky_relu",
    "elu",
    "selu",
    "silu",
    "mish",
    "gelu",
    "hardtanh",
    "logsigmoid",
    "softplus",
    "softsign",
    "sigmoid",
    "tanh",
    "softmax",
    "softmin",
    "log_softmax",
    "linear",
    "dropout",
    "layer_norm",
    "batch_norm",
    "conv1d",
    "conv2d",
    "conv3d",
    "max_pool1d",
    "max_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "max_pool3d",
    "avg_pool3d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "lp_pool1d",
    "lp_pool2d",
    "lp_pool3d",
    "pad",
    "embedding",
    "one_hot",
    "normalize",
    "scaled_dot_product_attention",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
    "nll_loss",
    "cross_entropy",
]


def _reduce(loss, reduction):
    if reduction == "mean":
        return ops.mean(loss)
    if reduction == "sum":
        return ops.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _legacy_reduction(size_average, reduce, reduction: str) -> str:
    """The reduction the deprecated ``size_average``/``reduce`` flags ask for."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    reduction = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn(
        f"size_average and reduce args will be deprecated, please use reduction='{reduction}' "
        "instead.",
        stacklevel=3,
    )
    return reduction


def _inplace(input: Tensor, result: Tensor) -> Tensor:
    """``input`` made to hold ``result``: an activation's ``inplace=True``."""
    input._check_inplace()
    return input._commit_inplace(result)


def _short(dtype) -> str:
    return dtype.scalar_name.lower()


# ---------------------------------------------------------------- activations


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    return _inplace(input, ops.relu(input)) if inplace else ops.relu(input)


@_named("LeakyReluBackward0")
def _leaky_relu(input, negative_slope):
    return ops.where(input > 0, input, input * negative_slope)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    out = _leaky_relu(input, negative_slope)
    return _inplace(input, out) if inplace else out


@_named("EluBackward0")
def _elu(input, alpha, scale=1.0):
    # PyTorch's arithmetic: exp(x) - 1 (not expm1) times one coefficient alpha * scale
    negative = (ops.exp(_nonpositive(input)) - 1.0) * (alpha * scale)
    return ops.where(input > 0, input * scale if scale != 1.0 else input, negative)


def _nonpositive(input):
    """``input`` where it is not positive, else 0: the argument of the exp of
    a branch taken there alone, whose derivative would overflow elsewhere
    (0 times inf: NaN gradients past x = 89 in float32)."""
    return ops.where(input > 0, 0.0, input)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    out = _elu(input, alpha)
    return _inplace(input, out) if inplace else out


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    out = _elu(input, _SELU_ALPHA, _SELU_SCALE)
    return _inplace(input, out) if inplace else out


@_named("SiluBackward0")
def _silu(input):
    return input * sigmoid(input)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    out = _silu(input)
    return _inplace(input, out) if inplace else out


@_named("MishBackward0")
def _mish(input):
    return input * P.tanh(P.softplus(input))


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    out = _mish(input)
    return _inplace(input, out) if inplace else out


@_named("HardtanhBackward0")
def _hardtanh(input, min_val, max_val):
    # the bounds themselves get no gradient, as in PyTorch (clamp's would pass it)
    return ops.where(input <= min_val, min_val, ops.where(input >= max_val, max_val, input))


def hardtanh(
    input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Tensor:
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    out = _hardtanh(input, min_val, max_val)
    return _inplace(input, out) if inplace else out


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    return hardtanh(input, 0.0, 6.0, inplace)


@_named("LogSigmoidBackward0")
def logsigmoid(input: Tensor) -> Tensor:
    # + 0.0 turns the -0.0 of a softplus that underflowed into PyTorch's +0.0
    return -P.softplus(-input) + 0.0


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    return ops.softplus(input, beta, threshold)


def softsign(input: Tensor) -> Tensor:
    return input / (1 + ops.abs(input))


def softmin(input: Tensor, dim=None, dtype=None) -> Tensor:
    return softmax(-input, dim, dtype)


def gumbel_softmax(
    logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1
) -> Tensor:
    """A sample of the Gumbel-softmax distribution: softmax((logits + g) / tau)
    with g Gumbel noise, -log of an exponential draw. ``hard``: the one-hot
    of its largest entry, differentiated as the soft sample (straight
    through: the one-hot minus the soft sample without its gradient, plus it)."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    gumbels = -ops.log(creation.empty_like(logits).exponential_())
    soft = softmax((logits + gumbels) / tau, dim)
    if not hard:
        return soft
    largest = ops.argmax(soft, dim, keepdim=True)
    one_hot = ops.scatter(creation.zeros_like(logits), dim, largest, 1.0)
    return one_hot - soft.detach() + soft


__all__ += ["gumbel_softmax"]


# ------------------------------------------------------------ linear, dropout


@autocasts("linear")
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight.T + bias. With a bias and a matrix of weights, as
    PyTorch's: one addmm of the input's rows (a float16 or bfloat16 result
    rounded once, product and bias), viewed back to its leading dimensions."""
    if bias is None or weight.ndim != 2 or input.ndim < 2:
        out = ops.matmul(input, ops.t(weight))
        if bias is None:
            return out
        check_added_dtype(bias, input, weight)  # PyTorch's addmm: no promotion
        return out + bias
    if input.ndim == 2:
        return ops.addmm(bias, input, ops.t(weight))
    rows = ops.addmm(bias, ops.flatten(input, 0, -2), ops.t(weight))
    return ops.reshape(rows, tuple(input.shape[:-1]) + (weight.shape[0],))


def dropout(input, p=0.5, training=True, inplace=False):
    # numbers.Real: a traced number (p from .item()) is one too
    if not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    mask = bernoulli_mask(input.shape, 1.0 - p, input.dtype)
    out = input * (mask * (1.0 / (1.0 - p)))
    if out.grad_fn is not None:
        out.grad_fn.label = "MulBackward0"
    return out


# -------------------------------------------------------------- normalization


def _in_input_dtype(norm):
    """A normalization as PyTorch's CPU kernels compute one of a float16 or
    bfloat16 input with float32 weights or statistics (what autocast's
    lower-precision ops feed them): in float32, the result rounded to the
    input's dtype once. Promoting instead would round the statistics to the
    input's dtype and give a float32 result."""

    @functools.wraps(norm)
    def norm_in_input_dtype(input, *args, **kwargs):
        reduced = isinstance(input, Tensor) and input.dtype.reduced
        if not reduced or not any(
            isinstance(a, Tensor) and a.dtype is dtypes.float32 for a in (*args, *kwargs.values())
        ):
            return norm(input, *args, **kwargs)
        out = norm(P.convert(input, dtype=dtypes.float32), *args, **kwargs)
        return P.convert(out, dtype=input.dtype)

    return norm_in_input_dtype


def _check_parameter_dtypes(input, *parameters) -> None:
    """PyTorch's CPU normalizations take weights and statistics of the
    input's dtype, or float32 ones with a float16 or bfloat16 input
    (``_in_input_dtype``); other dtypes raise rather than promote."""
    given = [p for p in parameters if p is not None]
    if all(p.dtype is input.dtype for p in given):
        return
    if any(p.dtype is not dtypes.float32 for p in given):
        raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
    if not input.dtype.reduced:
        raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")


@_named("NativeLayerNormBackward0")
@_in_input_dtype
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    _check_parameter_dtypes(input, weight, bias)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(input.shape[input.ndim - len(shape) :]) != shape:
        raise RuntimeError(
            f"Given normalized_shape={list(shape)}, expected input with shape "
            f"[*, {', '.join(map(str, shape))}], but got input of size"
            f"{list(input.shape)}"
        )
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    mean = ops.mean(input, dims, keepdim=True)
    centered = input - mean
    variance = ops.mean(centered * centered, dims, keepdim=True)
    out = centered * ops.rsqrt(variance + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


@_named("NativeBatchNormBackward0")
@_in_input_dtype
def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum=0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalizes each channel (dimension 1) over the batch and the other
    dimensions. In training, by the batch's statistics, and the running ones
    move ``momentum`` of the way to them (the unbiased variance, as PyTorch);
    otherwise by the running statistics. ``momentum`` may be a tensor."""
    if input.ndim < 2:
        raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")
    _check_parameter_dtypes(input, weight, bias, running_mean, running_var)
    channels = input.shape[1]
    axes = (0, *range(2, input.ndim))
    count = input.numel() // channels if channels else 0
    shape = (1, channels) + (1,) * (input.ndim - 2)
    if training:
        if count == 1:
            raise ValueError(
                f"Expected more than 1 value per channel when training, got input size "
                f"{input.shape}"
            )
        mean = ops.mean(input, axes, keepdim=True)
        squares = ops.sum((input - mean) * (input - mean), axes, keepdim=True)
        var = squares / ops.divisor(count)
        if running_mean is not None and running_var is not None:
            with no_grad():
                running_mean.copy_(
                    mean.reshape(channels) * momentum + running_mean * (1 - momentum)
                )
                unbiased = squares.reshape(channels) / ops.divisor(max(count - 1, 0))
                running_var.copy_(unbiased * momentum + running_var * (1 - momentum))
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
        mean, var = running_mean.reshape(shape), running_var.reshape(shape)
    # PyTorch's arrangement: one scale and one shift per channel
    scale = ops.rsqrt(var + eps)
    if weight is not None:
        scale = scale * weight.reshape(shape)
    shift = -mean * scale
    if bias is not None:
        shift = bias.reshape(shape) + shift
    return input * scale + shift


# ------------------------------------------------------ convolution and pooling


def _tuple(value, n: int, name: str) -> tuple:
    """An int or a sequence of ints as a tuple of ``n`` (one int repeated)."""
    if isinstance(value, (tuple, list)):
        if len(value) == 1:
            value = tuple(value) * n
        if len(value) != n:
            raise RuntimeError(f"expected {name} to be a single integer or a list of {n} values")
        return tuple(int(v) for v in value)
    return (int(value),) * n


def _batched(input: Tensor, dims: int, name: str) -> tuple:
    """(input with a batch dimension, whether it had one)."""
    if input.ndim == dims + 2:
        return input, True
    if input.ndim == dims + 1:
        return ops.unsqueeze(input, 0), False
    raise RuntimeError(
        f"Expected {dims + 1}D (unbatched) or {dims + 2}D (batched) input to {name}, but got "
        f"input of size: {list(input.shape)}"
    )


def _same_padding(kernel, dilation) -> tuple:
    """padding="same": the output as large as the input, an odd total's extra at the end."""
    pairs = []
    for k, d in zip(kernel, dilation):
        total = d * (k - 1)
        pairs.append((total // 2, total - total // 2))
    return tuple(pairs)


def _check_groups(groups: int) -> None:
    if groups < 1:
        raise RuntimeError("non-positive groups is not supported")


def _check_filters(weight, groups: int) -> None:
    """PyTorch's checks of a weight's first dimension (filters, or a
    transposed convolution's input channels): at least one per group, and
    a whole number of them."""
    for condition, what in (
        (weight.shape[0] < groups, "at least"),
        (weight.shape[0] % groups, "divisible by"),
    ):
        if condition:
            raise RuntimeError(
                f"Given groups={groups}, expected weight to be {what} {groups} at dimension "
                f"0, but got weight of size {list(weight.shape)} instead"
            )


def _conv(input, weight, bias, stride, padding, dilation, groups, dims, name):
    x, batched = _batched(input, dims, name)
    if weight.ndim != dims + 2:
        raise RuntimeError(
            f"weight of a {name} should have {dims + 2} dimensions, got {list(weight.shape)}"
        )
    if x.dtype is not weight.dtype:
        raise RuntimeError(
            f"Input type ({x.type()}) and weight type ({weight.type()}) should be the same"
        )
    if bias is not None and bias.dtype is not x.dtype:
        raise RuntimeError(
            f"Input type ({_short(x.dtype)}) and bias type ({_short(bias.dtype)}) should be "
            "the same"
        )
    kernel = tuple(weight.shape[2:])
    stride, dilation = _tuple(stride, dims, "stride"), _tuple(dilation, dims, "dilation")
    _check_groups(groups)
    if any(s < 1 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d < 1 for d in dilation):
        raise RuntimeError("dilation should be greater than zero")
    out_channels = weight.shape[0]
    _check_filters(weight, groups)
    if x.shape[1] != weight.shape[1] * groups:
        raise RuntimeError(
            f"Given groups={groups}, weight of size {list(weight.shape)}, expected "
            f"input{list(x.shape)} to have {weight.shape[1] * groups} channels, but got "
            f"{x.shape[1]} channels instead"
        )
    if isinstance(padding, str):
        if padding == "valid":
            pads = ((0, 0),) * dims
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            pads = _same_padding(kernel, dilation)
        else:
            raise ValueError(f"Invalid padding string '{padding}', should be one of valid, same")
    else:
        pads = tuple((p, p) for p in _tuple(padding, dims, "padding"))
        if any(p < 0 for p, _ in pads):
            raise RuntimeError("negative padding is not supported")
    padded = [size + lo + hi for size, (lo, hi) in zip(x.shape[2:], pads)]
    reach = [d * (k - 1) + 1 for k, d in zip(kernel, dilation)]
    if any(r > p for r, p in zip(reach, padded)):
        raise RuntimeError(
            f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
            f"Kernel size: ({' x '.join(map(str, reach))}). Kernel size can't be greater than "
            "actual input size"
        )
    if any(lo or hi for lo, hi in pads):
        x = P.pad(x, widths=((0, 0), (0, 0)) + pads, value=0)
    taps = weight.shape[1] * math.prod(kernel)
    if groups == 1 and set(stride) == set(dilation) == {1}:
        # (O, C*k) times each image's windows, read in place
        out = P.windows_matmul(P.reshape(weight, shape=(out_channels, taps)), x, kernel=kernel)
    else:
        cols = P.windows(x, kernel=kernel, stride=stride, dilation=dilation)  # (N, C, *k, *out)
        batch, positions = x.shape[0], cols.shape[2 + dims :]
        if groups == 1:  # (O, C*k) @ (N, C*k, out): one matrix product per image
            out = P.matmul(
                P.reshape(weight, shape=(out_channels, taps)),
                P.reshape(cols, shape=(batch, taps, math.prod(positions))),
            )
        else:
            out = P.matmul(
                P.reshape(weight, shape=(groups, out_channels // groups, taps)),
                P.reshape(cols, shape=(batch, groups, taps, math.prod(positions))),
            )
        out = P.reshape(out, shape=(batch, out_channels, *positions))
    if bias is not None:
        out = out + P.reshape(bias, shape=(out_channels,) + (1,) * dims)
    return out if batched else P.reshape(out, shape=out.shape[1:])


@autocasts("conv1d")
@_named("ConvolutionBackward0")
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """1-D convolution (cross-correlation) of (N, C, L) or (C, L) with (O, C/groups, k)."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


@autocasts("conv2d")
@_named("ConvolutionBackward0")
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """2-D convolution (cross-correlation) of (N, C, H, W) or (C, H, W) with
    (O, C/groups, kh, kw)."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


@autocasts("conv3d")
@_named("ConvolutionBackward0")
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1) -> Tensor:
    """3-D convolution (cross-correlation) of (N, C, D, H, W) or (C, D, H, W)."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


def _pool_size(size, kernel, padding, stride, dilation, ceil_mode) -> int:
    """PyTorch's pooling output size: with ``ceil_mode`` a last partial window
    counts, as long as it starts inside the input or its left padding."""
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    count = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (count - 1) * stride >= size + padding:
        count -= 1
    return count


def _check_max_pool_padding(kernel, padding, name):
    """PyTorch's max_pool1d and max_pool2d take padding up to half the
    kernel, whatever the dilation (its other poolings, half the dilated one)."""
    if all(p <= k // 2 for k, p in zip(kernel, padding)):
        return
    if name == "max_pool1d":
        raise RuntimeError(
            f"max_pool1d() padding should be at most half of kernel size, but got "
            f"padding={padding[0]} and kernel_size={kernel[0]}"
        )
    (kh, kw), (ph, pw) = kernel, padding
    raise RuntimeError(
        f"pad should be smaller than or equal to half of kernel size, but got padW = {pw}, "
        f"padH = {ph}, kW = {kw}, kH = {kh}"
    )


class _Pooling:
    """The windows of a pooling: the settings checked, the input padded with
    ``fill`` (and cropped or extended for ceil_mode), then its windows taken."""

    def __init__(self, input, kernel_size, stride, padding, dilation, ceil_mode, dims, name):
        if input.ndim not in (dims + 1, dims + 2):
            raise RuntimeError(
                f"{name}: Expected {dims + 1}D or {dims + 2}D (batch mode) tensor for input, "
                f"but got: {list(input.shape)}"
            )
        self.x, self.batched = _batched(input, dims, name)
        self.dims = dims
        self.kernel = _tuple(kernel_size, dims, "kernel_size")
        no_stride = stride is None or (isinstance(stride, (tuple, list)) and not stride)
        self.stride = self.kernel if no_stride else _tuple(stride, dims, "stride")
        self.padding = _tuple(padding, dims, "padding")
        self.dilation = _tuple(dilation, dims, "dilation")
        if any(k < 1 for k in self.kernel) or any(s < 1 for s in self.stride):
            raise RuntimeError(f"{name}: kernel_size and stride must be greater than zero")
        for k, p, d in zip(self.kernel, self.padding, self.dilation):
            if p < 0 or p > (d * (k - 1) + 1) // 2:
                raise RuntimeError(
                    f"pad should be at most half of effective kernel size, but got pad={p}, "
                    f"kernel_size={k} and dilation={d}"
                )
        if name in ("max_pool1d", "max_pool2d"):  # then, as PyTorch, half the kernel itself
            _check_max_pool_padding(self.kernel, self.padding, name)
        self.sizes = tuple(self.x.shape[2:])
        self.counts = tuple(
            _pool_size(size, k, p, s, d, ceil_mode)
            for size, k, p, s, d in zip(
                self.sizes, self.kernel, self.padding, self.stride, self.dilation
            )
        )
        if any(c < 1 for c in self.counts):
            channels = self.x.shape[1]
            raise RuntimeError(
                f"Given input size: ({'x'.join(map(str, (channels, *self.sizes)))}). "
                f"Calculated output size: ({'x'.join(map(str, (channels, *self.counts)))}). "
                "Output size is too small"
            )

    def windows(self, fill) -> Tensor:
        """(N, C, k1*k2*..., *counts): every window, flattened."""
        widths = []
        for size, k, p, s, d, count in zip(
            self.sizes, self.kernel, self.padding, self.stride, self.dilation, self.counts
        ):
            reach = (count - 1) * s + d * (k - 1) + 1  # what the windows cover, padding included
            widths.append((p, reach - size - p))
        x = self.x
        if any(lo or hi for lo, hi in widths):
            x = P.pad(x, widths=((0, 0), (0, 0), *widths), value=fill)
        cols = P.windows(x, kernel=self.kernel, stride=self.stride, dilation=self.dilation)
        n, c = x.shape[:2]
        return P.reshape(cols, shape=(n, c, math.prod(self.kernel), *self.counts))

    def unbatch(self, out: Tensor) -> Tensor:
        return out if self.batched else P.reshape(out, shape=out.shape[1:])

    def input_positions(self) -> np.ndarray:
        """(taps, *counts): the flat index into the unpadded spatial input each tap reads."""
        grids = np.meshgrid(
            *[np.arange(k) for k in self.kernel],
            *[np.arange(c) for c in self.counts],
            indexing="ij",
        )
        flat = np.zeros(grids[0].shape, np.int64)
        for axis in range(self.dims):
            tap, window = grids[axis], grids[self.dims + axis]
            position = window * self.stride[axis] - self.padding[axis] + tap * self.dilation[axis]
            flat = flat * self.sizes[axis] + position
        return flat.reshape(math.prod(self.kernel), *self.counts)

    def divisors(self, count_include_pad: bool) -> np.ndarray:
        """How many elements each window averages over, per output position:
        padding counted or not, the part past the padding (ceil_mode) never."""
        result = np.ones((), np.int64)
        for size, k, p, s, count in zip(
            self.sizes, self.kernel, self.padding, self.stride, self.counts
        ):
            start = np.arange(count) * s - p
            end = np.minimum(start + k, size + p)
            if not count_include_pad:
                start, end = np.maximum(start, 0), np.minimum(end, size)
            result = np.multiply.outer(result, end - start)
        return result


def _max_of_tiles(pooling) -> Tensor:
    """Max pooling whose windows tile the input (stride = kernel, no padding,
    no dilation): each tile's maximum, where the gradient goes too (the first
    of equal values, the last NaN, as PyTorch's), by two primitives that read
    the input in place."""
    x = pooling.x
    whole = tuple(c * k for c, k in zip(pooling.counts, pooling.kernel))
    if whole != pooling.sizes:  # the rows and columns no tile covers are left out
        x = x[(slice(None), slice(None)) + tuple(slice(0, n) for n in whole)]
    return P.take_at_tile_max(x, x, kernel=pooling.kernel)


def _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, dims):
    name = f"max_pool{dims}d"
    pooling = _Pooling(input, kernel_size, stride, padding, dilation, ceil_mode, dims, name)
    tiles = pooling.stride == pooling.kernel and not any(pooling.padding)
    whole = all(c * k <= n for c, k, n in zip(pooling.counts, pooling.kernel, pooling.sizes))
    if tiles and whole and set(pooling.dilation) == {1} and not return_indices:
        return pooling.unbatch(_max_of_tiles(pooling))
    # max(dim) takes the first maximum (a NaN if there is one) and gives it the
    # whole gradient, as PyTorch's max pooling does
    values, taps = ops.max(pooling.windows(-math.inf), dim=2)
    values = pooling.unbatch(values)
    if not return_indices:
        return values
    return values, pooling.unbatch(_chosen_positions(pooling.input_positions(), taps))


def _chosen_positions(positions: np.ndarray, taps: Tensor) -> Tensor:
    """Max pooling's indices: ``positions`` (taps, *counts), the flat input
    position each tap of each window reads, at the taps (N, C, *counts) chosen."""
    table = constant_array(positions.reshape(1, 1, *positions.shape), dtypes.int64)
    picked = ops.gather(ops.expand(table, *taps.shape[:2], *positions.shape), 2, taps.unsqueeze(2))
    return ops.squeeze(picked, 2)


@_named("MaxPool2DWithIndicesBackward0")
def max_pool1d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    """The maximum of each window of (N, C, L) or (C, L) (``padding`` adds -inf)."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 1)


@_named("MaxPool2DWithIndicesBackward0")
def max_pool2d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    """The maximum of each window of (N, C, H, W) or (C, H, W) (``padding`` adds -inf)."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2)


@autocasts("max_pool3d")
@_named("MaxPool3DWithIndicesBackward0")
def max_pool3d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    """The maximum of each window of (N, C, D, H, W) or (C, D, H, W) (``padding`` adds -inf)."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 3)


def _avg_pool(
    input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, dims
):
    name = f"avg_pool{dims}d"
    pooling = _Pooling(input, kernel_size, stride, padding, 1, ceil_mode, dims, name)
    sums = ops.sum(pooling.windows(0.0), 2)
    if divisor_override:
        return pooling.unbatch(sums / float(divisor_override))
    divisors = pooling.divisors(count_include_pad)
    if np.all(divisors == divisors.flat[0]):
        return pooling.unbatch(sums / float(divisors.flat[0]))
    return pooling.unbatch(sums / constant_array(divisors.astype(sums.dtype.np), sums.dtype))


@_named("AvgPool2DBackward0")
def avg_pool1d(
    input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True
) -> Tensor:
    """The mean of each window of (N, C, L) or (C, L)."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1)


@_named("AvgPool2DBackward0")
def avg_pool2d(
    input,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
) -> Tensor:
    """The mean of each window of (N, C, H, W) or (C, H, W): over the window's
    size including padding unless ``count_include_pad=False``, or over
    ``divisor_override``."""
    return _avg_pool(
        input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2
    )


@autocasts("avg_pool3d")
@_named("AvgPool3DBackward0")
def avg_pool3d(
    input,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
) -> Tensor:
    """The mean of each window of (N, C, D, H, W) or (C, D, H, W), as avg_pool2d's."""
    return _avg_pool(
        input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 3
    )


def _adaptive_bounds(size: int, count: int) -> list:
    """PyTorch's adaptive windows: the i-th covers [floor(i*size/count), ceil((i+1)*size/count))."""
    return [(i * size // count, -(-(i + 1) * size // count)) for i in range(count)]


def _adaptive_avg_pool(input, output_size, dims, name):
    x, batched = _batched(input, dims, name)
    sizes = tuple(x.shape[2:])
    wanted = (output_size,) * dims if isinstance(output_size, int) else tuple(output_size)
    if len(wanted) != dims:
        raise ValueError(f"{name}: output_size must have {dims} elements, got {output_size}")
    counts = tuple(size if w is None else int(w) for size, w in zip(sizes, wanted))
    if any(c < 1 for c in counts) or any(s == 0 for s in sizes):
        raise RuntimeError(f"{name}: elements of output_size must be greater than or equal to 1")
    if all(size % count == 0 for size, count in zip(sizes, counts)):
        kernel = tuple(size // count for size, count in zip(sizes, counts))
        out = _avg_pool(x, kernel, kernel, 0, False, True, None, dims)
    else:
        # windows of different sizes: each axis summed window by window, then
        # one division by the window sizes (a product with a 0/1 matrix
        # marking the windows would spread a NaN or an infinity to every
        # window, as 0 times it)
        out, divisors = x, np.ones((), x.dtype.np)
        for axis, (size, count) in enumerate(zip(sizes, counts)):
            bounds = _adaptive_bounds(size, count)
            windows = [ops.narrow(out, 2 + axis, start, end - start) for start, end in bounds]
            out = ops.cat([ops.sum(w, 2 + axis, keepdim=True) for w in windows], 2 + axis)
            divisors = np.multiply.outer(divisors, [end - start for start, end in bounds])
        out = out / constant_array(divisors.astype(x.dtype.np), x.dtype)
    return out if batched else P.reshape(out, shape=out.shape[1:])


@_named("AdaptiveAvgPool2DBackward0")
def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    return _adaptive_avg_pool(input, output_size, 1, "adaptive_avg_pool1d")


@_named("AdaptiveAvgPool2DBackward0")
def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Means over ``output_size`` windows per axis, as even as the sizes allow."""
    return _adaptive_avg_pool(input, output_size, 2, "adaptive_avg_pool2d")


@autocasts("adaptive_avg_pool3d")
@_named("AdaptiveAvgPool3DBackward0")
def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    return _adaptive_avg_pool(input, output_size, 3, "adaptive_avg_pool3d")


def _adaptive_max_counts(input, output_size, dims, name) -> tuple:
    """The windows per axis of an adaptive max pooling (None: as many as the
    input has), with PyTorch's checks of the input and ``output_size``."""
    sequence = isinstance(output_size, (tuple, list))
    if dims > 1 and sequence and input.ndim <= len(output_size):
        raise ValueError(f"Input dimension should be at least {len(output_size) + 1}")
    if dims == 1 and input.ndim not in (2, 3):
        raise RuntimeError(
            f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional tensor for argument "
            f"#1 'self' (while checking arguments for {name})"
        )
    if input.ndim not in (dims + 1, dims + 2):
        raise RuntimeError(
            f"{name}(): Expected {dims + 1}D or {dims + 2}D tensor, but got: {list(input.shape)}"
        )
    wanted = tuple(output_size) if sequence else (output_size,) * dims
    if len(wanted) != dims:
        if dims == 1:
            raise RuntimeError(
                f"{name}() argument 'output_size' should contain one int (got {len(wanted)})"
            )
        raise RuntimeError(f"{name}(): internal error: output_size.size() must be {dims}")
    sizes = tuple(input.shape[input.ndim - dims :])
    counts = tuple(size if w is None else int(w) for size, w in zip(sizes, wanted))
    for axis in range(input.ndim - dims, input.ndim):
        if input.shape[axis] == 0:
            raise RuntimeError(
                f"{name}(): Expected input to have non-zero size for non-batch dimensions, but "
                f"input has sizes {list(input.shape)} with dimension {axis} being empty"
            )
    if any(c < 0 for c in counts):
        shape = list(input.shape[: input.ndim - dims]) + list(counts)
        bad = next(c for c in counts if c < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {bad}: {shape}")
    return counts


def _adaptive_max_pool(input, output_size, return_indices, dims):
    name = f"adaptive_max_pool{dims}d"
    counts = _adaptive_max_counts(input, output_size, dims, name)
    x, batched = _batched(input, dims, name)
    sizes = tuple(x.shape[2:])
    if all(c and size % c == 0 for size, c in zip(sizes, counts)):
        kernel = tuple(size // c for size, c in zip(sizes, counts))
        return _max_pool(input, kernel, kernel, 0, 1, False, return_indices, dims)
    # windows of different sizes: each cut to the longest, the short ones
    # repeating their last element, which changes neither maximum nor index
    taps_per_axis = []  # per axis (reach, count): the position each tap of a window reads
    for size, count in zip(sizes, counts):
        starts, ends = np.array(_adaptive_bounds(size, count), np.int64).reshape(count, 2).T
        reach = int((ends - starts).max()) if count else 1
        taps_per_axis.append(np.minimum(starts + np.arange(reach)[:, None], ends - 1))
    positions = np.zeros((1,) * (2 * dims), np.int64)
    for axis, (size, taps) in enumerate(zip(sizes, taps_per_axis)):
        shape = [1] * (2 * dims)
        shape[axis], shape[dims + axis] = taps.shape
        positions = positions * size + taps.reshape(shape)
    reaches = tuple(t.shape[0] for t in taps_per_axis)
    positions = np.broadcast_to(positions, reaches + counts).reshape(math.prod(reaches), *counts)
    n, c = x.shape[:2]
    flat = P.reshape(x, shape=(n, c, math.prod(sizes)))
    windows = ops.index_select(flat, 2, constant_array(positions.ravel(), dtypes.int64))
    values, taps = ops.max(P.reshape(windows, shape=(n, c, *positions.shape)), dim=2)
    unbatch = (lambda t: t) if batched else (lambda t: P.reshape(t, shape=t.shape[1:]))
    if not return_indices:
        return unbatch(values)
    return unbatch(values), unbatch(_chosen_positions(positions, taps))


@_named("AdaptiveMaxPool2DBackward0")
def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    """The maximum of each of ``output_size`` windows as even as the length allows."""
    return _adaptive_max_pool(input, output_size, return_indices, 1)


@_named("AdaptiveMaxPool2DBackward0")
def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    """Maxima over ``output_size`` windows per axis (None: the input's size),
    as adaptive_avg_pool2d's; ``return_indices`` adds their flat positions."""
    return _adaptive_max_pool(input, output_size, return_indices, 2)


@autocasts("adaptive_max_pool3d")
@_named("AdaptiveMaxPool3DBackward0")
def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    return _adaptive_max_pool(input, output_size, return_indices, 3)


def _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, dims):
    """The ``norm_type``-norm of each window: the average of the powers times
    the kernel's size, to the power 1/norm_type, as PyTorch computes it (a
    negative sum of odd powers gives NaN)."""
    kernel = _tuple(kernel_size, dims, "kernel_size")
    powers = input.pow(norm_type)
    means = _avg_pool(powers, kernel, stride, 0, ceil_mode, True, None, dims)
    return (ops.sign(means) * ops.relu(ops.abs(means)) * math.prod(kernel)).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False) -> Tensor:
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 1)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False) -> Tensor:
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 2)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False) -> Tensor:
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 3)


# -------------------------------------------------------------------- padding


def _source_positions(size: int, before: int, after: int, mode: str) -> np.ndarray:
    """The input position each output position of a padded axis reads."""
    positions = np.arange(-before, size + after)
    if mode == "replicate":
        return np.clip(positions, 0, size - 1)
    if mode == "circular":
        return positions % size
    period = 2 * (size - 1)  # reflect: ... 2 1 | 0 1 2 ... n-1 | n-2 ...
    folded = np.abs(positions) % period if period else np.zeros_like(positions)
    return np.where(folded < size, folded, period - folded)


def pad(input: Tensor, pad, mode: str = "constant", value=None) -> Tensor:
    """Pads the last ``len(pad) // 2`` dimensions, the last first: ``pad`` is
    (last_before, last_after, second_last_before, ...). Negative widths crop.
    ``mode`` "constant" (with ``value``), "reflect", "replicate" or "circular"."""
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    padded = len(pad) // 2
    if padded > input.ndim:
        raise RuntimeError("Padding length too large")
    widths = [(0, 0)] * (input.ndim - padded) + [
        (pad[2 * k], pad[2 * k + 1]) for k in reversed(range(padded))
    ]
    if mode == "constant":
        out = P.pad(input, widths=tuple(widths), value=0 if value is None else value)
        if out.grad_fn is not None:
            out.grad_fn.label = "ConstantPadNdBackward0"
        return out
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    if input.ndim not in (padded + 1, padded + 2):
        raise RuntimeError(
            f"Expected {padded + 1}D or {padded + 2}D (batch mode) tensor for input to be "
            f"padded in {mode} mode over {padded} dimension(s), but got: {list(input.shape)}"
        )
    return _PAD_KERNELS.get((mode, padded), _pad_from_positions)(input, widths, mode, padded)


def _pad_from_positions(input: Tensor, widths: list, mode: str, padded: int) -> Tensor:
    """The last ``padded`` dimensions padded by mode "reflect", "replicate" or
    "circular": each output position reads its input position."""
    out = input
    for axis in range(input.ndim - padded, input.ndim):
        before, after = widths[axis]
        size = input.shape[axis]
        if mode == "reflect" and (before >= size or after >= size):
            raise RuntimeError(
                f"Argument #4: Padding size should be less than the corresponding input "
                f"dimension, but got: padding ({before}, {after}) at dimension {axis} of input "
                f"{list(input.shape)}"
            )
        if mode == "circular" and (before > size or after > size):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if before or after:
            positions = _source_positions(size, before, after, mode)
            out = ops.index_select(out, axis, constant_array(positions, dtypes.int64))
    return out


# PyTorch's pad runs a kernel per mode and count of padded dimensions, which
# autocast's policy names: these run in float32 under autocast
_PAD_KERNELS = {
    ("reflect", 1): autocasts("reflection_pad1d")(_pad_from_positions),
    ("reflect", 2): autocasts("reflection_pad2d")(_pad_from_positions),
    ("replicate", 1): autocasts("replication_pad1d")(_pad_from_positions),
    ("replicate", 2): autocasts("replication_pad2d")(_pad_from_positions),
    ("replicate", 3): autocasts("replication_pad3d")(_pad_from_positions),
}


# ------------------------------------------------------------------ embedding


def _check_indices(indices: Tensor, size: int) -> None:
    """Indices outside [0, size) are an error, not numpy's wrap-around; under
    jit this is a guard, so a later call with a bad index retraces and raises."""
    if indices.numel() and ops.any((indices < 0) | (indices >= size)):
        raise IndexError("index out of range in self")


@_named("EmbeddingBackward0")
def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """The rows of ``weight`` that the integer ``input`` names, in ``input``'s
    shape plus one. Rows at ``padding_idx`` get no gradient; with
    ``max_norm`` the rows looked up are first renormalized in place."""
    if not isinstance(input, Tensor) or input.dtype.category != dtypes.INTEGER:
        found = getattr(input, "dtype", type(input).__name__)
        raise RuntimeError(
            "Expected tensor for argument #1 'indices' to have one of the following scalar "
            f"types: Long, Int; but got {found} instead (while checking arguments for embedding)"
        )
    if scale_grad_by_freq or sparse:
        raise NotImplementedError(
            "embedding: scale_grad_by_freq and sparse gradients are not supported by fusegrad"
        )
    rows = weight.shape[0]
    if padding_idx is not None:
        if not -rows <= padding_idx < rows:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= rows
    indices = input if input.dtype is dtypes.int64 else input.long()
    _check_indices(indices, rows)
    if max_norm is not None:
        _renorm_rows(weight, indices.reshape(-1), max_norm, norm_type)
    out = P.index(weight, indices, spec=(("array",),))
    if padding_idx is not None:
        padding = ops.unsqueeze(indices == padding_idx, -1)
        out = ops.where(padding, out.detach(), out)
    return out


def _renorm_rows(weight: Tensor, indices: Tensor, max_norm: float, norm_type: float) -> None:
    """Scales the rows ``indices`` names down to norm ``max_norm`` where above it."""
    with no_grad():
        rows = weight[indices]
        norms = ops.norm(rows, norm_type, 1, keepdim=True)
        scale = ops.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight[indices] = rows * scale


def one_hot(tensor, num_classes=-1):
    """Classes outside [0, num_classes) raise PyTorch's errors, not a row of
    zeros; under jit the checks are guards, so a later call with a bad class
    retraces and raises."""
    from ..eager.creation import arange

    if tensor.numel() and ops.any(tensor < 0):
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        num_classes = int(tensor.max().item()) + 1
    elif tensor.numel() and ops.any(tensor >= num_classes):
        raise RuntimeError("Class values must be smaller than num_classes.")
    return ops.eq(ops.unsqueeze(tensor, -1), arange(num_classes)).to(dtypes.int64)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    return input / ops.clamp(ops.norm(input, p, dim, keepdim=True), min=eps)


# ------------------------------------------------------------------ attention


@autocasts("scaled_dot_product_attention")
@_rounded_once  # PyTorch's CPU kernels compute float16 and bfloat16 attention in float32
def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """softmax(query @ key^T * scale + mask) @ value over the last two
    dimensions (..., L, E) x (..., S, E) x (..., S, Ev). A bool ``attn_mask``
    says which positions take part, a float one is added; ``is_causal`` masks
    the future. A row with every position masked gives zeros (PyTorch's
    ``_safe_softmax``), with a zero gradient."""
    backends_cuda.check_sdp_kernel_allowed()
    if is_causal and attn_mask is not None:
        raise RuntimeError(
            "_scaled_dot_product_attention: Explicit attn_mask should not be set when "
            "is_causal=True"
        )
    length, source = query.shape[-2], key.shape[-2]
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        repeat = query.shape[-3] // key.shape[-3]
        heads = constant_array(np.arange(query.shape[-3]) // repeat, dtypes.int64)
        key = ops.index_select(key, key.ndim - 3, heads)
        value = ops.index_select(value, value.ndim - 3, heads)
    factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    # as PyTorch's reference computation: sqrt(|scale|) on each side
    root = math.sqrt(abs(factor))
    scores = ops.matmul(query * (root if factor >= 0 else -root), ops.transpose(key, -2, -1) * root)
    if is_causal:
        attn_mask = constant_array(np.tril(np.ones((length, source), np.bool_)), dtypes.bool_)
    if attn_mask is not None:
        if attn_mask.dtype is dtypes.bool_:
            scores = ops.where(attn_mask, scores, -math.inf)
        else:
            scores = scores + attn_mask
    masked_rows = ops.all(scores == -math.inf, -1, keepdim=True)
    weights = softmax(ops.where(masked_rows, 0.0, scores), -1)
    weights = ops.where(masked_rows, 0.0, weights)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return ops.matmul(weights, value)


# --------------------------------------------------------------------- losses


def _warn_if_broadcast(input: Tensor, target: Tensor) -> None:
    if input.shape != target.shape:
        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input "
            f"size ({input.shape}). This will likely lead to incorrect results due to "
            "broadcasting. Please ensure they have the same size.",
            stacklevel=3,
        )


@autocasts("mse_loss")
@_named("MseLossBackward0")
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _warn_if_broadcast(input, target)
    diff = input - target
    return _reduce(diff * diff, reduction)


@autocasts("l1_loss")
@_named("L1LossBackward0")
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean") -> Tensor:
    """|input - target|, reduced."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _warn_if_broadcast(input, target)
    return _reduce(ops.abs(input - target), reduction)


@autocasts("smooth_l1_loss")
@_named("SmoothL1LossBackward0")
def smooth_l1_loss(
    input, target, size_average=None, reduce=None, reduction="mean", beta: float = 1.0
) -> Tensor:
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _warn_if_broadcast(input, target)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    diff = input - target
    size = ops.abs(diff)
    if beta == 0.0:
        return _reduce(size, reduction)
    return _reduce(ops.where(size < beta, diff * diff * 0.5 / beta, size - 0.5 * beta), reduction)


@autocasts("huber_loss")
@_named("HuberLossBackward0")
def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0, weight=None) -> Tensor:
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta) (d = input - target)."""
    _warn_if_broadcast(input, target)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    diff = input - target
    size = ops.abs(diff)
    losses = ops.where(size < delta, diff * diff * 0.5, (size - 0.5 * delta) * delta)
    if weight is not None:
        losses = losses * weight
    return _reduce(losses, reduction)


def _check_target_size(input, target) -> None:
    if target.shape != input.shape:
        raise ValueError(
            f"Using a target size ({target.shape}) that is different to the input size "
            f"({input.shape}) is deprecated. Please ensure they have the same size."
        )


@autocasts("binary_cross_entropy")
@_named("BinaryCrossEntropyBackward0")
def binary_cross_entropy(
    input, target, weight=None, size_average=None, reduce=None, reduction="mean"
) -> Tensor:
    """-(t log(x) + (1 - t) log(1 - x)), each logarithm clamped at -100 as PyTorch does,
    for probabilities ``input``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_target_size(input, target)
    # a guard under jit: a later call with such an input retraces and raises
    if input.numel() and ops.any((input < 0) | (input > 1)):
        raise RuntimeError("all elements of input should be between 0 and 1")
    losses = P.binary_cross_entropy(input, target)
    if weight is not None:
        losses = losses * weight
    return _reduce(losses, reduction)


@autocasts("binary_cross_entropy_with_logits")
@_named("BinaryCrossEntropyWithLogitsBackward0")
def binary_cross_entropy_with_logits(
    input,
    target,
    weight=None,
    size_average=None,
    reduce=None,
    reduction="mean",
    pos_weight=None,
) -> Tensor:
    """binary_cross_entropy(sigmoid(input), target) computed stably from the
    logits; ``pos_weight`` weighs the positive term (per class, last dimension)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(
            f"Target size ({target.shape}) must be the same as input size ({input.shape})"
        )
    losses = P.binary_cross_entropy_with_logits(
        input, target, 1.0 if pos_weight is None else pos_weight
    )
    if weight is not None:
        losses = losses * weight
    return _reduce(losses, reduction)


@autocasts("kl_div")
@_named("KlDivBackward0")
def kl_div(
    input, target, size_average=None, reduce=None, reduction="mean", log_target=False
) -> Tensor:
    """The KL divergence of ``target`` from the distribution whose logarithm is
    ``input``, pointwise: t (log t - input), 0 where t is 0 (with ``log_target``
    the target is given as its logarithm). "batchmean" divides the sum by the
    batch size, which is the divergence; "mean" divides by every element."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction == "mean":
        warnings.warn(
            "reduction: 'mean' divides the total loss by both the batch size and the support "
            "size.'batchmean' divides only by the batch size, and aligns with the KL div math "
            "definition.'mean' will be changed to behave the same as 'batchmean' in the next "
            "major release.",
            stacklevel=2,
        )
    if log_target:
        losses = ops.exp(target) * (target - input)
    else:
        # xlogy(t, t): 0 at t == 0, where log would make 0 * -inf
        zero = target == 0
        entropy = ops.where(zero, 0.0, target * ops.log(ops.where(zero, 1.0, target)))
        losses = entropy - target * input
    if reduction == "batchmean":
        total = ops.sum(losses)
        return total / ops.divisor(input.shape[0]) if input.ndim else total
    return _reduce(losses, reduction)


ONE_HOT_CLASSES = 1024  # nll_loss picks by a compare up to this many classes, else gathers


@autocasts("nll_loss")
@_named("NllLossBackward0")
def nll_loss(
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index=-100,
    reduce=None,
    reduction="mean",
):
    """Negative log-likelihood of class indices ``target`` under log-probabilities
    ``input`` of shape (N, C) or (C,) (or (N, C, d1, ...))."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if not isinstance(target, Tensor) or target.dtype.category != dtypes.INTEGER:
        raise RuntimeError(
            f"expected scalar type Long but found {getattr(target, 'dtype', type(target).__name__)}"
        )
    if input.ndim == 1:
        input, target = ops.unsqueeze(input, 0), ops.unsqueeze(target, 0)
    if input.ndim > 2:  # (N, C, d...) -> (N*d..., C)
        input = ops.reshape(ops.transpose(ops.flatten(input, 2), 1, 2), (-1, input.shape[1]))
        target = ops.reshape(target, (-1,))
    classes = input.shape[1]
    if input.shape[0] != target.shape[0]:
        raise ValueError(
            f"Expected input batch_size ({input.shape[0]}) to match target "
            f"batch_size ({target.shape[0]})."
        )
    valid = target != ignore_index
    safe_target = ops.where(valid, target, 0)
    # a guard under jit: numpy would wrap a negative index around
    if safe_target.numel() and ops.any((safe_target < 0) | (safe_target >= classes)):
        bad = safe_target._data[(safe_target._data < 0) | (safe_target._data >= classes)]
        raise IndexError(f"Target {int(bad[0])} is out of bounds.")
    if classes <= ONE_HOT_CLASSES:
        # each row's target picked by a compare with every class index: it
        # fuses with the log_softmax before it (and its gradient, a select,
        # with the softmax's), where a gather and its scattered gradient ran
        # on their own; adding the row's zeros leaves the value exact
        indices = constant_array(np.arange(classes, dtype=np.int64)[None], dtypes.int64)
        chosen = ops.unsqueeze(safe_target, 1) == indices
        picked = -ops.sum(ops.where(chosen, input, 0.0), 1)
    else:
        picked = -ops.gather(input, 1, ops.unsqueeze(safe_target, 1)).reshape(-1)
    w = ops.where(valid, 1.0, 0.0).to(input.dtype)
    if weight is not None:
        w = w * ops.index_select(weight, 0, safe_target)
    losses = picked * w
    if reduction == "mean":
        return ops.sum(losses) / ops.sum(w)
    return _reduce(losses, reduction)


@autocasts("cross_entropy_loss")
@_named(
    # with class indices, PyTorch's graph is log_softmax's node and nll_loss's
    lambda input, target, *a, **k: (
        None
        if isinstance(target, Tensor) and target.dtype.category == dtypes.INTEGER
        else "DivBackward1"
    )
)
def cross_entropy(
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index=-100,
    reduce=None,
    reduction="mean",
    label_smoothing=0.0,
):
    """Softmax cross-entropy of logits ``input`` (N, C) against class indices or
    class probabilities ``target``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    logp = log_softmax(input, 1 if input.ndim > 1 else 0)
    if target.dtype.is_floating_point:  # class probabilities
        if target.shape != input.shape:
            raise RuntimeError(
                f"Expected target size {list(input.shape)}, got {list(target.shape)}"
            )
        classes = input.shape[1] if input.ndim > 1 else input.shape[0]
        if label_smoothing:
            target = target * (1 - label_smoothing) + label_smoothing / classes
        product = (
            logp * target
            if weight is None
            else logp
            * target
            * weight.reshape((1, -1) + (1,) * (input.ndim - 2) if input.ndim > 1 else (-1,))
        )
        losses = -ops.sum(product, 1 if input.ndim > 1 else 0)
        if reduction == "mean":
            return ops.sum(losses) / ops.divisor(losses.shape[0] if losses.ndim else 1)
        return _reduce(losses, reduction)
    loss = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing:
        smooth = -ops.mean(logp, 1 if input.ndim > 1 else 0)
        loss = loss * (1 - label_smoothing) + _reduce(smooth, reduction) * label_smoothing
    return loss


@autocasts("ctc_loss")
def ctc_loss(
    log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
    zero_infinity=False,
):  # fmt: skip
    """Connectionist temporal classification (Graves et al., 2006): minus the
    log-probability of the targets, summed over their alignments to the
    input steps, by the forward recursion in log space over the targets with
    a blank before, between and after them. ``log_probs`` (T, N, C) (or (T,
    C)); ``targets`` padded (N, S) or concatenated; "mean" divides each loss
    by its target's length, then averages. Autograd differentiates the
    recursion; to that gradient PyTorch's kernel adds exp(log_probs) at each
    counted step, which changes no gradient reaching logits through a
    log_softmax, and so does this."""
    if log_probs.dtype not in (dtypes.float32, dtypes.float64):
        raise NotImplementedError(
            f"\"ctc_loss_cpu\" not implemented for '{log_probs.dtype.scalar_name}'"
        )
    unbatched = log_probs.ndim == 2
    if unbatched:
        log_probs, targets = ops.unsqueeze(log_probs, 1), ops.unsqueeze(targets, 0)
    steps, batch, classes = log_probs.shape
    input_lengths, target_lengths = _ctc_lengths(input_lengths, target_lengths, batch)
    if not 0 <= blank < classes:
        raise RuntimeError("blank must be in label range")
    if ops.any(input_lengths > steps):
        longest = int(ops.amax(input_lengths).item())
        raise RuntimeError(
            f"Expected input_lengths to have value at most {steps}, but got value {longest} "
            "(while checking arguments for ctc_loss_cpu)"
        )
    labels = _ctc_labels(_padded_targets(targets.long(), target_lengths), blank)
    losses = _ctc_forward(log_probs, labels, input_lengths, target_lengths)
    # PyTorch's gradient: plus exp(log_probs) at the counted steps (x - x is 0)
    counted = ops.unsqueeze(creation.arange(steps)[:, None] < input_lengths, -1)
    counted = counted & ops.isfinite(log_probs.detach())
    kept = ops.where(counted, log_probs, 0.0)
    losses = losses + ops.sum((kept - kept.detach()) * ops.exp(kept.detach()), (0, 2))
    if zero_infinity:
        losses = ops.where(ops.isinf(losses), 0.0, losses)
    if reduction == "mean":
        divisors = ops.clamp_min(target_lengths, 1).to(losses.dtype)
        return ops.mean(losses / divisors)
    if unbatched and reduction == "none":
        return losses[0]
    return _reduce(losses, reduction)


def _ctc_lengths(input_lengths, target_lengths, batch: int) -> tuple:
    """Both lengths as int64 tensors of one length per sequence."""
    both = (input_lengths, target_lengths)
    if all(isinstance(n, Tensor) and n.dtype.category == dtypes.INTEGER for n in both):
        input_lengths, target_lengths = (ops.reshape(n, (-1,)).long() for n in both)
    elif all(isinstance(n, (list, tuple)) for n in both):
        input_lengths, target_lengths = (creation.tensor(list(n), dtype=dtypes.int64) for n in both)
    else:
        raise TypeError(
            "ctc_loss(): input_lengths and target_lengths must both be tuples of ints or both "
            f"be integer Tensors, got {type(input_lengths).__name__} and "
            f"{type(target_lengths).__name__}"
        )
    for name, lengths in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
        if lengths.shape[0] != batch:
            raise RuntimeError(f"{name} must be of size batch_size")
    return input_lengths, target_lengths


def _padded_targets(targets: Tensor, target_lengths: Tensor) -> Tensor:
    """(N, S) targets, S the longest's length or the padding's."""
    batch = target_lengths.shape[0]
    if targets.ndim == 2:
        if ops.any(target_lengths > targets.shape[1]):
            longest = int(ops.amax(target_lengths).item())
            raise RuntimeError(
                f"Expected tensor to have size at least {longest} at dimension 1, but got size "
                f"{targets.shape[1]} for argument #2 'targets' (while checking arguments for "
                "ctc_loss_allocate_outputs)"
            )
        return targets
    total = int(ops.sum(target_lengths).item())
    if targets.shape[0] != total:
        raise RuntimeError(
            f"Expected tensor to have size {total} at dimension 0, but got size "
            f"{targets.shape[0]} for argument #2 'targets' (while checking arguments for "
            "ctc_loss_allocate_outputs)"
        )
    longest = int(ops.amax(target_lengths).item()) if total else 0
    if not longest:
        return creation.zeros_like(targets).reshape(1, 0).expand(batch, 0)
    starts = ops.cumsum(target_lengths, 0) - target_lengths
    places = ops.clamp_max(starts[:, None] + creation.arange(longest)[None, :], total - 1)
    return ops.take(targets, places)


def _ctc_labels(targets: Tensor, blank: int) -> Tensor:
    """(N, 2S + 1): each sequence's targets with a blank before, between and after them."""
    batch, length = targets.shape
    blanks = creation.full_like(targets, blank)
    interleaved = ops.reshape(ops.stack([blanks, targets], -1), (batch, 2 * length))
    return ops.cat([interleaved, blanks[:, :1] if length else creation.full((batch, 1), blank)], 1)


def _ctc_forward(log_probs, labels, input_lengths, target_lengths) -> Tensor:
    """Minus the log of the summed probability of every alignment: alpha[s],
    the log-probability of the paths through the first steps ending at
    label s, moves from s, s - 1 and (between different targets) s - 2."""
    steps, batch, _ = log_probs.shape
    positions = labels.shape[1]
    emitted = ops.gather(log_probs, 2, ops.expand(labels[None], (steps, batch, positions)))
    # to a target from the one before it, past the blank between (at odd positions)
    odd = creation.arange(positions) % 2 == 1
    skips = odd & pad(labels[:, 2:] != labels[:, :-2], (2, 0), value=False)
    alpha = ops.where(creation.arange(positions) < 2, emitted[0], -math.inf)
    for t in range(1, steps):
        shifted = pad(alpha, (1, -1), value=-math.inf)
        skipped = ops.where(skips, pad(alpha, (2, -2), value=-math.inf), -math.inf)
        moved = _log_sum_exp(alpha, shifted, skipped) + emitted[t]
        alpha = ops.where((t < input_lengths)[:, None], moved, alpha)
    ends = 2 * target_lengths[:, None]
    last = ops.gather(alpha, 1, ends)
    before = ops.where(ends > 0, ops.gather(alpha, 1, ops.clamp_min(ends - 1, 0)), -math.inf)
    losses = -_log_sum_exp(last, before)[:, 0]
    # no steps: only the empty target has an alignment
    return ops.where(input_lengths == 0, ops.where(target_lengths == 0, 0.0, math.inf), losses)


def _log_sum_exp(*terms: Tensor) -> Tensor:
    """log(sum(exp(terms))) of tensors of one shape, -inf where all are,
    with a zero gradient there (logsumexp's would be NaN)."""
    stacked = ops.stack(terms)
    top = ops.amax(stacked, 0).detach()
    shift = ops.where(ops.isinf(top), 0.0, top)
    total = ops.sum(ops.exp(stacked - shift), 0)
    empty = total == 0.0
    return ops.where(empty, -math.inf, ops.log(ops.where(empty, 1.0, total)) + shift)


__all__ += ["ctc_loss"]


# ------------------------------------ more activations, norms, distances, losses


@_named("HardsigmoidBackward0")
def _hardsigmoid(input):
    return ops.where(input <= -3, 0.0, ops.where(input >= 3, 1.0, input / 6 + 0.5))


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    out = _hardsigmoid(input)
    return _inplace(input, out) if inplace else out


@_named("HardswishBackward0")
def _hardswish(input):
    return ops.where(input <= -3, 0.0, ops.where(input >= 3, input, input * (input + 3) / 6))


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    out = _hardswish(input)
    return _inplace(input, out) if inplace else out


@_named("HardshrinkBackward0")
def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    return ops.where((input >= -lambd) & (input <= lambd), 0.0, input)


@_named("SoftshrinkBackward0")
def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    return ops.where(input > lambd, input - lambd, ops.where(input < -lambd, input + lambd, 0.0))


def tanhshrink(input: Tensor) -> Tensor:
    return input - ops.tanh(input)


@_named("ThresholdBackward0")
def _threshold(input, threshold, value):
    return ops.where(input > threshold, input, value)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    out = _threshold(input, threshold, value)
    return _inplace(input, out) if inplace else out


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    out = ops.where(input > 0, input, (ops.exp(_nonpositive(input) / alpha) - 1.0) * alpha)
    return _inplace(input, out) if inplace else out


@_named("GluBackward0")
def glu(input: Tensor, dim: int = -1) -> Tensor:
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    size = input.shape[dim]
    if size % 2:
        raise RuntimeError(
            f"Halving dimension must be even, but dimension {dim % input.ndim} is size {size}"
        )
    first, second = ops.chunk(input, 2, dim)
    return first * sigmoid(second)


@autocasts("prelu")
@_named("PreluKernelBackward0")
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """max(0, x) + weight * min(0, x), one weight per channel (dimension 1) or one in all."""
    if weight.numel() != 1:
        channels = input.shape[1] if input.ndim > 1 else 1
        if weight.numel() != channels:
            raise RuntimeError(
                f"Mismatch of parameter numbers and input channel size. Found parameter "
                f"numbers = {weight.numel()} and channel size = {channels}."
            )
        weight = weight.reshape((channels,) + (1,) * (input.ndim - 2)) if input.ndim > 1 else weight
    return ops.where(input > 0, input, input * weight)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky ReLU with a slope drawn uniformly from [lower, upper] per element
    in training, their mean otherwise."""
    if training:
        slopes = creation.empty(input.shape, dtype=input.dtype).uniform_(lower, upper)
        out = ops.where(input >= 0, input, input * slopes)
    else:
        out = _leaky_relu(input, (lower + upper) / 2)
    return _inplace(input, out) if inplace else out


@_in_input_dtype
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalizes each sample's channels (dimension 1) in ``num_groups`` groups
    over the group's channels and the other dimensions, then scales and shifts
    per channel."""
    if input.ndim < 2:
        raise RuntimeError(
            f"Expected at least 2 dimensions for input tensor but received {input.ndim}"
        )
    _check_parameter_dtypes(input, weight, bias)
    batch, channels = input.shape[0], input.shape[1]
    if channels % num_groups:
        raise RuntimeError(
            f"Expected number of channels in input to be divisible by num_groups, but got input "
            f"of shape {list(input.shape)} and num_groups={num_groups}"
        )
    per_group = [batch * channels // num_groups, num_groups, *input.shape[2:]]
    if per_group[0] * math.prod(per_group[2:]) == 1:  # PyTorch's check, as batch_norm's
        raise ValueError(
            f"Expected more than 1 value per channel when training, got input size {per_group}"
        )
    grouped = input.reshape(batch, num_groups, -1)
    mean = ops.mean(grouped, 2, keepdim=True)
    centered = grouped - mean
    variance = ops.mean(centered * centered, 2, keepdim=True)
    out = (centered * ops.rsqrt(variance + eps)).reshape(input.shape)
    shape = (1, channels) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


@_in_input_dtype
def instance_norm(
    input,
    running_mean=None,
    running_var=None,
    weight=None,
    bias=None,
    use_input_stats=True,
    momentum=0.1,
    eps=1e-5,
):
    """Normalizes each sample's each channel over its other dimensions (or
    by running statistics when ``use_input_stats`` is False)."""
    if input.ndim < 3:
        raise ValueError(f"expected a batch of channels with spatial dimensions, got {input.ndim}D")
    _check_parameter_dtypes(input, weight, bias, running_mean, running_var)
    batch, channels = input.shape[0], input.shape[1]
    shape = (1, channels) + (1,) * (input.ndim - 2)
    if use_input_stats:
        axes = tuple(range(2, input.ndim))
        mean = ops.mean(input, axes, keepdim=True)
        centered = input - mean
        squares = ops.sum(centered * centered, axes, keepdim=True)
        count = math.prod(input.shape[2:])
        out = centered * ops.rsqrt(squares / ops.divisor(count) + eps)
        if running_mean is not None and running_var is not None:
            with no_grad():
                batch_mean = ops.mean(mean.reshape(batch, channels), 0)
                unbiased = ops.mean(squares.reshape(batch, channels), 0) / ops.divisor(
                    max(count - 1, 0)
                )
                running_mean.copy_(batch_mean * momentum + running_mean * (1 - momentum))
                running_var.copy_(unbiased * momentum + running_var * (1 - momentum))
    else:
        mean, var = running_mean.reshape(shape), running_var.reshape(shape)
        out = (input - mean) * ops.rsqrt(var + eps)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) over the trailing ``normalized_shape``
    dimensions, times weight, as PyTorch computes it: a float16 or bfloat16
    input in float32 (eps float32's machine epsilon when not given, else the
    input's), the product with the weight in their promoted dtype, the
    result rounded once to the input's dtype."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(input.shape[input.ndim - len(shape) :]) != shape:
        raise RuntimeError(
            f"Given normalized_shape={list(shape)}, expected input with shape "
            f"[*, {', '.join(map(str, shape))}], but got input of size{list(input.shape)}"
        )
    x = P.convert(input, dtype=dtypes.float32) if input.dtype.reduced else input
    eps = dtypes.finfo(x.dtype).eps if eps is None else eps
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    out = x * ops.rsqrt(ops.mean(x * x, dims, keepdim=True) + eps)
    if weight is not None:
        out = out * weight
    return out if out.dtype is input.dtype else P.convert(out, dtype=input.dtype)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """x1 . x2 / max(|x1| |x2|, eps) along ``dim``, as PyTorch computes it
    (each norm clamped at sqrt(eps) before the product)."""
    x1, x2 = ops.broadcast_tensors(x1, x2)
    root = math.sqrt(eps)
    norm1 = ops.clamp(ops.norm(x1, 2, dim, keepdim=True), min=root)
    norm2 = ops.clamp(ops.norm(x2, 2, dim, keepdim=True), min=root)
    return ops.sum((x1 / norm1) * (x2 / norm2), dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    return ops.norm(x1 - x2 + eps, p, -1, keepdim=keepdim)


def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) to (*, C, H r, W r)."""
    r = upscale_factor
    *lead, channels, height, width = input.shape
    if channels % (r * r):
        raise RuntimeError(
            f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square "
            f"of upscale_factor, but input.size(-3)={channels} is not divisible by {r * r}"
        )
    out = input.reshape(*lead, channels // (r * r), r, r, height, width)
    n = len(lead)
    out = out.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return out.reshape(*lead, channels // (r * r), height * r, width * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) to (*, C r^2, H, W)."""
    r = downscale_factor
    *lead, channels, height, width = input.shape
    if height % r or width % r:
        raise RuntimeError(
            f"pixel_unshuffle expects height and width to be divisible by downscale_factor, "
            f"but got {height} and {width} for downscale_factor={r}"
        )
    out = input.reshape(*lead, channels, height // r, r, width // r, r)
    n = len(lead)
    out = out.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return out.reshape(*lead, channels * r * r, height // r, width // r)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) to (N, C k_h k_w, L), each column one window."""
    if input.ndim != 4:
        raise NotImplementedError(
            "Input Error: Only 4D input Tensors are supported (got {input.ndim}D)"
        )
    kernel, dilation, padding, stride = (
        _tuple(value, 2, name)
        for value, name in (
            (kernel_size, "kernel_size"),
            (dilation, "dilation"),
            (padding, "padding"),
            (stride, "stride"),
        )
    )
    x = P.pad(input, widths=((0, 0), (0, 0)) + tuple((p, p) for p in padding), value=0)
    cols = P.windows(x, kernel=kernel, stride=stride, dilation=dilation)  # (N, C, *k, *out)
    batch = input.shape[0]
    return cols.reshape(batch, input.shape[1] * kernel[0] * kernel[1], -1)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im, unfold's adjoint: columns (N, C k_h k_w, L) summed into (N, C, H, W)."""
    size, kernel, dilation, padding, stride = (
        _tuple(value, 2, name)
        for value, name in (
            (output_size, "output_size"),
            (kernel_size, "kernel_size"),
            (dilation, "dilation"),
            (padding, "padding"),
            (stride, "stride"),
        )
    )
    padded = tuple(s + 2 * p for s, p in zip(size, padding))
    counts = tuple(
        P.window_count(s, k, st, d) for s, k, st, d in zip(padded, kernel, stride, dilation)
    )
    batch, rows, columns = input.shape
    channels = rows // (kernel[0] * kernel[1])
    if channels * kernel[0] * kernel[1] != rows or math.prod(counts) != columns:
        raise RuntimeError(
            f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, "
            f"and its dimension 2 to match the calculated number of sliding blocks "
            f"{counts[0]} * {counts[1]} = {math.prod(counts)}, but got input.size(1)={rows}, "
            f"input.size(2)={columns}."
        )
    cols = input.reshape(batch, channels, *kernel, *counts)
    image = P.fold(cols, size=padded, kernel=kernel, stride=stride, dilation=dilation)
    return image[:, :, padding[0] : padding[0] + size[0], padding[1] : padding[1] + size[1]]


@autocasts("margin_ranking_loss")
def margin_ranking_loss(input1, input2, target, margin=0.0, reduction="mean", **legacy):
    reduction = _legacy_reduction(legacy.get("size_average"), legacy.get("reduce"), reduction)
    return _reduce(ops.clamp(-target * (input1 - input2) + margin, min=0), reduction)


@autocasts("hinge_embedding_loss")
def hinge_embedding_loss(input, target, margin=1.0, reduction="mean", **legacy):
    reduction = _legacy_reduction(legacy.get("size_average"), legacy.get("reduce"), reduction)
    margin_part = ops.clamp(margin - input, min=0)
    loss = ops.where(target == 1, input, 0.0) + ops.where(target == -1, margin_part, 0.0)
    return _reduce(loss, reduction)


@autocasts("soft_margin_loss")
def soft_margin_loss(input, target, reduction="mean", **legacy):
    reduction = _legacy_reduction(legacy.get("size_average"), legacy.get("reduce"), reduction)
    return _reduce(ops.log1p(ops.exp(-target * input)), reduction)


@autocasts("cosine_embedding_loss")
def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction="mean", **legacy):
    reduction = _legacy_reduction(legacy.get("size_average"), legacy.get("reduce"), reduction)
    eps = 1e-12  # PyTorch's, added to the squared norms
    dot = ops.sum(input1 * input2, -1)
    norms = ops.sqrt((ops.sum(input1 * input1, -1) + eps) * (ops.sum(input2 * input2, -1) + eps))
    cosine = dot / norms
    loss = ops.where(
        target == 1, 1 - cosine, ops.where(target == -1, ops.clamp(cosine - margin, min=0), 0.0)
    )
    return _reduce(loss, reduction)


@autocasts("triplet_margin_loss")
def triplet_margin_loss(
    anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, reduction="mean", **legacy
):
    reduction = _legacy_reduction(legacy.get("size_average"), legacy.get("reduce"), reduction)
    to_positive = pairwise_distance(anchor, positive, p, eps)
    to_negative = pairwise_distance(anchor, negative, p, eps)
    if swap:
        to_negative = ops.minimum(to_negative, pairwise_distance(positive, negative, p, eps))
    return _reduce(ops.clamp(to_positive - to_negative + margin, min=0), reduction)


@autocasts("poisson_nll_loss")
def poisson_nll_loss(
    input, target, log_input=True, full=False, eps=1e-8, reduction="mean", **legacy
):
    reduction = _legacy_reduction(legacy.get("size_average"), legacy.get("reduce"), reduction)
    if log_input:
        loss = ops.exp(input) - target * input
    else:
        loss = input - target * ops.log(input + eps)
    if full:  # Stirling's term for the targets above 1
        stirling = target * ops.log(target) - target + 0.5 * ops.log(2 * math.pi * target)
        loss = loss + ops.where(target > 1, stirling, 0.0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    if var.ndim == input.ndim - 1 and tuple(var.shape) == tuple(input.shape[:-1]):
        var = var.unsqueeze(-1)
    elif var.ndim != input.ndim or any(
        v not in (i, 1) for v, i in zip(var.shape, input.shape)
    ):  # one variance per sample, or homoscedastic
        raise ValueError("var is of incorrect size")
    if bool(ops.any(var < 0)):
        raise ValueError("var has negative entry/entries")
    with no_grad():
        clamped = ops.clamp(var, min=eps)
    var = var + (clamped - var).detach()  # PyTorch clamps without changing the gradient
    loss = 0.5 * (ops.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, reduction="mean", **legacy):
    reduction = _legacy_reduction(legacy.get("size_average"), legacy.get("reduce"), reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    return _reduce(ops.mean(loss, -1), reduction)


__all__ += [
    "hardsigmoid",
    "hardswish",
    "hardshrink",
    "softshrink",
    "tanhshrink",
    "threshold",
    "celu",
    "glu",
    "prelu",
    "rrelu",
    "group_norm",
    "instance_norm",
    "rms_norm",
    "cosine_similarity",
    "pairwise_distance",
    "pixel_shuffle",
    "pixel_unshuffle",
    "unfold",
    "fold",
    "margin_ranking_loss",
    "hinge_embedding_loss",
    "soft_margin_loss",
    "cosine_embedding_loss",
    "triplet_margin_loss",
    "poisson_nll_loss",
    "gaussian_nll_loss",
    "multilabel_soft_margin_loss",
]


def _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, dims):
    """The adjoint of a convolution in its input: each input pixel's weighted
    kernel (a matrix product, columns per pixel) summed into the output where
    its window lies (fold, col2im), the padding cropped."""
    unbatched = input.ndim == dims + 1
    if unbatched:
        input = input.unsqueeze(0)
    if input.ndim != dims + 2:
        raise RuntimeError(
            f"Expected {dims + 1}D (unbatched) or {dims + 2}D (batched) input to "
            f"conv_transpose{dims}d, but got input of size: {list(input.shape)}"
        )
    _check_groups(groups)
    _check_filters(weight, groups)
    if dims == 1:  # as 2-D with a height of 1
        out = _conv_transpose(
            input.unsqueeze(2), weight.unsqueeze(2), bias, (1, *_tuple(stride, 1, "stride")),
            (0, *_tuple(padding, 1, "padding")), (0, *_tuple(output_padding, 1, "output_padding")),
            groups, (1, *_tuple(dilation, 1, "dilation")), 2,
        ).squeeze(2)  # fmt: skip
        return out.squeeze(0) if unbatched else out
    stride, padding = _tuple(stride, dims, "stride"), _tuple(padding, dims, "padding")
    output_padding = _tuple(output_padding, dims, "output_padding")
    dilation = _tuple(dilation, dims, "dilation")
    batch, channels, *spatial = input.shape
    if weight.shape[0] != channels:
        raise RuntimeError(
            f"Given transposed=1, weight of size {list(weight.shape)}, expected input"
            f"{list(input.shape)} to have {weight.shape[0]} channels, but got {channels} "
            f"channels instead"
        )
    _check_output_padding(output_padding, stride, dilation)
    kernel = tuple(weight.shape[2:])
    # the windows' extent, before the padding is cropped and output_padding added
    full = tuple(
        (n - 1) * s + d * (k - 1) + 1 for n, s, d, k in zip(spatial, stride, dilation, kernel)
    )
    size = tuple(f - 2 * p + op for f, p, op in zip(full, padding, output_padding))
    if any(n <= 0 for n in size):
        raise RuntimeError(
            f"Given input size per channel: ({' x '.join(map(str, spatial))}). Calculated "
            f"output size per channel: ({' x '.join(map(str, size))}). Output size is too small"
        )
    per_group, out_per_group, taps = channels // groups, weight.shape[1], math.prod(kernel)
    # (G, taps of a group's outputs, a group's inputs) times (N, G, inputs, pixels)
    matrices = weight.reshape(groups, per_group, out_per_group * taps).mT
    pixels = input.reshape(batch, groups, per_group, math.prod(spatial))
    columns = (matrices @ pixels).reshape(batch, groups * out_per_group, *kernel, *spatial)
    image = P.fold(columns, size=full, kernel=kernel, stride=stride, dilation=dilation)
    # the padding cropped; the output_padding beyond every window, zeros
    widths = tuple((-p, op - p) for p, op in zip(padding, output_padding))
    out = (
        image
        if not any(padding + output_padding)
        else P.pad(image, widths=((0, 0), (0, 0), *widths), value=0)
    )
    if bias is not None:
        out = out + bias.reshape(1, -1, *(1,) * dims)
    return out.squeeze(0) if unbatched else out


def _check_output_padding(output_padding, stride, dilation) -> None:
    if any(op >= max(s, d) for op, s, d in zip(output_padding, stride, dilation)):
        axes = ("depth", "height", "width")[-len(stride) :]
        settings = " ".join(
            f"{name}_{axis}: {value}"
            for name, values in (
                ("output_padding", output_padding), ("stride", stride), ("dilation", dilation)
            )
            for axis, value in zip(axes, values)
        )  # fmt: skip
        raise RuntimeError(
            f"output padding must be smaller than either stride or dilation, but got {settings}"
        )


@autocasts("conv_transpose1d")
def conv_transpose1d(
    input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
):
    return _conv_transpose(
        input, weight, bias, stride, padding, output_padding, groups, dilation, 1
    )


@autocasts("conv_transpose2d")
def conv_transpose2d(
    input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
):
    return _conv_transpose(
        input, weight, bias, stride, padding, output_padding, groups, dilation, 2
    )


@autocasts("conv_transpose3d")
def conv_transpose3d(
    input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
):
    return _conv_transpose(
        input, weight, bias, stride, padding, output_padding, groups, dilation, 3
    )


__all__ += ["conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]


def _source_size_and_scales(input, size, scale_factor, dims, recompute_scale_factor):
    spatial = tuple(input.shape[2:])
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        out = _tuple(size, dims, "size")
        return out, tuple(n / o if o else 0.0 for n, o in zip(spatial, out))
    factors = scale_factor if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * dims
    if len(factors) != dims:
        raise ValueError(
            f"Input and scale_factor must have the same number of spatial dimensions, but got "
            f"input with spatial dimensions of {list(input.shape[2:])} and scale_factor of "
            f"shape {list(factors)}."
        )
    factors = tuple(float(f) for f in factors)
    out = tuple(math.floor(n * f) for n, f in zip(spatial, factors))
    if recompute_scale_factor:
        return out, tuple(n / o if o else 0.0 for n, o in zip(spatial, out))
    return out, tuple(1.0 / f for f in factors)


def _nearest_sources(n_in, n_out, scale, exact):
    positions = np.arange(n_out, dtype=np.float64)
    source = np.floor((positions + 0.5) * scale) if exact else np.floor(positions * scale)
    return np.minimum(source, n_in - 1).astype(np.int64)


def _linear_weights(n_in, n_out, scale, align_corners):
    """For each output position along an axis: its two source positions and
    the weight of the second (PyTorch's source-index arithmetic)."""
    positions = np.arange(n_out, dtype=np.float64)
    if align_corners:
        source = positions * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else:
        source = np.maximum((positions + 0.5) * scale - 0.5, 0.0)
    low = np.minimum(np.floor(source), n_in - 1).astype(np.int64)
    high = np.minimum(low + 1, n_in - 1)
    return low, high, source - low


def interpolate(
    input,
    size=None,
    scale_factor=None,
    mode="nearest",
    align_corners=None,
    recompute_scale_factor=None,
    antialias=False,
):
    """Resizes the trailing spatial dimensions of (N, C, ...) by "nearest",
    "nearest-exact", "linear", "bilinear" or "area" (adaptive average pooling)."""
    dims = input.ndim - 2
    if dims not in (1, 2):
        raise NotImplementedError(
            f"interpolate: {input.ndim}D input is not supported by fusegrad (3D and 4D are)"
        )
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported by fusegrad")
    linear_modes = {"linear": 1, "bilinear": 2}
    if mode in linear_modes and linear_modes[mode] != dims:
        raise NotImplementedError(
            f"Got {input.ndim}D input, but {mode} mode needs {linear_modes[mode] + 2}D input"
        )
    if align_corners is not None and mode not in linear_modes:
        raise ValueError(
            "align_corners option can only be set with the interpolating modes: "
            "linear | bilinear | bicubic | trilinear"
        )
    out_size, scales = _source_size_and_scales(
        input, size, scale_factor, dims, recompute_scale_factor
    )
    if mode == "area":
        pool = adaptive_avg_pool1d if dims == 1 else adaptive_avg_pool2d
        return pool(input, out_size)
    if mode not in ("nearest", "nearest-exact", *linear_modes):
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported by fusegrad")
    if min(*input.shape[2:], *out_size) <= 0:
        axes = "HW"[-dims:]
        sizes = [
            ", ".join(f"{a}: {n}" for a, n in zip(axes, s)) for s in (input.shape[2:], out_size)
        ]
        raise RuntimeError(
            "Input and output sizes should be greater than 0, but got input "
            f"({sizes[0]}){' and' if dims == 1 else ''} output ({sizes[1]})"
        )
    out = input
    for axis, (n_in, n_out, scale) in enumerate(zip(input.shape[2:], out_size, scales), start=2):
        if mode in ("nearest", "nearest-exact"):
            sources = _nearest_sources(n_in, n_out, scale, mode == "nearest-exact")
            out = ops.index_select(out, axis, constant_array(sources, dtypes.int64))
            continue
        low, high, weight = _linear_weights(n_in, n_out, scale, bool(align_corners))
        shape = (n_out,) + (1,) * (input.ndim - 1 - axis)
        second = constant_array(weight.reshape(shape).astype(input.dtype.np), input.dtype)
        below = ops.index_select(out, axis, constant_array(low, dtypes.int64))
        above = ops.index_select(out, axis, constant_array(high, dtypes.int64))
        out = below + (above - below) * second
    return out


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)


__all__ += ["interpolate", "upsample"]


# -------------------------------------------------------------- grid sampling

_ALIGN_CORNERS_CHANGED = (
    "Default grid_sample and affine_grid behavior has changed to align_corners=False since "
    "1.3.0. Please specify align_corners=True if the old behavior is desired. See the "
    "documentation of grid_sample for details."
)


def _align_corners(align_corners) -> bool:
    if align_corners is None:
        warnings.warn(_ALIGN_CORNERS_CHANGED, stacklevel=4)
        return False
    return bool(align_corners)


def _grid_axis(size: int, align_corners: bool) -> np.ndarray:
    """affine_grid's normalized positions of an axis's pixels: -1 and 1 at the
    corner pixels' centres, or (not align_corners) at their outer edges; a
    single pixel at 0."""
    if size == 1:
        return np.zeros(1)
    positions = np.linspace(-1.0, 1.0, size)
    return positions if align_corners else positions * ((size - 1) / size)


@_named("AffineGridGeneratorBackward0")
def affine_grid(theta: Tensor, size, align_corners=None) -> Tensor:
    """The sampling grid (N, *spatial, 2 or 3) of grid_sample that applies the
    affine maps ``theta`` (N, 2, 3) or (N, 3, 4) to an output of ``size``
    (N, C, H, W) or (N, C, D, H, W), in normalized coordinates."""
    align_corners = _align_corners(align_corners)
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    dims = len(size) - 2
    if dims not in (2, 3):
        raise NotImplementedError(
            "affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
            f"respectively. Got size {size}."
        )
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (dims, dims + 1):
        raise ValueError(
            f"Expected a batch of {dims}D affine matrices of shape Nx{dims}x{dims + 1} for size "
            f"{size}. Got {theta.shape}."
        )
    spatial = tuple(int(n) for n in size[2:])
    if align_corners and min(spatial) == 1:
        warnings.warn(
            "Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
            "align_corners=True. This is not an intended use case of affine_grid. See the "
            "documentation of affine_grid for details.",
            stacklevel=3,
        )
    elif min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if theta.shape[0] != size[0]:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: [{size[0]}, "
            f"{dims + 1}] but got: [{theta.shape[0]}, {dims + 1}]."
        )
    axes = np.meshgrid(*(_grid_axis(n, align_corners) for n in spatial), indexing="ij")
    # each pixel's (x, y[, z], 1): the grid's coordinates list the last axis first
    base = np.stack([*axes[::-1], np.ones(spatial)], axis=-1).reshape(-1, dims + 1)
    grid = ops.matmul(constant_array(base.astype(theta.dtype.np), theta.dtype), theta.mT)
    return P.reshape(grid, shape=(size[0], *spatial, dims))


def _check_grid_sample(input: Tensor, grid: Tensor, mode: str) -> None:
    sizes = f"input with sizes {list(input.shape)} and grid with sizes {list(grid.shape)}"
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(
            f"grid_sampler(): expected grid and input to have same batch size, but got {sizes}"
        )
    if grid.shape[-1] != input.ndim - 2:
        raise RuntimeError(
            f"grid_sampler(): expected grid to have size {input.ndim - 2} in last dimension, "
            f"but got grid with sizes {list(grid.shape)}"
        )
    for axis in range(2, input.ndim):
        if input.shape[axis] == 0:
            raise RuntimeError(
                "grid_sampler(): expected input to have non-empty spatial dimensions, but "
                f"input has sizes {list(input.shape)} with dimension {axis} being empty"
            )
    dims = 2 if input.ndim == 4 else 3
    if input.ndim != dims + 2 or grid.ndim != input.ndim:
        raise RuntimeError(
            f"grid_sampler(): expected {dims + 2}D input and grid with same number of "
            f"dimensions, but got {sizes}"
        )
    if mode == "bicubic" and dims == 3:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(
            f'"grid_sampler_{dims}d_cpu_kernel_impl" not implemented for '
            f"'{input.dtype.scalar_name}'"
        )
    if grid.dtype is not input.dtype:
        raise RuntimeError(
            f"expected scalar type {input.dtype.scalar_name} but found {grid.dtype.scalar_name}"
        )


def _unnormalized(coordinate: Tensor, size: int, align_corners: bool) -> Tensor:
    """A grid coordinate (-1 and 1: the corner pixels' centres, or with
    align_corners False their outer edges) as a position along an axis of ``size``."""
    if align_corners:
        return (coordinate + 1) / 2 * (size - 1)
    return ((coordinate + 1) * size - 1) / 2


def _clipped(position: Tensor, size: int) -> Tensor:
    """position within [0, size - 1], as PyTorch clips: the gradient 0 where
    clipped (at the bounds too), a NaN position at 0."""
    inside = ops.where(position > 0, position, 0.0)
    return ops.where(inside < size - 1, inside, float(size - 1))


def _reflected(position: Tensor, twice_low: int, twice_high: int) -> Tensor:
    """position reflected at low and high until it lies between them."""
    if twice_low == twice_high:
        return creation.zeros_like(position)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    distance = ops.abs(position - low)
    extra = ops.fmod(distance, span)
    flips = ops.floor(distance / span)
    return ops.where(ops.fmod(flips, 2.0) == 0, extra + low, span - extra + low)


def _padded(position: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    """Where a position outside the input reads ("border": the nearest edge,
    "reflection": its mirror image in the edges); "zeros" leaves it, to read 0."""
    if padding_mode == "border":
        return _clipped(position, size)
    if padding_mode == "reflection":
        bounds = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        return _clipped(_reflected(position, *bounds), size)
    return position


def _cubic_weights(t: Tensor) -> list:
    """The cubic convolution weights (a = -0.75) of the taps at -1, 0, 1 and
    2 around a position ``t`` past the tap at 0."""
    a = -0.75

    def near(x):  # taps within 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # taps between 1 and 2 away
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _sum_of_taps(flat: Tensor, taps: list, sizes: tuple) -> Tensor:
    """The sum over every combination of one tap per axis of the input value
    there (0 outside the input) times the taps' weights. ``flat`` is the
    input (N, C, prod(sizes)); ``taps`` holds per axis its (position, weight)
    pairs, tensors (N, P) with whole-number positions, a weight None for 1."""
    n, channels = flat.shape[:2]
    batch = P.reshape(index_tensors.positions(n), shape=(n, 1, 1))
    channel = P.reshape(index_tensors.positions(channels), shape=(1, channels, 1))
    total = None
    for combination in itertools.product(*taps):
        index, factor = None, None
        for (position, weight), size in zip(combination, sizes):
            inside = (position >= 0) & (position <= size - 1)  # False for NaN
            axis_index = P.convert(ops.where(inside, position, 0.0), dtype=dtypes.int64)
            index = axis_index if index is None else index * size + axis_index
            mask = P.convert(inside, dtype=flat.dtype)
            for part in (mask, weight):
                if part is not None:
                    factor = part if factor is None else factor * part
        picked = index_tensors.index_with_arrays(flat, [batch, channel, ops.unsqueeze(index, 1)])
        term = picked * ops.unsqueeze(factor, 1)
        total = term if total is None else total + term
    return total


@autocasts("grid_sampler")
@_named(lambda input, *args, **kwargs: f"GridSampler{input.ndim - 2}DBackward0")
def grid_sample(
    input: Tensor, grid: Tensor, mode="bilinear", padding_mode="zeros", align_corners=None
) -> Tensor:
    """Samples (N, C, H, W) at the positions ``grid`` (N, Ho, Wo, 2) gives in
    normalized coordinates ((x, y) from -1 to 1, see ``align_corners``), or
    (N, C, D, H, W) at (N, Do, Ho, Wo, 3): interpolating ("bilinear" (trilinear
    in 3-D), "nearest", or "bicubic" in 2-D), reading outside the input 0
    ("zeros"), the nearest edge ("border") or the mirror image ("reflection")."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(
            "nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or "
            f"'bicubic', but got: '{mode}'"
        )
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(
            "nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
            f"'reflection', but got: '{padding_mode}'"
        )
    align_corners = _align_corners(align_corners)
    _check_grid_sample(input, grid, mode)
    dims = input.ndim - 2
    n, channels, sizes = input.shape[0], input.shape[1], tuple(input.shape[2:])
    out_sizes = tuple(grid.shape[1:-1])
    points = P.reshape(grid, shape=(n, math.prod(out_sizes), dims))
    # the grid's last axis lists x (the last axis of the input) first
    coordinates = [
        _unnormalized(ops.select(points, -1, dims - 1 - axis), size, align_corners)
        for axis, size in enumerate(sizes)
    ]
    taps = []
    for position, size in zip(coordinates, sizes):
        if mode == "bicubic":  # the padding moves each tap, not the position
            low = ops.floor(position)
            weights = _cubic_weights(position - low)
            steps = zip(range(-1, 3), weights)
            taps.append(
                [(_padded(low + k, size, padding_mode, align_corners), w) for k, w in steps]
            )
            continue
        position = _padded(position, size, padding_mode, align_corners)
        if mode == "nearest":  # rounding half to even, as PyTorch's nearbyint
            taps.append([(ops.round(position), None)])
        else:
            low = ops.floor(position)
            taps.append([(low, low + 1 - position), (low + 1, position - low)])
    flat = P.reshape(input, shape=(n, channels, math.prod(sizes)))
    return P.reshape(_sum_of_taps(flat, taps, sizes), shape=(n, channels, *out_sizes))


__all__ += ["affine_grid", "grid_sample"]


def _feature_dropout(input, p, training):
    """ATen's feature dropout: zeroes whole channels, each (sample, channel)'s
    slice of the dimensions after the first two, with probability p in
    training, scaling the others by 1/(1 - p)."""
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    if input.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    channels = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    return input * (bernoulli_mask(channels, 1.0 - p, input.dtype) * (1.0 / (1.0 - p)))


def _check_probability(p) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _warn_unexpected_rank(input, name: str, spatial: int) -> None:
    """PyTorch's warning for an input to dropout2d/3d of another rank than
    (N, C, *spatial) or (C, *spatial), which it then drops out all the same."""
    if input.ndim not in (spatial + 1, spatial + 2):
        warnings.warn(
            f"{name}: Received a {input.ndim}-D input to {name}, which is deprecated and will "
            "result in an error in a future release. To retain the behavior and silence this "
            f"warning, please use dropout instead. Note that {name} exists to provide "
            f"channel-wise dropout on inputs with {spatial} spatial dimensions, a channel "
            f"dimension, and an optional batch dimension (i.e. {spatial + 1}D or "
            f"{spatial + 2}D inputs).",
            stacklevel=3,
        )


def dropout1d(input, p=0.5, training=True, inplace=False):
    _check_probability(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
            "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial "
            "dimension, a channel dimension, and an optional batch dimension (i.e. 2D or 3D "
            "inputs)."
        )
    if input.ndim == 2:  # unbatched (C, L)
        return _feature_dropout(input.unsqueeze(0), p, training).squeeze(0)
    return _feature_dropout(input, p, training)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Channel dropout of (N, C, H, W); a 3D input is taken as (N, C, L), and
    other ranks are dropped out by their first two dimensions, with PyTorch's
    warnings."""
    _check_probability(p)
    _warn_unexpected_rank(input, "dropout2d", 2)
    if input.ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C is "
            "the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=2,
        )
    return _feature_dropout(input, p, training)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Channel dropout of (N, C, D, H, W); any other rank is taken as
    unbatched (its first dimension the channels), with PyTorch's warning."""
    _check_probability(p)
    _warn_unexpected_rank(input, "dropout3d", 3)
    if input.ndim != 5:
        return _feature_dropout(input.unsqueeze(0), p, training).squeeze(0)
    return _feature_dropout(input, p, training)


def _in_place(function):
    def in_place(input, *args, **kwargs):
        return function(input, *args, inplace=True, **kwargs)

    in_place.__name__ = function.__name__ + "_"
    return in_place


relu_, elu_, selu_, celu_ = map(_in_place, (relu, elu, selu, celu))
leaky_relu_, hardtanh_, threshold_, rrelu_ = map(
    _in_place, (leaky_relu, hardtanh, threshold, rrelu)
)

__all__ += [
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "relu_",
    "elu_",
    "selu_",
    "celu_",
    "leaky_relu_",
    "hardtanh_",
    "threshold_",
    "rrelu_",
]
