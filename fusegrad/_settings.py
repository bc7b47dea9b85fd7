"""PyTorch's process-wide settings: threads, float32 matrix-product
precision, deterministic algorithms and the default dtype, with what each
means for fusegrad.

* ``set_num_threads(n)``: kernels and routines split across ``n`` cores,
  and numpy's OpenBLAS runs on ``n`` threads (``FUSEGRAD_NUM_THREADS`` is
  the same budget, set from the environment). A program's kernels split as
  they did when it first ran for their layouts: set it before running
  compiled code, as scripts do.
* ``set_num_interop_threads(n)``: fusegrad runs one operation after
  another, so there are no inter-op threads; the number is kept, once, as
  PyTorch keeps it.
* ``set_float32_matmul_precision``: PyTorch lets a product compute in lower
  precision than "highest" where a faster kernel exists; fusegrad has none,
  so every float32 product is computed in full precision whatever the setting.
* ``use_deterministic_algorithms(True)``: fusegrad's operations give the
  same bits every run for a given thread count; with
  ``FUSEGRAD_NUM_THREADS=auto`` OpenBLAS's thread count follows the
  machine's load, which changes a product's last bits, so that stops.
* ``set_default_dtype(d)``: the dtype of floating tensors made without one
  (creation functions, layers' parameters, ``Tensor(...)``) and of Python
  floats in type promotion: float32 (the default), float64, float16 or
  bfloat16. Process-wide, as in PyTorch; a jit function's cache key holds
  it, so a program traced under another default is not reused.
"""

from __future__ import annotations

import warnings

from .eager import tensor_types
from .ir import dtypes
from .runtime import threads

__all__ = [
    "are_deterministic_algorithms_enabled",
    "get_default_dtype",
    "get_deterministic_debug_mode",
    "get_float32_matmul_precision",
    "get_num_interop_threads",
    "get_num_threads",
    "is_deterministic_algorithms_warn_only_enabled",
    "set_default_dtype",
    "set_default_tensor_type",
    "set_deterministic_debug_mode",
    "set_float32_matmul_precision",
    "set_num_interop_threads",
    "set_num_threads",
    "use_deterministic_algorithms",
]


class _Settings:
    matmul_precision = "highest"
    interop_threads = None  # set once by set_num_interop_threads
    deterministic = False
    warn_only = False
    warned_of_tensor_type = False  # set_default_tensor_type's deprecation, said once


_settings = _Settings()

# ----------------------------------------------------------------------- threads


def _positive_int(value, caller: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RuntimeError(f"{caller} expects an int, but got {type(value).__name__}")
    if value <= 0:
        raise RuntimeError(f"{caller} expects a positive integer")
    return value


def set_num_threads(int) -> None:
    """The cores fusegrad's kernels split across, and OpenBLAS's threads."""
    threads.set_count(_positive_int(int, "set_num_threads"))


def get_num_threads() -> int:
    return threads.count()


def set_num_interop_threads(int) -> None:
    count = _positive_int(int, "set_num_interop_threads")
    if _settings.interop_threads is not None:
        raise RuntimeError(
            "Error: cannot set number of interop threads after parallel work has started or "
            "set_num_interop_threads called"
        )
    _settings.interop_threads = count


def get_num_interop_threads() -> int:
    return _settings.interop_threads or threads.count()


# --------------------------------------------------------------------- precision

_PRECISIONS = ("highest", "high", "medium")


def set_float32_matmul_precision(precision: str) -> None:
    """Kept and read back; every precision computes as "highest" here, which
    PyTorch's contract allows (a lower one is used only where a faster
    kernel exists)."""
    if not isinstance(precision, str):
        raise RuntimeError(
            f"set_float32_matmul_precision expects a str, but got {type(precision).__name__}"
        )
    if precision not in _PRECISIONS:
        warnings.warn(  # PyTorch's words, as it spells them
            f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
            "setFloat32MatmulPrecision call has no effect.",
            stacklevel=2,
        )
        return
    _settings.matmul_precision = precision


def get_float32_matmul_precision() -> str:
    return _settings.matmul_precision


# ------------------------------------------------------------------- determinism

_DEBUG_MODES = ("default", "warn", "error")


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Every operation of fusegrad is deterministic already; this also keeps
    OpenBLAS's thread count from following the load (see the module's doc)."""
    if not isinstance(mode, bool):
        raise TypeError(
            "_set_deterministic_algorithms(): argument 'mode' (position 1) must be bool, "
            f"not {type(mode).__name__}"
        )
    _settings.deterministic = mode
    _settings.warn_only = mode and warn_only
    threads.hold_blas_steady(mode)


def are_deterministic_algorithms_enabled() -> bool:
    return _settings.deterministic


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _settings.warn_only


def set_deterministic_debug_mode(debug_mode) -> None:
    """0 or "default": off; 1 or "warn": on, warning only; 2 or "error": on."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(
                "invalid value of debug_mode, expected one of `default`, `warn`, `error`, "
                f"but got {debug_mode}"
            )
        debug_mode = _DEBUG_MODES.index(debug_mode)
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(
            f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}"
        )
    use_deterministic_algorithms(debug_mode > 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode() -> int:
    if not _settings.deterministic:
        return 0
    return 1 if _settings.warn_only else 2


# ------------------------------------------------------------------ default dtype


def get_default_dtype():
    """The dtype of floating tensors made without one: float32 unless
    ``set_default_dtype`` said otherwise."""
    return dtypes.default_float()


def set_default_dtype(d) -> None:
    """Makes ``d`` (float32, float64, float16 or bfloat16) the dtype of
    floating tensors made without one and of Python floats in promotion."""
    if not isinstance(d, dtypes.DType):
        raise TypeError(
            "invalid dtype object: only floating-point types are supported as the default type"
        )
    if not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    dtypes.DEFAULT_FOR_CATEGORY[dtypes.FLOATING] = d


def set_default_tensor_type(t) -> None:
    """Deprecated in PyTorch: the default dtype from a tensor type
    (``FloatTensor``) or its name (``"torch.FloatTensor"``); a CUDA type
    raises as on PyTorch's CPU build."""
    if not _settings.warned_of_tensor_type:
        _settings.warned_of_tensor_type = True
        warnings.warn(
            "torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
            "torch.set_default_dtype() and torch.set_default_device() as alternatives.",
            stacklevel=2,
        )
    tensor_type = _tensor_type(t) if isinstance(t, str) else t
    if isinstance(tensor_type, tensor_types.CudaTensorType):
        tensor_type()  # raises: no CUDA
    if not isinstance(tensor_type, tensor_types.LegacyTensorType):
        raise TypeError(
            "invalid type object: only floating-point types are supported as the default type"
        )
    set_default_dtype(tensor_type.dtype)


def _tensor_type(name: str):
    """The type ``"torch.FloatTensor"`` or ``"torch.cuda.FloatTensor"`` names
    (``fusegrad.`` as well)."""
    module, _, type_name = name.rpartition(".")
    package, _, submodule = module.partition(".")
    if package not in ("torch", "fusegrad") or submodule not in ("", "cuda"):
        raise ModuleNotFoundError(f"No module named {module or name!r}")
    found = (tensor_types.cuda_tensor_types() if submodule else vars(tensor_types)).get(type_name)
    if not isinstance(found, (tensor_types.LegacyTensorType, tensor_types.CudaTensorType)):
        raise AttributeError(f"module {module!r} has no attribute {type_name!r}")
    return found
