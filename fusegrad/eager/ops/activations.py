"""Activation functions: relu, gelu, softplus, softmax and log_softmax
(sigmoid and tanh are primitives' ops, pointwise.py's); nn.functional's
activations build on them."""

from __future__ import annotations

import math
import warnings

from ...ir import dtypes
from ...ir import primitives as P
from .arguments import _cast, _to_float, as_tensor_arg
from .composite import _named
from .reductions import amax, logsumexp, sum
from .registry import public


@public(inplace=True)
def relu(input):
    return P.relu(as_tensor_arg(input))


@public(method=False)
@_named("GeluBackward0")
def gelu(input, approximate: str = "none"):
    x = _to_float(as_tensor_arg(input))
    if approximate == "none":
        return P.gelu(x)
    if approximate == "tanh":
        inner = (x + x * x * x * 0.044715) * math.sqrt(2.0 / math.pi)
        return x * 0.5 * (1.0 + P.tanh(inner))
    raise ValueError(f"approximate argument must be either none or tanh, got {approximate!r}")


@public(method=False)
@_named("SoftplusBackward0")
def softplus(input, beta=1.0, threshold=20.0):
    x = _to_float(as_tensor_arg(input))
    scaled = x * beta if beta != 1 else x
    smooth = P.softplus(scaled)
    if beta != 1:
        smooth = smooth / beta
    return P.where(scaled > threshold, x, smooth)


def _softmax_dim(input, dim):
    if dim is None:
        warnings.warn(
            "Implicit dimension choice for softmax has been deprecated. Change the "
            "call to include dim=X as an argument.",
            stacklevel=3,
        )
        return 0 if input.ndim in (0, 1, 3) else 1
    return dim


@public(out=True)
@_named("SoftmaxBackward0")
def softmax(input, dim=None, dtype=None):
    x = as_tensor_arg(input)
    x = _to_float(x if dtype is None else _cast(x, dtypes.as_dtype(dtype)))
    dim = _softmax_dim(x, dim)
    if x.numel() == 0:  # no maximum to shift by (amax refuses), and nothing to compute
        return x * 1.0
    e = P.exp(x - amax(x, dim, keepdim=True).detach())
    return e / sum(e, dim, keepdim=True)


@public(out=True)
@_named("LogSoftmaxBackward0")
def log_softmax(input, dim=None, dtype=None):
    x = as_tensor_arg(input)
    x = _to_float(x if dtype is None else _cast(x, dtypes.as_dtype(dtype)))
    dim = _softmax_dim(x, dim)
    if x.numel() == 0:  # (the sums of no terms would be logs of 0)
        return x * 1.0
    return x - logsumexp(x, dim, keepdim=True)
