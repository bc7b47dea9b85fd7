"""``fusegrad.nn.functional``: neural-network functions, all compositions of ops."""

from __future__ import annotations

import math

from ..ir import dtypes
from ..tracer import ops
from ..tracer.ops import _named, gelu, log_softmax, relu, sigmoid, softmax, softplus, tanh
from ..tracer.random import bernoulli_mask
from ..tracer.tensor import Tensor

__all__ = [
    "relu",
    "gelu",
    "softplus",
    "sigmoid",
    "tanh",
    "softmax",
    "log_softmax",
    "mse_loss",
    "cross_entropy",
    "nll_loss",
    "linear",
    "dropout",
    "layer_norm",
]


def _reduce(loss, reduction):
    if reduction == "mean":
        return ops.mean(loss)
    if reduction == "sum":
        return ops.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


@_named("MseLossBackward0")
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    if input.shape != target.shape:
        import warnings

        warnings.warn(
            f"Using a target size ({target.shape}) that is different to the input "
            f"size ({input.shape}). This will likely lead to incorrect results due to "
            "broadcasting. Please ensure they have the same size.",
            stacklevel=2,
        )
    diff = input - target
    return _reduce(diff * diff, reduction)


@_named("NllLossBackward0")
def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of class indices ``target`` under log-probabilities
    ``input`` of shape (N, C) or (C,) (or (N, C, d1, ...))."""
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
    if safe_target.numel() and (safe_target._data.max() >= classes or safe_target._data.min() < 0):
        raise IndexError(f"Target {int(safe_target._data.max())} is out of bounds.")
    picked = -ops.gather(input, 1, ops.unsqueeze(safe_target, 1)).reshape(-1)
    w = ops.where(valid, 1.0, 0.0).to(input.dtype)
    if weight is not None:
        w = w * ops.index_select(weight, 0, safe_target)
    losses = picked * w
    if reduction == "mean":
        return ops.sum(losses) / ops.sum(w)
    return _reduce(losses, reduction)


@_named(
    lambda input, target, *a, **k: (
        "NllLossBackward0"
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
            return ops.sum(losses) / float(losses.numel() and losses.shape[0] if losses.ndim else 1)
        return _reduce(losses, reduction)
    loss = nll_loss(logp, target, weight, ignore_index, reduction)
    if label_smoothing:
        smooth = -ops.mean(logp, 1 if input.ndim > 1 else 0)
        loss = loss * (1 - label_smoothing) + _reduce(smooth, reduction) * label_smoothing
    return loss


def linear(input, weight, bias=None):
    """input @ weight.T + bias."""
    out = ops.matmul(input, ops.t(weight))
    if bias is not None:
        out = out + bias
        if out.grad_fn is not None and input.ndim == 2:
            out.grad_fn.label = "AddmmBackward0"
    return out


def dropout(input, p=0.5, training=True, inplace=False):
    if not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
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


@_named("NativeLayerNormBackward0")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
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


def softsign(input):
    return input / (1 + ops.abs(input))


def silu(input):
    return input * sigmoid(input)


def leaky_relu(input, negative_slope=0.01):
    return ops.where(input > 0, input, input * negative_slope)


def one_hot(tensor, num_classes=-1):
    from ..tracer.creation import arange

    n = int(tensor.max().item()) + 1 if num_classes < 0 else num_classes
    return ops.eq(ops.unsqueeze(tensor, -1), arange(n)).to(dtypes.int64)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    return input / ops.clamp(ops.norm(input, p, dim, keepdim=True), min=eps)


del math
