"""The tensor operations users call, as functions (``fusegrad.exp(x)``); the
Tensor methods and operators are these same functions.

Each op does PyTorch's argument handling and type promotion, then applies
primitives. Composite ops (softmax, gelu, var, ...) are compositions of
primitives with no derivative code of their own; ``_named`` only gives the
node they end in PyTorch's name, which is what ``grad_fn`` prints.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import itertools
import math
import operator
import warnings
from collections import namedtuple

import numpy as np

from ..ir import dtypes
from ..ir import primitives as P
from ..ir.shapes import (
    broadcast_shapes,
    infer_reshape,
    is_symbolic,
    normalize_axes,
    normalize_dim,
    reduced_shape,
    sizes_from_args,
)
from . import autograd, devices, grad_mode
from .tensor import NumberOperand, Size, Tensor, constant, constant_array, recording

# ------------------------------------------------------------------ plumbing

FUNCTIONS: dict = {}  # name -> op: what ``fusegrad.<name>`` is
METHODS: dict = {}  # name -> op: what ``Tensor.<name>`` is


def public(op=None, *, name=None, function=True, method=True):
    """Makes an op ``fusegrad.<name>`` and ``Tensor.<name>`` (or one of the
    two), under its own name unless ``name`` is given: the one place either
    list is written."""

    def register(op):
        exposed, key = _with_numpy_names(op), name or op.__name__
        for wanted, table in ((function, FUNCTIONS), (method, METHODS)):
            if wanted:
                if key in table:  # a second definition would silently win
                    raise RuntimeError(f"op {key!r} is registered twice")
                table[key] = exposed
        return op

    return register if op is None else register(op)


_NUMPY_NAMES = {"axis": "dim", "keepdims": "keepdim"}


def _with_numpy_names(op):
    """op, also taking numpy's names for its ``dim`` and ``keepdim``
    (``x.sum(axis=0, keepdims=True)``), as PyTorch's functions do."""
    parameters = inspect.signature(op).parameters
    if "dim" not in parameters and "keepdim" not in parameters:
        return op

    @functools.wraps(op)
    def op_taking_numpy_names(*args, **kwargs):
        if "axis" in kwargs or "keepdims" in kwargs:
            for numpy_name, name in _NUMPY_NAMES.items():
                if numpy_name in kwargs:
                    if name in kwargs:
                        raise TypeError(
                            f"{op.__name__}() got multiple values for argument '{name}'"
                        )
                    kwargs[name] = kwargs.pop(numpy_name)
        return op(*args, **kwargs)

    return op_taking_numpy_names


def _with_out(op):
    """op, also taking ``out=``: a tensor (a tuple of them for ops returning
    several) the result is written into and that is returned, as PyTorch's
    functions do. Not differentiable: refused when the result needs a gradient."""

    @functools.wraps(op)
    def op_with_out(*args, out=None, **kwargs):
        result = op(*args, **kwargs)
        if out is None:
            return result
        if isinstance(result, Tensor):
            return _write_out(op.__name__, result, out)
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(
                f"{op.__name__}(): argument 'out' must be a tuple of {len(result)} Tensors"
            )
        return _rebuilt(result, [_write_out(op.__name__, r, o) for r, o in zip(result, out)])

    return op_with_out


def _write_out(name, result, out):
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if result.requires_grad:
        raise RuntimeError(
            f"{name}(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad."
        )
    out._check_inplace()
    if out.shape != result.shape:
        if recording.trace is not None:
            recording.trace.unsupported("resizing an out= tensor")
        if out.numel():
            warnings.warn(
                f"An output with one or more elements was resized since it had shape "
                f"{list(out.shape)}, which does not match the required output shape "
                f"{list(result.shape)}. This behavior is deprecated, and in a future "
                "PyTorch release outputs will not be resized unless they have zero "
                "elements. You can explicitly reuse an out tensor t by resizing it, "
                "inplace, to zero elements with t.resize_(0).",
                UserWarning,
                stacklevel=3,
            )
        out._data = np.empty(result.shape, out._data.dtype)
    return out._commit_inplace(result)


def _named(backward_name):
    """Gives the node a composite op ends in the PyTorch name of the op (for
    grad_fn). On float16 and bfloat16 tensors the op computes in float32 and
    rounds its result once, as PyTorch's kernel for it does."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            mark = autograd.sequence_mark()
            reduced = _reduced_result(args, kwargs)
            out = fn(*args, **kwargs) if reduced is None else _in_float32(fn, reduced, args, kwargs)
            node = getattr(out, "grad_fn", None)
            if node is not None and node.sequence_nr > mark:
                node.label = (
                    backward_name(*args, **kwargs) if callable(backward_name) else backward_name
                )
                for inner, _ in node.edges:  # a loop, not any(): this runs on every call
                    # (a leaf's accumulator, numbered infinity, is no inner step)
                    if inner is not None and mark < inner.sequence_nr < math.inf:
                        # inner steps: shown as one node, as PyTorch's, on the op's inputs
                        node.shown_edges = tuple(
                            autograd.gradient_edge(a) if a.requires_grad else (None, 0)
                            for a in args
                            if isinstance(a, Tensor)
                        )
                        break
            return out

        return wrapper

    return decorate


def _reduced_result(args, kwargs):
    """The float16 or bfloat16 dtype the tensors among an op's arguments
    promote to, if they promote to one (and no ``dtype=`` asks for another)."""
    for a in args:
        if a.__class__ is Tensor and a._dtype.reduced:
            break
    else:
        if not kwargs or not builtins.any(isinstance(v, Tensor) for v in kwargs.values()):
            return None
    if kwargs.get("dtype") is not None:
        return None
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
    dtype = dtypes.result_type(*tensors)
    return dtype if dtype.reduced else None


def _in_float32(fn, dtype, args, kwargs):
    """fn on the tensors of ``dtype`` converted to float32, its float32 results rounded back."""

    def up(a):
        return (
            P.convert(a, dtype=dtypes.float32) if isinstance(a, Tensor) and a._dtype is dtype else a
        )

    def down(t):
        return (
            P.convert(t, dtype=dtype) if isinstance(t, Tensor) and t._dtype is dtypes.float32 else t
        )

    out = fn(*[up(a) for a in args], **{k: up(v) for k, v in kwargs.items()})
    return _rebuilt(out, [down(t) for t in out]) if isinstance(out, tuple) else down(out)


def _rebuilt(result: tuple, items: list) -> tuple:
    """A tuple of ``items`` of the type of ``result`` (a named one or a plain one)."""
    return type(result)(*items) if hasattr(result, "_fields") else tuple(items)


def _rounded_once(fn):
    """fn with ``_named``'s float32 computation on float16 and bfloat16
    tensors, for a composite op whose node keeps the name of its last step."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        reduced = _reduced_result(args, kwargs)
        return fn(*args, **kwargs) if reduced is None else _in_float32(fn, reduced, args, kwargs)

    return wrapper


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
    return x if x._dtype.is_floating_point else P.convert(x, dtype=dtypes.float32)


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
        dtype = dtypes.float32
    return prim(_cast(a, dtype), _cast(b, dtype))


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


# ---------------------------------------------------------------- arithmetic


@public
def add(input, other, *, alpha=1):
    return _binary(P.add, input, other if alpha == 1 else other * alpha)


@public
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


@_named("RsubBackward1")
def rsub(input, other):
    return _binary(P.sub, other, input)


@public
def div(input, other, *, rounding_mode=None):
    if rounding_mode is None:
        return _binary(P.div, input, other, floating=True)
    if rounding_mode == "floor":
        return _binary(P.floor_divide, input, other)
    if rounding_mode == "trunc":
        if dtypes.result_type(_check_operand(input), _check_operand(other)).is_floating_point:
            return P.trunc(_binary(P.div, input, other))
        # integers: x - fmod(x, y) is a multiple of y, so its floored quotient is exact
        return _binary(P.floor_divide, sub(input, _binary(P.fmod, input, other)), other)
    raise RuntimeError(
        "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
        f"'{rounding_mode}'"
    )


true_divide = public(lambda input, other: div(input, other), name="true_divide")


@public
@_named(
    lambda input, exponent: (
        "PowBackward0"
        if not isinstance(exponent, Tensor)
        else ("PowBackward1" if isinstance(input, Tensor) else "PowBackward2")
    )
)
def pow(input, exponent):
    return _binary(P.pow_, input, exponent)


@public
def neg(input):
    input = as_tensor_arg(input)
    if input._dtype is dtypes.bool_:
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If "
            "you are trying to invert a mask, use the `~` or `logical_not()` "
            "operator instead."
        )
    return P.neg(input)


@public
def abs(input):
    return P.abs_(as_tensor_arg(input))


@public
def sign(input):
    return P.sign(as_tensor_arg(input))


@public
@_named("RsqrtBackward0")
def rsqrt(input):
    return 1.0 / P.sqrt(_to_float(as_tensor_arg(input)))


@public
@_named("TanBackward0")
def tan(input):
    input = _to_float(as_tensor_arg(input))
    return P.sin(input) / P.cos(input)


@public
def relu(input):
    return P.relu(as_tensor_arg(input))


@public(method=False)
@_named("GeluBackward0")
def gelu(input, approximate: str = "none"):
    x = _to_float(as_tensor_arg(input))
    if approximate == "none":
        return P.gelu(x)
    if approximate == "tanh":
        inner = (x + x * x * x * 0.044715) * math.sqrt(2.0 / math.pi)
        return x * 0.5 * (1.0 + P.tanh(inner))
    raise ValueError(f"approximate argument must be either none or tanh, got {approximate!r}")


@public(method=False)
@_named("SoftplusBackward0")
def softplus(input, beta=1.0, threshold=20.0):
    x = _to_float(as_tensor_arg(input))
    scaled = x * beta if beta != 1 else x
    smooth = P.softplus(scaled)
    if beta != 1:
        smooth = smooth / beta
    return P.where(scaled > threshold, x, smooth)


@public
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
    return out


clip = public(clamp, name="clip")


@public
@_named("ClampMinBackward0")
def clamp_min(input, min):
    return clamp(input, min=min)


@public
@_named("ClampMaxBackward0")
def clamp_max(input, max):
    return clamp(input, max=max)


@public
def square(input):
    return pow(as_tensor_arg(input), 2)


@public
@_named("ReciprocalBackward0")
def reciprocal(input):
    return div(1.0, as_tensor_arg(input))


@public
def maximum(input, other):
    return _binary(P.maximum, as_tensor_arg(input), as_tensor_arg(other, "other"))


@public
def minimum(input, other):
    return _binary(P.minimum, as_tensor_arg(input), as_tensor_arg(other, "other"))


@public(method=False)
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


@public
def nonzero(input, *, as_tuple=False):
    """The positions of the non-zero elements: one row each, or one tensor per
    dimension (``as_tuple``). Eager only: how many there are is a value."""
    input = as_tensor_arg(input)
    if recording.trace is not None:
        recording.trace.unsupported("nonzero (its result's shape depends on the input's values)")
    positions = np.nonzero(input._data.reshape(input.shape or (1,)))
    if as_tuple:
        return tuple(Tensor._make(p.astype(np.int64)) for p in positions)
    rows = np.stack(positions, axis=1) if input.ndim else np.zeros((len(positions[0]), 0))
    return Tensor._make(rows.astype(np.int64))


@public(method=False)
def argwhere(input):
    return nonzero(input)


# ---------------------------------------------------------------- comparisons


def _logical(prim, a, b):
    return prim(
        _cast(a, dtypes.bool_) if isinstance(a, Tensor) else bool(a),
        _cast(b, dtypes.bool_) if isinstance(b, Tensor) else bool(b),
    )


@public
def logical_and(input, other):
    return _logical(P.logical_and, input, other)


@public
def logical_or(input, other):
    return _logical(P.logical_or, input, other)


@public
def logical_xor(input, other):
    return _logical(P.ne, input, other)


@public
def logical_not(input):
    return P.logical_not(as_tensor_arg(input))


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
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    # with ops, so that a traced function's decision is a guard on their result
    return bool(isclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan).all())


@public
def equal(input, other) -> bool:
    return input.shape == other.shape and bool((input == other).all())


# ----------------------------------------------------------------- reductions


def _keep(out, input, axes, keepdim):
    if keepdim:
        return P.reshape(out, shape=reduced_shape(input.shape, axes, keepdims=True))
    return out


@public
def sum(input, dim=None, keepdim=False, *, dtype=None):
    input = as_tensor_arg(input)
    axes = normalize_axes(dim, input.ndim)
    if dtype is not None:
        input = _cast(input, dtypes.as_dtype(dtype))
    elif input._dtype.category != dtypes.FLOATING:
        input = _cast(input, dtypes.int64)
    out = _keep(P.reduce_sum(input, axes=axes), input, axes, keepdim)
    if out.grad_fn is not None:  # always a new node: the label can't land on an input's
        out.grad_fn.label = "SumBackward0" if dim is None else "SumBackward1"
    return out


@public
@_named(
    lambda input, dim=None, keepdim=False, **kw: "MeanBackward0" if dim is None else "MeanBackward1"
)
def mean(input, dim=None, keepdim=False, *, dtype=None):
    input = as_tensor_arg(input)
    if dtype is not None:
        input = _cast(input, dtypes.as_dtype(dtype))
    if not input._dtype.is_floating_point:
        which = "Input" if dtype is None else "Optional"
        raise RuntimeError(
            f"mean(): could not infer output dtype. {which} dtype must be either "
            f"a floating point or complex dtype. Got: {_short(input._dtype)}"
        )
    axes = normalize_axes(dim, input.ndim)
    count = math.prod(input.shape[a] for a in axes)
    return _keep(P.reduce_sum(input, axes=axes), input, axes, keepdim) / divisor(count)


def divisor(count):
    """A count to divide by: a float, or for a size that varies between calls
    the size itself (an input of the program, read on every call)."""
    return count if is_symbolic(count) else float(count)


def _short(dtype) -> str:
    return dtype.scalar_name


@public
@_named(
    lambda input, dim=None, keepdim=False, **kw: "ProdBackward0" if dim is None else "ProdBackward1"
)
def prod(input, dim=None, keepdim=False, *, dtype=None):
    input = as_tensor_arg(input)
    if dtype is not None:
        input = _cast(input, dtypes.as_dtype(dtype))
    elif input._dtype.category != dtypes.FLOATING:
        input = _cast(input, dtypes.int64)
    axes = normalize_axes(dim, input.ndim)
    return _keep(P.reduce_prod(input, axes=axes), input, axes, keepdim)


def _require_nonempty(input, axes, name):
    if builtins.any(input.shape[a] == 0 for a in axes) or (not axes and input.numel() == 0):
        raise RuntimeError(
            f"{name}(): Expected reduction dim to be specified for input.numel() "
            "== 0. Specify the reduction dim with the 'dim' argument."
        )


@public
@_named("AmaxBackward0")
def amax(input, dim=(), keepdim=False):
    input = as_tensor_arg(input)
    axes = normalize_axes(dim, input.ndim)
    _require_nonempty(input, axes, "amax")
    return _keep(P.reduce_max(input, axes=axes), input, axes, keepdim)


@public
@_named("AminBackward0")
def amin(input, dim=(), keepdim=False):
    input = as_tensor_arg(input)
    axes = normalize_axes(dim, input.ndim)
    _require_nonempty(input, axes, "amin")
    return _keep(P.reduce_min(input, axes=axes), input, axes, keepdim)


def _return_type(name):
    """(values, indices), printed the way PyTorch prints its return types."""
    base = namedtuple(name, ["values", "indices"])

    def __repr__(self):
        return f"fusegrad.return_types.{name}(\nvalues={self.values!r},\nindices={self.indices!r})"

    return type(name, (base,), {"__slots__": (), "__repr__": __repr__})


MaxResult = _return_type("max")
MinResult = _return_type("min")
SortResult = _return_type("sort")
TopkResult = _return_type("topk")


def _select_along(input, indices, axis):
    """input[..., indices[...], ...] with `indices` holding one position per row of `axis`."""
    grids = []
    for d in range(input.ndim):
        if d == axis:
            grids.append(indices)
        else:
            shape = [1] * indices.ndim
            keep = d if d < axis else d - 1
            shape[keep] = input.shape[d]
            grids.append(P.reshape(positions(input.shape[d]), shape=tuple(shape)))
    return index_with_arrays(input, grids)


def _extreme_of_all(x, reduce_all):
    """The max (min) of all of x, its gradient shared as PyTorch's max()
    shares it: evenly between the elements equal to it or, where x holds NaN,
    between the NaNs. The primitive's rule is amax's, which (as PyTorch's
    amax) finds no element equal to a NaN result and gives NaN everywhere; so
    the primitive sees x with its NaNs zeroed, and the NaNs' share is their
    sum over their count. Without a gradient to share, the primitive alone
    gives the same value without the composition's extra passes over x."""
    axes = tuple(range(x.ndim))
    if not (x.requires_grad and grad_mode.is_grad_enabled()):
        return reduce_all(x, axes=axes)
    nan = isnan(x)
    count = sum(nan)
    numbers = reduce_all(P.where(nan, 0.0, x), axes=axes)
    nans = sum(P.where(nan, x, 0.0)) / _cast(clamp_min(count, 1), x._dtype)
    return P.where(count > 0, nans, numbers)


def _extremum(input, dim, keepdim, other, reduce_all, arg_prim, result_type, backward_name, name):
    input = as_tensor_arg(input)
    if isinstance(dim, Tensor):
        return (maximum if name == "max" else minimum)(input, dim)
    if other is not None:
        return (maximum if name == "max" else minimum)(input, other)
    if dim is None:
        if input.numel() == 0:
            raise RuntimeError(
                f"{name}(): Expected reduction dim to be specified for "
                "input.numel() == 0. Specify the reduction dim with the 'dim' "
                "argument."
            )
        out = _extreme_of_all(input, reduce_all)
        if out.grad_fn is not None:
            out.grad_fn.label = name.capitalize() + "Backward1"
        return out
    axis = normalize_dim(dim, input.ndim)
    if input.ndim == 0:
        return result_type(input * 1, Tensor._make(np.array(0), dtypes.int64))
    if input.shape[axis] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {axis} to have non-zero size.")
    indices = arg_prim(input, axis=axis)
    values = _select_along(input, indices, axis)
    if keepdim:
        values, indices = unsqueeze(values, axis), unsqueeze(indices, axis)
    if values.grad_fn is not None:
        values.grad_fn.label = backward_name
    return result_type(values, indices)


@public
def max(input, dim=None, keepdim=False, *, other=None):
    return _extremum(
        input, dim, keepdim, other, P.reduce_max, P.argmax, MaxResult, "MaxBackward0", "max"
    )


@public
def min(input, dim=None, keepdim=False, *, other=None):
    return _extremum(
        input, dim, keepdim, other, P.reduce_min, P.argmin, MinResult, "MinBackward0", "min"
    )


def _arg(prim, input, dim, keepdim):
    input = as_tensor_arg(input)
    if dim is None:
        flat = P.reshape(input, shape=(input.numel(),))
        out = prim(flat, axis=0)
        return P.reshape(out, shape=(1,) * input.ndim) if keepdim else out
    axis = normalize_dim(dim, input.ndim)
    if input.ndim == 0:
        return Tensor._make(np.array(0), dtypes.int64)
    out = prim(input, axis=axis)
    return unsqueeze(out, axis) if keepdim else out


@public
def argmax(input, dim=None, keepdim=False):
    return _arg(P.argmax, input, dim, keepdim)


@public
def argmin(input, dim=None, keepdim=False):
    return _arg(P.argmin, input, dim, keepdim)


@public
def all(input, dim=None, keepdim=False):
    input = as_tensor_arg(input)
    axes = normalize_axes(dim, input.ndim)
    return (
        _keep(P.reduce_min(_cast(input, dtypes.bool_), axes=axes), input, axes, keepdim)
        if input.numel()
        else Tensor._make(np.array(True))
    )


@public
def any(input, dim=None, keepdim=False):
    input = as_tensor_arg(input)
    axes = normalize_axes(dim, input.ndim)
    return (
        _keep(P.reduce_max(_cast(input, dtypes.bool_), axes=axes), input, axes, keepdim)
        if input.numel()
        else Tensor._make(np.array(False))
    )


def _var(input, dim, correction, keepdim):
    input = as_tensor_arg(input)
    if not input._dtype.is_floating_point:
        raise RuntimeError("std and var only support floating point and complex dtypes")
    axes = normalize_axes(dim, input.ndim)
    count = math.prod(input.shape[a] for a in axes)
    centered = input - P.reduce_sum(input, axes=axes).reshape(
        tuple(1 if i in axes else s for i, s in enumerate(input.shape))
    ) / divisor(count)
    squares = _keep(P.reduce_sum(centered * centered, axes=axes), input, axes, keepdim)
    return squares / divisor(builtins.max(count - correction, 0))


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased is None or unbiased else 0


@public
@_named("VarBackward0")
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):  # var(x, False): the legacy `unbiased` positional
        dim, unbiased = None, dim
    return _var(input, dim, _correction(unbiased, correction), keepdim)


@public
@_named("StdBackward0")
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return P.sqrt(_var(input, dim, _correction(unbiased, correction), keepdim))


@public
@_named("LinalgVectorNormBackward0")
def norm(input, p="fro", dim=None, keepdim=False):
    x = _to_float(as_tensor_arg(input))
    axes = normalize_axes(dim, x.ndim)
    if p in ("fro", 2, 2.0):
        # PyTorch's subgradient at 0 is 0, where sqrt's derivative is infinite:
        # sqrt only ever sees non-zero arguments (the "double where").
        squares = P.reduce_sum(x * x, axes=axes)
        zero = squares == 0.0
        out = P.where(zero, 0.0, P.sqrt(P.where(zero, 1.0, squares)))
    elif p in (math.inf, "inf"):
        out = P.reduce_max(abs(x), axes=axes)
    elif p in (-math.inf, "-inf"):
        out = P.reduce_min(abs(x), axes=axes)
    elif p == 1:
        out = P.reduce_sum(abs(x), axes=axes)
    elif p == 0:
        out = P.reduce_sum(_cast(x != 0, x._dtype), axes=axes)
    elif isinstance(p, (int, float)):
        out = P.reduce_sum(abs(x) ** p, axes=axes) ** (1.0 / p)
    else:
        raise ValueError(f"norm: unsupported p={p!r}")
    return _keep(out, x, axes, keepdim)


@public
@_named("LogsumexpBackward0")
def logsumexp(input, dim, keepdim=False):
    x = _to_float(as_tensor_arg(input))
    axes = normalize_axes(dim, x.ndim)
    # Shifting by the (detached) max keeps exp from overflowing; the shift's
    # gradient cancels exactly, so detaching it changes no derivative.
    shift = (
        P.reduce_max(x, axes=axes).detach()
        if x.numel()
        else Tensor._make(
            np.zeros(tuple(s for i, s in enumerate(x.shape) if i not in axes), x._dtype.np)
        )
    )
    shift = where(isinf(shift), 0.0, shift)
    kept = P.reshape(shift, shape=tuple(1 if i in axes else s for i, s in enumerate(x.shape)))
    out = P.log(P.reduce_sum(P.exp(x - kept), axes=axes)) + shift
    return _keep(out, x, axes, keepdim)


def _softmax_dim(input, dim):
    if dim is None:
        warnings.warn(
            "Implicit dimension choice for softmax has been deprecated. Change the "
            "call to include dim=X as an argument.",
            stacklevel=3,
        )
        return 0 if input.ndim in (0, 1, 3) else 1
    return dim


@public
@_named("SoftmaxBackward0")
def softmax(input, dim=None, dtype=None):
    x = as_tensor_arg(input)
    x = _to_float(x if dtype is None else _cast(x, dtypes.as_dtype(dtype)))
    dim = _softmax_dim(x, dim)
    e = P.exp(x - amax(x, dim, keepdim=True).detach())
    return e / sum(e, dim, keepdim=True)


@public
@_named("LogSoftmaxBackward0")
def log_softmax(input, dim=None, dtype=None):
    x = as_tensor_arg(input)
    x = _to_float(x if dtype is None else _cast(x, dtypes.as_dtype(dtype)))
    dim = _softmax_dim(x, dim)
    return x - logsumexp(x, dim, keepdim=True)


# ------------------------------------------------------- scans and sorting


def _scan(prim, input, dim, dtype):
    input = as_tensor_arg(input)
    if dtype is not None:
        input = _cast(input, dtypes.as_dtype(dtype))
    elif input._dtype.category != dtypes.FLOATING:
        input = _cast(input, dtypes.int64)  # as sum: integers accumulate in int64
    axis = normalize_dim(dim, input.ndim)
    if input.ndim == 0:
        return P.reshape(prim(P.reshape(input, shape=(1,)), axis=0, reverse=False), shape=())
    return prim(input, axis=axis, reverse=False)


@public
@_named("CumsumBackward0")
def cumsum(input, dim, *, dtype=None):
    return _scan(P.cumsum, input, dim, dtype)


@public
@_named("CumprodBackward0")
def cumprod(input, dim, *, dtype=None):
    return _scan(P.cumprod, input, dim, dtype)


def _order(input, dim, descending):
    """(input as at least 1-d, its sorting axis, the positions sorting it)."""
    input = as_tensor_arg(input)
    axis = normalize_dim(dim, input.ndim)
    x = input if input.ndim else P.reshape(input, shape=(1,))
    return x, axis, P.argsort(x, axis=axis, descending=bool(descending))


@public
def sort(input, dim=-1, descending=False, stable=False):
    """Always stable (``stable`` only promises it): equal elements keep their order."""
    x, axis, order = _order(input, dim, descending)
    values = gather(x, axis, order)
    if input.ndim == 0:
        values, order = P.reshape(values, shape=()), P.reshape(order, shape=())
    if values.grad_fn is not None:
        values.grad_fn.label = "SortBackward0"
    return SortResult(values, order)


@public
def argsort(input, dim=-1, descending=False, stable=False):
    x, _, order = _order(input, dim, descending)
    return order if x is input else P.reshape(order, shape=())


@public
def topk(input, k, dim=None, largest=True, sorted=True):
    """The k largest (or smallest) elements along dim, in order; of equal
    elements the first ones (as JAX: PyTorch leaves ties' order unspecified).
    ``sorted=False`` allows any order; this is the sorted one."""
    x, axis, order = _order(input, -1 if dim is None else dim, largest)
    k = operator.index(k)
    if not 0 <= k <= x.shape[axis]:
        raise RuntimeError("selected index k out of range")
    indices = P.index(order, spec=_narrow_spec(x.ndim, axis, 0, k))
    values = gather(x, axis, indices)
    if input.ndim == 0 and k:
        values, indices = P.reshape(values, shape=()), P.reshape(indices, shape=())
    if values.grad_fn is not None:
        values.grad_fn.label = "TopkBackward0"
    return TopkResult(values, indices)


# ----------------------------------------------------------- matrix products


def _check_same_dtype(a, b, what):
    if a._dtype is not b._dtype:
        if what == "dot":
            raise RuntimeError(
                f"dot : expected both vectors to have same dtype, but found "
                f"{_short(a._dtype)} and {_short(b._dtype)}"
            )
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: "
            f"{a._dtype.name.replace('float32', 'float').replace('float64', 'double')}"
            f" != "
            f"{b._dtype.name.replace('float32', 'float').replace('float64', 'double')}"
        )


@public
@_named("DotBackward0")
def dot(input, other):
    input, other = as_tensor_arg(input), as_tensor_arg(other, "other")
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.shape != other.shape:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{input.shape[0]}] and "
            f"src [{other.shape[0]}] to have the same number of elements, but "
            f"got {input.shape[0]} and {other.shape[0]} elements respectively"
        )
    _check_same_dtype(input, other, "dot")
    return P.reduce_sum(P.mul(input, other), axes=(0,))


@public
@_named("MmBackward0")
def mm(input, mat2):
    input, mat2 = as_tensor_arg(input), as_tensor_arg(mat2, "mat2")
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"{'self' if input.ndim != 2 else 'mat2'} must be a matrix")
    _check_same_dtype(input, mat2, "mm")
    return P.matmul(input, mat2)


@public
@_named("MvBackward0")
def mv(input, vec):
    input, vec = as_tensor_arg(input), as_tensor_arg(vec, "vec")
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.ndim}, {vec.ndim}")
    _check_same_dtype(input, vec, "mv")
    out = P.matmul(input, P.reshape(vec, shape=(vec.shape[0], 1)))
    return P.reshape(out, shape=(input.shape[0],))


@public
@_named("BmmBackward0")
def bmm(input, mat2):
    input, mat2 = as_tensor_arg(input), as_tensor_arg(mat2, "mat2")
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError(f"batch{1 if input.ndim != 3 else 2} must be a 3D tensor")
    if input.shape[0] != mat2.shape[0]:
        raise RuntimeError(
            "batch1 and batch2 must have same number of batches, got "
            f"{input.shape[0]} and {mat2.shape[0]}"
        )
    _check_same_dtype(input, mat2, "bmm")
    return P.matmul(input, mat2)


@public
def matmul(input, other):
    input, other = as_tensor_arg(input), as_tensor_arg(other, "other")
    if input.ndim == 0 or other.ndim == 0:
        raise RuntimeError(
            "both arguments to matmul need to be at least 1D, but they are "
            f"{input.ndim}D and {other.ndim}D"
        )
    _check_same_dtype(input, other, "matmul")
    if input.ndim == 1 and other.ndim == 1:
        return dot(input, other)
    if input.ndim == 2 and other.ndim == 2:
        return mm(input, other)
    if input.ndim == 2 and other.ndim == 1:
        return mv(input, other)
    if input.ndim == 3 and other.ndim == 3 and input.shape[0] == other.shape[0]:
        return bmm(input, other)
    return _batched_matmul(input, other)


@_named("UnsafeViewBackward0")
def _batched_matmul(input, other):
    a = P.reshape(input, shape=(1,) + input.shape) if input.ndim == 1 else input
    b = P.reshape(other, shape=other.shape + (1,)) if other.ndim == 1 else other
    out = P.matmul(a, b)
    if input.ndim == 1:
        out = P.reshape(out, shape=out.shape[:-2] + out.shape[-1:])
    if other.ndim == 1:
        out = P.reshape(out, shape=out.shape[:-1])
    return out


@public
def outer(input, vec2):
    return unsqueeze(input, 1) * unsqueeze(vec2, 0)


# --------------------------------------------------------------- shape ops


def _shape_arg(shape, input) -> tuple:
    """A target shape given as varargs or one sequence, with one -1 resolved."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for s in shape:
        if s.__class__ is not int:
            try:
                shape = tuple(s if is_symbolic(s) else operator.index(s) for s in shape)
            except TypeError:
                raise TypeError(f"shape must be a sequence of ints, got {shape!r}") from None
            break
    if -1 not in shape and math.prod(shape) == input.numel():
        return shape
    return infer_reshape(shape, input.numel())


@public
def reshape(input, *shape):
    input = as_tensor_arg(input)
    return P.reshape(input, shape=_shape_arg(shape, input))


@public(function=False)
def view(input, *shape):
    input = as_tensor_arg(input)
    target = _shape_arg(shape, input)
    trial = input._data.view()
    try:
        trial.shape = recording.trace.hinted(target) if is_symbolic(target) else target
    except AttributeError:
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride "
            "(at least one dimension spans across two contiguous subspaces). "
            "Use .reshape(...) instead."
        ) from None
    return reshape(input, target)


@public
def flatten(input, start_dim=0, end_dim=-1):
    input = as_tensor_arg(input)
    if input.ndim == 0:
        return P.reshape(input, shape=(1,))
    start, end = normalize_dim(start_dim, input.ndim), normalize_dim(end_dim, input.ndim)
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = (
        input.shape[:start] + (math.prod(input.shape[start : end + 1]),) + input.shape[end + 1 :]
    )
    return P.reshape(input, shape=shape)


@public
def unflatten(input, dim, sizes):
    input = as_tensor_arg(input)
    d = normalize_dim(dim, input.ndim)
    inner = infer_reshape(sizes, input.shape[d])
    return reshape(input, input.shape[:d] + inner + input.shape[d + 1 :])


@public
@_named("PermuteBackward0")
def permute(input, *dims):
    input = as_tensor_arg(input)
    dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
    if len(dims) != input.ndim:
        raise RuntimeError(
            "permute(sparse_coo): number of dimensions in the tensor input does "
            f"not match the length of the desired ordering of dimensions i.e. "
            f"input.dim() = {input.ndim} is not equal to len(dims) = {len(dims)}"
        )
    perm = tuple(normalize_dim(d, input.ndim) for d in dims)
    if len(set(perm)) != len(perm):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return P.transpose(input, perm=perm)


@public
@_named("TransposeBackward0")
def transpose(input, dim0, dim1):
    input = as_tensor_arg(input)
    if input.ndim == 0:
        return P.reshape(input, shape=())
    a, b = normalize_dim(dim0, input.ndim), normalize_dim(dim1, input.ndim)
    perm = list(range(input.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return P.transpose(input, perm=tuple(perm))


swapaxes = public(transpose, name="swapaxes")


@public
@_named("TBackward0")
def t(input):
    input = as_tensor_arg(input)
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return P.transpose(input, perm=tuple(reversed(range(input.ndim))))


@public
@_named("UnsqueezeBackward0")
def unsqueeze(input, dim):
    input = as_tensor_arg(input)
    d = normalize_dim(dim, input.ndim + 1)
    return P.reshape(input, shape=input.shape[:d] + (1,) + input.shape[d:])


@public
@_named(lambda input, dim=None: "SqueezeBackward0" if dim is None else "SqueezeBackward1")
def squeeze(input, dim=None):
    input = as_tensor_arg(input)
    if dim is None:
        axes = {i for i, s in enumerate(input.shape) if s == 1}
    else:
        axes = {normalize_dim(d, input.ndim) for d in _ints(dim)}
        axes = {a for a in axes if input.ndim and input.shape[a] == 1}
    return P.reshape(input, shape=tuple(s for i, s in enumerate(input.shape) if i not in axes))


@public(function=False)
@_named("ExpandBackward0")
def expand(input, *sizes):
    input = as_tensor_arg(input)
    sizes = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes
    if len(sizes) < input.ndim:
        raise RuntimeError(
            f"expand(torch.{input.type().split('.')[-1]}{{{list(input.shape)}}}, "
            f"size={list(sizes)}): the number of sizes provided "
            f"({len(sizes)}) must be greater or equal to the number of "
            f"dimensions in the tensor ({input.ndim})"
        )
    lead = len(sizes) - input.ndim
    target = []
    for i, s in enumerate(sizes):
        if s == -1:
            if i < lead:
                raise RuntimeError(
                    f"The expanded size of the tensor (-1) isn't allowed in a "
                    f"leading, non-existing dimension {i}"
                )
            s = input.shape[i - lead]
        target.append(s)
    return P.broadcast_to(input, shape=tuple(target))


@public(function=False)
def expand_as(input, other):
    return expand(input, other.shape)


@public
def broadcast_to(input, size):
    return expand(input, tuple(size))


@public(method=False)
def broadcast_tensors(*tensors):
    shape = broadcast_shapes(*[t.shape for t in tensors])
    return tuple(expand(t, shape) for t in tensors)


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


@public(method=False)
@_named("CatBackward0")
def cat(tensors, dim=0):
    tensors = _promote_all(tensors, "cat")
    if tensors[0].ndim == 0:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    axis = normalize_dim(dim, tensors[0].ndim)
    for t in tensors:
        if t.ndim != tensors[0].ndim:
            raise RuntimeError(
                f"Tensors must have same number of dimensions: got {tensors[0].ndim} and {t.ndim}"
            )
    return P.concatenate(*tensors, axis=axis)


concat = public(cat, name="concat", method=False)
concatenate = public(cat, name="concatenate", method=False)


@public(method=False)
@_named("StackBackward0")
def stack(tensors, dim=0):
    tensors = _promote_all(tensors, "stack")
    for k, t in enumerate(tensors):
        if t.shape != tensors[0].shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got "
                f"{list(tensors[0].shape)} at entry 0 and {list(t.shape)} at "
                f"entry {k}"
            )
    axis = normalize_dim(dim, tensors[0].ndim + 1)
    shape = tensors[0].shape[:axis] + (1,) + tensors[0].shape[axis:]
    return P.concatenate(*[P.reshape(t, shape=shape) for t in tensors], axis=axis)


@public(function=False)
@_named("RepeatBackward0")
def repeat(input, *sizes):
    """Tiles the tensor: ``sizes[i]`` copies along dimension i (new leading
    dimensions where there are more sizes than dimensions)."""
    input = as_tensor_arg(input)
    sizes = sizes_from_args(sizes, "repeats")
    if len(sizes) < input.ndim:
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of "
            "dimensions of tensor"
        )
    shape = (1,) * (len(sizes) - input.ndim) + input.shape
    paired = builtins.sum(((1, n) for n in shape), ())
    tiled = builtins.sum(((r, n) for r, n in zip(sizes, shape)), ())
    x = P.broadcast_to(P.reshape(input, shape=paired), shape=tiled)
    return clone(P.reshape(x, shape=tuple(r * n for r, n in zip(sizes, shape))))


@public
def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element repeated ``repeats`` times along dim (of the flattened
    tensor without dim). ``repeat_interleave(counts)`` repeats each index."""
    input = as_tensor_arg(input)
    if repeats is None:  # the one-argument form: input holds the counts
        counts = _repeat_counts(input, None)
        return Tensor._new(np.repeat(np.arange(len(counts)), counts).astype(np.int64), dtypes.int64)
    if dim is None:
        input, axis = P.reshape(input, shape=(input.numel(),)), 0
    else:
        axis = normalize_dim(dim, input.ndim)
        if input.ndim == 0:
            input = P.reshape(input, shape=(1,))
    size = input.shape[axis]
    if isinstance(repeats, Tensor) and repeats.numel() != 1:
        counts = _repeat_counts(repeats, size)
        positions = np.repeat(np.arange(size), counts).astype(np.int64)
        spec = (("slice", None, None, None),) * axis + (("array",),)
        return P.index(input, constant_array(positions, dtypes.int64), spec=spec)
    times = operator.index(repeats)
    if times < 0:
        raise RuntimeError("repeats can not be negative")
    shape = input.shape
    spread = P.reshape(input, shape=shape[: axis + 1] + (1,) + shape[axis + 1 :])
    spread = P.broadcast_to(spread, shape=shape[: axis + 1] + (times,) + shape[axis + 1 :])
    return clone(P.reshape(spread, shape=shape[:axis] + (size * times,) + shape[axis + 1 :]))


def _repeat_counts(repeats, size) -> list:
    """The counts a tensor of repeats holds (read from its values: under jit
    they are guarded, so other counts compile again)."""
    if repeats.ndim > 1:
        raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
    if repeats._dtype.category != dtypes.INTEGER:
        raise RuntimeError("repeats has to be Long or Int tensor")
    counts = repeats.reshape(-1).tolist()
    if size is not None and len(counts) != size:
        raise RuntimeError(
            f"repeats must have the same size as input along dim, but got "
            f"repeats.size(0) = {len(counts)} and input.size(0) = {size}"
        )
    if builtins.any(c < 0 for c in counts):
        raise RuntimeError("repeats can not be negative")
    return counts


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


@public
@_named("FlipBackward0")
def flip(input, dims):
    input = as_tensor_arg(input)
    axes = _dims_arg(dims, input.ndim, "flip")
    spec = tuple(("slice", None, None, -1 if d in axes else None) for d in range(input.ndim))
    return clone(P.index(input, spec=spec))  # a copy, as PyTorch's: not a view


@public
def fliplr(input):
    input = as_tensor_arg(input)
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, (1,))


@public
def flipud(input):
    input = as_tensor_arg(input)
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, (0,))


@public
@_named("RollBackward0")
def roll(input, shifts, dims=None):
    input = as_tensor_arg(input)
    if dims is None:
        shifts = _ints(shifts)
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        flat = P.reshape(input, shape=(input.numel(),))
        return P.reshape(roll(flat, shifts, 0), shape=input.shape)
    shifts, dims = _ints(shifts), _ints(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(
            f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}"
        )
    out = input
    for shift, dim in zip(shifts, dims):
        axis = normalize_dim(operator.index(dim), input.ndim)
        size = input.shape[axis]
        cut = size - operator.index(shift) % size if size else 0
        if cut not in (0, size):
            head = P.index(out, spec=_narrow_spec(out.ndim, axis, cut, size))
            tail = P.index(out, spec=_narrow_spec(out.ndim, axis, 0, cut))
            out = P.concatenate(head, tail, axis=axis)
    return out if out is not input else clone(input)


def _tri(input, diagonal, keep, name):
    input = as_tensor_arg(input)
    if input.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    diagonal = operator.index(diagonal)
    rows, cols = input.shape[-2:]
    if is_symbolic(rows) or is_symbolic(cols):
        # sizes that vary between calls: the mask is computed at run time
        offsets = P.reshape(positions(cols), shape=(1, cols)) - P.reshape(
            positions(rows), shape=(rows, 1)
        )
        mask = offsets <= diagonal if keep is np.tril else offsets >= diagonal
    else:
        mask = constant_array(keep(np.ones((rows, cols), np.bool_), diagonal), dtypes.bool_)
    return P.where(mask, input, 0)


@public
@_named("TrilBackward0")
def tril(input, diagonal=0):
    """The lower triangle of the last two dimensions (at or below the
    ``diagonal``-th diagonal), zeros above."""
    return _tri(input, diagonal, np.tril, "tril")


@public
@_named("TriuBackward0")
def triu(input, diagonal=0):
    """The upper triangle of the last two dimensions, zeros below."""
    return _tri(input, diagonal, np.triu, "triu")


@public
def diagonal(input, offset=0, dim1=0, dim2=1):
    """A view of the diagonal of the (dim1, dim2) planes, as the last dimension."""
    input = as_tensor_arg(input)
    a, b = normalize_dim(dim1, input.ndim), normalize_dim(dim2, input.ndim)
    if a == b:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return P.diagonal(input, offset=operator.index(offset), dim1=a, dim2=b)


@public
@_named("DiagEmbedBackward0")
def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices (in dims dim1, dim2 of the result) with the last dimension of
    input on their ``offset``-th diagonal, zeros elsewhere."""
    input = as_tensor_arg(input)
    ndim = input.ndim + 1
    a, b = normalize_dim(dim1, ndim), normalize_dim(dim2, ndim)
    if a == b:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    if input.ndim == 0:
        input = P.reshape(input, shape=(1,))
    offset = operator.index(offset)
    side = input.shape[-1] + builtins.abs(offset)
    batch = iter(input.shape[:-1])
    shape = tuple(side if d in (a, b) else next(batch) for d in range(ndim))
    return P.embed_diagonal(input, shape, offset, a, b)


@public
def diag(input, diagonal=0):
    """The diagonal of a matrix (a copy), or the square matrix with a vector
    on its ``diagonal``-th diagonal."""
    input = as_tensor_arg(input)
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim != 2:
        raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + f"{input.ndim}D")
    return clone(P.diagonal(input, offset=operator.index(diagonal), dim1=0, dim2=1))


@public
@_named("TraceBackward0")
def trace(input):
    input = as_tensor_arg(input)
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return sum(P.diagonal(input, offset=0, dim1=0, dim2=1))


@public
def masked_fill(input, mask, value):
    """``value`` where ``mask`` (broadcast) is True, ``input`` elsewhere."""
    input = as_tensor_arg(input)
    mask = as_tensor_arg(mask, "mask")
    if mask._dtype is not dtypes.bool_:
        raise RuntimeError(
            f"masked_fill_ only supports boolean masks, but got mask with dtype {mask._dtype.name}"
        )
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(
                "masked_fill_ only supports a 0-dimensional value tensor, but got tensor "
                f"with {value.ndim} dimension(s)."
            )
        name = "MaskedFillBackward1"
    else:
        name = "MaskedFillBackward0"
    out = P.where(mask, _cast(_check_operand(value), input._dtype), input)
    if out.grad_fn is not None:
        out.grad_fn.label = name
    return out


def _narrow_spec(ndim, axis, start, stop):
    return (("slice", None, None, None),) * axis + (("slice", start, stop, None),)


@public
def split(tensor, split_size_or_sections, dim=0):
    tensor = as_tensor_arg(tensor, "tensor")
    axis = normalize_dim(dim, tensor.ndim)
    size = tensor.shape[axis]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0 and size:
            raise RuntimeError(
                f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}"
            )
        bounds = [(s, builtins.min(s + step, size)) for s in range(0, size, builtins.max(step, 1))]
        name = "SplitBackward0"
    else:
        sections = list(split_size_or_sections)
        if builtins.sum(sections) != size:
            raise RuntimeError(
                f"split_with_sizes expects split_sizes to sum exactly to {size} "
                f"(input tensor's size at dimension {axis}), but got "
                f"split_sizes={sections}"
            )
        starts = np.cumsum([0] + sections[:-1]).tolist()
        bounds = [(s, s + n) for s, n in zip(starts, sections)]
        name = "SplitWithSizesBackward0"
    parts = []
    for start, stop in bounds:
        part = P.index(tensor, spec=_narrow_spec(tensor.ndim, axis, start, stop))
        if part.grad_fn is not None:
            part.grad_fn.label = name
        parts.append(part)
    return tuple(parts)


@public
def chunk(input, chunks, dim=0):
    input = as_tensor_arg(input)
    if not isinstance(chunks, int):
        raise TypeError(f"chunk(): argument 'chunks' must be int, not {type(chunks).__name__}")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    axis = normalize_dim(dim, input.ndim)
    size = input.shape[axis]
    return split(input, builtins.max(1, -(-size // chunks)), axis)


@public
def unbind(input, dim=0):
    input = as_tensor_arg(input)
    axis = normalize_dim(dim, input.ndim)
    spec = (("slice", None, None, None),) * axis
    return tuple(P.index(input, spec=spec + (("int", i),)) for i in range(input.shape[axis]))


@public
def narrow(input, dim, start, length):
    input = as_tensor_arg(input)
    axis = normalize_dim(dim, input.ndim)
    size = input.shape[axis]
    if start < 0:
        start += size
    if not 0 <= start <= size or length < 0 or start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return P.index(input, spec=_narrow_spec(input.ndim, axis, start, start + length))


# --------------------------------------------------------------- gathering


def index_with_arrays(input, arrays):
    """input[arrays[0], arrays[1], ...] with integer tensors (numpy advanced indexing)."""
    return P.index(input, *arrays, spec=(("array",),) * len(arrays))


def _as_index_tensor(index, name="index"):
    index = as_tensor_arg(index, name)
    if index._dtype.category != dtypes.INTEGER:
        raise RuntimeError(f"{name}(): Expected dtype int64 for index")
    return index


@public
@_named("IndexSelectBackward0")
def index_select(input, dim, index):
    input = as_tensor_arg(input)
    index = _as_index_tensor(index, "index_select")
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    axis = normalize_dim(dim, input.ndim)
    _check_bounds(index, input.shape[axis] if input.ndim else 1, axis, "index_select")
    spec = (("slice", None, None, None),) * axis + (("array",),)
    return P.index(input, P.reshape(index, shape=(index.numel(),)), spec=spec)


def _check_bounds(index, size, axis, what):
    if index.numel() and (index._data.max() >= size or index._data.min() < -size):
        bad = index._data.max() if index._data.max() >= size else index._data.min()
        raise RuntimeError(
            f"{what}(): index {bad} is out of bounds for dimension {axis} with size {size}"
        )


@public
@_named("GatherBackward0")
def gather(input, dim, index):
    input = as_tensor_arg(input)
    index = _as_index_tensor(index, "gather")
    axis = normalize_dim(dim, input.ndim)
    if index.ndim != input.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for d in range(input.ndim):
        if d != axis and index.shape[d] > input.shape[d]:
            raise RuntimeError(
                f"Size does not match at dimension {d} expected index "
                f"{list(index.shape)} to be smaller than self "
                f"{list(input.shape)} apart from dimension {axis}"
            )
    _check_bounds(index, input.shape[axis], axis, "gather")
    return index_with_arrays(input, _grids(index, axis))


def _grids(index, axis) -> list:
    """Index arrays addressing, for each element of ``index``, its own position
    with its value in place of the coordinate along ``axis``."""
    grids = []
    for d in range(index.ndim):
        if d == axis:
            grids.append(index)
        else:
            shape = [1] * index.ndim
            shape[d] = index.shape[d]
            grids.append(P.reshape(positions(index.shape[d]), shape=tuple(shape)))
    return grids


def positions(n):
    """0, 1, ..., n - 1 as an int64 tensor; for a size that varies between
    calls, computed (a running count of ones) rather than a constant."""
    if is_symbolic(n):
        ones = P.broadcast_to(constant(1, dtypes.int64), shape=(n,))
        return P.cumsum(ones, axis=0, reverse=False) - 1
    return constant_array(np.arange(n), dtypes.int64)


def _scatter_args(what, input, dim, index, src):
    """Checks scatter's arguments; returns the axis and the part of src that is used."""
    input = as_tensor_arg(input)
    index = _as_index_tensor(index, what)
    axis = normalize_dim(dim, input.ndim)
    if index.ndim != input.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if isinstance(src, Tensor):
        if src._dtype is not input._dtype:
            raise RuntimeError(f"{what}(): Expected self.dtype to be equal to src.dtype")
        if src.ndim != input.ndim:
            raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    for d in range(input.ndim):
        too_big = d != axis and index.shape[d] > input.shape[d]
        if too_big or (isinstance(src, Tensor) and index.shape[d] > src.shape[d]):
            raise RuntimeError(
                f"Expected index {list(index.shape)} to be smaller than self "
                f"{list(input.shape)} apart from dimension {axis}"
                + (
                    f" and to be smaller size than src {list(src.shape)}"
                    if isinstance(src, Tensor)
                    else ""
                )
            )
    _check_bounds(index, input.shape[axis], axis, what)
    if isinstance(src, Tensor) and src.shape != index.shape:
        src = P.index(src, spec=tuple(("slice", 0, n, None) for n in index.shape))
    return input, index, axis, src


@public
def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """A copy of input with ``src[i][j]`` (or ``value``) written at
    ``[index[i][j]][j]`` (dim 0; likewise for others). Where index repeats a
    place, one of the values written there lands, as in PyTorch."""
    if src is None and value is None:
        raise TypeError("scatter() missing 1 required argument: 'src' or 'value'")
    src = value if src is None else src
    if reduce is not None:
        if reduce == "add":
            return scatter_add(input, dim, index, src)
        raise RuntimeError(
            f"scatter(): reduce={reduce!r} is not supported by fusegrad (reduce='add' is)"
        )
    input, index, axis, src = _scatter_args("scatter", input, dim, index, src)
    if not isinstance(src, Tensor):
        src = _cast(_check_operand(src), input._dtype)
    out = P.index_put(input, src, *_grids(index, axis), spec=(("array",),) * input.ndim)
    if out.grad_fn is not None:
        out.grad_fn.label = "ScatterBackward0" if src.ndim else "ScatterBackward1"
    return out


@public
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """input with each ``src[i][j]`` reduced into ``[index[i][j]][j]`` (dim 0;
    likewise for others) by "sum", "mean", "amax" or "amin", input's own value
    taking part unless ``include_self`` is False. An extreme's gradient is
    shared evenly between the values equal to it, as PyTorch shares it."""
    if reduce not in ("sum", "mean", "amax", "amin", "prod"):
        raise RuntimeError(
            f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}"
        )
    if reduce == "prod":
        raise RuntimeError('scatter_reduce(): reduce="prod" is not supported by fusegrad')
    input, index, axis, src = _scatter_args("scatter_reduce", input, dim, index, src)
    src = _cast(_check_operand(src), input._dtype)
    grids, spec = _grids(index, axis), (("array",),) * input.ndim

    def scattered(values):
        values = expand(values, index.shape)
        return P.scatter_add(values, *grids, spec=spec, shape=input.shape)

    received = scattered(P.broadcast_to(constant(1, input._dtype), shape=index.shape))
    hit = received > 0
    if reduce in ("sum", "mean"):
        base = input if include_self else P.where(hit, constant(0, input._dtype), input)
        total = base + scattered(src)
        if reduce == "sum":
            return total
        count = received + 1 if include_self else P.where(hit, received, 1)
        if input._dtype.is_floating_point:
            return total / count
        return _binary(P.floor_divide, total, count)
    minimum = reduce == "amin"
    if include_self:
        base = input
    else:  # where src reaches, start from the reduction's identity
        if input._dtype.is_floating_point:
            identity = math.inf if minimum else -math.inf
        else:
            limits = np.iinfo(input._dtype.np)
            identity = int(limits.max if minimum else limits.min)
        base = P.where(hit, constant(identity, input._dtype), input)
    value = P.scatter_extreme(base, expand(src, index.shape), *grids, spec=spec, minimum=minimum)
    if not input._dtype.is_floating_point:
        return value
    return _shared_by_ties(input, src, value, hit, include_self, axis, index, scattered)


def _shared_by_ties(input, src, value, hit, include_self, axis, index, scattered):
    """``value`` (each place's extreme), its gradient shared evenly between
    the values equal to it: the src elements reduced there and, when
    included, input's own. ``t - stop_gradient(t)`` is 0 with t's gradient."""
    src = expand(src, index.shape)
    src_tie = src == gather(value, axis, index)
    self_tie = (input == value) if include_self else P.logical_not(hit)
    ties = scattered(_cast(src_tie, input._dtype)) + _cast(self_tie, input._dtype)
    movable_src = src_tie & P.logical_not(isinf(src))
    movable_self = self_tie & P.logical_not(isinf(input))
    offset = scattered(P.where(movable_src, src - P.stop_gradient(src), 0.0)) + P.where(
        movable_self, input - P.stop_gradient(input), 0.0
    )
    return P.stop_gradient(value) + offset / ties


@public
@_named("ScatterAddBackward0")
def scatter_add(input, dim, index, src):
    """input with ``src[i][j]`` added at ``[index[i][j]][j]`` (dim 0; likewise for others)."""
    input, index, axis, src = _scatter_args("scatter_add", input, dim, index, src)
    added = P.scatter_add(
        src, *_grids(index, axis), spec=(("array",),) * input.ndim, shape=input.shape
    )
    return input + added


@public
@_named("IndexAddBackward0")
def index_add(input, dim, index, source, *, alpha=1):
    """input with ``alpha * source[..., i, ...]`` added at ``input[..., index[i], ...]``."""
    input = as_tensor_arg(input)
    source = as_tensor_arg(source, "source")
    index = _as_index_tensor(index, "index_add")
    if index.ndim > 1:
        raise IndexError("index_add_(): Index is supposed to be a vector")
    axis = normalize_dim(dim, input.ndim)
    if source._dtype is not input._dtype:
        raise RuntimeError(
            "index_add_(): self ("
            + _short(input._dtype)
            + ") and source ("
            + _short(source._dtype)
            + ") must have the same scalar type"
        )
    expected = input.shape[:axis] + (index.numel(),) + input.shape[axis + 1 :]
    if source.shape != expected and not (source.ndim == 0 and expected == (1,) * input.ndim):
        raise RuntimeError(
            f"index_add_(): source shape {list(source.shape)} does not match "
            f"the expected shape {list(expected)}"
        )
    _check_bounds(index, input.shape[axis] if input.ndim else 1, axis, "index_add_")
    if alpha != 1:
        source = source * alpha
    spec = (("slice", None, None, None),) * axis + (("array",),)
    flat = P.reshape(index, shape=(index.numel(),))
    source = P.reshape(source, shape=expected)
    return input + P.scatter_add(source, flat, spec=spec, shape=input.shape)


@public(method=False)
def take_along_dim(input, indices, dim):
    return gather(input, dim, indices)


# ------------------------------------------------------------ copies and casts


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


@public(method=False)
def numel(input) -> int:
    return input.numel()


@public(method=False)
def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


@public(method=False)
def is_floating_point(input) -> bool:
    return input.is_floating_point()


# ------------------------------------------------ more of PyTorch's ops, composed


@public
def sgn(input):
    return sign(input)


@public
def positive(input):
    return as_tensor_arg(input)


@public
@_named("FracBackward0")
def frac(input):
    input = as_tensor_arg(input)
    return input - P.trunc(input)


@public
def deg2rad(input):
    return _to_float(as_tensor_arg(input)) * (math.pi / 180.0)


@public
def rad2deg(input):
    return _to_float(as_tensor_arg(input)) * (180.0 / math.pi)


@public
@_named("LogitBackward0")
def logit(input, eps=None):
    x = _to_float(as_tensor_arg(input))
    if eps is not None:
        x = clamp(x, eps, 1.0 - eps)
    return P.log(x / (1.0 - x))


@public
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


def _floating_pair(a, b):
    """Two operands (tensors or numbers) promoted to one floating dtype."""
    a, b = _check_operand(a), _check_operand(b)
    dtype = dtypes.result_type(a, b)
    dtype = dtype if dtype.is_floating_point else dtypes.float32
    return _cast(a, dtype), _cast(b, dtype)


@public
@_named("XlogyBackward0")
def xlogy(input, other):
    x, y = _floating_pair(input, other)
    # xlogy(0, y) is 0 for every y but NaN; log sees 1 there when log(y) would
    # make it NaN, so the gradient in x there is 0, as in PyTorch
    defined_as_zero = (x == 0.0) & ((y <= 0.0) | (y == math.inf))
    return x * P.log(P.where(defined_as_zero, 1.0, y))


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


@public
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    input = as_tensor_arg(input)
    if not input._dtype.is_floating_point:
        return clone(input)
    # the tensor's own dtype's bounds, though a float16 one computes in float32
    largest = dtypes.finfo(input._dtype).max
    posinf = largest if posinf is None else posinf
    return _nan_to_num(input, nan, posinf, -largest if neginf is None else neginf)


@public
@_named("AddcmulBackward0")
def addcmul(input, tensor1, tensor2, *, value=1):
    return input + tensor1 * tensor2 * value if value != 1 else input + tensor1 * tensor2


@public
@_named("AddcdivBackward0")
def addcdiv(input, tensor1, tensor2, *, value=1):
    return input + tensor1 / tensor2 * value if value != 1 else input + tensor1 / tensor2


@public
@_named(
    lambda input, end, weight: "LerpBackward1" if isinstance(weight, Tensor) else "LerpBackward0"
)
def lerp(input, end, weight):
    input, end = as_tensor_arg(input), as_tensor_arg(end, "end")
    step = end - input
    if not isinstance(weight, Tensor):  # PyTorch's two formulas: exact at both ends
        return input + step * weight if builtins.abs(weight) < 0.5 else end - step * (1.0 - weight)
    return P.where(P.abs_(weight) < 0.5, input + step * weight, end - step * (1.0 - weight))


def _scaled_sum(input, product, beta, alpha):
    """beta * input + alpha * product; input only shapes the result when beta
    is 0 (its NaNs do not reach it), as in PyTorch."""
    product = product if alpha == 1 else product * alpha
    if beta == 0:
        shape = broadcast_shapes(input.shape, product.shape)
        return product if product.shape == shape else clone(broadcast_to(product, shape))
    return (input if beta == 1 else input * beta) + product


@public
@_named("AddmmBackward0")
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    return _scaled_sum(input, mm(mat1, mat2), beta, alpha)


@public
@_named("AddmvBackward0")
def addmv(input, mat, vec, *, beta=1, alpha=1):
    return _scaled_sum(input, mv(mat, vec), beta, alpha)


@public
@_named("AddrBackward0")
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    return _scaled_sum(input, outer(vec1, vec2), beta, alpha)


@public
@_named("BaddbmmBackward0")
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    return _scaled_sum(input, bmm(batch1, batch2), beta, alpha)


@public
@_named("AddbmmBackward0")
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    return _scaled_sum(input, P.reduce_sum(bmm(batch1, batch2), axes=(0,)), beta, alpha)


@public
@_named("SelectBackward0")
def select(input, dim, index):
    input = as_tensor_arg(input)
    axis = normalize_dim(dim, input.ndim)
    size = input.shape[axis]
    if not -size <= index < size:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(input.shape)} "
            f"at dimension {axis}"
        )
    spec = (("slice", None, None, None),) * axis + (("int", index % size),)
    return P.index(input, spec=spec)


@public
def movedim(input, source, destination):
    input = as_tensor_arg(input)
    sources = _dims_arg(source, input.ndim, "source")
    destinations = _dims_arg(destination, input.ndim, "destination")
    if len(sources) != len(destinations):
        raise RuntimeError(
            f"movedim: Invalid source or destination dims: source ({list(_ints(source))} dims) "
            f"should contain the same number of dims as destination "
            f"({list(_ints(destination))} dims)"
        )
    rest = iter(d for d in range(input.ndim) if d not in sources)
    moved = dict(zip(destinations, sources))
    return permute(input, tuple(moved[d] if d in moved else next(rest) for d in range(input.ndim)))


moveaxis = public(movedim, name="moveaxis")
swapdims = public(transpose, name="swapdims")


@public(function=False)
@_named("UnfoldBackward0")
def unfold(input, dimension, size, step):
    """Every window of ``size`` elements ``step`` apart along ``dimension``,
    as a new last dimension (a copy here; a view in PyTorch)."""
    input = as_tensor_arg(input)
    axis = normalize_dim(dimension, builtins.max(input.ndim, 1))
    length = input.shape[axis] if input.ndim else 1
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if size < 0 or size > length:
        raise RuntimeError(
            f"maximum size for tensor at dimension {axis} is {length} but size is {size}"
        )
    x = movedim(input, axis, -1) if input.ndim else P.reshape(input, shape=(1,))
    windows = P.windows(x, kernel=(size,), stride=(step,), dilation=(1,))  # (..., size, count)
    out = movedim(windows, -1, axis)
    return out if input.ndim else P.reshape(out, shape=(size,))


@public(function=False)
def view_as(input, other):
    return input.view(other.shape)


@public(function=False)
def reshape_as(input, other):
    return reshape(input, other.shape)


@public(function=False)
def ndimension(input):
    return input.ndim


@public
def ravel(input):
    return reshape(input, -1)


@public
def tile(input, dims):
    input = as_tensor_arg(input)
    dims = tuple(_ints(dims))
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


def _lifted_shape(shape, ndim):
    """numpy's atleast_Nd: a vector is a row of a matrix and the middle of a 3-d tensor."""
    if len(shape) >= ndim:
        return shape
    if ndim == 3 and len(shape) == 2:
        return shape + (1,)
    if ndim == 3 and len(shape) == 1:
        return (1,) + shape + (1,)
    return (1,) * (ndim - len(shape)) + shape


def _at_least(ndim, tensors):
    """Each tensor reshaped to ``ndim`` dimensions or more: one tensor for one
    given, a tuple for several or for one sequence."""
    sequence = len(tensors) == 1 and isinstance(tensors[0], (tuple, list))
    lifted = tuple(
        reshape(t, _lifted_shape(as_tensor_arg(t).shape, ndim))
        for t in (tensors[0] if sequence else tensors)
    )
    return lifted[0] if len(lifted) == 1 and not sequence else lifted


@public(method=False)
def atleast_1d(*tensors):
    return _at_least(1, tensors)


@public(method=False)
def atleast_2d(*tensors):
    return _at_least(2, tensors)


@public(method=False)
def atleast_3d(*tensors):
    return _at_least(3, tensors)


@public(method=False)
def hstack(tensors):
    tensors = _at_least(1, (tensors,))
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


@public(method=False)
def vstack(tensors):
    return cat(_at_least(2, (tensors,)), 0)


row_stack = public(vstack, name="row_stack", method=False)


@public(method=False)
def dstack(tensors):
    return cat(_at_least(3, (tensors,)), 2)


@public(method=False)
def column_stack(tensors):
    columns = [reshape(t, (t.numel(), 1)) if as_tensor_arg(t).ndim <= 1 else t for t in tensors]
    return cat(columns, 1)


@public(method=False)
def meshgrid(*tensors, indexing=None):
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn(
            "torch.meshgrid: in an upcoming release, it will be required to pass the indexing "
            "argument.",
            UserWarning,
            stacklevel=2,
        )
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(
            f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}'
        )
    for t in tensors:
        if as_tensor_arg(t).ndim > 1:
            raise RuntimeError(
                f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t}"
            )
        if t._dtype is not tensors[0]._dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    axes = [reshape(t, -1) for t in tensors]
    swap = indexing == "xy" and len(axes) >= 2  # "xy": "ij" with the first two swapped
    if swap:
        axes[0], axes[1] = axes[1], axes[0]
    shape = tuple(a.shape[0] for a in axes)
    grids = [
        expand(reshape(a, tuple(-1 if d == k else 1 for d in range(len(axes)))), shape)
        for k, a in enumerate(axes)
    ]
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def _triangle_indices(row, col, offset, lower, dtype, name):
    if row < 0 or col < 0:
        raise RuntimeError(f"{name} expects non-negative row and col, got {row} and {col}")
    rows, cols = np.tril_indices(row, offset, col) if lower else np.triu_indices(row, offset, col)
    dtype = dtypes.int64 if dtype is None else dtypes.as_dtype(dtype)
    return Tensor._make(np.stack([rows, cols]).astype(dtype.np), dtype)


@public(method=False)
def tril_indices(row, col, offset=0, *, dtype=None, device=None):
    return _triangle_indices(row, col, offset, True, dtype, "tril_indices")


@public(method=False)
def triu_indices(row, col, offset=0, *, dtype=None, device=None):
    return _triangle_indices(row, col, offset, False, dtype, "triu_indices")


@public
def rot90(input, k=1, dims=(0, 1)):
    input = as_tensor_arg(input)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    a, b = (normalize_dim(d, input.ndim) for d in dims)
    if a == b:
        raise RuntimeError(
            f"expected rotation dims to be different, but got dim0 = {a} and dim1 = {b}"
        )
    k %= 4
    if k == 1:
        return transpose(flip(input, (b,)), a, b)
    if k == 2:
        return flip(input, (a, b))
    if k == 3:
        return flip(transpose(input, a, b), (b,))
    return clone(input)


@public
def diff(input, n=1, dim=-1, prepend=None, append=None):
    input = as_tensor_arg(input)
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    axis = normalize_dim(dim, input.ndim)
    parts = [t for t in (prepend, input, append) if t is not None]
    x = cat(parts, axis) if len(parts) > 1 else input
    for _ in range(n):
        size = x.shape[axis]
        if size == 0:
            break
        x = narrow(x, axis, 1, size - 1) - narrow(x, axis, 0, size - 1)
    return x


@public
def count_nonzero(input, dim=None):
    input = as_tensor_arg(input)
    return sum(input != 0, dim)


@public
def take(input, index):
    input = as_tensor_arg(input)
    index = _as_index_tensor(index)
    flat = reshape(input, -1)
    _check_bounds(index, flat.shape[0], 0, "take")
    return index_with_arrays(flat, [index])


@public
def diagflat(input, offset=0):
    return diag(reshape(as_tensor_arg(input), -1), offset)


# ---------------------------------------------------------- products, composed


@public
def inner(input, other):
    input, other = as_tensor_arg(input), as_tensor_arg(other, "other")
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    return tensordot(input, other, ([-1], [-1]))


@public(method=False)
def tensordot(a, b, dims=2):
    a, b = as_tensor_arg(a, "a"), as_tensor_arg(b, "b")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        dims_a, dims_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        dims_a, dims_b = (list(_ints(d)) for d in dims)
    dims_a = [normalize_dim(d, a.ndim) for d in dims_a]
    dims_b = [normalize_dim(d, b.ndim) for d in dims_b]
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db]:
            raise RuntimeError(
                f"contracted dimensions need to match, but first has size {a.shape[da]} in dim "
                f"{da} and second has size {b.shape[db]} in dim {db}"
            )
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    contracted = math.prod(a.shape[d] for d in dims_a)
    left = reshape(permute(a, free_a + dims_a), (math.prod(a.shape[d] for d in free_a), contracted))
    right = reshape(
        permute(b, dims_b + free_b), (contracted, math.prod(b.shape[d] for d in free_b))
    )
    shape = tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b)
    return reshape(mm(*_promote_all([left, right], "tensordot")), shape)


# --------------------------------------- more reductions, splits and products


MedianResult = _return_type("median")
AminmaxResult = namedtuple("aminmax", ["min", "max"])


def _lower_median(input, dim, keepdim, skip_nan):
    """The lower median along ``dim`` and where it is: the (n-1)//2-th of the
    sorted values, or NaN (the first one) where a row holds one, unless
    ``skip_nan``, which takes the median of the other values."""
    x, axis, order = _order(input, dim, False)  # NaNs sort last
    n = x.shape[axis]
    nans = sum(isnan(x), axis, keepdim=True)
    if skip_nan:
        rank = clamp_min((n - nans - 1) // 2, 0)
    else:
        rank = where(nans > 0, n - nans, (n - 1) // 2)
    indices = gather(order, axis, rank)
    values = gather(x, axis, indices)
    if not keepdim or input.ndim == 0:
        shape = input.shape if input.ndim == 0 else reduced_shape(x.shape, (axis,), False)
        values, indices = P.reshape(values, shape=shape), P.reshape(indices, shape=shape)
    return values, indices


def _shared_between_ties(x, value):
    """``value``, with its gradient shared evenly between the elements of x
    equal to it (NaN ones where it is NaN), as PyTorch's median of a whole
    tensor shares it. ``x - stop_gradient(x)`` is 0 with x's gradient, so the
    value stays exactly the element's (infinite ones take no gradient)."""
    if not x._dtype.is_floating_point:
        return value
    tie = (x == value) | (isnan(x) & isnan(value))
    movable = tie & P.logical_not(isinf(x))
    count = sum(tie)
    offset = sum(P.where(movable, x - P.stop_gradient(x), 0.0)) / _cast(count, x._dtype)
    return P.stop_gradient(value) + offset


def _median(input, dim, keepdim, skip_nan, name, backward_name):
    input = as_tensor_arg(input)
    if dim is None:
        if input.numel() == 0:
            if not input._dtype.is_floating_point:
                raise RuntimeError("median() input tensor cannot be empty")
            return reshape(sum(input) * math.nan, ())
        flat = reshape(input, -1)
        values, _ = _lower_median(flat, 0, False, skip_nan)
        result = values = _shared_between_ties(flat, values)
    else:
        _require_nonempty(input, normalize_axes(dim, input.ndim), name)
        values, indices = _lower_median(input, dim, keepdim, skip_nan)
        result = MedianResult(values, indices)
    if values.grad_fn is not None:
        values.grad_fn.label = backward_name
    return result


@public
def median(input, dim=None, keepdim=False):
    """The lower of the two middle values (PyTorch's median), NaN where there is one."""
    name = "MedianBackward0" if dim is None else "MedianBackward1"
    return _median(input, dim, keepdim, False, "median", name)


@public
def nanmedian(input, dim=None, keepdim=False):
    name = "NanmedianBackward0" if dim is None else "MedianBackward1"
    return _median(input, dim, keepdim, True, "nanmedian", name)


@public
def aminmax(input, *, dim=None, keepdim=False):
    return AminmaxResult(
        amin(input, () if dim is None else dim, keepdim),
        amax(input, () if dim is None else dim, keepdim),
    )


@public
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    input = as_tensor_arg(input)
    if input._dtype.is_floating_point:
        input = P.where(isnan(input), 0.0, input)
    return sum(input, dim, keepdim, dtype=dtype)


@public
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    input = as_tensor_arg(input)
    if not input._dtype.is_floating_point:
        raise RuntimeError(
            "nanmean(): expected input to have floating point or complex dtype but got "
            + input._dtype.scalar_name
        )
    present = P.logical_not(isnan(input))
    return nansum(input, dim, keepdim, dtype=dtype) / sum(present, dim, keepdim)


@public
def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


@public
def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


@public
def fmax(input, other):
    """The larger of the two, the other where one is NaN."""
    return _binary(_nan_ignoring(P.maximum), input, other)


@public
def fmin(input, other):
    return _binary(_nan_ignoring(P.minimum), input, other)


def _nan_ignoring(prim):
    def op(a, b):
        if not a._dtype.is_floating_point:
            return prim(a, b)
        return P.where(isnan(a), b, P.where(isnan(b), a, prim(a, b)))

    return op


@public
def heaviside(input, values):
    input, values = as_tensor_arg(input), as_tensor_arg(values, "values")
    if input._dtype is not values._dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes")
    return P.where(input == 0, values, _cast(input > 0, input._dtype))


def _eager_only(what, why="its result's shape depends on the input's values"):
    if recording.trace is not None:
        recording.trace.unsupported(f"{what} ({why})")


@public
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values (slices along ``dim``), sorted, with where each
    element went and how often each value occurs. Eager only, no gradient."""
    input = as_tensor_arg(input)
    _eager_only("unique")
    data = (
        input._data if dim is None else np.moveaxis(input._data, normalize_dim(dim, input.ndim), 0)
    )
    values, inverse, counts = np.unique(
        data.reshape(-1) if dim is None else data.reshape(data.shape[0], -1),
        return_inverse=True,
        return_counts=True,
        axis=None if dim is None else 0,
    )
    if dim is None:
        inverse = inverse.reshape(input.shape)
    else:
        values = np.moveaxis(
            values.reshape((-1,) + data.shape[1:]), 0, normalize_dim(dim, input.ndim)
        )
    result = [Tensor._make(np.ascontiguousarray(values), input._dtype)]
    if return_inverse:
        result.append(Tensor._make(inverse.astype(np.int64)))
    if return_counts:
        result.append(Tensor._make(counts.astype(np.int64)))
    return result[0] if len(result) == 1 else tuple(result)


@public
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Each run of equal consecutive values (slices along ``dim``) once. Eager only."""
    input = as_tensor_arg(input)
    _eager_only("unique_consecutive")
    axis = 0 if dim is None else normalize_dim(dim, input.ndim)
    data = input._data.reshape(-1) if dim is None else np.moveaxis(input._data, axis, 0)
    rows = data.reshape(data.shape[0], -1)
    starts = np.ones(len(rows), bool)
    starts[1:] = np.any(rows[1:] != rows[:-1], axis=1)
    values = data[starts]
    if dim is not None:
        values = np.moveaxis(values, 0, axis)
    result = [Tensor._make(np.ascontiguousarray(values), input._dtype)]
    if return_inverse:
        inverse = np.cumsum(starts) - 1
        result.append(
            Tensor._make(inverse.reshape(input.shape if dim is None else -1).astype(np.int64))
        )
    if return_counts:
        result.append(
            Tensor._make(np.diff(np.append(np.flatnonzero(starts), len(rows))).astype(np.int64))
        )
    return result[0] if len(result) == 1 else tuple(result)


@public
def bincount(input, weights=None, minlength=0):
    """How often each non-negative integer occurs (weights summed instead when
    given). Eager only, no gradient."""
    input = as_tensor_arg(input)
    _eager_only("bincount")
    if input.ndim != 1 or input._dtype.category != dtypes.INTEGER:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if input.numel() and int(input._data.min()) < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is None:
        return Tensor._make(np.bincount(input._data, minlength=minlength).astype(np.int64))
    weights = as_tensor_arg(weights, "weights")
    counts = np.bincount(input._data, weights._data, minlength=minlength)
    dtype = weights._dtype if weights._dtype.is_floating_point else dtypes.float64
    return Tensor._make(counts.astype(dtype.np), dtype)


@public
def masked_select(input, mask):
    """The elements where ``mask`` (broadcast with input) holds, as a vector.
    Eager only: how many there are is a value."""
    input, mask = as_tensor_arg(input), as_tensor_arg(mask, "mask")
    if mask._dtype is not dtypes.bool_:
        raise RuntimeError(
            f"masked_select: expected BoolTensor for mask, got {mask._dtype.scalar_name}"
        )
    shape = broadcast_shapes(input.shape, mask.shape)
    return expand(input, shape)[expand(mask, shape)]


@public
def index_fill(input, dim, index, value):
    input = as_tensor_arg(input)
    axis = normalize_dim(dim, builtins.max(input.ndim, 1))
    index = _as_index_tensor(index, "index_fill")
    size = input.shape[axis] if input.ndim else 1
    _check_bounds(index, size, axis, "index_fill_")
    return P.where(_positions_hit(index, size, axis, input.ndim), _cast(value, input._dtype), input)


def _positions_hit(index, size, axis, ndim):
    """A bool tensor, 1 along every axis but ``axis``: whether each position
    along it is in ``index``."""
    wrapped = P.where(index < 0, index + size, index)
    flat = P.reshape(wrapped, shape=(index.numel(), 1))
    hit = any(flat == P.reshape(positions(size), shape=(1, size)), 0)
    return P.reshape(hit, shape=tuple(size if d == axis else 1 for d in range(ndim)))


@public
def index_copy(input, dim, index, source):
    """input with ``source[..., i, ...]`` at ``input[..., index[i], ...]``."""
    input = as_tensor_arg(input)
    axis = normalize_dim(dim, builtins.max(input.ndim, 1))
    index = _as_index_tensor(index, "index_copy")
    zeros = P.broadcast_to(constant(0, input._dtype), shape=input.shape)
    placed = index_add(zeros, dim, index, source)
    return P.where(
        _positions_hit(index, input.shape[axis] if input.ndim else 1, axis, input.ndim),
        placed,
        input,
    )


@public(method=False)
def block_diag(*tensors):
    """The matrices (scalars and vectors as one row) along a diagonal, zeros elsewhere."""
    if not tensors:
        return Tensor._make(np.zeros((1, 0), np.float32))
    blocks = _promote_all(
        [reshape(t, _lifted_shape(as_tensor_arg(t).shape, 2)) for t in tensors], "block_diag"
    )
    for k, b in enumerate(blocks):
        if b.ndim != 2:
            raise RuntimeError(
                f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {k} has "
                f"{b.ndim} dimensions"
            )
    width = builtins.sum(b.shape[1] for b in blocks)
    rows, before = [], 0
    for b in blocks:
        after = width - before - b.shape[1]
        rows.append(P.pad(b, widths=((0, 0), (before, after)), value=0))
        before += b.shape[1]
    return cat(rows, 0)


@public(method=False)
def cartesian_prod(*tensors):
    if len(tensors) == 1:
        return as_tensor_arg(tensors[0])
    grids = meshgrid(*tensors, indexing="ij")
    return stack([reshape(g, -1) for g in grids], 1)


@public
def kron(input, other):
    a, b = as_tensor_arg(input), as_tensor_arg(other, "other")
    ndim = builtins.max(a.ndim, b.ndim)
    a = reshape(a, (1,) * (ndim - a.ndim) + a.shape)
    b = reshape(b, (1,) * (ndim - b.ndim) + b.shape)
    interleaved_a = reshape(a, tuple(s for size in a.shape for s in (size, 1)))
    interleaved_b = reshape(b, tuple(s for size in b.shape for s in (1, size)))
    return reshape(interleaved_a * interleaved_b, tuple(x * y for x, y in zip(a.shape, b.shape)))


@public(method=False)
def cdist(x1, x2, p=2.0, compute_mode=None):
    """The p-norm distance between each row of x1 and each row of x2 (per batch)."""
    x1, x2 = as_tensor_arg(x1, "x1"), as_tensor_arg(x2, "x2")
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(
            f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D, X2 got: {x2.ndim}D"
        )
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(
            f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}"
        )
    differences = unsqueeze(x1, -2) - unsqueeze(x2, -3)
    return norm(differences, p, -1)


@public
def dist(input, other, p=2):
    return norm(reshape(as_tensor_arg(input) - other, -1), p)


@public
def tensor_split(input, indices_or_sections, dim=0):
    input = as_tensor_arg(input)
    axis = normalize_dim(dim, input.ndim)
    size = input.shape[axis]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, int):
        sections = indices_or_sections
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        longer, length = size % sections, size // sections
        cuts = [k * length + builtins.min(k, longer) for k in range(1, sections)]
    else:
        cuts = list(indices_or_sections)
    parts = []
    for start, stop in zip([0, *cuts], [*cuts, size]):
        start, stop = builtins.min(start, size), builtins.min(stop, size)  # past the end: empty
        parts.append(narrow(input, axis, start, builtins.max(stop - start, 0)))
    return tuple(parts)


def _split_along(input, sections, dim, name):
    input = as_tensor_arg(input)
    if isinstance(sections, int) and input.shape[dim] % sections:
        raise RuntimeError(
            f"torch.{name} attempted to split along dimension {dim}, but the size of the "
            f"dimension {input.shape[dim]} is not divisible by the split_size {sections}!"
        )
    return tensor_split(input, sections, dim)


@public
def hsplit(input, indices_or_sections):
    return _split_along(input, indices_or_sections, 1 if input.ndim > 1 else 0, "hsplit")


@public
def vsplit(input, indices_or_sections):
    if input.ndim < 2:
        raise RuntimeError(
            f"torch.vsplit requires a tensor with at least 2 dimension, but got a tensor with "
            f"{input.ndim} dimensions!"
        )
    return _split_along(input, indices_or_sections, 0, "vsplit")


@public
def dsplit(input, indices_or_sections):
    if input.ndim < 3:
        raise RuntimeError(
            f"torch.dsplit requires a tensor with at least 3 dimension, but got a tensor with "
            f"{input.ndim} dimensions!"
        )
    return _split_along(input, indices_or_sections, 2, "dsplit")


@public(method=False)
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """For each value, how many of the sorted sequence's last-dim values lie
    below it (at or below it for ``right``): compares every pair, so it
    compiles, with memory the product of the two sizes."""
    sequence = as_tensor_arg(sorted_sequence, "sorted_sequence")
    values = input if isinstance(input, Tensor) else constant(input, sequence._dtype)
    if sorter is not None:
        sequence = take_along_dim(sequence, sorter, -1)
    right = right or side == "right"
    if sequence.ndim > 1 and sequence.shape[:-1] != values.shape[:-1]:
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
            "dimensions of boundaries tensor and input value tensor must match, but we got "
            f"boundaries tensor {list(sequence.shape)} and input value tensor {list(values.shape)}"
        )
    rows = sequence if sequence.ndim == 1 else unsqueeze(sequence, -2)
    columns = unsqueeze(values, -1)
    below = rows <= columns if right else rows < columns
    return sum(below, -1, dtype=dtypes.int32 if out_int32 else dtypes.int64)


@public
def bucketize(input, boundaries, *, out_int32=False, right=False):
    if as_tensor_arg(boundaries, "boundaries").ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


@public(method=False)
def trapezoid(y, x=None, *, dx=None, dim=-1):
    y = as_tensor_arg(y, "y")
    axis = normalize_dim(dim, y.ndim)
    n = y.shape[axis]
    if n == 0:
        return sum(y, axis)
    pairs = narrow(y, axis, 1, n - 1) + narrow(y, axis, 0, n - 1)
    if x is None:
        return sum(pairs, axis) * ((1.0 if dx is None else dx) * 0.5)
    x = as_tensor_arg(x, "x")
    if x.ndim == 1:
        x = reshape(x, tuple(-1 if d == axis else 1 for d in range(y.ndim)))
        along = axis
    else:
        along = normalize_dim(dim, x.ndim)
    steps = diff(x, dim=along)
    return sum(pairs * steps, axis) * 0.5


trapz = public(trapezoid, name="trapz", method=False)


@public
def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance of the rows (variables) over the columns (observations),
    weighted as numpy's cov."""
    x = _to_float(as_tensor_arg(input))
    if x.ndim > 2:
        raise RuntimeError(
            "cov(): expected input to have two or fewer dimensions but got an input with "
            f"{x.ndim} dimensions"
        )
    x = reshape(x, (1, -1)) if x.ndim < 2 else x
    observations = x.shape[1]
    weights = None
    for given in (fweights, aweights):
        if given is not None:
            given = _cast(as_tensor_arg(given, "weights"), x._dtype)
            weights = given if weights is None else weights * given
    if weights is None:
        total = constant(float(observations), x._dtype)
        average = mean(x, 1, keepdim=True)
        centered = x - average
        scale = total - correction
        product = matmul(centered, transpose(centered, 0, 1))
    else:
        total = sum(weights)
        average = sum(x * weights, 1, keepdim=True) / total
        centered = x - average
        if correction == 0:
            scale = total
        elif aweights is None:
            scale = total - correction
        else:
            scale = (
                total - correction * sum(weights * _cast(as_tensor_arg(aweights), x._dtype)) / total
            )
        product = matmul(centered * weights, transpose(centered, 0, 1))
    out = product / P.maximum(scale, constant(0.0, x._dtype))
    return P.reshape(out, shape=()) if as_tensor_arg(input).ndim < 2 else out


@public
def corrcoef(input):
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = P.sqrt(diagonal(c))
    r = c / unsqueeze(d, 1) / unsqueeze(d, 0)
    return clamp(r, -1.0, 1.0)


# -------------------------------------------- order statistics and the rest


CummaxResult = _return_type("cummax")
CumminResult = _return_type("cummin")


def _running(input, dim, minimum, result_type, backward_name):
    input = as_tensor_arg(input)
    x = input if input.ndim else P.reshape(input, shape=(1,))
    axis = normalize_dim(dim, x.ndim)
    indices = P.running_extreme(x, axis=axis, minimum=minimum)
    values = gather(x, axis, indices)
    if input.ndim == 0:
        values, indices = P.reshape(values, shape=()), P.reshape(indices, shape=())
    if values.grad_fn is not None:
        values.grad_fn.label = backward_name
    return result_type(values, indices)


@public
def cummax(input, dim):
    return _running(input, dim, False, CummaxResult, "CummaxBackward0")


@public
def cummin(input, dim):
    return _running(input, dim, True, CumminResult, "CumminBackward0")


@public
@_named("LogcumsumexpBackward0")
def logcumsumexp(input, dim):
    input = _to_float(as_tensor_arg(input))
    x = input if input.ndim else P.reshape(input, shape=(1,))
    out = P.logcumsumexp(x, axis=normalize_dim(dim, x.ndim), reverse=False)
    return out if input.ndim else P.reshape(out, shape=())


KthvalueResult = _return_type("kthvalue")


@public
def kthvalue(input, k, dim=-1, keepdim=False):
    """The k-th smallest value along ``dim`` (k from 1) and where it is."""
    input = as_tensor_arg(input)
    x, axis, order = _order(input, dim, False)
    if not 1 <= k <= x.shape[axis]:
        raise IndexError(f"kthvalue(): selected number k out of range for dimension {axis}")
    indices = narrow(order, axis, k - 1, 1)
    values = gather(x, axis, indices)
    if not keepdim or input.ndim == 0:
        shape = input.shape if input.ndim == 0 else reduced_shape(x.shape, (axis,), False)
        values, indices = P.reshape(values, shape=shape), P.reshape(indices, shape=shape)
    if values.grad_fn is not None:
        values.grad_fn.label = "KthvalueBackward0"
    return KthvalueResult(values, indices)


def _quantile(input, q, dim, keepdim, interpolation, skip_nan, name):
    """numpy's quantile: q in [0, 1] of the sorted values, the rank q * (n-1)
    between two of them resolved by ``interpolation``; NaN where a row holds
    one (``skip_nan``: of the other values)."""
    input = as_tensor_arg(input)
    if not input._dtype.is_floating_point:
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    methods = ("linear", "lower", "higher", "midpoint", "nearest")
    if interpolation not in methods:
        raise RuntimeError(
            f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest. "
            f"Got {interpolation}"
        )
    scalar_q = not isinstance(q, Tensor)
    qs = constant_array(np.atleast_1d(np.asarray(q, np.float64)), dtypes.float64) if scalar_q else q
    if ((qs._data < 0) | (qs._data > 1)).any():
        raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    x = reshape(input, -1) if dim is None else input
    axis = 0 if dim is None else normalize_dim(dim, x.ndim)
    x = movedim(x, axis, -1)
    values = sort(x, -1).values  # NaNs last
    n = x.shape[-1]
    nans = sum(isnan(x), -1, keepdim=True)
    count = n - nans if skip_nan else constant(n, dtypes.int64)
    qs64 = reshape(_cast(qs, dtypes.float64), (-1,) + (1,) * x.ndim)
    rank = qs64 * _cast(count - 1, dtypes.float64)
    last = float(builtins.max(n - 1, 0))  # ranks stay inside the rows, whatever q holds
    below = clamp(P.floor(rank), 0.0, last)
    above = clamp(P.ceil(rank), 0.0, last)
    if interpolation == "nearest":
        below = above = clamp(P.round_(rank), 0.0, last)
    elif interpolation == "lower":
        above = below
    elif interpolation == "higher":
        below = above
    stacked = expand(unsqueeze(values, 0), (qs64.shape[0],) + values.shape)
    positions_shape = stacked.shape[:-1] + (1,)  # one rank per row and q
    low = gather(stacked, -1, expand(_cast(below, dtypes.int64), positions_shape))
    high = gather(stacked, -1, expand(_cast(above, dtypes.int64), positions_shape))
    if interpolation == "midpoint":
        out = low + (high - low) * 0.5
    elif interpolation == "linear":
        out = low + (high - low) * _cast(rank - below, input._dtype)
    else:
        out = low
    if not skip_nan:
        out = P.where(nans > 0, math.nan, out)
    else:
        out = P.where(count == 0, math.nan, out)
    out = P.reshape(out, shape=out.shape[:-1])  # the rank axis, one position
    if keepdim:
        kept = [1] * input.ndim if dim is None else list(input.shape)
        if dim is not None:
            kept[axis] = 1
        out = P.reshape(out, shape=(out.shape[0], *kept))
    return P.reshape(out, shape=out.shape[1:]) if scalar_q and np.ndim(q) == 0 else out


@public
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


@public
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")


@public
def msort(input):
    return sort(input, 0).values


@public
def narrow_copy(input, dim, start, length):
    return clone(narrow(input, dim, start, length))


@public
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    elements = as_tensor_arg(elements, "elements")
    tests = (
        test_elements
        if isinstance(test_elements, Tensor)
        else constant_array(np.atleast_1d(np.asarray(test_elements)), elements._dtype)
    )
    found = any(unsqueeze(elements, -1) == reshape(tests, -1), -1)
    return P.logical_not(found) if invert else found


@public
def float_power(input, exponent):
    """input ** exponent in float64."""
    base = _cast(_check_operand(input), dtypes.float64)
    return pow(
        base, _cast(exponent, dtypes.float64) if isinstance(exponent, Tensor) else float(exponent)
    )


@public
def ldexp(input, other):
    """input * 2 ** other."""
    input = _to_float(as_tensor_arg(input))
    return input * P.exp2(_cast(as_tensor_arg(other, "other"), input._dtype))


@public
def vdot(input, other):
    return dot(input, other)


@public
def is_complex(input) -> bool:
    return False


@public
def isreal(input):
    input = as_tensor_arg(input)
    return P.logical_not(P.broadcast_to(constant(False, dtypes.bool_), shape=input.shape))


@public
def is_nonzero(input) -> bool:
    input = as_tensor_arg(input)
    if input.numel() != 1:
        if input.numel() == 0:
            raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item())


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


def _linear_positions(shape, indices):
    """Where input[indices] (integer tensors, one per leading dimension,
    broadcast together) lies in the flattened input."""
    indices = [_as_index_tensor(i, "index_put") for i in indices]
    grid = broadcast_shapes(*[i.shape for i in indices])
    linear = None
    for axis, index in enumerate(indices):
        size = shape[axis]
        _check_bounds(index, size, axis, "index_put")
        wrapped = expand(P.where(index < 0, index + size, index), grid)
        stride = math.prod(shape[axis + 1 : len(indices)])
        linear = wrapped * stride if linear is None else linear + wrapped * stride
    return linear, grid


@public
def index_put(input, indices, values, accumulate=False):
    """input with ``values`` at input[indices] (indices a tuple of integer
    tensors); with ``accumulate`` they are added, repeated positions summed."""
    input = as_tensor_arg(input)
    indices = tuple(indices)
    values = _cast(
        values if isinstance(values, Tensor) else constant(values, input._dtype), input._dtype
    )
    if not accumulate:
        return P.index_put(input, values, *indices, spec=(("array",),) * len(indices))
    linear, grid = _linear_positions(input.shape, indices)
    rest = input.shape[len(indices) :]
    rows = reshape(input, (math.prod(input.shape[: len(indices)]),) + rest)
    added = expand(values, grid + rest)
    flat = index_add(rows, 0, reshape(linear, -1), reshape(added, (-1,) + rest))
    return reshape(flat, input.shape)


@public
def put(input, index, source, accumulate=False):
    """input with ``source`` at the flattened positions ``index``."""
    input = as_tensor_arg(input)
    flat = reshape(input, -1)
    index, source = reshape(_as_index_tensor(index, "put"), -1), reshape(source, -1)
    return reshape(index_put(flat, (index,), source, accumulate), input.shape)


@public(function=False)
def storage_offset(input) -> int:
    """How many elements into its storage the tensor's first one lies."""
    storage = input._data
    while storage.base is not None and isinstance(storage.base, np.ndarray):
        storage = storage.base
    offset = input._data.__array_interface__["data"][0] - storage.__array_interface__["data"][0]
    return offset // input._data.itemsize


def _bits(prim, name, a, b):
    a, b = _check_operand(a), _check_operand(b)
    dtype = dtypes.result_type(a, b)
    if dtype.category == dtypes.FLOATING:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{dtype.scalar_name}'")
    return prim(_cast(a, dtype), _cast(b, dtype))


@public
def bitwise_and(input, other):
    return _bits(P.bitwise_and, "bitwise_and", input, other)


@public
def bitwise_or(input, other):
    return _bits(P.bitwise_or, "bitwise_or", input, other)


@public
def bitwise_xor(input, other):
    return _bits(P.bitwise_xor, "bitwise_xor", input, other)


@public
def bitwise_not(input):
    input = as_tensor_arg(input)
    if input._dtype.category == dtypes.FLOATING:
        raise NotImplementedError(
            f"\"bitwise_not_cpu\" not implemented for '{input._dtype.scalar_name}'"
        )
    return P.bitwise_not(input)


@public
def bitwise_left_shift(input, other):
    return _bits(P.left_shift, "lshift", input, other)


@public
def bitwise_right_shift(input, other):
    return _bits(P.right_shift, "rshift", input, other)


@public
def gcd(input, other):
    return _bits(P.gcd, "gcd", input, other)


@public
def lcm(input, other):
    return _bits(P.lcm, "lcm", input, other)


def _scattered(input, src, spec, name):
    """input with ``src`` written where ``spec`` indexes: the functional
    form of an assignment into a view."""
    input, src = as_tensor_arg(input), as_tensor_arg(src, "src")
    target = P.index(input, spec=spec).shape
    if src.shape != target:
        raise RuntimeError(
            f"expected src to have a size equal to the slice of self. src size = "
            f"{list(src.shape)}, slice size = {list(target)}"
        )
    return P.index_put(input, _cast(src, input._dtype), spec=spec)


@public
def select_scatter(input, src, dim, index):
    input = as_tensor_arg(input)
    axis = normalize_dim(dim, input.ndim)
    size = input.shape[axis]
    if not -size <= index < size:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(input.shape)} "
            f"at dimension {axis}"
        )
    spec = (("slice", None, None, None),) * axis + (("int", index % size),)
    return _scattered(input, src, spec, "select_scatter")


@public
def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    input = as_tensor_arg(input)
    axis = normalize_dim(dim, input.ndim)
    spec = (("slice", None, None, None),) * axis + (("slice", start, end, step),)
    return _scattered(input, src, spec, "slice_scatter")


@public(method=False)
def combinations(input, r=2, with_replacement=False):
    """The r-element combinations of a vector's elements, one per row."""
    input = as_tensor_arg(input)
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    choose = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(choose(range(input.shape[0]), r))
    if not rows:
        return P.index(input, spec=(("slice", 0, 0, None),))  # PyTorch's empty vector
    positions_taken = constant_array(np.array(rows, np.int64).reshape(-1), dtypes.int64)
    return reshape(index_with_arrays(input, [positions_taken]), (len(rows), r))


@public(method=False)
def vander(x, N=None, increasing=False):
    """The powers x^0 .. x^(N-1) of each element, one row each (highest first
    unless ``increasing``)."""
    x = as_tensor_arg(x, "x")
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    count = x.shape[0] if N is None else N
    if count < 0:
        raise RuntimeError("N must be non-negative.")
    powers = range(count) if increasing else range(count - 1, -1, -1)
    columns = [
        pow(x, k) if k else P.broadcast_to(constant(1, x._dtype), shape=x.shape) for k in powers
    ]
    return stack(columns, 1) if columns else reshape(x, (x.shape[0], 0)) * 0


@public(method=False)
def unravel_index(indices, shape):
    """The coordinates, one tensor per dimension of ``shape``, of flat positions."""
    indices = _as_index_tensor(indices, "unravel_index")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    total = math.prod(shape)
    if bool(any((indices < -total) | (indices >= builtins.max(total, 1)))):
        raise RuntimeError("index out of bounds for the unraveled shape")
    rest = P.where(indices < 0, indices + total, indices)
    coordinates = []
    for size in reversed(shape):
        coordinates.append(_binary(P.remainder, rest, size))
        rest = _binary(P.floor_divide, rest, size)
    return tuple(reversed(coordinates))


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
@_named("RenormBackward0")
def renorm(input, p, dim, maxnorm):
    """Each slice along ``dim`` whose p-norm exceeds ``maxnorm`` scaled down to it."""
    input = _to_float(as_tensor_arg(input))
    axis = normalize_dim(dim, input.ndim)
    others = tuple(d for d in range(input.ndim) if d != axis)
    norms = norm(input, p, others, keepdim=True)
    scale = P.where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)  # PyTorch's 1e-7
    return input * scale


@public
def histc(input, bins=100, min=0, max=0):
    """Counts of the values in ``bins`` equal bins between min and max (the
    data's own range when both are 0); values outside are not counted."""
    input = _to_float(as_tensor_arg(input))
    low, high = float(min), float(max)
    if low == high:
        low, high = float(amin(input).item()), float(amax(input).item())
    if low == high:
        low, high = low - 1, high + 1
    if low > high:
        raise RuntimeError("max must be larger than min")
    values = reshape(input, -1)
    inside = (values >= low) & (values <= high)
    position = P.floor((values - low) * (bins / (high - low)))
    bin_of = _cast(clamp(position, 0, bins - 1), dtypes.int64)
    counted = _cast(inside, input._dtype)
    return P.scatter_add(counted, bin_of, spec=(("array",),), shape=(bins,))


@public
def masked_scatter(input, mask, source):
    """input with the elements of ``source``, in order, where ``mask``
    (broadcast to input) holds. Eager only: how many is a value."""
    input, mask = as_tensor_arg(input), as_tensor_arg(mask, "mask")
    _eager_only("masked_scatter")
    if input.ndim == 0:
        input, mask = reshape(input, (1,)), reshape(mask, (1,))
        return reshape(masked_scatter(input, mask, source), ())
    places = np.nonzero(np.broadcast_to(mask._data, input.shape))
    count = len(places[0])
    source = as_tensor_arg(source, "source")
    if source.numel() < count:
        raise RuntimeError(
            "masked_scatter: expected source to have at least as many elements as ones in mask"
        )
    taken = _cast(P.index(reshape(source, -1), spec=(("slice", 0, count, None),)), input._dtype)
    arrays = [Tensor._make(p.astype(np.int64)) for p in places]
    return P.index_put(input, taken, *arrays, spec=(("array",),) * input.ndim)


absolute = public(abs, name="absolute")


@public(method=False, name="broadcast_shapes")
def _broadcast_shapes(*shapes):
    return Size(broadcast_shapes(*[(s,) if isinstance(s, int) else tuple(s) for s in shapes]))


@public(function=False)
def get_device(input) -> int:
    return -1  # PyTorch's answer for a CPU tensor


@public(function=False)
def data_ptr(input) -> int:
    return input._data.ctypes.data


for _prim in P.PRIMITIVES.values():
    if _prim.public:
        globals()[_prim.name] = public(op_of(_prim))

for _alias, _name in (
    ("multiply", "mul"),
    ("subtract", "sub"),
    ("divide", "div"),
    ("negative", "neg"),
    ("arctan2", "atan2"),
    ("arcsin", "asin"),
    ("arccos", "acos"),
    ("arctan", "atan"),
    ("arcsinh", "asinh"),
    ("arccosh", "acosh"),
    ("arctanh", "atanh"),
    ("not_equal", "ne"),
    ("greater", "gt"),
    ("greater_equal", "ge"),
    ("less", "lt"),
    ("less_equal", "le"),
):
    if _alias in FUNCTIONS or _alias in METHODS:
        raise RuntimeError(f"op {_alias!r} is registered twice")
    FUNCTIONS[_alias] = FUNCTIONS[_name]
    METHODS[_alias] = METHODS[_name]
    globals()[_alias] = globals()[_name]

# The functions taking out= (as in PyTorch; their methods don't).
for _name in (
    "add sub mul multiply div divide true_divide fmod remainder floor_divide pow neg negative "
    "abs sign exp log log1p expm1 log2 log10 exp2 sqrt rsqrt sin cos tan tanh sigmoid erf "
    "floor ceil trunc round "
    "clamp clip clamp_min clamp_max square reciprocal atan2 arctan2 maximum minimum where "
    "eq ne lt le gt ge logical_and logical_or logical_xor logical_not "
    "sum mean prod amax amin max min argmax argmin all any logsumexp "
    "cumsum cumprod sort argsort topk softmax log_softmax "
    "matmul mm mv bmm dot outer cat concat concatenate stack "
    "index_select gather take_along_dim nonzero tril triu diag flip roll"
).split():
    FUNCTIONS[_name] = _with_out(FUNCTIONS[_name])
