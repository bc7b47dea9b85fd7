"""Statistics along dimensions: variance and standard deviation (var, std,
var_mean, std_mean), medians and quantiles, covariance and correlation (cov,
corrcoef), and histograms (histc, histogram, bincount)."""

from __future__ import annotations

import builtins
import math

import numpy as np

from ...ir import dtypes
from ...ir import primitives as P
from ...ir.shapes import normalize_axes, normalize_dim, reduced_shape
from ..tensor import Tensor, constant, constant_array
from .arguments import C_TYPE_NAMES, _cast, _eager_only, _to_float, as_tensor_arg
from .composite import _named
from .gather_scatter import gather, take
from .linear import matmul
from .matrices import diagonal
from .pointwise import clamp, clamp_min, isinf, isnan, where
from .reductions import (
    _keep,
    _require_nonempty,
    _return_type,
    amax,
    amin,
    divisor,
    mean,
    sqrt_of_squares,
    sum,
)
from .registry import public
from .shape import expand, movedim, reshape, transpose, unsqueeze
from .sorting import _order, searchsorted, sort

# -------------------------------------------------------------------- variance


def _var(input, dim, correction, keepdim):
    input = as_tensor_arg(input)
    if not input._dtype.is_floating_point:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    axes = normalize_axes(dim, input.ndim)
    count = math.prod(input.shape[a] for a in axes)
    centered = input - P.reduce_sum(input, axes=axes).reshape(
        tuple(1 if i in axes else s for i, s in enumerate(input.shape))
    ) / divisor(count)
    squares = _keep(P.reduce_sum(centered * centered, axes=axes), input, axes, keepdim)
    return squares / divisor(builtins.max(count - correction, 0))


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


@public
@_named("VarBackward0")
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):  # var(x, False): the legacy `unbiased` positional
        dim, unbiased = None, dim
    return _var(input, dim, _correction(unbiased, correction), keepdim)


@public
@_named("StdBackward0")
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return sqrt_of_squares(_var(input, dim, _correction(unbiased, correction), keepdim))


@public
def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


@public
def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


# ------------------------------------------------------- medians and quantiles


MedianResult = _return_type("median")


def _lower_median(input, dim, keepdim, skip_nan):
    """The lower median along ``dim`` and where it is: the (n-1)//2-th of the
    sorted values, or NaN (the first one) where a row holds one, unless
    ``skip_nan``, which takes the median of the other values."""
    x, axis, order = _order(input, dim, False)  # NaNs sort last
    n = x.shape[axis]
    nans = sum(isnan(x), axis, keepdim=True)
    if skip_nan:
        rank = clamp_min((n - nans - 1) // 2, 0)
    else:
        rank = where(nans > 0, n - nans, (n - 1) // 2)
    indices = gather(order, axis, rank)
    values = gather(x, axis, indices)
    if not keepdim or input.ndim == 0:
        shape = input.shape if input.ndim == 0 else reduced_shape(x.shape, (axis,), False)
        values, indices = P.reshape(values, shape=shape), P.reshape(indices, shape=shape)
    return values, indices


def _shared_between_ties(x, value):
    """``value``, with its gradient shared evenly between the elements of x
    equal to it (NaN ones where it is NaN), as PyTorch's median of a whole
    tensor shares it. ``x - stop_gradient(x)`` is 0 with x's gradient, so the
    value stays exactly the element's (infinite ones take no gradient)."""
    if not x._dtype.is_floating_point:
        return value
    tie = (x == value) | (isnan(x) & isnan(value))
    movable = tie & P.logical_not(isinf(x))
    count = sum(tie)
    offset = sum(P.where(movable, x - P.stop_gradient(x), 0.0)) / _cast(count, x._dtype)
    return P.stop_gradient(value) + offset


def _median(input, dim, keepdim, skip_nan, name, backward_name):
    input = as_tensor_arg(input)
    if dim is None:
        if input.numel() == 0:
            if not input._dtype.is_floating_point:
                raise RuntimeError("median() input tensor cannot be empty")
            return reshape(sum(input) * math.nan, ())
        flat = reshape(input, -1)
        values, _ = _lower_median(flat, 0, False, skip_nan)
        result = values = _shared_between_ties(flat, values)
    else:
        _require_nonempty(input, normalize_axes(dim, input.ndim), name)
        values, indices = _lower_median(input, dim, keepdim, skip_nan)
        result = MedianResult(values, indices)
    if values.grad_fn is not None:
        values.grad_fn.label = backward_name
    return result


@public
def median(input, dim=None, keepdim=False):
    """The lower of the two middle values (PyTorch's median), NaN where there is one."""
    name = "MedianBackward0" if dim is None else "MedianBackward1"
    return _median(input, dim, keepdim, False, "median", name)


@public
def nanmedian(input, dim=None, keepdim=False):
    name = "NanmedianBackward0" if dim is None else "MedianBackward1"
    return _median(input, dim, keepdim, True, "nanmedian", name)


def _quantile(input, q, dim, keepdim, interpolation, skip_nan, name):
    """numpy's quantile: q in [0, 1] of the sorted values, the rank q * (n-1)
    between two of them resolved by ``interpolation``; NaN where a row holds
    one (``skip_nan``: of the other values)."""
    input = as_tensor_arg(input)
    if not input._dtype.is_floating_point:
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    methods = ("linear", "lower", "higher", "midpoint", "nearest")
    if interpolation not in methods:
        raise RuntimeError(
            f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest. "
            f"Got {interpolation}"
        )
    scalar_q = not isinstance(q, Tensor)
    qs = constant_array(np.atleast_1d(np.asarray(q, np.float64)), dtypes.float64) if scalar_q else q
    if ((qs._data < 0) | (qs._data > 1)).any():
        raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    x = reshape(input, -1) if dim is None else input
    axis = 0 if dim is None else normalize_dim(dim, x.ndim)
    x = movedim(x, axis, -1)
    values = sort(x, -1).values  # NaNs last
    n = x.shape[-1]
    nans = sum(isnan(x), -1, keepdim=True)
    count = n - nans if skip_nan else constant(n, dtypes.int64)
    qs64 = reshape(_cast(qs, dtypes.float64), (-1,) + (1,) * x.ndim)
    rank = qs64 * _cast(count - 1, dtypes.float64)
    last = float(builtins.max(n - 1, 0))  # ranks stay inside the rows, whatever q holds
    below = clamp(P.floor(rank), 0.0, last)
    above = clamp(P.ceil(rank), 0.0, last)
    if interpolation == "nearest":
        below = above = clamp(P.round_(rank), 0.0, last)
    elif interpolation == "lower":
        above = below
    elif interpolation == "higher":
        below = above
    stacked = expand(unsqueeze(values, 0), (qs64.shape[0],) + values.shape)
    positions_shape = stacked.shape[:-1] + (1,)  # one rank per row and q
    low = gather(stacked, -1, expand(_cast(below, dtypes.int64), positions_shape))
    high = gather(stacked, -1, expand(_cast(above, dtypes.int64), positions_shape))
    if interpolation == "midpoint":
        out = low + (high - low) * 0.5
    elif interpolation == "linear":
        out = low + (high - low) * _cast(rank - below, input._dtype)
    else:
        out = low
    if not skip_nan:
        out = P.where(nans > 0, math.nan, out)
    else:
        out = P.where(count == 0, math.nan, out)
    out = P.reshape(out, shape=out.shape[:-1])  # the rank axis, one position
    if keepdim:
        kept = [1] * input.ndim if dim is None else list(input.shape)
        if dim is not None:
            kept[axis] = 1
        out = P.reshape(out, shape=(out.shape[0], *kept))
    return P.reshape(out, shape=out.shape[1:]) if scalar_q and np.ndim(q) == 0 else out


@public
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


@public
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")


# ------------------------------------------------------------------ covariance


@public
def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance of the rows (variables) over the columns (observations),
    weighted as numpy's cov."""
    x = _to_float(as_tensor_arg(input))
    if x.ndim > 2:
        raise RuntimeError(
            "cov(): expected input to have two or fewer dimensions but got an input with "
            f"{x.ndim} dimensions"
        )
    x = reshape(x, (1, -1)) if x.ndim < 2 else x
    observations = x.shape[1]
    weights = None
    for given in (fweights, aweights):
        if given is not None:
            given = _cast(as_tensor_arg(given, "weights"), x._dtype)
            weights = given if weights is None else weights * given
    if weights is None:
        total = constant(float(observations), x._dtype)
        average = mean(x, 1, keepdim=True)
        centered = x - average
        scale = total - correction
        product = matmul(centered, transpose(centered, 0, 1))
    else:
        total = sum(weights)
        average = sum(x * weights, 1, keepdim=True) / total
        centered = x - average
        if correction == 0:
            scale = total
        elif aweights is None:
            scale = total - correction
        else:
            scale = (
                total - correction * sum(weights * _cast(as_tensor_arg(aweights), x._dtype)) / total
            )
        product = matmul(centered * weights, transpose(centered, 0, 1))
    out = product / P.maximum(scale, constant(0.0, x._dtype))
    return P.reshape(out, shape=()) if as_tensor_arg(input).ndim < 2 else out


@public
def corrcoef(input):
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = P.sqrt(diagonal(c))
    r = c / unsqueeze(d, 1) / unsqueeze(d, 0)
    return clamp(r, -1.0, 1.0)


# ------------------------------------------------------------------ histograms


@public
def histc(input, bins=100, min=0, max=0):
    """Counts of the values in ``bins`` equal bins between min and max (the
    data's own range when both are 0); values outside are not counted."""
    input = _to_float(as_tensor_arg(input))
    low, high = float(min), float(max)
    if low == high:
        low, high = float(amin(input).item()), float(amax(input).item())
    if low == high:
        low, high = low - 1, high + 1
    if low > high:
        raise RuntimeError("max must be larger than min")
    values = reshape(input, -1)
    inside = (values >= low) & (values <= high)
    position = P.floor((values - low) * (bins / (high - low)))
    bin_of = _cast(clamp(position, 0, bins - 1), dtypes.int64)
    counted = _cast(inside, input._dtype)
    return P.scatter_add(counted, bin_of, spec=(("array",),), shape=(bins,))


HistogramResult = _return_type("histogram", ("hist", "bin_edges"))


@public
def histogram(input, bins=100, *, range=None, weight=None, density=False):
    """How many values (or how much ``weight``) fall in each bin, and the
    bins' edges: ``bins`` equal bins over ``range`` (the data's own range by
    default), or the edges a tensor ``bins`` holds. Values outside are not
    counted; the last bin holds its right edge. No gradient, as in PyTorch."""
    input = as_tensor_arg(input)
    if not input._dtype.is_floating_point:
        raise NotImplementedError(
            f"\"histogramdd\" not implemented for '{input._dtype.scalar_name}'"
        )
    values = reshape(input.detach(), -1)
    if isinstance(bins, Tensor):
        edges = _given_edges(bins, input)
        count = edges.shape[0] - 1
        # the last edge closes the last bin
        position = searchsorted(edges, values, right=True) - 1
        bin_of = where(values == edges[-1], count - 1, position)
    else:
        if bins <= 0:
            raise RuntimeError(
                f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0"
            )
        low, high = _histogram_range(values, range)
        edges = constant_array(
            np.linspace(low, high, bins + 1).astype(input._dtype.np), input._dtype
        )
        bin_of = _uniform_bin(values, edges, low, high, bins)
        count = bins
    inside = (values >= edges[0]) & (values <= edges[-1])
    if weight is None:
        counted = _cast(inside, input._dtype)
    else:
        counted = where(inside, reshape(_checked_weight(weight, input), -1), 0.0)
    hist = P.scatter_add(counted, clamp(bin_of, 0, count - 1), spec=(("array",),), shape=(count,))
    if density:
        hist = hist / (sum(hist) * (edges[1:] - edges[:-1]))
    return HistogramResult(hist, edges)


def _given_edges(bins: Tensor, input: Tensor) -> Tensor:
    if bins._dtype is not input._dtype:
        raise RuntimeError(
            "torch.histogramdd: input tensor and bins tensors should have the same dtype, but "
            f"got input with dtype {C_TYPE_NAMES[input._dtype.name]} and bins for dimension 0 "
            f"with dtype {C_TYPE_NAMES[bins._dtype.name]}"
        )
    if bins.ndim != 1:
        raise RuntimeError(
            f"torch.histogramdd: bins tensor should have one dimension, but got {bins.ndim} "
            "dimensions in the bins tensor for dimension 0"
        )
    return bins.detach()


def _histogram_range(values: Tensor, given) -> tuple:
    """The range of equal bins: the given one or the data's (0 to 1 for no
    data), widened by a half on each side when it is a single value."""
    if given is not None:
        low, high = (float(v) for v in given)
    elif values.numel():
        low, high = float(amin(values).item()), float(amax(values).item())
    else:
        low, high = 0.0, 1.0
    if low > high:
        raise RuntimeError(
            f"torch.histogramdd: min should not exceed max, but got min {low:g} max {high:g} "
            "for dimension 0"
        )
    if not (math.isfinite(low) and math.isfinite(high)):
        raise RuntimeError(
            f"torch.histogramdd: dimension 0's range [{low:g}, {high:g}] is not finite"
        )
    return (low - 0.5, high + 0.5) if low == high else (low, high)


def _uniform_bin(values: Tensor, edges: Tensor, low: float, high: float, bins: int) -> Tensor:
    """Each value's bin among equal ones, by arithmetic, moved by one where
    rounding put it past an edge, so the edges decide as a search would."""
    position = clamp(P.floor((values - low) * (bins / (high - low))), 0, bins - 1)
    bin_of = _cast(position, dtypes.int64)
    lower, upper = take(edges, bin_of), take(edges, bin_of + 1)
    below = _cast(values < lower, dtypes.int64)
    above = _cast((values >= upper) & (bin_of < bins - 1), dtypes.int64)
    return bin_of - below + above


def _checked_weight(weight, input: Tensor) -> Tensor:
    weight = as_tensor_arg(weight, "weight")
    if weight._dtype is not input._dtype:
        raise RuntimeError(
            "torch.histogramdd: if weight tensor is provided, input tensor and weight tensor "
            f"should have the same dtype, but got input({C_TYPE_NAMES[input._dtype.name]}), "
            f"and weight({C_TYPE_NAMES[weight._dtype.name]})"
        )
    if weight.shape != input.shape:
        raise RuntimeError(
            "torch.histogramdd: if weight tensor is provided it should have the same shape as "
            "the input tensor excluding its innermost dimension, but got input with shape "
            f"{[input.numel(), 1]} and weight with shape {list(weight.shape)}"
        )
    return weight.detach()


@public
def bincount(input, weights=None, minlength=0):
    """How often each non-negative integer occurs (weights summed instead when
    given). Eager only, no gradient."""
    input = as_tensor_arg(input)
    _eager_only("bincount")
    if input.ndim != 1 or input._dtype.category != dtypes.INTEGER:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if input.numel() and int(input._data.min()) < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is None:
        return Tensor._new(
            np.bincount(input._data, minlength=minlength).astype(np.int64), dtypes.int64
        )
    weights = as_tensor_arg(weights, "weights")
    counts = np.bincount(input._data, weights._data, minlength=minlength)
    dtype = weights._dtype if weights._dtype.is_floating_point else dtypes.float64
    return Tensor._new(counts.astype(dtype.np), dtype)
