"""Reductions along dimensions: sums and products (sum, mean, prod, nansum,
...), extremes (amax, max, argmax, aminmax, ...), all and any, norms (norm,
dist, cdist, renorm) and logsumexp. The statistics (var, median, quantile,
...) are statistics.py's."""

from __future__ import annotations

import builtins
import math
from collections import namedtuple

import numpy as np

from ...ir import dtypes
from ...ir import primitives as P
from ...ir.shapes import is_symbolic, normalize_axes, normalize_dim, reduced_shape
from .. import grad_mode
from ..tensor import Tensor
from .arguments import _cast, _short, _to_float, as_tensor_arg
from .composite import _named
from .index_tensors import index_with_arrays, positions
from .pointwise import abs, clamp_min, isinf, isnan, maximum, minimum, where
from .registry import public
from .shape import reshape, unsqueeze

# ----------------------------------------------------------- sums and products


def _keep(out, input, axes, keepdim):
    if keepdim:
        return P.reshape(out, shape=reduced_shape(input.shape, axes, keepdims=True))
    return out


@public(out=True)
def sum(input, dim=None, keepdim=False, *, dtype=None):
    input = as_tensor_arg(input)
    axes = normalize_axes(dim, input.ndim)
    if dtype is not None:
        input = _cast(input, dtypes.as_dtype(dtype))
    elif input._dtype.category != dtypes.FLOATING:
        input = _cast(input, dtypes.int64)
    out = _keep(P.reduce_sum(input, axes=axes), input, axes, keepdim)
    if out.grad_fn is not None:  # always a new node: the label can't land on an input's
        out.grad_fn.label = "SumBackward0" if dim is None else "SumBackward1"
    return out


@public
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    input = as_tensor_arg(input)
    if input._dtype.is_floating_point:
        input = P.where(isnan(input), 0.0, input)
    return sum(input, dim, keepdim, dtype=dtype)


@public(out=True)
@_named(
    lambda input, dim=None, keepdim=False, **kw: "MeanBackward0" if dim is None else "MeanBackward1"
)
def mean(input, dim=None, keepdim=False, *, dtype=None):
    input = as_tensor_arg(input)
    if dtype is not None:
        input = _cast(input, dtypes.as_dtype(dtype))
    if not input._dtype.is_floating_point:
        which = "Input" if dtype is None else "Optional"
        raise RuntimeError(
            f"mean(): could not infer output dtype. {which} dtype must be either "
            f"a floating point or complex dtype. Got: {_short(input._dtype)}"
        )
    axes = normalize_axes(dim, input.ndim)
    count = math.prod(input.shape[a] for a in axes)
    return _keep(P.reduce_sum(input, axes=axes), input, axes, keepdim) / divisor(count)


@public
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    input = as_tensor_arg(input)
    if not input._dtype.is_floating_point:
        raise RuntimeError(
            "nanmean(): expected input to have floating point or complex dtype but got "
            + input._dtype.scalar_name
        )
    present = P.logical_not(isnan(input))
    return nansum(input, dim, keepdim, dtype=dtype) / sum(present, dim, keepdim)


def divisor(count):
    """A count to divide by: a float, or for a size that varies between calls
    the size itself (an input of the program, read on every call)."""
    return count if is_symbolic(count) else float(count)


@public(out=True)
@_named(
    lambda input, dim=None, keepdim=False, **kw: "ProdBackward0" if dim is None else "ProdBackward1"
)
def prod(input, dim=None, keepdim=False, *, dtype=None):
    input = as_tensor_arg(input)
    if dtype is not None:
        input = _cast(input, dtypes.as_dtype(dtype))
    elif input._dtype.category != dtypes.FLOATING:
        input = _cast(input, dtypes.int64)
    axes = normalize_axes(dim, input.ndim)
    return _keep(P.reduce_prod(input, axes=axes), input, axes, keepdim)


@public
def count_nonzero(input, dim=None):
    input = as_tensor_arg(input)
    return sum(input != 0, dim)


# -------------------------------------------------------------------- extremes


def _require_nonempty(input, axes, name):
    if builtins.any(input.shape[a] == 0 for a in axes) or (not axes and input.numel() == 0):
        raise RuntimeError(
            f"{name}(): Expected reduction dim to be specified for input.numel() "
            "== 0. Specify the reduction dim with the 'dim' argument."
        )


@public(out=True)
@_named("AmaxBackward0")
def amax(input, dim=(), keepdim=False):
    input = as_tensor_arg(input)
    axes = normalize_axes(dim, input.ndim)
    _require_nonempty(input, axes, "amax")
    return _keep(P.reduce_max(input, axes=axes), input, axes, keepdim)


@public(out=True)
@_named("AminBackward0")
def amin(input, dim=(), keepdim=False):
    input = as_tensor_arg(input)
    axes = normalize_axes(dim, input.ndim)
    _require_nonempty(input, axes, "amin")
    return _keep(P.reduce_min(input, axes=axes), input, axes, keepdim)


AminmaxResult = namedtuple("aminmax", ["min", "max"])


@public
def aminmax(input, *, dim=None, keepdim=False):
    return AminmaxResult(
        amin(input, () if dim is None else dim, keepdim),
        amax(input, () if dim is None else dim, keepdim),
    )


def _return_type(name, fields=("values", "indices")):
    """A named tuple (values, indices unless ``fields`` says otherwise),
    printed the way PyTorch prints its return types."""
    base = namedtuple(name, fields)

    def __repr__(self):
        items = ",\n".join(f"{field}={value!r}" for field, value in zip(fields, self))
        return f"fusegrad.return_types.{name}(\n{items})"

    return type(name, (base,), {"__slots__": (), "__repr__": __repr__})


MaxResult = _return_type("max")
MinResult = _return_type("min")


def _select_along(input, indices, axis):
    """input[..., indices[...], ...] with `indices` holding one position per row of `axis`."""
    grids = []
    for d in range(input.ndim):
        if d == axis:
            grids.append(indices)
        else:
            shape = [1] * indices.ndim
            keep = d if d < axis else d - 1
            shape[keep] = input.shape[d]
            grids.append(P.reshape(positions(input.shape[d]), shape=tuple(shape)))
    return index_with_arrays(input, grids)


def _extreme_of_all(x, reduce_all):
    """The max (min) of all of x, its gradient shared as PyTorch's max()
    shares it: evenly between the elements equal to it or, where x holds NaN,
    between the NaNs. The primitive's rule is amax's, which (as PyTorch's
    amax) finds no element equal to a NaN result and gives NaN everywhere; so
    the primitive sees x with its NaNs zeroed, and the NaNs' share is their
    sum over their count. Without a gradient to share, the primitive alone
    gives the same value without the composition's extra passes over x."""
    axes = tuple(range(x.ndim))
    if not (x.requires_grad and grad_mode.is_grad_enabled()):
        return reduce_all(x, axes=axes)
    nan = isnan(x)
    count = sum(nan)
    numbers = reduce_all(P.where(nan, 0.0, x), axes=axes)
    nans = sum(P.where(nan, x, 0.0)) / _cast(clamp_min(count, 1), x._dtype)
    return P.where(count > 0, nans, numbers)


def _extremum(input, dim, keepdim, other, reduce_all, arg_prim, result_type, backward_name, name):
    input = as_tensor_arg(input)
    if isinstance(dim, Tensor):
        return (maximum if name == "max" else minimum)(input, dim)
    if other is not None:
        return (maximum if name == "max" else minimum)(input, other)
    if dim is None:
        if input.numel() == 0:
            raise RuntimeError(
                f"{name}(): Expected reduction dim to be specified for "
                "input.numel() == 0. Specify the reduction dim with the 'dim' "
                "argument."
            )
        out = _extreme_of_all(input, reduce_all)
        if out.grad_fn is not None:
            out.grad_fn.label = name.capitalize() + "Backward1"
        return out
    axis = normalize_dim(dim, input.ndim)
    if input.ndim == 0:
        return result_type(input * 1, Tensor._new(np.array(0), dtypes.int64))
    if input.shape[axis] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {axis} to have non-zero size.")
    indices = arg_prim(input, axis=axis)
    values = _select_along(input, indices, axis)
    if keepdim:
        values, indices = unsqueeze(values, axis), unsqueeze(indices, axis)
    if values.grad_fn is not None:
        values.grad_fn.label = backward_name
    return result_type(values, indices)


@public(out=True)
def max(input, dim=None, keepdim=False, *, other=None):
    return _extremum(
        input, dim, keepdim, other, P.reduce_max, P.argmax, MaxResult, "MaxBackward0", "max"
    )


@public(out=True)
def min(input, dim=None, keepdim=False, *, other=None):
    return _extremum(
        input, dim, keepdim, other, P.reduce_min, P.argmin, MinResult, "MinBackward0", "min"
    )


def _arg(prim, input, dim, keepdim):
    input = as_tensor_arg(input)
    if dim is None:
        flat = P.reshape(input, shape=(input.numel(),))
        out = prim(flat, axis=0)
        return P.reshape(out, shape=(1,) * input.ndim) if keepdim else out
    axis = normalize_dim(dim, input.ndim)
    if input.ndim == 0:
        return Tensor._new(np.array(0), dtypes.int64)
    out = prim(input, axis=axis)
    return unsqueeze(out, axis) if keepdim else out


@public(out=True)
def argmax(input, dim=None, keepdim=False):
    return _arg(P.argmax, input, dim, keepdim)


@public(out=True)
def argmin(input, dim=None, keepdim=False):
    return _arg(P.argmin, input, dim, keepdim)


# ----------------------------------------------------------------- all and any


@public(out=True)
def all(input, dim=None, keepdim=False):
    input = as_tensor_arg(input)
    axes = normalize_axes(dim, input.ndim)
    if not input.numel():  # numpy's minimum has no identity
        return _of_nothing(True, input, axes, keepdim)
    return _keep(P.reduce_min(_cast(input, dtypes.bool_), axes=axes), input, axes, keepdim)


@public(out=True)
def any(input, dim=None, keepdim=False):
    input = as_tensor_arg(input)
    axes = normalize_axes(dim, input.ndim)
    if not input.numel():
        return _of_nothing(False, input, axes, keepdim)
    return _keep(P.reduce_max(_cast(input, dtypes.bool_), axes=axes), input, axes, keepdim)


def _of_nothing(value: bool, input, axes, keepdim):
    """all's or any's result over an empty tensor: ``value`` in the shape
    the reduction leaves."""
    kept = [(1 if keepdim else None) if a in axes else s for a, s in enumerate(input.shape)]
    return Tensor._new(np.full([s for s in kept if s is not None], value), dtypes.bool_)


# --------------------------------------------------------- norms and logsumexp


@public
@_named("LinalgVectorNormBackward0")
def norm(input, p="fro", dim=None, keepdim=False):
    x = _to_float(as_tensor_arg(input))
    axes = normalize_axes(dim, x.ndim)
    if p in ("fro", 2, 2.0):
        out = sqrt_of_squares(P.reduce_sum(x * x, axes=axes))
    elif p in (math.inf, "inf"):
        out = P.reduce_max(abs(x), axes=axes)
    elif p in (-math.inf, "-inf"):
        out = P.reduce_min(abs(x), axes=axes)
    elif p == 1:
        out = P.reduce_sum(abs(x), axes=axes)
    elif p == 0:
        out = P.reduce_sum(_cast(x != 0, x._dtype), axes=axes)
    elif isinstance(p, (int, float)):
        out = _root_of_powers(x, p, axes)
    else:
        raise ValueError(f"norm: unsupported p={p!r}")
    return _keep(out, x, axes, keepdim)


def _root_of_powers(x, p, axes):
    """(sum |x|^p)^(1/p) with PyTorch's subgradients: 0 for an element at 0
    (where |x|^p's derivative is infinite for p < 1) and for a norm of 0
    (where the root's is, for p > 1). Neither power sees a 0 (the "double
    where"): there they take their values, 0 or (p < 0) infinity, as
    constants."""
    zero = x == 0.0
    powers = P.where(zero, 0.0 if p > 0 else math.inf, P.where(zero, 1.0, abs(x)) ** p)
    sums = P.reduce_sum(powers, axes=axes)
    none = sums == 0.0
    return P.where(none, 0.0 if p > 0 else math.inf, P.where(none, 1.0, sums) ** (1.0 / p))


def sqrt_of_squares(squares):
    """sqrt of a sum of squares (a norm's, a standard deviation's), with
    PyTorch's subgradient 0 at 0, where sqrt's derivative is infinite: sqrt
    only ever sees non-zero arguments (the "double where")."""
    zero = squares == 0.0
    return P.where(zero, 0.0, P.sqrt(P.where(zero, 1.0, squares)))


@public
def dist(input, other, p=2):
    return norm(reshape(as_tensor_arg(input) - other, -1), p)


@public(method=False)
def cdist(x1, x2, p=2.0, compute_mode=None):
    """The p-norm distance between each row of x1 and each row of x2 (per batch)."""
    x1, x2 = as_tensor_arg(x1, "x1"), as_tensor_arg(x2, "x2")
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(
            f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D, X2 got: {x2.ndim}D"
        )
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(
            f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}"
        )
    differences = unsqueeze(x1, -2) - unsqueeze(x2, -3)
    return norm(differences, p, -1)


@public(inplace=True)
@_named("RenormBackward0")
def renorm(input, p, dim, maxnorm):
    """Each slice along ``dim`` whose p-norm exceeds ``maxnorm`` scaled down to it."""
    input = _to_float(as_tensor_arg(input))
    axis = normalize_dim(dim, input.ndim)
    others = tuple(d for d in range(input.ndim) if d != axis)
    norms = norm(input, p, others, keepdim=True)
    scale = P.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)  # PyTorch's 1e-7
    return input * scale


@public(out=True)
@_named("LogsumexpBackward0")
def logsumexp(input, dim, keepdim=False):
    x = _to_float(as_tensor_arg(input))
    axes = normalize_axes(dim, x.ndim)
    # Shifting by the (detached) max keeps exp from overflowing; the shift's
    # gradient cancels exactly, so detaching it changes no derivative.
    shift = (
        P.reduce_max(x, axes=axes).detach()
        if x.numel()
        else Tensor._make(
            np.zeros(tuple(s for i, s in enumerate(x.shape) if i not in axes), x._dtype.np)
        )
    )
    shift = where(isinf(shift), 0.0, shift)
    kept = P.reshape(shift, shape=tuple(1 if i in axes else s for i, s in enumerate(x.shape)))
    out = P.log(P.reduce_sum(P.exp(x - kept), axes=axes)) + shift
    return _keep(out, x, axes, keepdim)
