"""Autocast's state: per device type, whether autocast is on and the dtype its
lower-precision ops run in; whether casts of weights are cached, the cache,
and how deep autocast regions nest. Thread-local, as in PyTorch (and as grad
mode). ``fusegrad.autocast`` sets it (amp/autocast_mode.py); the ops read it
(autocast_policy.py); a jit function's cache key holds it (``key``)."""

from __future__ import annotations

import threading

from ..ir import dtypes
from .devices import device

# The device types PyTorch has autocast for (its is_autocast_available) that a
# device name here can spell, with PyTorch's default dtype for each
# (at::autocast's autocast_dtype). Only the CPU's changes what ops compute:
# there is no other device.
DEFAULT_DTYPES = {
    "cpu": dtypes.bfloat16,
    "cuda": dtypes.float16,
    "xpu": dtypes.float16,
    "hpu": dtypes.bfloat16,
    "xla": dtypes.bfloat16,
    "mps": dtypes.float16,
}


class _AutocastState(threading.local):
    def __init__(self):
        self.enabled = frozenset()  # the device types with autocast on
        self.dtypes = dict(DEFAULT_DTYPES)
        self.cache_enabled = True
        self.nesting = 0  # autocast regions entered and not left
        # (weight's id, trace) -> the weight's cast and what it was made of:
        # see autocast_policy.cached_cast
        self.cache: dict = {}


state = _AutocastState()


def device_type(name: str) -> str:
    """The device type a name spells (``"cuda:0"``: cuda), as PyTorch parses it."""
    return device(name).type


def is_available(device_type_name: str) -> bool:
    return device_type(device_type_name) in DEFAULT_DTYPES


def _autocast_device(name: str) -> str:
    kind = device_type(name)
    if kind not in DEFAULT_DTYPES:
        raise RuntimeError(
            "unknown device type for autocast in get_autocast_dispatch_key_from_device_type"
        )
    return kind


def is_enabled(device_type_name: str) -> bool:
    return _autocast_device(device_type_name) in state.enabled


def set_enabled(device_type_name: str, enabled: bool) -> None:
    kind = _autocast_device(device_type_name)
    state.enabled = state.enabled | {kind} if enabled else state.enabled - {kind}


def get_dtype(device_type_name: str):
    return state.dtypes[_autocast_device(device_type_name)]


def set_dtype(device_type_name: str, dtype) -> None:
    state.dtypes[_autocast_device(device_type_name)] = dtypes.as_dtype(dtype)


def cpu_dtype():
    """The dtype the CPU's lower-precision ops run in, None with autocast off
    on the CPU: what the ops ask on every call."""
    return state.dtypes["cpu"] if "cpu" in state.enabled else None


def is_cache_enabled() -> bool:
    return state.cache_enabled


def set_cache_enabled(enabled: bool) -> None:
    state.cache_enabled = bool(enabled)


def weight_casts() -> dict:
    """The cache of weights' casts (autocast_policy.cached_cast)."""
    return state.cache


def clear_cache() -> None:
    state.cache.clear()


def increment_nesting() -> int:
    state.nesting += 1
    return state.nesting


def decrement_nesting() -> int:
    state.nesting -= 1
    return state.nesting


def key():
    """What of the state a traced function's program depends on (the casts
    it recorded, what its code read): None with autocast off everywhere,
    else the devices it is on for, their dtypes and whether casts are cached."""
    if not state.enabled:
        return None
    on = tuple(sorted((kind, state.dtypes[kind].name) for kind in state.enabled))
    return on, state.cache_enabled


class suspended:
    """Autocast off on every device inside, as PyTorch's autocast kernels turn
    it off around the op they run (ExcludeDispatchKeyGuard), so the ops an
    op is made of are not cast again."""

    __slots__ = ("saved",)

    def __enter__(self):
        self.saved = state.enabled
        state.enabled = frozenset()

    def __exit__(self, *exc):
        state.enabled = self.saved
        return False
