"""PyTorch's legacy tensor types, ``FloatTensor``, ``LongTensor``, ...: each a
constructor of tensors of its dtype (``FloatTensor([1, 2])``,
``FloatTensor(2, 3)``) and a type that ``isinstance`` and ``Tensor.type``
know; and their CUDA namesakes (``cuda.FloatTensor``), types no tensor has,
as in a CPU-only PyTorch. ``Tensor.type`` is here, beside the types it reads.
"""

from __future__ import annotations

from ..ir import dtypes
from . import creation, devices, ops
from .tensor import Tensor, tensor_type_name

# One type per dtype fusegrad has.
_DTYPES = (
    dtypes.float32,
    dtypes.float64,
    dtypes.float16,
    dtypes.bfloat16,
    dtypes.int64,
    dtypes.int32,
    dtypes.int16,
    dtypes.int8,
    dtypes.uint8,
    dtypes.bool_,
)


class LegacyTensorType(type):
    """The type of ``FloatTensor`` and its kin (PyTorch's ``torch.tensortype``):
    calling one makes a tensor of its dtype, and every tensor of that dtype is
    an instance of it."""

    def __call__(cls, *args, **kwargs):
        return creation.legacy_construct(cls.dtype, args, kwargs)

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj._dtype is cls.dtype


class CudaTensorType(type):
    """The type of ``cuda.FloatTensor`` and its kin: there, so that a script
    can name one, but no tensor is an instance and none can be made."""

    def __call__(cls, *args, **kwargs):
        raise TypeError(
            f"type {cls.__module__}.{cls.__name__} not available. Torch not compiled with "
            "CUDA enabled."
        )

    def __instancecheck__(cls, obj) -> bool:
        return False


def _tensor_type(metaclass, module: str, dtype):
    attributes = {
        "dtype": dtype,
        "is_cuda": metaclass is CudaTensorType,
        "is_sparse": False,
        "__module__": module,
        "__doc__": f"Tensors of dtype {dtype!r}: PyTorch's legacy tensor type.",
    }
    return metaclass(f"{dtype.scalar_name}Tensor", (), attributes)


def cuda_tensor_types() -> dict:
    """``fusegrad.cuda``'s ``FloatTensor`` and its kin, by name."""
    types = (_tensor_type(CudaTensorType, "fusegrad.cuda", d) for d in _DTYPES)
    return {t.__name__: t for t in types}


FloatTensor = _tensor_type(LegacyTensorType, "fusegrad", dtypes.float32)
DoubleTensor = _tensor_type(LegacyTensorType, "fusegrad", dtypes.float64)
HalfTensor = _tensor_type(LegacyTensorType, "fusegrad", dtypes.float16)
BFloat16Tensor = _tensor_type(LegacyTensorType, "fusegrad", dtypes.bfloat16)
LongTensor = _tensor_type(LegacyTensorType, "fusegrad", dtypes.int64)
IntTensor = _tensor_type(LegacyTensorType, "fusegrad", dtypes.int32)
ShortTensor = _tensor_type(LegacyTensorType, "fusegrad", dtypes.int16)
CharTensor = _tensor_type(LegacyTensorType, "fusegrad", dtypes.int8)
ByteTensor = _tensor_type(LegacyTensorType, "fusegrad", dtypes.uint8)
BoolTensor = _tensor_type(LegacyTensorType, "fusegrad", dtypes.bool_)

_BY_NAME = {
    t.__name__: t
    for t in (
        FloatTensor,
        DoubleTensor,
        HalfTensor,
        BFloat16Tensor,
        LongTensor,
        IntTensor,
        ShortTensor,
        CharTensor,
        ByteTensor,
        BoolTensor,
    )
}


def _named(name: str):
    """The tensor type a string names (``"torch.FloatTensor"``), as a dtype, or
    the CUDA device for a CUDA type's name."""
    package, _, type_name = name.rpartition(".")
    if package in ("torch", "fusegrad") and type_name in _BY_NAME:
        return _BY_NAME[type_name].dtype
    if package in ("torch.cuda", "fusegrad.cuda") and type_name in _BY_NAME:
        return devices.device("cuda")
    raise ValueError(f"invalid type: '{name}'")


def type_(self, dtype=None, non_blocking: bool = False, **kwargs):
    """``x.type()``: the name of x's tensor type (``'fusegrad.FloatTensor'``);
    ``x.type(t)``: x converted to ``t`` (a dtype, a tensor type or its name),
    x itself when it is of that type already."""
    if dtype is None:
        return tensor_type_name(self._dtype)
    if isinstance(dtype, str):
        dtype = _named(dtype)
    elif isinstance(dtype, LegacyTensorType):
        dtype = dtype.dtype
    elif isinstance(dtype, CudaTensorType):
        dtype = devices.device("cuda")
    if isinstance(dtype, (dtypes.DType, devices.device)):
        return ops.to(self, dtype)  # a CUDA device is refused there, as x.cuda() is
    raise TypeError(
        f"type() received an invalid combination of arguments - got ({type(dtype).__name__}), "
        "but expected one of: (torch.dtype dtype, bool non_blocking), "
        "(str dtype, bool non_blocking)"
    )


Tensor.type = type_
