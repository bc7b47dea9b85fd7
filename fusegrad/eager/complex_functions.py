"""fusegrad's functions of complex numbers (``view_as_real``,
``view_as_complex``, ``polar``, ``complex``, ``real``, ``imag``, ``conj``,
...), and how the public functions that have a complex implementation take
complex tensors there: ``fusegrad.<op>`` dispatches on its arguments
(``functions_taking_complex``), the real op staying what ``Tensor``'s
methods and fusegrad's own code call.
"""

from __future__ import annotations

import functools

from ..ir import dtypes
from ..ir import primitives as P
from ..ir.shapes import normalize_dim
from . import ops
from .autocast_policy import autocasts
from .complex_tensor import (
    COMPLEX_NUMBERS,
    ComplexTensor,
    _as_dtype,
    _complex_like,
    _joined,
    _label,
    _no_complex32,
    _pair_of,
    add,
    binary,
    div,
    matmul,
    outer,
    refusal,
    result_dtype,
    sub,
    where,
)
from .ops.arguments import as_tensor_arg
from .tensor import Tensor, recording


def _joined_along(tensors, dim, join, what: str):
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise RuntimeError(f"{what}() expects a non-empty TensorList")
    parts = result_dtype(*tensors).to_real()
    pairs = [_pair_of(t, parts) for t in tensors]
    return ComplexTensor._of(join(pairs, dim))


def cat(tensors, dim=0):
    ndim = tensors[0].ndim if tensors else 0
    if ndim == 0:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    return _joined_along(tensors, normalize_dim(dim, ndim), ops.cat, "cat")


def stack(tensors, dim=0):
    ndim = tensors[0].ndim if tensors else 0
    return _joined_along(tensors, normalize_dim(dim, ndim + 1), ops.stack, "stack")


# ----------------------------------------------------- public functions


def is_complex(input) -> bool:
    return isinstance(as_tensor_arg(input), ComplexTensor)


def view_as_real(input) -> Tensor:
    """The pair: a view, so writes to either show in the other."""
    if not isinstance(input, ComplexTensor):
        raise RuntimeError("view_as_real is only supported for complex tensors")
    pair = input._pair
    return _label(P.reshape(pair, shape=pair.shape), "ViewAsRealBackward0")


@autocasts("view_as_complex")
def view_as_complex(input) -> ComplexTensor:
    """The complex tensor whose pair is a view of ``input``, a float tensor
    with a last dimension of 2 holding each element's parts. PyTorch's
    layout checks (its parts adjacent in memory) are eager mode's: a
    compiled program computes values, and never shares this memory."""
    input = as_tensor_arg(input)
    if not input._dtype.is_floating_point or input._dtype is dtypes.bfloat16:
        raise RuntimeError(
            "view_as_complex is only supported for half, float and double tensors, but got a "
            f"tensor of scalar type: {input._dtype.scalar_name}"
        )
    if input._dtype is dtypes.float16:
        _no_complex32()
    if input.ndim == 0 or input.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if recording.trace is None:
        _check_parts_adjacent(input)
    return ComplexTensor._of(_label(P.reshape(input, shape=input.shape), "ViewAsComplexBackward0"))


def _check_parts_adjacent(input: Tensor) -> None:
    strides = input.stride()
    if strides[-1] != 1:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % 2 for s in strides[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    if input.storage_offset() % 2:
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")


def _check_parts_pair(first: Tensor, second: Tensor) -> None:
    """PyTorch's checks of ``complex``'s and ``polar``'s real arguments."""
    floats = (dtypes.float16, dtypes.float32, dtypes.float64)
    if first._dtype not in floats or second._dtype not in floats:
        raise RuntimeError(
            "Expected both inputs to be Half, Float or Double tensors but got "
            f"{first._dtype.scalar_name} and {second._dtype.scalar_name}"
        )
    if first._dtype is not second._dtype:
        raise RuntimeError(
            f"Expected object of scalar type {first._dtype.scalar_name} but got scalar type "
            f"{second._dtype.scalar_name} for second argument"
        )
    if first._dtype is dtypes.float16:
        _no_complex32()


@autocasts("polar")
def polar(abs, angle) -> ComplexTensor:
    """The complex numbers of these magnitudes and angles."""
    abs, angle = as_tensor_arg(abs, "abs"), as_tensor_arg(angle, "angle")
    _check_parts_pair(abs, angle)
    return _label(_joined(abs * angle.cos(), abs * angle.sin()), "PolarBackward0")


def complex_of_parts(real, imag) -> ComplexTensor:
    """``fusegrad.complex``: the complex numbers of these real and imaginary parts."""
    real, imag = as_tensor_arg(real, "real"), as_tensor_arg(imag, "imag")
    _check_parts_pair(real, imag)
    return _label(_joined(real, imag), "ComplexBackward0")


def real(input) -> Tensor:
    input = as_tensor_arg(input)
    return input.real if isinstance(input, ComplexTensor) else input


def imag(input) -> Tensor:
    input = as_tensor_arg(input)
    if not isinstance(input, ComplexTensor):
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return input.imag


def conj(input) -> Tensor:
    input = as_tensor_arg(input)
    return input.conj() if isinstance(input, ComplexTensor) else input


def is_conj(input) -> bool:
    as_tensor_arg(input)
    return False


def adjoint(input) -> Tensor:
    return as_tensor_arg(input).mH


def to_complex(input, dtype) -> ComplexTensor:
    """A real tensor converted to complex ``dtype``, its imaginary parts 0."""
    return _complex_like(input, dtype.to_real())


# ------------------------------------------------------------- dispatch


def _by_method(name: str):
    def op(input, *args, **kwargs):
        if not isinstance(input, ComplexTensor):
            raise refusal(f"{name} with a complex argument after a real input")
        return getattr(input, name)(*args, **kwargs)

    return op


_METHOD_FUNCTIONS = (
    "abs absolute angle sgn exp log sqrt reciprocal square pow neg negative positive "
    "isnan isinf isfinite norm sum mean clone reshape flatten ravel unflatten squeeze "
    "unsqueeze transpose swapaxes swapdims t permute movedim moveaxis flip roll narrow "
    "select chunk split unbind broadcast_to resolve_conj resolve_neg"
).split()
_FUNCTIONS = {
    **{name: _by_method(name) for name in _METHOD_FUNCTIONS},
    "detach": lambda input: input.detach(),
    "real": real,
    "is_complex": is_complex,
    "add": add,
    "sub": sub,
    "subtract": sub,
    "mul": functools.partial(binary, "mul"),
    "multiply": functools.partial(binary, "mul"),
    "div": div,
    "divide": div,
    "true_divide": functools.partial(binary, "div"),
    "eq": functools.partial(binary, "eq"),
    "ne": functools.partial(binary, "ne"),
    "not_equal": functools.partial(binary, "ne"),
    "matmul": matmul,
    "mm": matmul,
    "bmm": matmul,
    "outer": outer,
    "where": where,
    "cat": cat,
    "concat": cat,
    "concatenate": cat,
    "stack": stack,
}


def _mentions_complex(values) -> bool:
    """Whether a complex tensor or number is among ``values`` (or in a list
    or tuple among them: cat's). Every call of a dispatching function asks:
    the common cases first."""
    for v in values:
        kind = v.__class__
        if kind is Tensor:
            continue
        if kind is list or kind is tuple:
            for t in v:
                if t.__class__ is ComplexTensor:
                    return True
        elif kind is ComplexTensor or isinstance(v, COMPLEX_NUMBERS):
            return True
    return False


def _dispatching(real_op, complex_op):
    @functools.wraps(real_op)
    def op(*args, **kwargs):
        if _mentions_complex(args) or (kwargs and _mentions_complex(kwargs.values())):
            return complex_op(*args, **kwargs)
        return real_op(*args, **kwargs)

    return op


def functions_taking_complex(functions: dict) -> dict:
    """The public functions (``functions``: name -> op) that have a complex
    implementation, each taking complex arguments to it and others to the
    real op."""
    return {name: _dispatching(functions[name], op) for name, op in _FUNCTIONS.items()}


def converting_to_complex(to):
    """``Tensor.to`` of real tensors, converting them to a complex dtype
    too (imaginary parts 0)."""

    @functools.wraps(to)
    def to_any(input, *args, **kwargs):
        target = kwargs.get("dtype")
        for a in args:
            if isinstance(a, (dtypes.DType, Tensor)) or a is complex:
                target = a.dtype if isinstance(a, Tensor) else a
        if target is complex or (isinstance(target, dtypes.DType) and target.is_complex):
            return to_complex(input, _as_dtype(target))
        return to(input, *args, **kwargs)

    return to_any
