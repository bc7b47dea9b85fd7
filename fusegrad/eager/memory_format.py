"""Memory formats: how a tensor's elements lie in memory. ``contiguous_format``
is C order; ``channels_last`` keeps a 4-d (N, C, H, W) tensor's channels
innermost (strides of an N, H, W, C array), ``channels_last_3d`` a 5-d
one's; ``preserve_format`` asks a copy for its source's layout. A tensor's
values never depend on its layout: only ``stride()`` and
``is_contiguous()`` see it."""

from __future__ import annotations

import numpy as np


class memory_format:
    """PyTorch's ``torch.memory_format``: the four formats are its only values."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"fusegrad.{self.name}"

    def __reduce__(self):
        return self.name  # the module's attribute of that name


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")

# the rank a channels-last format needs, and the dimensions outermost first in memory
_CHANNELS_LAST = {channels_last: (4, (0, 2, 3, 1)), channels_last_3d: (5, (0, 2, 3, 4, 1))}


def check(value, caller: str, argument: str = "memory_format") -> None:
    if not isinstance(value, memory_format):
        raise TypeError(
            f"{caller}(): argument '{argument}' must be fusegrad.memory_format, "
            f"not {type(value).__name__}"
        )


def check_rank(fmt: memory_format, ndim: int) -> None:
    rank = _CHANNELS_LAST.get(fmt, (ndim,))[0]
    if ndim != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {fmt.name} format")


def memory_order(fmt: memory_format, ndim: int) -> tuple:
    """The dimensions, outermost first in memory, of an array in ``fmt``."""
    return _CHANNELS_LAST[fmt][1] if fmt in _CHANNELS_LAST else tuple(range(ndim))


def is_laid_out(array: np.ndarray, fmt: memory_format) -> bool:
    """Whether ``array``'s strides are those of ``fmt``: along the memory
    order, innermost first, each dimension of more than one element steps
    over all the elements of those inside it, as PyTorch decides it
    (preserve_format asks the same as contiguous_format)."""
    if fmt not in _CHANNELS_LAST:
        return array.flags.c_contiguous
    if array.ndim != _CHANNELS_LAST[fmt][0]:
        return False
    expected = array.itemsize
    for dim in reversed(memory_order(fmt, array.ndim)):
        if array.shape[dim] != 1:
            if array.strides[dim] != expected:
                return False
            expected *= array.shape[dim]
    return True


def laid_out(array: np.ndarray, fmt: memory_format, like: np.ndarray) -> np.ndarray:
    """``array`` (in C order) with its values laid out as ``fmt`` says; for
    preserve_format, in ``like``'s strides' order (numpy's order "K": the
    same strides where ``like``'s elements are dense, as PyTorch keeps them)."""
    if fmt is preserve_format:
        if like.flags.c_contiguous:
            return array
        copy = np.empty_like(like, dtype=array.dtype)
        copy[...] = array
        return copy
    if fmt is contiguous_format or is_laid_out(array, fmt):
        return array
    order = memory_order(fmt, array.ndim)
    return np.ascontiguousarray(array.transpose(order)).transpose(np.argsort(order))
