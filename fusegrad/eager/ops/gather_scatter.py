"""Gathers and scatters: reading a tensor at positions given by index
tensors, an index or a mask (index_select, gather, take, select,
masked_select), and writing at them (scatter, index_add, index_fill,
index_put, put, masked_fill, masked_scatter, select_scatter, ...): into a
copy, or with the in-place methods into the tensor. unravel_index turns
flat positions into coordinates."""

from __future__ import annotations

import builtins
import math

import numpy as np

from ...ir import dtypes
from ...ir import primitives as P
from ...ir.shapes import broadcast_shapes, normalize_dim
from ..tensor import Tensor, constant
from .arguments import _binary, _cast, _check_operand, _eager_only, _short, as_tensor_arg
from .composite import _named
from .index_tensors import index_with_arrays, positions
from .pointwise import isinf
from .reductions import any
from .registry import public
from .shape import expand, reshape

# ------------------------------------------------------------------- gathering


def _as_index_tensor(index, name="index"):
    index = as_tensor_arg(index, name)
    if index._dtype.category != dtypes.INTEGER:
        raise RuntimeError(f"{name}(): Expected dtype int64 for index")
    return index


@public(out=True)
@_named("IndexSelectBackward0")
def index_select(input, dim, index):
    input = as_tensor_arg(input)
    index = _as_index_tensor(index, "index_select")
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    axis = normalize_dim(dim, input.ndim)
    _check_bounds(index, input.shape[axis] if input.ndim else 1, axis, "index_select")
    spec = (("slice", None, None, None),) * axis + (("array",),)
    return P.index(input, P.reshape(index, shape=(index.numel(),)), spec=spec)


def _check_bounds(index, size, axis, what):
    if index.numel() and (index._data.max() >= size or index._data.min() < -size):
        bad = index._data.max() if index._data.max() >= size else index._data.min()
        raise RuntimeError(
            f"{what}(): index {bad} is out of bounds for dimension {axis} with size {size}"
        )


@public(out=True)
@_named("GatherBackward0")
def gather(input, dim, index):
    input = as_tensor_arg(input)
    index = _as_index_tensor(index, "gather")
    axis = normalize_dim(dim, input.ndim)
    if index.ndim != input.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for d in range(input.ndim):
        if d != axis and index.shape[d] > input.shape[d]:
            raise RuntimeError(
                f"Size does not match at dimension {d} expected index "
                f"{list(index.shape)} to be smaller than self "
                f"{list(input.shape)} apart from dimension {axis}"
            )
    _check_bounds(index, input.shape[axis], axis, "gather")
    return index_with_arrays(input, _grids(index, axis))


def _grids(index, axis) -> list:
    """Index arrays addressing, for each element of ``index``, its own position
    with its value in place of the coordinate along ``axis``."""
    grids = []
    for d in range(index.ndim):
        if d == axis:
            grids.append(index)
        else:
            shape = [1] * index.ndim
            shape[d] = index.shape[d]
            grids.append(P.reshape(positions(index.shape[d]), shape=tuple(shape)))
    return grids


@public(method=False, out=True)
def take_along_dim(input, indices, dim):
    return gather(input, dim, indices)


@public
def take(input, index):
    input = as_tensor_arg(input)
    index = _as_index_tensor(index)
    flat = reshape(input, -1)
    _check_bounds(index, flat.shape[0], 0, "take")
    return index_with_arrays(flat, [index])


@public
@_named("SelectBackward0")
def select(input, dim, index):
    input = as_tensor_arg(input)
    axis = normalize_dim(dim, input.ndim)
    size = input.shape[axis]
    if not -size <= index < size:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(input.shape)} "
            f"at dimension {axis}"
        )
    spec = (("slice", None, None, None),) * axis + (("int", index % size),)
    return P.index(input, spec=spec)


@public
def masked_select(input, mask):
    """The elements where ``mask`` (broadcast with input) holds, as a vector.
    Eager only: how many there are is a value."""
    input, mask = as_tensor_arg(input), as_tensor_arg(mask, "mask")
    if mask._dtype is not dtypes.bool_:
        raise RuntimeError(
            f"masked_select: expected BoolTensor for mask, got {mask._dtype.scalar_name}"
        )
    shape = broadcast_shapes(input.shape, mask.shape)
    return expand(input, shape)[expand(mask, shape)]


# ------------------------------------------------------------------ scattering


def _scatter_args(what, input, dim, index, src):
    """Checks scatter's arguments; returns the axis and the part of src that is used."""
    input = as_tensor_arg(input)
    index = _as_index_tensor(index, what)
    axis = normalize_dim(dim, input.ndim)
    if index.ndim != input.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if isinstance(src, Tensor):
        if src._dtype is not input._dtype:
            raise RuntimeError(f"{what}(): Expected self.dtype to be equal to src.dtype")
        if src.ndim != input.ndim:
            raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    for d in range(input.ndim):
        too_big = d != axis and index.shape[d] > input.shape[d]
        if too_big or (isinstance(src, Tensor) and index.shape[d] > src.shape[d]):
            raise RuntimeError(
                f"Expected index {list(index.shape)} to be smaller than self "
                f"{list(input.shape)} apart from dimension {axis}"
                + (
                    f" and to be smaller size than src {list(src.shape)}"
                    if isinstance(src, Tensor)
                    else ""
                )
            )
    _check_bounds(index, input.shape[axis], axis, what)
    if isinstance(src, Tensor) and src.shape != index.shape:
        src = P.index(src, spec=tuple(("slice", 0, n, None) for n in index.shape))
    return input, index, axis, src


@public(inplace=True)
def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """A copy of input with ``src[i][j]`` (or ``value``) written at
    ``[index[i][j]][j]`` (dim 0; likewise for others). Where index repeats a
    place, one of the values written there lands, as in PyTorch."""
    if src is None and value is None:
        raise TypeError("scatter() missing 1 required argument: 'src' or 'value'")
    src = value if src is None else src
    if reduce is not None:
        if reduce == "add":
            return scatter_add(input, dim, index, src)
        raise RuntimeError(
            f"scatter(): reduce={reduce!r} is not supported by fusegrad (reduce='add' is)"
        )
    input, index, axis, src = _scatter_args("scatter", input, dim, index, src)
    if not isinstance(src, Tensor):
        src = _cast(_check_operand(src), input._dtype)
    out = P.index_put(input, src, *_grids(index, axis), spec=(("array",),) * input.ndim)
    if out.grad_fn is not None:
        out.grad_fn.label = "ScatterBackward0" if src.ndim else "ScatterBackward1"
    return out


@public(inplace=True)
@_named("ScatterReduceBackward0")
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """input with each ``src[i][j]`` reduced into ``[index[i][j]][j]`` (dim 0;
    likewise for others) by "sum", "mean", "amax" or "amin", input's own value
    taking part unless ``include_self`` is False. An extreme's gradient is
    shared evenly between the values equal to it, as PyTorch shares it."""
    if reduce not in ("sum", "mean", "amax", "amin", "prod"):
        raise RuntimeError(
            f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}"
        )
    if reduce == "prod":
        raise RuntimeError('scatter_reduce(): reduce="prod" is not supported by fusegrad')
    input, index, axis, src = _scatter_args("scatter_reduce", input, dim, index, src)
    src = _cast(_check_operand(src), input._dtype)
    grids, spec = _grids(index, axis), (("array",),) * input.ndim

    def scattered(values):
        values = expand(values, index.shape)
        return P.scatter_add(values, *grids, spec=spec, shape=input.shape)

    received = scattered(P.broadcast_to(constant(1, input._dtype), shape=index.shape))
    hit = received > 0
    if reduce in ("sum", "mean"):
        base = input if include_self else P.where(hit, constant(0, input._dtype), input)
        total = base + scattered(src)
        if reduce == "sum":
            return total
        count = received + 1 if include_self else P.where(hit, received, 1)
        if input._dtype.is_floating_point:
            return total / count
        return _binary(P.floor_divide, total, count)
    minimum = reduce == "amin"
    if include_self:
        base = input
    else:  # where src reaches, start from the reduction's identity
        if input._dtype.is_floating_point:
            identity = math.inf if minimum else -math.inf
        else:
            limits = np.iinfo(input._dtype.np)
            identity = int(limits.max if minimum else limits.min)
        base = P.where(hit, constant(identity, input._dtype), input)
    value = P.scatter_extreme(base, expand(src, index.shape), *grids, spec=spec, minimum=minimum)
    if not input._dtype.is_floating_point:
        return value
    return _shared_by_ties(input, src, value, hit, include_self, axis, index, scattered)


def _shared_by_ties(input, src, value, hit, include_self, axis, index, scattered):
    """``value`` (each place's extreme), its gradient shared evenly between
    the values equal to it: the src elements reduced there and, when
    included, input's own. ``t - stop_gradient(t)`` is 0 with t's gradient."""
    src = expand(src, index.shape)
    src_tie = src == gather(value, axis, index)
    self_tie = (input == value) if include_self else P.logical_not(hit)
    ties = scattered(_cast(src_tie, input._dtype)) + _cast(self_tie, input._dtype)
    movable_src = src_tie & P.logical_not(isinf(src))
    movable_self = self_tie & P.logical_not(isinf(input))
    offset = scattered(P.where(movable_src, src - P.stop_gradient(src), 0.0)) + P.where(
        movable_self, input - P.stop_gradient(input), 0.0
    )
    return P.stop_gradient(value) + offset / ties


@public(inplace=True)
@_named("ScatterAddBackward0")
def scatter_add(input, dim, index, src):
    """input with ``src[i][j]`` added at ``[index[i][j]][j]`` (dim 0; likewise for others)."""
    input, index, axis, src = _scatter_args("scatter_add", input, dim, index, src)
    added = P.scatter_add(
        src, *_grids(index, axis), spec=(("array",),) * input.ndim, shape=input.shape
    )
    return input + added


@public(inplace=True)
@_named("IndexAddBackward0")
def index_add(input, dim, index, source, *, alpha=1):
    """input with ``alpha * source[..., i, ...]`` added at ``input[..., index[i], ...]``."""
    input = as_tensor_arg(input)
    source = as_tensor_arg(source, "source")
    index = _as_index_tensor(index, "index_add")
    if index.ndim > 1:
        raise IndexError("index_add_(): Index is supposed to be a vector")
    axis = normalize_dim(dim, input.ndim)
    if source._dtype is not input._dtype:
        raise RuntimeError(
            "index_add_(): self ("
            + _short(input._dtype)
            + ") and source ("
            + _short(source._dtype)
            + ") must have the same scalar type"
        )
    expected = input.shape[:axis] + (index.numel(),) + input.shape[axis + 1 :]
    if source.shape != expected and not (source.ndim == 0 and expected == (1,) * input.ndim):
        raise RuntimeError(
            f"index_add_(): source shape {list(source.shape)} does not match "
            f"the expected shape {list(expected)}"
        )
    _check_bounds(index, input.shape[axis] if input.ndim else 1, axis, "index_add_")
    if alpha != 1:
        source = source * alpha
    spec = (("slice", None, None, None),) * axis + (("array",),)
    flat = P.reshape(index, shape=(index.numel(),))
    source = P.reshape(source, shape=expected)
    return input + P.scatter_add(source, flat, spec=spec, shape=input.shape)


@public(inplace=True)
@_named(
    lambda input, dim, index, value: (
        "IndexFillBackward1" if isinstance(value, Tensor) else "IndexFillBackward0"
    )
)
def index_fill(input, dim, index, value):
    input = as_tensor_arg(input)
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(
            "index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
            f"{value.ndim} dimension(s)."
        )
    axis = normalize_dim(dim, builtins.max(input.ndim, 1))
    index = _as_index_tensor(index, "index_fill")
    size = input.shape[axis] if input.ndim else 1
    _check_bounds(index, size, axis, "index_fill_")
    return P.where(_positions_hit(index, size, axis, input.ndim), _cast(value, input._dtype), input)


def _positions_hit(index, size, axis, ndim):
    """A bool tensor, 1 along every axis but ``axis``: whether each position
    along it is in ``index``."""
    wrapped = P.where(index < 0, index + size, index)
    flat = P.reshape(wrapped, shape=(index.numel(), 1))
    hit = any(flat == P.reshape(positions(size), shape=(1, size)), 0)
    return P.reshape(hit, shape=tuple(size if d == axis else 1 for d in range(ndim)))


@public(inplace=True)
@_named("IndexCopyBackward0")
def index_copy(input, dim, index, source):
    """input with ``source[..., i, ...]`` at ``input[..., index[i], ...]``."""
    input = as_tensor_arg(input)
    axis = normalize_dim(dim, builtins.max(input.ndim, 1))
    index = _as_index_tensor(index, "index_copy")
    zeros = P.broadcast_to(constant(0, input._dtype), shape=input.shape)
    placed = index_add(zeros, dim, index, source)
    return P.where(
        _positions_hit(index, input.shape[axis] if input.ndim else 1, axis, input.ndim),
        placed,
        input,
    )


@public
def masked_fill(input, mask, value):
    """``value`` where ``mask`` (broadcast) is True, ``input`` elsewhere."""
    input = as_tensor_arg(input)
    mask = as_tensor_arg(mask, "mask")
    if mask._dtype is not dtypes.bool_:
        raise RuntimeError(
            f"masked_fill_ only supports boolean masks, but got mask with dtype {mask._dtype.name}"
        )
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(
                "masked_fill_ only supports a 0-dimensional value tensor, but got tensor "
                f"with {value.ndim} dimension(s)."
            )
        name = "MaskedFillBackward1"
    else:
        name = "MaskedFillBackward0"
    out = P.where(mask, _cast(_check_operand(value), input._dtype), input)
    if out.grad_fn is not None:
        out.grad_fn.label = name
    return out


@public(inplace=True)
@_named("MaskedScatterBackward0")
def masked_scatter(input, mask, source):
    """input with the elements of ``source``, in order, where ``mask``
    (broadcast to input) holds. Eager only: how many is a value."""
    input, mask = as_tensor_arg(input), as_tensor_arg(mask, "mask")
    _eager_only("masked_scatter")
    if input.ndim == 0:
        input, mask = reshape(input, (1,)), reshape(mask, (1,))
        return reshape(masked_scatter(input, mask, source), ())
    places = np.nonzero(np.broadcast_to(mask._data, input.shape))
    count = len(places[0])
    source = as_tensor_arg(source, "source")
    if source.numel() < count:
        raise RuntimeError(
            "masked_scatter: expected source to have at least as many elements as ones in mask"
        )
    taken = _cast(P.index(reshape(source, -1), spec=(("slice", 0, count, None),)), input._dtype)
    arrays = [Tensor._make(p.astype(np.int64)) for p in places]
    return P.index_put(input, taken, *arrays, spec=(("array",),) * input.ndim)


def _scattered(input, src, spec, name):
    """input with ``src`` written where ``spec`` indexes: the functional
    form of an assignment into a view."""
    input, src = as_tensor_arg(input), as_tensor_arg(src, "src")
    target = P.index(input, spec=spec).shape
    if src.shape != target:
        raise RuntimeError(
            f"expected src to have a size equal to the slice of self. src size = "
            f"{list(src.shape)}, slice size = {list(target)}"
        )
    return P.index_put(input, _cast(src, input._dtype), spec=spec)


@public
def select_scatter(input, src, dim, index):
    input = as_tensor_arg(input)
    axis = normalize_dim(dim, input.ndim)
    size = input.shape[axis]
    if not -size <= index < size:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(input.shape)} "
            f"at dimension {axis}"
        )
    spec = (("slice", None, None, None),) * axis + (("int", index % size),)
    return _scattered(input, src, spec, "select_scatter")


@public
def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    input = as_tensor_arg(input)
    axis = normalize_dim(dim, input.ndim)
    spec = (("slice", None, None, None),) * axis + (("slice", start, end, step),)
    return _scattered(input, src, spec, "slice_scatter")


# -------------------------------------------------------------- flat positions


def _linear_positions(shape, indices):
    """Where input[indices] (integer tensors, one per leading dimension,
    broadcast together) lies in the flattened input."""
    indices = [_as_index_tensor(i, "index_put") for i in indices]
    grid = broadcast_shapes(*[i.shape for i in indices])
    linear = None
    for axis, index in enumerate(indices):
        size = shape[axis]
        _check_bounds(index, size, axis, "index_put")
        wrapped = expand(P.where(index < 0, index + size, index), grid)
        stride = math.prod(shape[axis + 1 : len(indices)])
        linear = wrapped * stride if linear is None else linear + wrapped * stride
    return linear, grid


@public(inplace=True)
@_named("IndexPutBackward0")
def index_put(input, indices, values, accumulate=False):
    """input with ``values`` at input[indices] (indices a tuple of integer
    tensors); with ``accumulate`` they are added, repeated positions summed."""
    input = as_tensor_arg(input)
    indices = tuple(indices)
    values = _cast(
        values if isinstance(values, Tensor) else constant(values, input._dtype), input._dtype
    )
    if not accumulate:
        return P.index_put(input, values, *indices, spec=(("array",),) * len(indices))
    linear, grid = _linear_positions(input.shape, indices)
    rest = input.shape[len(indices) :]
    rows = reshape(input, (math.prod(input.shape[: len(indices)]),) + rest)
    added = expand(values, grid + rest)
    flat = index_add(rows, 0, reshape(linear, -1), reshape(added, (-1,) + rest))
    return reshape(flat, input.shape)


@public(inplace=True)
@_named("PutBackward0")
def put(input, index, source, accumulate=False):
    """input with ``source`` at the flattened positions ``index``."""
    input = as_tensor_arg(input)
    flat = reshape(input, -1)
    index, source = reshape(_as_index_tensor(index, "put"), -1), reshape(source, -1)
    return reshape(index_put(flat, (index,), source, accumulate), input.shape)


@public(method=False)
def unravel_index(indices, shape):
    """The coordinates, one tensor per dimension of ``shape``, of flat positions."""
    indices = _as_index_tensor(indices, "unravel_index")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    total = math.prod(shape)
    if bool(any((indices < -total) | (indices >= builtins.max(total, 1)))):
        raise RuntimeError("index out of bounds for the unraveled shape")
    rest = P.where(indices < 0, indices + total, indices)
    coordinates = []
    for size in reversed(shape):
        coordinates.append(_binary(P.remainder, rest, size))
        rest = _binary(P.floor_divide, rest, size)
    return tuple(reversed(coordinates))
