"""``nn.init``: filling parameters in place with the distributions networks
start from, with the fans and gains PyTorch computes.

Every sample is drawn with ``fusegrad.rand``/``randn``, so these follow the
library's generator (``manual_seed``, and ``generator=`` where the samplers
take one), and is written into the tensor under ``no_grad``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..eager import creation, ops
from ..eager.grad_mode import no_grad
from ..eager.tensor import Tensor

__all__ = [
    "calculate_gain",
    "uniform_",
    "normal_",
    "trunc_normal_",
    "constant_",
    "ones_",
    "zeros_",
    "eye_",
    "dirac_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "orthogonal_",
    "sparse_",
    "normal",
    "uniform",
    "constant",
    "xavier_uniform",
    "xavier_normal",
    "kaiming_uniform",
    "kaiming_normal",
    "orthogonal",
    "eye",
    "dirac",
    "sparse",
]


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The factor a nonlinearity needs to keep the variance of activations:
    1 for linear layers and sigmoid, 5/3 for tanh, sqrt(2) for relu,
    sqrt(2 / (1 + slope^2)) for leaky_relu, 3/4 for selu."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d")
    linear += ("conv_transpose2d", "conv_transpose3d")
    if nonlinearity in linear or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple:
    if tensor.dim() < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions"
        )
    receptive_field = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive_field, tensor.shape[0] * receptive_field


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of ['fan_in', 'fan_out']")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _draw(sampler, tensor: Tensor, generator) -> Tensor:
    """A sample of ``tensor``'s shape and dtype (a generator passed on only when given)."""
    extra = {} if generator is None else {"generator": generator}
    return sampler(tuple(tensor.shape), dtype=tensor.dtype, **extra)


def _fill(tensor: Tensor, value) -> Tensor:
    with no_grad():
        return tensor.copy_(value) if isinstance(value, Tensor) else tensor.fill_(value)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fills ``tensor`` with values drawn uniformly from [a, b)."""
    return _fill(tensor, _draw(creation.rand, tensor, generator) * (b - a) + a)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fills ``tensor`` with values drawn from N(mean, std^2)."""
    return _fill(tensor, _draw(creation.randn, tensor, generator) * std + mean)


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator=None,
) -> Tensor:
    """Fills ``tensor`` with N(mean, std^2) restricted to [a, b], by inverting
    the normal CDF on a uniform draw between the CDF's values at a and b."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
            "The distribution of values may be incorrect.",
            stacklevel=2,
        )
    low, high = _normal_cdf((a - mean) / std), _normal_cdf((b - mean) / std)
    uniform = _draw(creation.rand, tensor, generator).double() * (2 * high - 2 * low) + (
        2 * low - 1
    )
    values = ops.erfinv(uniform) * (std * math.sqrt(2.0)) + mean
    return _fill(tensor, ops.clamp(values, min=a, max=b))


def _normal_cdf(x: float) -> float:
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def constant_(tensor: Tensor, val: float) -> Tensor:
    return _fill(tensor, val)


def ones_(tensor: Tensor) -> Tensor:
    return _fill(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    return _fill(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """Fills a 2-D tensor with the identity (ones on the diagonal)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, creation.eye(*tensor.shape, dtype=tensor.dtype))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fills a 3-, 4- or 5-D convolution weight so the convolution is the
    identity on as many channels as it has (in each of ``groups`` groups)."""
    if tensor.dim() not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    out_per_group = tensor.shape[0] // groups
    if tensor.shape[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    values = np.zeros(tuple(tensor.shape), tensor.dtype.np)
    centre = tuple(size // 2 for size in tensor.shape[2:])
    for g in range(groups):
        for d in range(min(out_per_group, tensor.shape[1])):
            values[(g * out_per_group + d, d, *centre)] = 1
    return _fill(tensor, creation.tensor(values))


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot's uniform initialization: bound gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot's normal initialization: std gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor, a, mode, nonlinearity) -> float | None:
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    return calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator=None,
) -> Tensor:
    """He's uniform initialization: bound gain * sqrt(3 / fan), ``a`` the
    leaky_relu slope the gain is for."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator=None,
) -> Tensor:
    """He's normal initialization: std gain / sqrt(fan)."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Fills ``tensor`` (flattened to rows x columns) with a random (semi-)orthogonal
    matrix: the Q of a normal draw's QR decomposition, signs fixed by R's diagonal."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    columns = tensor.numel() // rows
    extra = {} if generator is None else {"generator": generator}
    draw = creation.randn(rows, columns, dtype=tensor.dtype, **extra).numpy()
    flat = draw.T if rows < columns else draw
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < columns:
        q = q.T
    return _fill(tensor, creation.tensor(q.reshape(tuple(tensor.shape)) * gain))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """Fills a 2-D tensor with N(0, std^2) values, then zeroes
    ceil(sparsity * rows) rows of each column, chosen at random."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, columns = tensor.shape
    zeros_per_column = math.ceil(sparsity * rows)
    values = np.array(_draw(creation.randn, tensor, generator).numpy()) * std
    for column in range(columns):
        # (the default generator, as PyTorch draws the rows)
        values[creation.randperm(rows).numpy()[:zeros_per_column], column] = 0
    return _fill(tensor, creation.tensor(values, dtype=tensor.dtype))


def _deprecated(method):
    """The old name of an initialization (without the trailing underscore):
    a FutureWarning, then the method."""
    old_name = method.__name__[:-1]

    def deprecated(*args, **kwargs):
        warnings.warn(
            f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{method.__name__}`.",
            FutureWarning,
            stacklevel=2,
        )
        return method(*args, **kwargs)

    deprecated.__name__ = deprecated.__qualname__ = old_name
    deprecated.__doc__ = f"Deprecated: ``{method.__name__}``."
    return deprecated


normal, uniform, constant = map(_deprecated, (normal_, uniform_, constant_))
xavier_uniform, xavier_normal = map(_deprecated, (xavier_uniform_, xavier_normal_))
kaiming_uniform, kaiming_normal = map(_deprecated, (kaiming_uniform_, kaiming_normal_))
orthogonal, eye, dirac, sparse = map(_deprecated, (orthogonal_, eye_, dirac_, sparse_))
