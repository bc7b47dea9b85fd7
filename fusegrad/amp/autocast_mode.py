"""``fusegrad.autocast`` (``torch.amp.autocast``): regions where ops run in
the dtype autocast's policy gives them (eager/autocast_policy.py), and the
functions that read and set autocast's state, with PyTorch's arguments and
messages. On the CPU, ``bfloat16`` (the default) or ``float16``; CUDA is
never available here, so ``autocast("cuda")`` warns and is off, as in a
CPU-only PyTorch build."""

from __future__ import annotations

import functools
import warnings

from .. import cuda
from ..eager import autocast_state
from ..eager.tensor import Tensor
from ..ir import dtypes

# the dtypes PyTorch's autocast takes on the CPU
_CPU_DTYPES = (dtypes.bfloat16, dtypes.float16)


def is_autocast_available(device_type: str) -> bool:
    """Whether autocast exists for ``device_type`` (``"cpu"``, ``"cuda"``, ...),
    whatever devices this machine has."""
    return autocast_state.is_available(device_type)


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    """Whether autocast is on for ``device_type``; without one, for CUDA (as
    PyTorch's deprecated form without an argument)."""
    return autocast_state.is_enabled(device_type)


def set_autocast_enabled(*args) -> None:
    """``set_autocast_enabled(device_type, enabled)``, or the deprecated
    ``set_autocast_enabled(enabled)`` for CUDA."""
    device_type, enabled = args if len(args) == 2 else ("cuda", *args)
    autocast_state.set_enabled(device_type, enabled)


def get_autocast_dtype(device_type: str):
    return autocast_state.get_dtype(device_type)


def set_autocast_dtype(device_type: str, dtype) -> None:
    autocast_state.set_dtype(device_type, dtype)


def is_autocast_cache_enabled() -> bool:
    return autocast_state.is_cache_enabled()


def set_autocast_cache_enabled(enabled: bool) -> None:
    autocast_state.set_cache_enabled(enabled)


def clear_autocast_cache() -> None:
    autocast_state.clear_cache()


def autocast_increment_nesting() -> int:
    return autocast_state.increment_nesting()


def autocast_decrement_nesting() -> int:
    return autocast_state.decrement_nesting()


def _deprecated_getter(name: str, replacement: str, read):
    def getter():
        warnings.warn(
            f"torch.{name}() is deprecated. Please use torch.{replacement} instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        return read()

    getter.__name__ = name
    return getter


is_autocast_cpu_enabled = _deprecated_getter(
    "is_autocast_cpu_enabled", "is_autocast_enabled('cpu')", lambda: is_autocast_enabled("cpu")
)
get_autocast_cpu_dtype = _deprecated_getter(
    "get_autocast_cpu_dtype", "get_autocast_dtype('cpu')", lambda: get_autocast_dtype("cpu")
)
get_autocast_gpu_dtype = _deprecated_getter(
    "get_autocast_gpu_dtype", "get_autocast_dtype('cuda')", lambda: get_autocast_dtype("cuda")
)


def autocast_decorator(autocast_instance, func):
    @functools.wraps(func)
    def decorate_autocast(*args, **kwargs):
        with autocast_instance:
            return func(*args, **kwargs)

    return decorate_autocast


class autocast:
    """A context manager and decorator: inside, ops run in mixed precision.

    On the CPU, products, convolutions and attention run in ``dtype``
    (bfloat16 by default), losses and linear algebra in float32, and other
    ops in their inputs' dtype; gradients reach float32 parameters in
    float32. ``cache_enabled``: whether a float32 weight's cast is made once
    per region.

    >>> import fusegrad as torch
    >>> with torch.autocast("cpu", dtype=torch.bfloat16):
    ...     (torch.ones(2, 3) @ torch.ones(3, 2)).dtype
    fusegrad.bfloat16
    """

    def __init__(self, device_type: str, dtype=None, enabled: bool = True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device = device_type
        if not is_autocast_available(self.device):
            raise RuntimeError(
                f"User specified an unsupported autocast device_type '{self.device}'"
            )
        self.fast_dtype = get_autocast_dtype(self.device) if dtype is None else dtype
        self._cache_enabled = (
            is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        )
        if enabled and self.device == "cuda" and not cuda.is_available():
            warnings.warn(
                "User provided device_type of 'cuda', but CUDA is not available. Disabling",
                stacklevel=2,
            )
            enabled = False
        if self.device == "cpu" and enabled and self.fast_dtype not in _CPU_DTYPES:
            warnings.warn(
                "In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                "CPU Autocast only supports dtype of "
                + ", ".join(str(d) for d in _CPU_DTYPES)
                + " currently.",
                stacklevel=2,
            )
            enabled = False
        self._enabled = enabled

    def __enter__(self):
        self.prev_cache_enabled = is_autocast_cache_enabled()
        self.prev = is_autocast_enabled(self.device)
        self.prev_fastdtype = get_autocast_dtype(self.device)
        set_autocast_enabled(self.device, self._enabled)
        set_autocast_dtype(self.device, self.fast_dtype)
        autocast_increment_nesting()
        set_autocast_cache_enabled(self._cache_enabled)

    def __exit__(self, exc_type, exc_val, exc_tb):
        # the casts cached for weights go when the outermost region ends
        if autocast_decrement_nesting() == 0:
            clear_autocast_cache()
        set_autocast_enabled(self.device, self.prev)
        set_autocast_dtype(self.device, self.prev_fastdtype)
        set_autocast_cache_enabled(self.prev_cache_enabled)
        return False

    def __call__(self, func):
        return autocast_decorator(self, func)


def _cast(value, device_type: str, dtype):
    """Tensors in ``value`` (and in its lists, tuples and dicts) that
    autocast would cast, cast to ``dtype``."""
    if isinstance(value, Tensor):
        eligible = value.is_floating_point() and value.dtype is not dtypes.float64
        return value.to(dtype) if eligible and device_type == "cpu" else value
    if isinstance(value, dict):
        return {
            _cast(k, device_type, dtype): _cast(v, device_type, dtype) for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, device_type, dtype) for v in value)
    return value


def custom_fwd(fwd=None, *, device_type: str, cast_inputs=None):
    """Decorator for a custom autograd Function's ``forward``: with
    ``cast_inputs``, inside an autocast region, its floating tensor
    arguments are cast to ``cast_inputs`` and it runs with autocast off;
    else it runs under the region's autocast (and ``custom_bwd`` runs the
    backward under the same)."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        args[0]._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            args[0]._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        autocast_context = is_autocast_enabled(device_type)
        args[0]._fwd_used_autocast = False
        if autocast_context:
            with autocast(device_type=device_type, enabled=False):
                return fwd(
                    *_cast(args, device_type, cast_inputs),
                    **_cast(kwargs, device_type, cast_inputs),
                )
        return fwd(*args, **kwargs)

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type: str):
    """Decorator for a custom autograd Function's ``backward``: it runs under
    the autocast state its ``forward`` (decorated with ``custom_fwd``) saw."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        with autocast(
            device_type=device_type, enabled=args[0]._fwd_used_autocast, dtype=args[0]._dtype
        ):
            return bwd(*args, **kwargs)

    return decorate_bwd
