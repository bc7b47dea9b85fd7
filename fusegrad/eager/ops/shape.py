"""Ops on a tensor's shape: reshaping (reshape, view, flatten, squeeze,
atleast_2d, ...), reordering dimensions (permute, transpose, movedim, ...),
broadcasting (expand, broadcast_to, ...), and rearranging the elements along
dimensions (repeat, tile, flip, roll, rot90, unfold)."""

from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from ...ir import dtypes
from ...ir import primitives as P
from ...ir.shapes import (
    broadcast_shapes,
    infer_reshape,
    is_symbolic,
    normalize_dim,
    sizes_from_args,
)
from ..tensor import Size, Tensor, constant_array, recording
from .arguments import _dims_arg, _ints, as_tensor_arg
from .composite import _named
from .copies import clone
from .index_tensors import _narrow_spec
from .registry import public

# ------------------------------------------------------------------- reshaping


def _shape_arg(shape, input) -> tuple:
    """A target shape given as varargs or one sequence, with one -1 resolved."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for s in shape:
        if s.__class__ is not int:
            try:
                shape = tuple(s if is_symbolic(s) else operator.index(s) for s in shape)
            except TypeError:
                raise TypeError(f"shape must be a sequence of ints, got {shape!r}") from None
            break
    if -1 not in shape and math.prod(shape) == input.numel():
        return shape
    return infer_reshape(shape, input.numel())


@public
def reshape(input, *shape):
    input = as_tensor_arg(input)
    return P.reshape(input, shape=_shape_arg(shape, input))


@public(function=False)
def view(input, *shape):
    input = as_tensor_arg(input)
    target = _shape_arg(shape, input)
    trial = input._data.view()
    try:
        trial.shape = recording.trace.hinted(target) if is_symbolic(target) else target
    except AttributeError:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride "
            "(at least one dimension spans across two contiguous subspaces). "
            "Use .reshape(...) instead."
        ) from None
    return reshape(input, target)


@public(function=False)
def view_as(input, other):
    return input.view(other.shape)


@public(function=False)
def reshape_as(input, other):
    return reshape(input, other.shape)


@public
def flatten(input, start_dim=0, end_dim=-1):
    input = as_tensor_arg(input)
    if input.ndim == 0:
        return P.reshape(input, shape=(1,))
    start, end = normalize_dim(start_dim, input.ndim), normalize_dim(end_dim, input.ndim)
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = (
        input.shape[:start] + (math.prod(input.shape[start : end + 1]),) + input.shape[end + 1 :]
    )
    return P.reshape(input, shape=shape)


@public
def unflatten(input, dim, sizes):
    input = as_tensor_arg(input)
    d = normalize_dim(dim, input.ndim)
    inner = infer_reshape(sizes, input.shape[d])
    return reshape(input, input.shape[:d] + inner + input.shape[d + 1 :])


@public
def ravel(input):
    return reshape(input, -1)


@public
@_named("UnsqueezeBackward0")
def unsqueeze(input, dim):
    return _unsqueezed(as_tensor_arg(input), dim)


def _unsqueezed(input, dim):
    d = normalize_dim(dim, input.ndim + 1)
    return P.reshape(input, shape=input.shape[:d] + (1,) + input.shape[d:])


@public
@_named(lambda input, dim=None: "SqueezeBackward0" if dim is None else "SqueezeBackward1")
def squeeze(input, dim=None):
    return _squeezed(as_tensor_arg(input), dim)


def _squeezed(input, dim):
    if dim is None:
        axes = {i for i, s in enumerate(input.shape) if s == 1}
    else:
        axes = {normalize_dim(d, input.ndim) for d in _ints(dim)}
        axes = {a for a in axes if input.ndim and input.shape[a] == 1}
    return P.reshape(input, shape=tuple(s for i, s in enumerate(input.shape) if i not in axes))


def _lifted_shape(shape, ndim):
    """numpy's atleast_Nd: a vector is a row of a matrix and the middle of a 3-d tensor."""
    if len(shape) >= ndim:
        return shape
    if ndim == 3 and len(shape) == 2:
        return shape + (1,)
    if ndim == 3 and len(shape) == 1:
        return (1,) + shape + (1,)
    return (1,) * (ndim - len(shape)) + shape


def _at_least(ndim, tensors):
    """Each tensor reshaped to ``ndim`` dimensions or more: one tensor for one
    given, a tuple for several or for one sequence."""
    sequence = len(tensors) == 1 and isinstance(tensors[0], (tuple, list))
    lifted = tuple(
        reshape(t, _lifted_shape(as_tensor_arg(t).shape, ndim))
        for t in (tensors[0] if sequence else tensors)
    )
    return lifted[0] if len(lifted) == 1 and not sequence else lifted


@public(method=False)
def atleast_1d(*tensors):
    return _at_least(1, tensors)


@public(method=False)
def atleast_2d(*tensors):
    return _at_least(2, tensors)


@public(method=False)
def atleast_3d(*tensors):
    return _at_least(3, tensors)


# ------------------------------------------------------- reordering dimensions


@public
@_named("PermuteBackward0")
def permute(input, *dims):
    input = as_tensor_arg(input)
    dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
    if len(dims) != input.ndim:
        raise RuntimeError(
            "permute(sparse_coo): number of dimensions in the tensor input does "
            f"not match the length of the desired ordering of dimensions i.e. "
            f"input.dim() = {input.ndim} is not equal to len(dims) = {len(dims)}"
        )
    perm = tuple(normalize_dim(d, input.ndim) for d in dims)
    if len(set(perm)) != len(perm):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return P.transpose(input, perm=perm)


@public
@_named("TransposeBackward0")
def transpose(input, dim0, dim1):
    return _transposed(as_tensor_arg(input), dim0, dim1)


def _transposed(input, dim0, dim1):
    if input.ndim == 0:
        return P.reshape(input, shape=())
    a, b = normalize_dim(dim0, input.ndim), normalize_dim(dim1, input.ndim)
    perm = list(range(input.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return P.transpose(input, perm=tuple(perm))


swapaxes = public(transpose, name="swapaxes")
swapdims = public(transpose, name="swapdims")


@public
@_named("TBackward0")
def t(input):
    return _t(as_tensor_arg(input), "t")


def _t(input, name):
    if input.ndim > 2:
        raise RuntimeError(
            f"{name}() expects a tensor with <= 2 dimensions, but self is {input.ndim}D"
        )
    return P.transpose(input, perm=tuple(reversed(range(input.ndim))))


# ------------------------------------------------- changing a shape in place
# PyTorch's in-place view ops: the tensor itself takes the view's shape. The
# view is taken with the primitive, not the op: on float16 the op computes
# in float32, which would copy.


def _in_place_view(input, view, backward_name):
    if view.grad_fn is not None:
        view.grad_fn.label = backward_name
    return input._commit_layout(view)


@public(function=False)
def squeeze_(input, dim=None):
    input._check_inplace()
    kind = 3 if dim is None else 5 if isinstance(dim, (tuple, list)) else 4
    return _in_place_view(input, _squeezed(input, dim), f"SqueezeBackward{kind}")


@public(function=False)
def unsqueeze_(input, dim):
    input._check_inplace()
    return _in_place_view(input, _unsqueezed(input, dim), "UnsqueezeBackward1")


@public(function=False)
def transpose_(input, dim0, dim1):
    input._check_inplace()
    return _in_place_view(input, _transposed(input, dim0, dim1), "TransposeBackward1")


swapaxes_ = public(transpose_, name="swapaxes_", function=False)
swapdims_ = public(transpose_, name="swapdims_", function=False)


@public(function=False)
def t_(input):
    input._check_inplace()
    return _in_place_view(input, _t(input, "t_"), "TBackward1")


@public
def movedim(input, source, destination):
    input = as_tensor_arg(input)
    sources = _dims_arg(source, input.ndim, "source")
    destinations = _dims_arg(destination, input.ndim, "destination")
    if len(sources) != len(destinations):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({list(_ints(source))} dims) "
            f"should contain the same number of dims as destination "
            f"({list(_ints(destination))} dims)"
        )
    rest = iter(d for d in range(input.ndim) if d not in sources)
    moved = dict(zip(destinations, sources))
    return permute(input, tuple(moved[d] if d in moved else next(rest) for d in range(input.ndim)))


moveaxis = public(movedim, name="moveaxis")


# ---------------------------------------------------------------- broadcasting


@public(function=False)
@_named("ExpandBackward0")
def expand(input, *sizes):
    input = as_tensor_arg(input)
    sizes = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes
    if len(sizes) < input.ndim:
        raise RuntimeError(
            f"expand(torch.{input.type().split('.')[-1]}{{{list(input.shape)}}}, "
            f"size={list(sizes)}): the number of sizes provided "
            f"({len(sizes)}) must be greater or equal to the number of "
            f"dimensions in the tensor ({input.ndim})"
        )
    lead = len(sizes) - input.ndim
    target = []
    for i, s in enumerate(sizes):
        if s == -1:
            if i < lead:
                raise RuntimeError(
                    f"The expanded size of the tensor (-1) isn't allowed in a "
                    f"leading, non-existing dimension {i}"
                )
            s = input.shape[i - lead]
        target.append(s)
    return P.broadcast_to(input, shape=tuple(target))


@public(function=False)
def expand_as(input, other):
    return expand(input, other.shape)


@public
def broadcast_to(input, size):
    return expand(input, tuple(size))


@public(method=False)
def broadcast_tensors(*tensors):
    shape = broadcast_shapes(*[t.shape for t in tensors])
    return tuple(expand(t, shape) for t in tensors)


@public(method=False, name="broadcast_shapes")
def _broadcast_shapes(*shapes):
    return Size(broadcast_shapes(*[(s,) if isinstance(s, int) else tuple(s) for s in shapes]))


# -------------------------------------------------------- rearranging elements


@public(function=False)
@_named("RepeatBackward0")
def repeat(input, *sizes):
    """Tiles the tensor: ``sizes[i]`` copies along dimension i (new leading
    dimensions where there are more sizes than dimensions)."""
    input = as_tensor_arg(input)
    sizes = sizes_from_args(sizes, "repeats")
    if len(sizes) < input.ndim:
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of "
            "dimensions of tensor"
        )
    shape = (1,) * (len(sizes) - input.ndim) + input.shape
    paired = builtins.sum(((1, n) for n in shape), ())
    tiled = builtins.sum(((r, n) for r, n in zip(sizes, shape)), ())
    x = P.broadcast_to(P.reshape(input, shape=paired), shape=tiled)
    return clone(P.reshape(x, shape=tuple(r * n for r, n in zip(sizes, shape))))


@public
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element repeated ``repeats`` times along dim (of the flattened
    tensor without dim). ``repeat_interleave(counts)`` repeats each index."""
    input = as_tensor_arg(input)
    if repeats is None:  # the one-argument form: input holds the counts
        counts = _repeat_counts(input, None)
        return Tensor._new(np.repeat(np.arange(len(counts)), counts).astype(np.int64), dtypes.int64)
    if dim is None:
        input, axis = P.reshape(input, shape=(input.numel(),)), 0
    else:
        axis = normalize_dim(dim, input.ndim)
        if input.ndim == 0:
            input = P.reshape(input, shape=(1,))
    size = input.shape[axis]
    if isinstance(repeats, Tensor) and repeats.numel() != 1:
        counts = _repeat_counts(repeats, size)
        positions = np.repeat(np.arange(size), counts).astype(np.int64)
        spec = (("slice", None, None, None),) * axis + (("array",),)
        return P.index(input, constant_array(positions, dtypes.int64), spec=spec)
    times = operator.index(repeats)
    if times < 0:
        raise RuntimeError("repeats can not be negative")
    shape = input.shape
    spread = P.reshape(input, shape=shape[: axis + 1] + (1,) + shape[axis + 1 :])
    spread = P.broadcast_to(spread, shape=shape[: axis + 1] + (times,) + shape[axis + 1 :])
    return clone(P.reshape(spread, shape=shape[:axis] + (size * times,) + shape[axis + 1 :]))


def _repeat_counts(repeats, size) -> list:
    """The counts a tensor of repeats holds (read from its values: under jit
    they are guarded, so other counts compile again)."""
    if repeats.ndim > 1:
        raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
    if repeats._dtype.category != dtypes.INTEGER:
        raise RuntimeError("repeats has to be Long or Int tensor")
    counts = repeats.reshape(-1).tolist()
    if size is not None and len(counts) != size:
        raise RuntimeError(
            f"repeats must have the same size as input along dim, but got "
            f"repeats.size(0) = {len(counts)} and input.size(0) = {size}"
        )
    if builtins.any(c < 0 for c in counts):
        raise RuntimeError("repeats can not be negative")
    return counts


@public
def tile(input, dims):
    input = as_tensor_arg(input)
    dims = tuple(_ints(dims))
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


@public(out=True)
@_named("FlipBackward0")
def flip(input, dims):
    input = as_tensor_arg(input)
    axes = _dims_arg(dims, input.ndim, "flip")
    spec = tuple(("slice", None, None, -1 if d in axes else None) for d in range(input.ndim))
    return clone(P.index(input, spec=spec))  # a copy, as PyTorch's: not a view


@public
def fliplr(input):
    input = as_tensor_arg(input)
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, (1,))


@public
def flipud(input):
    input = as_tensor_arg(input)
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, (0,))


@public(out=True)
@_named("RollBackward0")
def roll(input, shifts, dims=None):
    input = as_tensor_arg(input)
    if dims is None:
        shifts = _ints(shifts)
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        flat = P.reshape(input, shape=(input.numel(),))
        return P.reshape(roll(flat, shifts, 0), shape=input.shape)
    shifts, dims = _ints(shifts), _ints(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(
            f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}"
        )
    out = input
    for shift, dim in zip(shifts, dims):
        axis = normalize_dim(operator.index(dim), input.ndim)
        size = input.shape[axis]
        cut = size - operator.index(shift) % size if size else 0
        if cut not in (0, size):
            head = P.index(out, spec=_narrow_spec(out.ndim, axis, cut, size))
            tail = P.index(out, spec=_narrow_spec(out.ndim, axis, 0, cut))
            out = P.concatenate(head, tail, axis=axis)
    return out if out is not input else clone(input)


@public
def rot90(input, k=1, dims=(0, 1)):
    input = as_tensor_arg(input)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    a, b = (normalize_dim(d, input.ndim) for d in dims)
    if a == b:
        raise RuntimeError(
            f"expected rotation dims to be different, but got dim0 = {a} and dim1 = {b}"
        )
    k %= 4
    if k == 1:
        return transpose(flip(input, (b,)), a, b)
    if k == 2:
        return flip(input, (a, b))
    if k == 3:
        return flip(transpose(input, a, b), (b,))
    return clone(input)


@public(function=False)
@_named("UnfoldBackward0")
def unfold(input, dimension, size, step):
    """Every window of ``size`` elements ``step`` apart along ``dimension``,
    as a new last dimension (a copy here; a view in PyTorch)."""
    input = as_tensor_arg(input)
    axis = normalize_dim(dimension, builtins.max(input.ndim, 1))
    length = input.shape[axis] if input.ndim else 1
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if size < 0 or size > length:
        raise RuntimeError(
            f"maximum size for tensor at dimension {axis} is {length} but size is {size}"
        )
    x = movedim(input, axis, -1) if input.ndim else P.reshape(input, shape=(1,))
    windows = P.windows(x, kernel=(size,), stride=(step,), dilation=(1,))  # (..., size, count)
    out = movedim(windows, -1, axis)
    return out if input.ndim else P.reshape(out, shape=(size,))
