"""Tensor methods and operators: each is an op from ``ops`` (one definition,
two spellings, as in PyTorch), the in-place variants its registration
declares too; plus the operators, and the methods no op makes."""

from __future__ import annotations

import numpy as np

from ..ir import dtypes
from ..ir import primitives as P
from . import (  # noqa: F401  (registering)
    complex_functions,
    complex_tensor,
    creation,
    einsum,
    indexing,
    linalg,
    ops,
    sparse,
    storage,
    tensor_types,
)
from .tensor import Tensor

for _name, _op in ops.METHODS.items():
    setattr(Tensor, _name, _op)


def _operator(prim, floating=False):
    def method(self, other):
        # two tensors of one dtype, the common case, have nothing to promote
        if other.__class__ is Tensor and self._dtype is other._dtype:
            if not floating or self._dtype.category == dtypes.FLOATING:
                return prim(self, other)
        result = ops.binary_operator(prim, self, other, floating)
        if result is NotImplemented:  # a complex number: complex tensors' operator
            return complex_tensor.operator(prim.name, self, other)
        return result

    return method


def _forward(op):
    """``self <op> other`` as ``op(self, other)``, NotImplemented for an
    operand the operators do not take."""

    def method(self, other):
        operand = ops.operator_operand(other)
        if operand is None:  # a complex number: complex tensors' operator
            return complex_tensor.operator(op.__name__, self, other)
        return op(self, operand)

    return method


def _reflected(prim, floating=False):
    def method(self, other):
        if not isinstance(other, (Tensor, *ops._NUMBERS)):
            return complex_tensor.operator(prim.name, other, self)
        return ops._binary(prim, other, self, floating)

    return method


def _bits(op):
    """``self <op> other`` for the bitwise operators, NotImplemented for an
    operand they do not take."""

    def method(self, other):
        if not isinstance(other, (Tensor, *ops._NUMBERS)):
            return NotImplemented
        return op(self, other)

    return method


def _reflected_bits(op):
    def method(self, other):
        if not isinstance(other, (Tensor, *ops._NUMBERS)):
            return NotImplemented
        return op(other, self)

    return method


Tensor.__add__ = _operator(P.add)
Tensor.__radd__ = _reflected(P.add)
Tensor.__sub__ = _forward(ops.sub)
Tensor.__rsub__ = lambda self, other: (
    ops.rsub(self, other)
    if isinstance(other, (Tensor, *ops._NUMBERS))
    else complex_tensor.operator("sub", other, self)
)
Tensor.__mul__ = _operator(P.mul)
Tensor.__rmul__ = _reflected(P.mul)
Tensor.__truediv__ = _operator(P.div, floating=True)
Tensor.__rtruediv__ = _reflected(P.div, floating=True)
Tensor.__floordiv__ = _operator(P.floor_divide)
Tensor.__rfloordiv__ = _reflected(P.floor_divide)
Tensor.__mod__ = _operator(P.remainder)
Tensor.__rmod__ = _reflected(P.remainder)
Tensor.__pow__ = _forward(ops.pow)
Tensor.__rpow__ = lambda self, other: (
    ops.pow(other, self)
    if isinstance(other, (Tensor, *ops._NUMBERS))
    else complex_tensor.operator("pow", other, self)
)
Tensor.__matmul__ = lambda self, other: (
    ops.matmul(self, other) if isinstance(other, Tensor) else NotImplemented
)
Tensor.__rmatmul__ = lambda self, other: (
    ops.matmul(other, self) if isinstance(other, Tensor) else NotImplemented
)
Tensor.__neg__ = ops.neg
Tensor.__pos__ = lambda self: self
Tensor.__abs__ = ops.abs
Tensor.__eq__ = _operator(P.eq)
Tensor.__ne__ = _operator(P.ne)
Tensor.__lt__ = _operator(P.lt)
Tensor.__le__ = _operator(P.le)
Tensor.__gt__ = _operator(P.gt)
Tensor.__ge__ = _operator(P.ge)
Tensor.__and__, Tensor.__rand__ = _bits(ops.bitwise_and), _reflected_bits(ops.bitwise_and)
Tensor.__or__, Tensor.__ror__ = _bits(ops.bitwise_or), _reflected_bits(ops.bitwise_or)
Tensor.__xor__, Tensor.__rxor__ = _bits(ops.bitwise_xor), _reflected_bits(ops.bitwise_xor)
Tensor.__lshift__ = _bits(ops.bitwise_left_shift)
Tensor.__rlshift__ = _reflected_bits(ops.bitwise_left_shift)
Tensor.__rshift__ = _bits(ops.bitwise_right_shift)
Tensor.__rrshift__ = _reflected_bits(ops.bitwise_right_shift)
Tensor.__invert__ = ops.bitwise_not
Tensor.__getitem__ = indexing.getitem
Tensor.__setitem__ = indexing.setitem

Tensor.float = lambda self: ops.to(self, dtypes.float32)
Tensor.double = lambda self: ops.to(self, dtypes.float64)
Tensor.long = lambda self: ops.to(self, dtypes.int64)
Tensor.int = lambda self: ops.to(self, dtypes.int32)
Tensor.short = lambda self: ops.to(self, dtypes.int16)
Tensor.char = lambda self: ops.to(self, dtypes.int8)
Tensor.byte = lambda self: ops.to(self, dtypes.uint8)
Tensor.bool = lambda self: ops.to(self, dtypes.bool_)
Tensor.half = lambda self: ops.to(self, dtypes.float16)
Tensor.bfloat16 = lambda self: ops.to(self, dtypes.bfloat16)
Tensor.cpu = lambda self: self
Tensor.layout = sparse.strided
Tensor.to_sparse = Tensor.to_sparse_coo = sparse.to_sparse
Tensor.to_dense = lambda self, dtype=None, *, masked_grad=None: ops.to(self, dtype)


def _sparse_only(name: str, layout: str):
    """A sparse tensor's method on a dense one: PyTorch's error."""

    def method(self, *args, **kwargs):
        raise RuntimeError(f"{name} expected {layout} layout but got Strided")

    method.__name__ = name
    return method


for _name in ("indices", "coalesce", "is_coalesced"):
    setattr(Tensor, _name, _sparse_only(_name, "sparse coordinate tensor"))
Tensor.values = _sparse_only("values", "sparse tensor")
Tensor.to = complex_functions.converting_to_complex(ops.METHODS["to"])
Tensor.type_as = lambda self, other: self.to(other.dtype)
Tensor.cfloat = lambda self: self.to(dtypes.complex64)
Tensor.cdouble = lambda self: self.to(dtypes.complex128)
# complex numbers' attributes, of real tensors (complex ones: complex_tensor.py)
Tensor.real = property(lambda self: self)
Tensor.imag = property(complex_functions.imag)
Tensor.conj = Tensor.conj_physical = lambda self: self
Tensor.is_conj = lambda self: False
Tensor.adjoint = lambda self: self.mH


Tensor.__iadd__ = _forward(Tensor.add_)
Tensor.__isub__ = _forward(Tensor.sub_)
Tensor.__imul__ = _forward(Tensor.mul_)
Tensor.__itruediv__ = _forward(Tensor.div_)
Tensor.__ifloordiv__ = _forward(Tensor.floor_divide_)
Tensor.__imod__ = _forward(Tensor.remainder_)
Tensor.__iand__ = _forward(Tensor.bitwise_and_)
Tensor.__ior__ = _forward(Tensor.bitwise_or_)
Tensor.__ixor__ = _forward(Tensor.bitwise_xor_)
Tensor.__ilshift__ = _forward(Tensor.bitwise_left_shift_)
Tensor.__irshift__ = _forward(Tensor.bitwise_right_shift_)


def masked_fill_(self, mask, value):
    if isinstance(mask, Tensor):  # the mask broadcasts to self, never self to the mask
        mask = ops.expand(mask, self.shape)
    self._check_inplace()
    return self._commit_inplace(ops.masked_fill(self, mask, value))


Tensor.masked_fill_ = masked_fill_


def fill_(self, value):
    indexing.setitem(self, Ellipsis, value)
    return self


def copy_(self, src):
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): argument 'src' must be Tensor, not {type(src).__name__}")
    indexing.setitem(self, Ellipsis, src)
    return self


Tensor.fill_ = fill_
Tensor.zero_ = lambda self: fill_(self, 0)
Tensor.copy_ = copy_
Tensor.where = lambda self, condition, other: ops.where(condition, self, other)
Tensor.polygamma = lambda self, n: ops.polygamma(n, self)


def _elementwise_python(self, fn, *others):
    """``fn`` of each element (and the matching elements of others), in
    place: plain Python, eager only, no gradient, as PyTorch's CPU-only
    ``apply_`` and ``map_``."""
    ops._eager_only("apply_ and map_", "Python code runs on each element")
    name = "map_" if others else "apply_"
    if self._requires_grad or any(o._requires_grad for o in others):
        raise RuntimeError(
            f"Can't call {name}() on Variable that requires grad. Use var.detach().{name}() "
            "instead."
        )
    arrays = [np.broadcast_to(o._data, self.shape) for o in others]
    values = np.vectorize(fn, otypes=[self._dtype.np])(self._data, *arrays)
    return self._commit_inplace(Tensor._make(np.asarray(values, self._dtype.np), self._dtype))


Tensor.apply_ = lambda self, callable: _elementwise_python(self, callable)
Tensor.map_ = lambda self, tensor, callable: _elementwise_python(self, callable, tensor)
Tensor.argwhere = lambda self: ops.argwhere(self)

complex_tensor.refuse_what_complex_tensors_lack()  # once every method is added
