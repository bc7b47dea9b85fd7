"""Running reductions along a dimension (cumsum, cumprod, logcumsumexp,
cummax, cummin), and a sequence's differences and integral (diff,
trapezoid)."""

from __future__ import annotations

from ...ir import dtypes
from ...ir import primitives as P
from ...ir.shapes import normalize_dim
from .arguments import _cast, _to_float, as_tensor_arg
from .composite import _named
from .gather_scatter import gather
from .joining import cat, narrow
from .reductions import _return_type, sum
from .registry import public
from .shape import reshape

# ---------------------------------------------------------- running reductions


def _scan(prim, input, dim, dtype):
    input = as_tensor_arg(input)
    if dtype is not None:
        input = _cast(input, dtypes.as_dtype(dtype))
    elif input._dtype.category != dtypes.FLOATING:
        input = _cast(input, dtypes.int64)  # as sum: integers accumulate in int64
    axis = normalize_dim(dim, input.ndim)
    if input.ndim == 0:
        return P.reshape(prim(P.reshape(input, shape=(1,)), axis=0, reverse=False), shape=())
    return prim(input, axis=axis, reverse=False)


@public(inplace=True, out=True)
@_named("CumsumBackward0")
def cumsum(input, dim, *, dtype=None):
    return _scan(P.cumsum, input, dim, dtype)


@public(inplace=True, out=True)
@_named("CumprodBackward0")
def cumprod(input, dim, *, dtype=None):
    return _scan(P.cumprod, input, dim, dtype)


@public
@_named("LogcumsumexpBackward0")
def logcumsumexp(input, dim):
    input = _to_float(as_tensor_arg(input))
    x = input if input.ndim else P.reshape(input, shape=(1,))
    out = P.logcumsumexp(x, axis=normalize_dim(dim, x.ndim), reverse=False)
    return out if input.ndim else P.reshape(out, shape=())


CummaxResult = _return_type("cummax")
CumminResult = _return_type("cummin")


def _running(input, dim, minimum, result_type, backward_name):
    input = as_tensor_arg(input)
    x = input if input.ndim else P.reshape(input, shape=(1,))
    axis = normalize_dim(dim, x.ndim)
    indices = P.running_extreme(x, axis=axis, minimum=minimum)
    values = gather(x, axis, indices)
    if input.ndim == 0:
        values, indices = P.reshape(values, shape=()), P.reshape(indices, shape=())
    if values.grad_fn is not None:
        values.grad_fn.label = backward_name
    return result_type(values, indices)


@public
def cummax(input, dim):
    return _running(input, dim, False, CummaxResult, "CummaxBackward0")


@public
def cummin(input, dim):
    return _running(input, dim, True, CumminResult, "CumminBackward0")


# --------------------------------------------------- differences and integrals


@public
def diff(input, n=1, dim=-1, prepend=None, append=None):
    input = as_tensor_arg(input)
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    axis = normalize_dim(dim, input.ndim)
    parts = [t for t in (prepend, input, append) if t is not None]
    x = cat(parts, axis) if len(parts) > 1 else input
    for _ in range(n):
        size = x.shape[axis]
        if size == 0:
            break
        x = narrow(x, axis, 1, size - 1) - narrow(x, axis, 0, size - 1)
    return x


@public(method=False)
def trapezoid(y, x=None, *, dx=None, dim=-1):
    y = as_tensor_arg(y, "y")
    axis = normalize_dim(dim, y.ndim)
    n = y.shape[axis]
    if n == 0:
        return sum(y, axis)
    pairs = narrow(y, axis, 1, n - 1) + narrow(y, axis, 0, n - 1)
    if x is None:
        return sum(pairs, axis) * ((1.0 if dx is None else dx) * 0.5)
    x = as_tensor_arg(x, "x")
    if x.ndim == 1:
        x = reshape(x, tuple(-1 if d == axis else 1 for d in range(y.ndim)))
        along = axis
    else:
        along = normalize_dim(dim, x.ndim)
    steps = diff(x, dim=along)
    return sum(pairs * steps, axis) * 0.5


trapz = public(trapezoid, name="trapz", method=False)
