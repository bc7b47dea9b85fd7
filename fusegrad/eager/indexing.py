"""``tensor[index]`` and ``tensor[index] = value``.

A Python index (ints, slices, None, Ellipsis, integer or boolean tensors,
lists) becomes a hashable spec plus integer index tensors, the operands of
the ``index`` / ``index_put`` primitives. Boolean masks become the integer
positions of their True elements.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..ir import dtypes
from ..ir import primitives as P
from ..ir.shapes import is_symbolic
from .tensor import NumberOperand, Tensor, constant_array, recording


def _index_tensor(value):
    """An integer index tensor, or a numpy bool array for a mask (a uint8
    one too, with PyTorch's deprecation warning)."""
    if isinstance(value, Tensor):
        if value.dtype is dtypes.bool_:
            return value._data
        if value.dtype is dtypes.uint8:
            return _byte_mask(value._data)
        if value.dtype not in (dtypes.int64, dtypes.int32):
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        return value if value.dtype is dtypes.int64 else P.convert(value, dtype=dtypes.int64)
    data = np.asarray(value)
    if data.dtype == np.bool_:
        return data
    if data.dtype == np.uint8:
        return _byte_mask(data)
    if data.size == 0:
        data = data.astype(np.int64)
    if data.dtype.kind not in "iu":
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    return constant_array(data.astype(np.int64, copy=False), dtypes.int64)


def _byte_mask(data: np.ndarray) -> np.ndarray:
    warnings.warn(
        "indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead.",
        UserWarning,
        stacklevel=5,  # the indexing expression
    )
    return data != 0


def _check_mask(mask: np.ndarray, shape: tuple, start: int) -> None:
    for k, size in enumerate(mask.shape):
        dim = start + k
        if dim >= len(shape):
            raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
        if size != shape[dim]:
            raise IndexError(
                f"The shape of the mask {list(mask.shape)} at index {k} does not "
                f"match the shape of the indexed tensor {list(shape)} at index {dim}"
            )


def _position(value):
    """A slice bound: an int, or a size that varies between calls, kept so."""
    if value is None or is_symbolic(value):
        return value
    return int(value)


def parse_index(index, shape: tuple):
    """Returns (spec, index tensors) for a Python index into a tensor of ``shape``."""
    ndim = len(shape)
    if not isinstance(index, tuple):
        index = (index,)
    spec, arrays = [], []
    consumed = 0  # dimensions of the input the index walks over
    for item in index:
        if item.__class__ is int:
            spec.append(("int", item))
            consumed += 1
        elif item is None:
            spec.append(("none",))
        elif item is Ellipsis:
            spec.append(("ellipsis",))
        elif isinstance(item, slice):
            if item.step is not None and int(item.step) <= 0:
                raise ValueError("step must be greater than zero")
            spec.append(
                ("slice", _position(item.start), _position(item.stop), _position(item.step))
            )
            consumed += 1
        elif isinstance(item, (bool, np.bool_)):
            spec.append(("none",))  # numpy and PyTorch: x[True] adds a dimension of size 1
            arrays.append(constant_array(np.zeros(1 if item else 0, np.int64), dtypes.int64))
            spec[-1] = ("array",)
        elif is_symbolic(item):
            spec.append(("int", item))
            consumed += 1
        elif isinstance(item, (int, np.integer)) or (
            isinstance(item, Tensor)
            and item.ndim == 0
            and item._dtype.category == dtypes.INTEGER
            and not (recording.trace is not None and recording.trace.indexes_by_tensor(item))
        ):
            spec.append(("int", int(item)))
            consumed += 1
        elif isinstance(item, (Tensor, list, range, np.ndarray)):
            converted = _index_tensor(item)
            if isinstance(converted, np.ndarray):  # a boolean mask
                if isinstance(item, Tensor) and recording.trace is not None:
                    recording.trace.unsupported(
                        "boolean-mask indexing (its result's shape depends on the mask's values)"
                    )
                _check_mask(converted, shape, consumed)
                for positions in np.nonzero(converted):
                    spec.append(("array",))
                    arrays.append(constant_array(positions.astype(np.int64), dtypes.int64))
                consumed += converted.ndim
            else:
                spec.append(("array",))
                arrays.append(converted)
                consumed += 1
        else:
            raise IndexError(
                "only integers, slices (`:`), ellipsis (`...`), None and long or "
                "byte Variables are valid indices (got "
                f"{type(item).__name__})"
            )
    if consumed > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    return tuple(spec), arrays


def getitem(tensor: Tensor, index) -> Tensor:
    spec, arrays = parse_index(index, tensor._data.shape)
    out = P.index(tensor, *arrays, spec=spec)
    if out.grad_fn is not None and not arrays:
        out.grad_fn.label = _basic_index_name(spec)
    return out


def _basic_index_name(spec) -> str:
    """PyTorch applies a basic index as a chain of select/slice/unsqueeze ops
    (full slices are no-ops): the node printed is that of the last one."""
    name = "AliasBackward0"
    for entry in spec:
        if entry[0] == "int":
            name = "SelectBackward0"
        elif entry[0] == "slice" and entry[1:] != (None, None, None):
            name = "SliceBackward0"
        elif entry[0] == "none":
            name = "UnsqueezeBackward0"
    return name


def setitem(tensor: Tensor, index, value) -> None:
    tensor._check_inplace()
    if isinstance(value, Tensor):
        value = value if value._dtype is tensor._dtype else P.convert(value, dtype=tensor._dtype)
    elif not isinstance(value, (bool, int, float, np.number, NumberOperand)):
        raise TypeError(f"can't assign a {type(value).__name__} to a {tensor.type()}")
    if _whole_mask(tensor, index) and (not isinstance(value, Tensor) or value.ndim == 0):
        if index._dtype is dtypes.uint8:  # PyTorch's masked_fill_ takes no byte mask
            raise RuntimeError(
                "masked_fill_ only supports boolean masks, but got mask with dtype unsigned char"
            )
        # one value where a mask of the tensor's shape holds: no shape depends
        # on the mask's values, so this compiles too
        tensor._commit_inplace(P.where(index, value, tensor))
        return
    spec, arrays = parse_index(index, tensor._data.shape)
    tensor._commit_inplace(P.index_put(tensor, value, *arrays, spec=spec))


def _whole_mask(tensor: Tensor, index) -> bool:
    return (
        isinstance(index, Tensor)
        and index._dtype in (dtypes.bool_, dtypes.uint8)
        and index._data.shape == tensor._data.shape
    )
