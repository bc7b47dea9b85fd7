"""Elementwise ops: arithmetic, math functions, clamping and choosing
(where), comparisons, logical and bitwise ops, and the ops of the
primitives declared ``public`` (exp, sin, mul, eq, ...) with their numpy
names (arcsin, multiply, ...)."""

from __future__ import annotations

import builtins
import functools
import math
import operator

from ...ir import dtypes
from ...ir import primitives as P
from ..tensor import Tensor, constant
from .arguments import (
    C_TYPE_NAMES,
    _binary,
    _cast,
    _check_operand,
    _floating_pair,
    _short,
    _to_float,
    as_tensor_arg,
)
from .composite import _named
from .copies import clone
from .index_tensors import nonzero
from .registry import DEFINED, public

# ------------------------------------------------------------------ arithmetic


@public(inplace=True, out=True)
def add(input, other, *, alpha=1):
    return _binary(P.add, input, other if alpha == 1 else other * alpha)


@public(inplace=True, out=True)
def sub(input, other, *, alpha=1):
    if (
        isinstance(input, Tensor)
        and input._dtype is dtypes.bool_
        and isinstance(other, Tensor)
        and other._dtype is dtypes.bool_
    ):
        raise RuntimeError(
            "Subtraction, the `-` operator, with two bool tensors is not "
            "supported. Use the `^` or `logical_xor()` operator instead."
        )
    return _binary(P.sub, input, other if alpha == 1 else other * alpha)


subtract = public(sub, name="subtract")


@_named("RsubBackward1")
def rsub(input, other):
    return _binary(P.sub, other, input)


@public(inplace=True, out=True)
def div(input, other, *, rounding_mode=None):
    if rounding_mode is None:
        return _binary(P.div, input, other, floating=True)
    if rounding_mode == "trunc":
        return _binary(P.trunc_divide, input, other)
    if rounding_mode == "floor":
        out = _binary(P.floor_divide, input, other)
        if out.grad_fn is not None:  # PyTorch's node of a division with a rounding mode
            out.grad_fn.label = "DivBackward2"
        return out
    raise RuntimeError(
        "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
        f"'{rounding_mode}'"
    )


divide = public(div, name="divide", out=True)
true_divide = public(lambda input, other: div(input, other), name="true_divide", out=True)


@public(inplace=True, out=True)
@_named(
    lambda input, exponent: (
        "PowBackward0"
        if not isinstance(exponent, Tensor)
        else ("PowBackward1" if isinstance(input, Tensor) else "PowBackward2")
    )
)
def pow(input, exponent):
    return _binary(P.pow_, input, exponent)


@public(inplace=True)
def float_power(input, exponent):
    """input ** exponent in float64."""
    base = _cast(_check_operand(input), dtypes.float64)
    return pow(
        base, _cast(exponent, dtypes.float64) if isinstance(exponent, Tensor) else float(exponent)
    )


@public(inplace=True, out=True)
def neg(input):
    input = as_tensor_arg(input)
    if input._dtype is dtypes.bool_:
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If "
            "you are trying to invert a mask, use the `~` or `logical_not()` "
            "operator instead."
        )
    return P.neg(input)


negative = public(neg, name="negative", out=True)


@public(inplace=True, out=True)
def abs(input):
    return P.abs_(as_tensor_arg(input))


absolute = public(abs, name="absolute", inplace=True)


@public(inplace=True, out=True)
def sign(input):
    return P.sign(as_tensor_arg(input))


@public(inplace=True, out=True)
@_named(
    lambda input, other: "CopysignBackward0" if isinstance(other, Tensor) else "CopysignBackward1"
)
def copysign(input, other):
    """The magnitude of ``input`` with the sign of ``other`` (-0.0's too)."""
    magnitude, sign = _floating_pair(input, other)
    flip = P.where(signbit(sign), constant(-1.0, sign._dtype), constant(1.0, sign._dtype))
    out = P.abs_(magnitude) * flip
    if sign._requires_grad:  # PyTorch's gradient in ``other`` is zeros, not none
        out = P.where(constant(False, dtypes.bool_), sign, out)
    return out


@public(inplace=True, out=True)
def round(input, *, decimals=0):
    """To the nearest integer, halves to even; with ``decimals``, to that
    many decimal places (left of the point when negative)."""
    input = as_tensor_arg(input)
    return P.round_(input) if decimals == 0 else _round_decimals(input, int(decimals))


@_named("RoundBackward1")
def _round_decimals(input, decimals: int):
    """As PyTorch's kernel: scaled by a power of ten in the tensor's dtype
    (float32 for float16 and bfloat16, rounded once), rounded, scaled back."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"round_cpu\" not implemented for '{_short(input.dtype)}'")
    scale = 10.0 ** builtins.abs(decimals)
    if decimals > 0:
        return P.round_(input * scale) / scale
    return P.round_(input / scale) * scale


@public(inplace=True)
def sgn(input):
    out = sign(input)
    if out.grad_fn is not None:  # a new node: the label can't land on an input's
        out.grad_fn.label = "SgnBackward0"
    return out


@public
def positive(input):
    return as_tensor_arg(input)


@public(inplace=True, out=True)
def square(input):
    return pow(as_tensor_arg(input), 2)


@public(inplace=True, out=True)
@_named("ReciprocalBackward0")
def reciprocal(input):
    return div(1.0, as_tensor_arg(input))


@public(inplace=True, out=True)
@_named("RsqrtBackward0")
def rsqrt(input):
    return 1.0 / P.sqrt(_to_float(as_tensor_arg(input)))


@public(inplace=True)
@_named("FracBackward0")
def frac(input):
    input = as_tensor_arg(input)
    return input - P.trunc(input)


@public(inplace=True)
def ldexp(input, other):
    """input * 2 ** other."""
    input = _to_float(as_tensor_arg(input))
    return input * P.exp2(_cast(as_tensor_arg(other, "other"), input._dtype))


@public(inplace=True)
@_named("XlogyBackward0")
def xlogy(input, other):
    x, y = _floating_pair(input, other)
    # xlogy(0, y) is 0 for every y but NaN; log sees 1 there when log(y) would
    # make it NaN, so the gradient in x there is 0, as in PyTorch
    defined_as_zero = (x == 0.0) & ((y <= 0.0) | (y == math.inf))
    return x * P.log(P.where(defined_as_zero, 1.0, y))


@public(inplace=True)
@_named("AddcmulBackward0")
def addcmul(input, tensor1, tensor2, *, value=1):
    return input + tensor1 * tensor2 * value if value != 1 else input + tensor1 * tensor2


@public(inplace=True)
@_named("AddcdivBackward0")
def addcdiv(input, tensor1, tensor2, *, value=1):
    return input + tensor1 / tensor2 * value if value != 1 else input + tensor1 / tensor2


@public(inplace=True)
@_named(
    lambda input, end, weight: "LerpBackward1" if isinstance(weight, Tensor) else "LerpBackward0"
)
def lerp(input, end, weight):
    input, end = as_tensor_arg(input), as_tensor_arg(end, "end")
    for name, operand in (("end", end), ("weight", weight)):
        if isinstance(operand, Tensor) and operand._dtype is not input._dtype:
            if name == "end" or operand.ndim:  # a 0-d weight is a number
                raise RuntimeError(
                    f"expected dtype {C_TYPE_NAMES[input._dtype.name]} for `{name}` but got "
                    f"dtype {C_TYPE_NAMES[operand._dtype.name]}"
                )
    step = end - input
    if not isinstance(weight, Tensor):  # PyTorch's two formulas: exact at both ends
        return input + step * weight if builtins.abs(weight) < 0.5 else end - step * (1.0 - weight)
    return P.where(P.abs_(weight) < 0.5, input + step * weight, end - step * (1.0 - weight))


# -------------------------------------------------------- other math functions


@public(inplace=True, out=True)
@_named("TanBackward0")
def tan(input):
    input = _to_float(as_tensor_arg(input))
    return P.sin(input) / P.cos(input)


@public(inplace=True)
def deg2rad(input):
    return _to_float(as_tensor_arg(input)) * (math.pi / 180.0)


@public(inplace=True)
def rad2deg(input):
    return _to_float(as_tensor_arg(input)) * (180.0 / math.pi)


@public(inplace=True)
@_named("LogitBackward0")
def logit(input, eps=None):
    x = _to_float(as_tensor_arg(input))
    if eps is not None:
        x = clamp(x, eps, 1.0 - eps)
    return P.log(x / (1.0 - x))


@public(inplace=True)
@_named("SincBackward0")
def sinc(input):
    y = _to_float(as_tensor_arg(input)) * math.pi
    # near 0, the series 1 - y^2/6 + y^4/120 (its every derivative right at 0);
    # elsewhere sin(y)/y, which then never sees y = 0, nor does its gradient
    small = P.abs_(y) < 1e-3
    squared = y * y
    series = 1.0 - squared / 6.0 * (1.0 - squared / 20.0)
    away = P.where(small, 1.0, y)
    return P.where(small, series, P.sin(away) / away)


@public(method=False)
@_named("PolygammaBackward0")
def polygamma(n, input):
    if not isinstance(n, int) or n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    x = _to_float(as_tensor_arg(input))
    return P.digamma(x) if n == 0 else P.polygamma(x, n=n)


@public
@_named("MvlgammaBackward0")
def mvlgamma(input, p):
    """The log of the multivariate gamma function of dimension p."""
    x = _to_float(as_tensor_arg(input))
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if bool((x._data <= (p - 1) / 2).any()):
        raise RuntimeError(f"All elements must be greater than (p-1)/2, but got {x._data.min()}")
    terms = [P.lgamma(x - k / 2.0) for k in range(p)]
    return functools.reduce(operator.add, terms) + p * (p - 1) / 4.0 * math.log(math.pi)


# ------------------------------------------------------- clamping and choosing


@public(inplace=True, out=True)
@_named("ClampBackward1")
def clamp(input, min=None, max=None):
    input = as_tensor_arg(input)
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    out = input
    if min is not None:
        out = where(out < min, min, out)
    if max is not None:
        out = where(out > max, max, out)
    if input.dtype.is_floating_point:
        # a NaN stays, as PyTorch's, which gives it no derivative (it is not
        # within the bounds), in reverse and forward mode alike
        out = where(isnan(input), input.detach(), out)
    return out


clip = public(clamp, name="clip", inplace=True, out=True)


@public(inplace=True, out=True)
@_named("ClampMinBackward0")
def clamp_min(input, min):
    return clamp(input, min=min)


@public(inplace=True, out=True)
@_named("ClampMaxBackward0")
def clamp_max(input, max):
    return clamp(input, max=max)


@public(out=True)
def maximum(input, other):
    return _binary(P.maximum, as_tensor_arg(input), as_tensor_arg(other, "other"))


@public(out=True)
def minimum(input, other):
    return _binary(P.minimum, as_tensor_arg(input), as_tensor_arg(other, "other"))


@public(inplace=True)
def fmax(input, other):
    """The larger of the two, the other where one is NaN."""
    return _binary(_nan_ignoring(P.maximum), input, other)


@public(inplace=True)
def fmin(input, other):
    return _binary(_nan_ignoring(P.minimum), input, other)


def _nan_ignoring(prim):
    def op(a, b):
        if not a._dtype.is_floating_point:
            return prim(a, b)
        return P.where(isnan(a), b, P.where(isnan(b), a, prim(a, b)))

    return op


@public(method=False, out=True)
def where(condition, input=None, other=None):
    if input is None and other is None:  # where(condition): the positions of its True elements
        return nonzero(condition, as_tuple=True)
    condition = as_tensor_arg(condition, "condition")
    if condition._dtype is not dtypes.bool_:
        raise RuntimeError(
            f"where expected condition to be a boolean tensor, but got a tensor "
            f"with dtype {_short(condition._dtype)}"
        )
    input, other = _check_operand(input), _check_operand(other)
    dtype = dtypes.result_type(input, other)
    return P.where(condition, _cast(input, dtype), _cast(other, dtype))


@public(inplace=True)
def heaviside(input, values):
    input, values = as_tensor_arg(input), as_tensor_arg(values, "values")
    if input._dtype is not values._dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes")
    return P.where(input == 0, values, _cast(input > 0, input._dtype))


# ------------------------------------------------- comparisons and logical ops


def _logical(prim, a, b):
    return prim(
        _cast(a, dtypes.bool_) if isinstance(a, Tensor) else bool(a),
        _cast(b, dtypes.bool_) if isinstance(b, Tensor) else bool(b),
    )


@public(inplace=True, out=True)
def logical_and(input, other):
    return _logical(P.logical_and, input, other)


@public(inplace=True, out=True)
def logical_or(input, other):
    return _logical(P.logical_or, input, other)


@public(inplace=True, out=True)
def logical_xor(input, other):
    return _logical(P.ne, input, other)


@public(inplace=True, out=True)
def logical_not(input):
    return P.logical_not(as_tensor_arg(input))


@public
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    a, b = as_tensor_arg(input), as_tensor_arg(other, "other")
    if a._dtype is not b._dtype:
        raise RuntimeError(f"{a._dtype.scalar_name} did not match {b._dtype.scalar_name}")
    if a._dtype is dtypes.bool_:
        return a == b
    close = a == b
    if a._dtype.is_floating_point:
        finite = isfinite(a) & isfinite(b)
        near = P.abs_(a - b) <= atol + rtol * P.abs_(b)
        close = close | (finite & near)
        if equal_nan:
            close = close | (isnan(a) & isnan(b))
    else:
        close = close | (
            P.abs_(_cast(a - b, dtypes.float64)) <= atol + rtol * P.abs_(_cast(b, dtypes.float64))
        )
    return close


@public
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    # with ops, so that a traced function's decision is a guard on their result
    return bool(isclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan).all())


@public
def equal(input, other) -> bool:
    return input.shape == other.shape and bool((input == other).all())


# --------------------------------------------------------- NaNs and infinities


@public
def isnan(input):
    input = as_tensor_arg(input)
    return input != input


@public
def isinf(input):
    input = as_tensor_arg(input)
    return abs(input) == math.inf


@public
def isfinite(input):
    input = as_tensor_arg(input)
    return logical_not(isnan(input) | isinf(input))


@public
def isposinf(input):
    input = as_tensor_arg(input)
    return input == math.inf if input._dtype.is_floating_point else input != input


@public
def isneginf(input):
    input = as_tensor_arg(input)
    return input == -math.inf if input._dtype.is_floating_point else input != input


@public
def signbit(input):
    input = as_tensor_arg(input)
    if not input._dtype.is_floating_point:
        return input < 0
    # -0 is below nothing, but its reciprocal is -inf
    return (input < 0.0) | ((input == 0.0) & (1.0 / input < 0.0))


@_named("NanToNumBackward0")
def _nan_to_num(input, nan, posinf, neginf):
    out = P.where(input == math.inf, constant(posinf, input._dtype), input)
    out = P.where(input == -math.inf, constant(neginf, input._dtype), out)
    return P.where(isnan(input), constant(nan, input._dtype), out)


@public(inplace=True)
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    input = as_tensor_arg(input)
    if not input._dtype.is_floating_point:
        return clone(input)
    # the tensor's own dtype's bounds, though a float16 one computes in float32
    largest = dtypes.finfo(input._dtype).max
    posinf = largest if posinf is None else posinf
    return _nan_to_num(input, nan, posinf, -largest if neginf is None else neginf)


# --------------------------------------- complex numbers' ops, on real tensors


@public
def real(input):
    return as_tensor_arg(input)  # every tensor here is real


resolve_conj = public(real, name="resolve_conj")
resolve_neg = public(real, name="resolve_neg")


@public
def angle(input):
    """A real number's angle: 0, or pi below 0 (NaN stays NaN)."""
    x = _to_float(as_tensor_arg(input))
    return P.where(x < 0.0, math.pi, P.where(isnan(x), x, 0.0))


@public
def isreal(input):
    input = as_tensor_arg(input)
    return P.logical_not(P.broadcast_to(constant(False, dtypes.bool_), shape=input.shape))


# ----------------------------------------------------------------- bitwise ops


def _bits(prim, name, a, b):
    a, b = _check_operand(a), _check_operand(b)
    dtype = dtypes.result_type(a, b)
    if dtype.category == dtypes.FLOATING:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{dtype.scalar_name}'")
    return prim(_cast(a, dtype), _cast(b, dtype))


@public(inplace=True)
def bitwise_and(input, other):
    return _bits(P.bitwise_and, "bitwise_and", input, other)


@public(inplace=True)
def bitwise_or(input, other):
    return _bits(P.bitwise_or, "bitwise_or", input, other)


@public(inplace=True)
def bitwise_xor(input, other):
    return _bits(P.bitwise_xor, "bitwise_xor", input, other)


@public(inplace=True)
def bitwise_not(input):
    input = as_tensor_arg(input)
    if input._dtype.category == dtypes.FLOATING:
        raise NotImplementedError(
            f"\"bitwise_not_cpu\" not implemented for '{input._dtype.scalar_name}'"
        )
    return P.bitwise_not(input)


@public(inplace=True)
def bitwise_left_shift(input, other):
    return _bits(P.left_shift, "lshift", input, other)


@public(inplace=True)
def bitwise_right_shift(input, other):
    return _bits(P.right_shift, "rshift", input, other)


@public(inplace=True)
def gcd(input, other):
    return _bits(P.gcd, "gcd", input, other)


@public(inplace=True)
def lcm(input, other):
    return _bits(P.lcm, "lcm", input, other)


# --------------------------------------------------------- the primitives' ops


def op_of(prim: P.Primitive):
    """The public op of a primitive declared ``public``: its operands
    promoted to one dtype, floating for ``public="float"``."""
    floating = prim.public == "float"
    if len(prim.inputs) == 1:

        def op(input):
            input = as_tensor_arg(input)
            return prim(_to_float(input) if floating else input)

    else:

        def op(input, other):
            return _binary(prim, input, other, floating)

    op.__name__ = op.__qualname__ = prim.name
    op.__doc__ = f"The primitive ``{prim.name}``, its operands promoted to one dtype."
    return op


# Each primitive declared ``public`` (ir/primitives.py) is the op of its name,
# with PyTorch's in-place method and ``out=`` (PyTorch has no in-place
# logaddexp): declaring the primitive is all it takes, the IR knowing
# nothing of methods.
_WITHOUT_INPLACE = {"logaddexp", "logaddexp2"}
for _prim in P.PRIMITIVES.values():
    if _prim.public:
        public(op_of(_prim), inplace=_prim.name not in _WITHOUT_INPLACE, out=True)

# numpy's and PyTorch's other names of those ops
for _alias, _name, _out in (
    ("arcsin", "asin", False),
    ("arccos", "acos", False),
    ("arctan", "atan", False),
    ("arcsinh", "asinh", False),
    ("arccosh", "acosh", False),
    ("arctanh", "atanh", False),
    ("arctan2", "atan2", True),
    ("not_equal", "ne", False),
    ("less", "lt", False),
    ("less_equal", "le", False),
    ("greater", "gt", False),
    ("greater_equal", "ge", False),
):
    public(DEFINED[_name], name=_alias, inplace=True, out=_out)
public(DEFINED["mul"], name="multiply", out=True)
public(DEFINED["trunc"], name="fix", inplace=True, out=True)
