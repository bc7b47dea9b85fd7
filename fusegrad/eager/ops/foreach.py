"""PyTorch's ``torch._foreach_*`` functions, which optimizers and moving
averages apply to lists of tensors: a loop of the op over the list. The
other operand is one number for all the tensors, a list of numbers or of
tensors (one each), or a 0-d tensor; ``_foreach_<op>`` returns a tuple of
new tensors, ``_foreach_<op>_`` updates each tensor in place, as ``t.<op>_``
does, and returns the list."""

from __future__ import annotations

from ..tensor import Tensor
from .arguments import _NUMBERS
from .pointwise import (
    add,
    addcdiv,
    addcmul,
    clamp_max,
    clamp_min,
    div,
    lerp,
    maximum,
    minimum,
    neg,
    sub,
)
from .reductions import norm
from .registry import DEFINED, _inplace, public


def _tensor_list(tensors, name: str) -> list:
    if not isinstance(tensors, (list, tuple)) or not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError(
            f"{name}(): argument 'self' must be tuple of Tensors, not {type(tensors).__name__}"
        )
    if not tensors:
        raise RuntimeError("Tensor list must have at least one tensor.")
    return list(tensors)


def _spread(other, count: int, name: str, packed: bool = False) -> list:
    """``other`` as one operand per tensor. ``packed``: a 1-d tensor holds
    one number per tensor (addcmul's and addcdiv's scalars)."""
    if isinstance(other, Tensor):
        if packed and other.ndim == 1 and other.shape[0] == count:
            return list(other.unbind())
        if other.ndim:
            raise RuntimeError(
                f"scalar tensor expected to be 0 dim but it has {other.ndim} dimensions and "
                f"{other.numel()} elements."
            )
        return [other] * count
    if isinstance(other, (list, tuple)):
        if len(other) != count:
            if any(isinstance(o, Tensor) for o in other):
                raise RuntimeError(
                    f"Tensor lists must have the same number of tensors, got {count} and "
                    f"{len(other)}"
                )
            raise RuntimeError("Tensor list must have same number of elements as scalar list.")
        return list(other)
    if isinstance(other, _NUMBERS):
        return [other] * count
    raise TypeError(
        f"{name}(): expected a number, a list of numbers, a Tensor or a list of Tensors, but "
        f"got {type(other).__name__}"
    )


def _new(op, name: str, tensors, *others, packed=(), **kwargs) -> tuple:
    """op of each tensor and its entries of ``others`` (``packed``: the
    positions among them of scalars a 1-d tensor may hold)."""
    tensors = _tensor_list(tensors, name)
    spread = [_spread(o, len(tensors), name, k in packed) for k, o in enumerate(others)]
    return tuple(op(*each, **kwargs) for each in zip(tensors, *spread))


def _in_place(op, name: str, tensors, *others, packed=(), **kwargs):
    """op of each tensor and its entries of ``others``, written into the tensor."""
    checked = _tensor_list(tensors, name)
    spread = [_spread(o, len(checked), name, k in packed) for k, o in enumerate(others)]
    write = _inplace(op)
    for each in zip(checked, *spread):
        write(*each, **kwargs)
    return tensors


# ------------------------------------------------- one operand per tensor


def _maximum(input, other):
    return clamp_min(input, other) if isinstance(other, _NUMBERS) else maximum(input, other)


def _minimum(input, other):
    return clamp_max(input, other) if isinstance(other, _NUMBERS) else minimum(input, other)


@public(method=False)
def _foreach_add(self, other, *, alpha=1):
    return _new(add, "_foreach_add", self, other, alpha=alpha)


@public(method=False)
def _foreach_add_(self, other, *, alpha=1):
    return _in_place(add, "_foreach_add_", self, other, alpha=alpha)


@public(method=False)
def _foreach_sub(self, other, *, alpha=1):
    return _new(sub, "_foreach_sub", self, other, alpha=alpha)


@public(method=False)
def _foreach_sub_(self, other, *, alpha=1):
    return _in_place(sub, "_foreach_sub_", self, other, alpha=alpha)


@public(method=False)
def _foreach_mul(self, other):
    return _new(DEFINED["mul"], "_foreach_mul", self, other)


@public(method=False)
def _foreach_mul_(self, other):
    return _in_place(DEFINED["mul"], "_foreach_mul_", self, other)


@public(method=False)
def _foreach_div(self, other):
    return _new(div, "_foreach_div", self, other)


@public(method=False)
def _foreach_div_(self, other):
    return _in_place(div, "_foreach_div_", self, other)


@public(method=False)
def _foreach_maximum(self, other):
    return _new(_maximum, "_foreach_maximum", self, other)


@public(method=False)
def _foreach_maximum_(self, other):
    return _in_place(_maximum, "_foreach_maximum_", self, other)


@public(method=False)
def _foreach_minimum(self, other):
    return _new(_minimum, "_foreach_minimum", self, other)


@public(method=False)
def _foreach_minimum_(self, other):
    return _in_place(_minimum, "_foreach_minimum_", self, other)


@public(method=False)
def _foreach_lerp(self, tensors1, weight):
    return _new(lerp, "_foreach_lerp", self, tensors1, weight)


@public(method=False)
def _foreach_lerp_(self, tensors1, weight):
    return _in_place(lerp, "_foreach_lerp_", self, tensors1, weight)


def _addcmul(input, tensor1, tensor2, value):
    return addcmul(input, tensor1, tensor2, value=value)


def _addcdiv(input, tensor1, tensor2, value):
    return addcdiv(input, tensor1, tensor2, value=value)


@public(method=False)
def _foreach_addcmul(self, tensor1, tensor2, value=1):
    return _new(_addcmul, "_foreach_addcmul", self, tensor1, tensor2, value, packed=(2,))


@public(method=False)
def _foreach_addcmul_(self, tensor1, tensor2, value=1):
    return _in_place(_addcmul, "_foreach_addcmul_", self, tensor1, tensor2, value, packed=(2,))


@public(method=False)
def _foreach_addcdiv(self, tensor1, tensor2, value=1):
    return _new(_addcdiv, "_foreach_addcdiv", self, tensor1, tensor2, value, packed=(2,))


@public(method=False)
def _foreach_addcdiv_(self, tensor1, tensor2, value=1):
    return _in_place(_addcdiv, "_foreach_addcdiv_", self, tensor1, tensor2, value, packed=(2,))


@public(method=False)
def _foreach_copy_(self, src, non_blocking=False):
    tensors = _tensor_list(self, "_foreach_copy_")
    for t, s in zip(tensors, _spread(src, len(tensors), "_foreach_copy_")):
        t.copy_(s)
    return self


# ------------------------------------------------------------ one tensor


@public(method=False)
def _foreach_neg(self):
    return _new(neg, "_foreach_neg", self)


@public(method=False)
def _foreach_neg_(self):
    return _in_place(neg, "_foreach_neg_", self)


@public(method=False)
def _foreach_sqrt(self):
    return _new(DEFINED["sqrt"], "_foreach_sqrt", self)


@public(method=False)
def _foreach_sqrt_(self):
    return _in_place(DEFINED["sqrt"], "_foreach_sqrt_", self)


@public(method=False)
def _foreach_exp(self):
    return _new(DEFINED["exp"], "_foreach_exp", self)


@public(method=False)
def _foreach_exp_(self):
    return _in_place(DEFINED["exp"], "_foreach_exp_", self)


@public(method=False)
def _foreach_reciprocal(self):
    return _new(DEFINED["reciprocal"], "_foreach_reciprocal", self)


@public(method=False)
def _foreach_reciprocal_(self):
    return _in_place(DEFINED["reciprocal"], "_foreach_reciprocal_", self)


@public(method=False)
def _foreach_zero_(self):
    for t in _tensor_list(self, "_foreach_zero_"):
        t.zero_()
    return self


@public(method=False)
def _foreach_norm(self, ord=2, dtype=None):
    """Each tensor's vector norm (all its elements), in ``dtype`` if given."""
    return _new(lambda t: norm(t if dtype is None else t.to(dtype), ord), "_foreach_norm", self)
