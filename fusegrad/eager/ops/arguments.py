"""The arguments of ops, handled as PyTorch handles them: tensors checked,
tensors and Python numbers promoted to one dtype, dims given as one int or a
sequence; and the refusal to trace an op whose result's shape is a value."""

from __future__ import annotations

import operator

import numpy as np

from ...ir import dtypes
from ...ir import primitives as P
from ...ir.shapes import normalize_dim
from ..tensor import NumberOperand, Tensor, constant, constant_array, recording

# PyTorch's messages name some dtypes by their C++ types
C_TYPE_NAMES = {
    "float32": "float",
    "float64": "double",
    "int64": "long int",
    "int32": "int",
    "int16": "short int",
    "int8": "signed char",
    "uint8": "unsigned char",
    "bool": "bool",
    "float16": "c10::Half",
    "bfloat16": "c10::BFloat16",
}


def as_tensor_arg(value, name: str = "input") -> Tensor:
    if isinstance(value, Tensor):
        return value
    raise TypeError(f"{name} must be a Tensor, not {type(value).__name__}")


# Python and numpy scalars: operands that promote by their category alone
_NUMBERS = (bool, int, float, np.bool_, np.integer, np.floating, NumberOperand)


def _check_operand(value):
    if isinstance(value, (Tensor, *_NUMBERS)):
        return value
    raise TypeError(
        f"unsupported operand type: {type(value).__name__} (expected a Tensor or a Python number)"
    )


def _cast(value, dtype):
    """A tensor converted to ``dtype``; a scalar as a constant of ``dtype``."""
    if not isinstance(value, Tensor):
        return constant(value, dtype)
    if value._dtype is not dtype:
        return P.convert(value, dtype=dtype)
    return value


def _to_float(x: Tensor) -> Tensor:
    return x if x._dtype.is_floating_point else P.convert(x, dtype=dtypes.default_float())


def _floating_pair(a, b):
    """Two operands (tensors or numbers) promoted to one floating dtype."""
    a, b = _check_operand(a), _check_operand(b)
    dtype = dtypes.result_type(a, b)
    dtype = dtype if dtype.is_floating_point else dtypes.default_float()
    return _cast(a, dtype), _cast(b, dtype)


def _promote_all(tensors, what):
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(
            f"{what}() argument 'tensors' must be a tuple or list of Tensors, not "
            f"{type(tensors).__name__}"
        )
    if not tensors:
        raise RuntimeError(f"{what}() expects a non-empty TensorList")
    for k, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(
                f"expected Tensor as element {k} in argument 0, but got {type(t).__name__}"
            )
    dtype = tensors[0]._dtype
    for t in tensors[1:]:
        dtype = dtypes.promote(dtype, t._dtype)
    return [_cast(t, dtype) for t in tensors]


def _short(dtype) -> str:
    return dtype.scalar_name


def operator_operand(value):
    """The right operand of ``tensor <op> value``, or None for one the operators
    do not take. PyTorch takes a 0-d numpy array there too, by handing the
    operation to numpy (numpy's promotion, no gradient); here it is the 0-d
    tensor holding the array (``as_tensor(array)``): PyTorch's promotion,
    and the tensor operand gets its gradient."""
    if isinstance(value, (Tensor, *_NUMBERS)):
        return value
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return constant_array(value, dtypes.from_numpy_dtype(value.dtype))
    return None


def binary_operator(prim, a, b, floating=False):
    """``a <op> b`` as Python operators see it: NotImplemented for a foreign
    operand, so Python raises its usual "unsupported operand type(s)" error."""
    if b.__class__ is not Tensor:
        b = operator_operand(b)
        if b is None:
            return NotImplemented
    return _binary(prim, a, b, floating)


def _binary(prim, a, b, floating=False):
    if a.__class__ is Tensor and (not floating or a._dtype.category == dtypes.FLOATING):
        # the common cases, where promotion has nothing to do
        if b.__class__ is Tensor and a._dtype is b._dtype:
            return prim(a, b)
        if (b.__class__ is float and a._dtype.category == dtypes.FLOATING) or (
            b.__class__ is int and a._dtype.category != dtypes.BOOL
        ):
            return prim(a, constant(b, a._dtype))
    a, b = _check_operand(a), _check_operand(b)
    dtype = dtypes.result_type(a, b)
    if floating and not dtype.is_floating_point:
        dtype = dtypes.default_float()
    return prim(_cast(a, dtype), _cast(b, dtype))


def _ints(value) -> tuple:
    """An int argument that may also be a sequence of ints, as a tuple."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _dims_arg(dims, ndim: int, what: str) -> tuple:
    dims = _ints(dims)
    axes = tuple(normalize_dim(operator.index(d), ndim) for d in dims)
    if len(set(axes)) != len(axes):
        raise RuntimeError(
            f"dims has duplicates, original {what} dims size={len(axes)}, but unique "
            f"{what} dims size={len(set(axes))}"
        )
    return axes


def _eager_only(what, why="its result's shape depends on the input's values"):
    if recording.trace is not None:
        recording.trace.unsupported(f"{what} ({why})")
