"""Copies and casts: clone, contiguous, to, detach."""

from __future__ import annotations

from ...ir import dtypes
from ...ir import primitives as P
from .. import devices
from .. import memory_format as memory_formats
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
def contiguous(input, memory_format=memory_formats.contiguous_format):
    """``input`` if its layout is ``memory_format``'s, else a copy laid out so."""
    input = as_tensor_arg(input)
    memory_formats.check(memory_format, "contiguous")
    memory_formats.check_rank(memory_format, input.ndim)
    if memory_formats.is_laid_out(input._data, memory_format):
        return input
    if memory_format is memory_formats.preserve_format:
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    if memory_format is memory_formats.contiguous_format:
        return clone(input)
    return _laid_out_copy(input, memory_formats.memory_order(memory_format, input.ndim))


@_named("CloneBackward0")
def _laid_out_copy(input, order: tuple):
    """A copy of ``input`` whose memory holds its dimensions in ``order``,
    outermost first: the permuted tensor, copied, permuted back."""
    inverse = sorted(range(len(order)), key=order.__getitem__)
    return clone(input.permute(order)).permute(inverse)


@public(function=False)
def to(input, *args, **kwargs):
    """``to(dtype)``, ``to("cpu")``, ``to(device, dtype)``, ``to(other_tensor)``,
    and ``memory_format=`` (as ``contiguous``); the CPU is the only device."""
    dtype = kwargs.get("dtype")
    memory_format = kwargs.get("memory_format") or memory_formats.preserve_format
    memory_formats.check(memory_format, "to")
    devices.check_device(kwargs.get("device"))
    for a in args:
        if isinstance(a, Tensor):
            dtype = a._dtype
        elif isinstance(a, dtypes.DType) or a in (float, int, bool):
            dtype = a
        elif a is not None:
            devices.check_device(a)
    if dtype is not None and dtypes.as_dtype(dtype) is not input._dtype:
        input = P.convert(input, dtype=dtypes.as_dtype(dtype))
    if memory_format is memory_formats.preserve_format:
        return input
    return contiguous(input, memory_format)


@public(method=False)
def detach(input):
    return input.detach()
