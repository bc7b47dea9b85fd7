"""What a tensor is: how many elements and dimensions it has, of what kind,
where it lies in memory."""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from .arguments import as_tensor_arg
from .registry import public


@public(method=False)
def numel(input) -> int:
    return input.numel()


@public(function=False)
def ndimension(input):
    return input.ndim


@public(method=False)
def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


@public(method=False)
def is_floating_point(input) -> bool:
    return input.is_floating_point()


@public
def is_complex(input) -> bool:
    return False


@public
def is_nonzero(input) -> bool:
    input = as_tensor_arg(input)
    if input.numel() != 1:
        if input.numel() == 0:
            raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item())


@public(function=False)
def storage_offset(input) -> int:
    """How many elements into its storage the tensor's first one lies."""
    storage = input._data
    while storage.base is not None and isinstance(storage.base, np.ndarray):
        storage = storage.base
    offset = input._data.__array_interface__["data"][0] - storage.__array_interface__["data"][0]
    return offset // input._data.itemsize


@public(function=False)
def get_device(input) -> int:
    return -1  # PyTorch's answer for a CPU tensor


@public(function=False)
def data_ptr(input) -> int:
    return input._data.ctypes.data


@public
def is_inference(input) -> bool:
    """Whether the tensor was made in inference mode (or is a view of one that was)."""
    return input._inference
