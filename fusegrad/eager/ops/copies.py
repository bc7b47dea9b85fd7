"""Copies and casts: clone, contiguous, to, detach."""

from __future__ import annotations

from ...ir import dtypes
from ...ir import primitives as P
from .. import devices
from ..tensor import Tensor
from .arguments import as_tensor_arg
from .composite import _named
from .registry import public


@public
@_named("CloneBackward0")
def clone(input):
    input = as_tensor_arg(input)
    return P.convert(input, dtype=input._dtype)


@public(function=False)
def contiguous(input):
    input = as_tensor_arg(input)
    return input if input._data.flags.c_contiguous else clone(input)


@public(function=False)
def to(input, *args, **kwargs):
    """``to(dtype)``, ``to("cpu")``, ``to(device, dtype)``, ``to(other_tensor)``;
    the CPU is the only device."""
    dtype = kwargs.get("dtype")
    devices.check_device(kwargs.get("device"))
    for a in args:
        if isinstance(a, Tensor):
            dtype = a._dtype
        elif isinstance(a, dtypes.DType) or a in (float, int, bool):
            dtype = a
        elif a is not None:
            devices.check_device(a)
    if dtype is None:
        return input
    dtype = dtypes.as_dtype(dtype)
    return input if dtype is input._dtype else P.convert(input, dtype=dtype)


@public(method=False)
def detach(input):
    return input.detach()
