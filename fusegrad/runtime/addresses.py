"""Where CPython keeps a tuple's items and numpy an array's data pointer,
found by looking for known addresses in a probe, not assumed: native code
(a plan's driver) and ``data_address`` read them from the objects
themselves, several times faster than ``ndarray.ctypes.data``."""

from __future__ import annotations

import ctypes

import numpy as np


def _offset_of(address: int, obj) -> int:
    """Where in ``obj``'s memory (its fixed part and, for a tuple, its
    items) ``address`` is stored."""
    size = type(obj).__basicsize__ + type(obj).__itemsize__ * len(obj)
    words = (ctypes.c_size_t * (size // ctypes.sizeof(ctypes.c_size_t))).from_address(id(obj))
    for k, word in enumerate(words):
        if word == address:
            return k * ctypes.sizeof(ctypes.c_size_t)
    raise RuntimeError("fusegrad: cannot find where this Python keeps tuple items or array data")


_PROBE = np.empty(3)
DATA_OFFSET = _offset_of(_PROBE.ctypes.data, _PROBE)
ITEMS_OFFSET = _offset_of(id(_PROBE), (_PROBE,))
del _PROBE


def data_address(a: np.ndarray) -> int:
    """The address of ``a``'s first element (0.15 us; ``a.ctypes.data``: 0.9)."""
    return ctypes.c_void_p.from_address(id(a) + DATA_OFFSET).value
