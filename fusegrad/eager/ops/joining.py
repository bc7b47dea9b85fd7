"""Joining tensors (cat, stack, hstack, ...) and splitting them (split,
chunk, unbind, narrow, tensor_split, ...); grids and combinations of the
elements of vectors (meshgrid, cartesian_prod, combinations)."""

from __future__ import annotations

import builtins
import itertools
import warnings

import numpy as np

from ...ir import dtypes
from ...ir import primitives as P
from ...ir.shapes import normalize_dim
from ..tensor import Tensor, constant_array
from .arguments import _promote_all, as_tensor_arg
from .composite import _named
from .copies import clone
from .index_tensors import _narrow_spec, index_with_arrays
from .registry import public
from .shape import _at_least, expand, reshape

# --------------------------------------------------------------------- joining


@public(method=False, out=True)
@_named("CatBackward0")
def cat(tensors, dim=0):
    tensors = _promote_all(tensors, "cat")
    if tensors[0].ndim == 0:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    axis = normalize_dim(dim, tensors[0].ndim)
    for t in tensors:
        if t.ndim != tensors[0].ndim:
            raise RuntimeError(
                f"Tensors must have same number of dimensions: got {tensors[0].ndim} and {t.ndim}"
            )
    return P.concatenate(*tensors, axis=axis)


concat = public(cat, name="concat", method=False, out=True)
concatenate = public(cat, name="concatenate", method=False, out=True)


@public(method=False, out=True)
@_named("StackBackward0")
def stack(tensors, dim=0):
    tensors = _promote_all(tensors, "stack")
    for k, t in enumerate(tensors):
        if t.shape != tensors[0].shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got "
                f"{list(tensors[0].shape)} at entry 0 and {list(t.shape)} at "
                f"entry {k}"
            )
    axis = normalize_dim(dim, tensors[0].ndim + 1)
    shape = tensors[0].shape[:axis] + (1,) + tensors[0].shape[axis:]
    return P.concatenate(*[P.reshape(t, shape=shape) for t in tensors], axis=axis)


@public(method=False)
def hstack(tensors):
    tensors = _at_least(1, (tensors,))
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


@public(method=False)
def vstack(tensors):
    return cat(_at_least(2, (tensors,)), 0)


row_stack = public(vstack, name="row_stack", method=False)


@public(method=False)
def dstack(tensors):
    return cat(_at_least(3, (tensors,)), 2)


@public(method=False)
def column_stack(tensors):
    columns = [reshape(t, (t.numel(), 1)) if as_tensor_arg(t).ndim <= 1 else t for t in tensors]
    return cat(columns, 1)


# ------------------------------------------------------------------- splitting


@public
def split(tensor, split_size_or_sections, dim=0):
    tensor = as_tensor_arg(tensor, "tensor")
    axis = normalize_dim(dim, tensor.ndim)
    size = tensor.shape[axis]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0 and size:
            raise RuntimeError(
                f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}"
            )
        bounds = [(s, builtins.min(s + step, size)) for s in range(0, size, builtins.max(step, 1))]
        name = "SplitBackward0"
    else:
        sections = list(split_size_or_sections)
        if builtins.sum(sections) != size:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {size} "
                f"(input tensor's size at dimension {axis}), but got "
                f"split_sizes={sections}"
            )
        starts = np.cumsum([0] + sections[:-1]).tolist()
        bounds = [(s, s + n) for s, n in zip(starts, sections)]
        name = "SplitWithSizesBackward0"
    parts = []
    for start, stop in bounds:
        part = P.index(tensor, spec=_narrow_spec(tensor.ndim, axis, start, stop))
        if part.grad_fn is not None:
            part.grad_fn.label = name
        parts.append(part)
    return tuple(parts)


@public
def chunk(input, chunks, dim=0):
    input = as_tensor_arg(input)
    if not isinstance(chunks, int):
        raise TypeError(f"chunk(): argument 'chunks' must be int, not {type(chunks).__name__}")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    axis = normalize_dim(dim, input.ndim)
    size = input.shape[axis]
    return split(input, builtins.max(1, -(-size // chunks)), axis)


@public
def unbind(input, dim=0):
    input = as_tensor_arg(input)
    axis = normalize_dim(dim, input.ndim)
    spec = (("slice", None, None, None),) * axis
    return tuple(P.index(input, spec=spec + (("int", i),)) for i in range(input.shape[axis]))


@public
def narrow(input, dim, start, length):
    input = as_tensor_arg(input)
    axis = normalize_dim(dim, input.ndim)
    size = input.shape[axis]
    if start < 0:
        start += size
    if not 0 <= start <= size or length < 0 or start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return P.index(input, spec=_narrow_spec(input.ndim, axis, start, start + length))


@public
def narrow_copy(input, dim, start, length):
    return clone(narrow(input, dim, start, length))


@public
def tensor_split(input, indices_or_sections, dim=0):
    input = as_tensor_arg(input)
    axis = normalize_dim(dim, input.ndim)
    size = input.shape[axis]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        sections = indices_or_sections
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        longer, length = size % sections, size // sections
        cuts = [k * length + builtins.min(k, longer) for k in range(1, sections)]
    else:
        cuts = list(indices_or_sections)
    parts = []
    for start, stop in zip([0, *cuts], [*cuts, size]):
        start, stop = builtins.min(start, size), builtins.min(stop, size)  # past the end: empty
        parts.append(narrow(input, axis, start, builtins.max(stop - start, 0)))
    return tuple(parts)


def _split_along(input, sections, dim, name):
    input = as_tensor_arg(input)
    if isinstance(sections, int) and input.shape[dim] % sections:
        raise RuntimeError(
            f"torch.{name} attempted to split along dimension {dim}, but the size of the "
            f"dimension {input.shape[dim]} is not divisible by the split_size {sections}!"
        )
    return tensor_split(input, sections, dim)


@public
def hsplit(input, indices_or_sections):
    return _split_along(input, indices_or_sections, 1 if input.ndim > 1 else 0, "hsplit")


@public
def vsplit(input, indices_or_sections):
    if input.ndim < 2:
        raise RuntimeError(
            f"torch.vsplit requires a tensor with at least 2 dimension, but got a tensor with "
            f"{input.ndim} dimensions!"
        )
    return _split_along(input, indices_or_sections, 0, "vsplit")


@public
def dsplit(input, indices_or_sections):
    if input.ndim < 3:
        raise RuntimeError(
            f"torch.dsplit requires a tensor with at least 3 dimension, but got a tensor with "
            f"{input.ndim} dimensions!"
        )
    return _split_along(input, indices_or_sections, 2, "dsplit")


# ------------------------------------------------------ grids and combinations


@public(method=False)
def meshgrid(*tensors, indexing=None):
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn(
            "torch.meshgrid: in an upcoming release, it will be required to pass the indexing "
            "argument.",
            UserWarning,
            stacklevel=2,
        )
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(
            f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}'
        )
    for t in tensors:
        if as_tensor_arg(t).ndim > 1:
            raise RuntimeError(
                f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t}"
            )
        if t._dtype is not tensors[0]._dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    axes = [reshape(t, -1) for t in tensors]
    swap = indexing == "xy" and len(axes) >= 2  # "xy": "ij" with the first two swapped
    if swap:
        axes[0], axes[1] = axes[1], axes[0]
    shape = tuple(a.shape[0] for a in axes)
    grids = [
        expand(reshape(a, tuple(-1 if d == k else 1 for d in range(len(axes)))), shape)
        for k, a in enumerate(axes)
    ]
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


@public(method=False)
def cartesian_prod(*tensors):
    if len(tensors) == 1:
        return as_tensor_arg(tensors[0])
    grids = meshgrid(*tensors, indexing="ij")
    return stack([reshape(g, -1) for g in grids], 1)


@public(method=False)
def combinations(input, r=2, with_replacement=False):
    """The r-element combinations of a vector's elements, one per row."""
    input = as_tensor_arg(input)
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    choose = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(choose(range(input.shape[0]), r))
    if not rows:
        return P.index(input, spec=(("slice", 0, 0, None),))  # PyTorch's empty vector
    positions_taken = constant_array(np.array(rows, np.int64).reshape(-1), dtypes.int64)
    return reshape(index_with_arrays(input, [positions_taken]), (len(rows), r))
