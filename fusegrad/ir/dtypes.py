"""Element types and PyTorch's type-promotion rules.

The IR and the tracer share these objects; a dtype knows its numpy equivalent
and its short IR spelling (``f32``), nothing about tensors.
"""

from __future__ import annotations

import numpy as np

BOOL, INTEGER, FLOATING = 0, 1, 2  # promotion categories, lowest first


class DType:
    """An element type. ``np`` is the numpy dtype its values are stored in;
    a reduced-precision float (float16, bfloat16) is stored in float32
    holding only values it can represent, each result rounded to it
    (``round``), as PyTorch computes these types on the CPU."""

    __slots__ = (
        "name",
        "short",
        "scalar_name",
        "np",
        "category",
        "itemsize",
        "reduced",
        "_rounding",
    )

    def __init__(
        self, name, short, scalar_name, np_dtype, category, *, itemsize=None, rounding=None
    ):
        self.name = name
        self.short = short  # the IR's spelling
        self.scalar_name = scalar_name  # PyTorch's (its tensor type: FloatTensor)
        self.np = np.dtype(np_dtype)
        self.category = category
        self.itemsize = itemsize or self.np.itemsize
        self.reduced = rounding is not None
        self._rounding = rounding

    def round(self, values) -> np.ndarray:
        """``values`` as this dtype's storage: for a reduced float, rounded to
        the nearest value it represents (ties to even)."""
        values = np.asarray(values, self.np)
        return self._rounding(values) if self.reduced else values

    @property
    def is_floating_point(self) -> bool:
        return self.category == FLOATING

    def __repr__(self) -> str:
        return f"fusegrad.{self.name}"

    def __reduce__(self):
        return (by_name, (self.name,))


def _to_float16(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float16).astype(np.float32)


def _to_bfloat16(values: np.ndarray) -> np.ndarray:
    """The upper 16 bits of the float32 values, rounded to nearest even
    (NaN stays NaN: its rounding could carry into the sign)."""
    bits = values.view(np.uint32)
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1)))) & np.uint32(0xFFFF0000)
    return np.where(np.isnan(values), np.float32(np.nan), rounded.view(np.float32))


float32 = DType("float32", "f32", "Float", np.float32, FLOATING)
float64 = DType("float64", "f64", "Double", np.float64, FLOATING)
int64 = DType("int64", "i64", "Long", np.int64, INTEGER)
int32 = DType("int32", "i32", "Int", np.int32, INTEGER)
bool_ = DType("bool", "bool", "Bool", np.bool_, BOOL)
float16 = DType("float16", "f16", "Half", np.float32, FLOATING, itemsize=2, rounding=_to_float16)
bfloat16 = DType(
    "bfloat16", "bf16", "BFloat16", np.float32, FLOATING, itemsize=2, rounding=_to_bfloat16
)

ALL_DTYPES = (float32, float64, int64, int32, bool_)  # one per storage type
REDUCED_DTYPES = (float16, bfloat16)
_BY_NAME = {d.name: d for d in ALL_DTYPES + REDUCED_DTYPES}
_BY_NUMPY = {d.np: d for d in ALL_DTYPES}
# numpy types we accept on input and map to the nearest fusegrad dtype
_NUMPY_ALIASES = {
    np.dtype(np.float16): float16,
    np.dtype(np.int8): int32,
    np.dtype(np.int16): int32,
    np.dtype(np.uint8): int32,
    np.dtype(np.uint16): int32,
    np.dtype(np.uint32): int64,
}
DEFAULT_FOR_CATEGORY = {BOOL: bool_, INTEGER: int64, FLOATING: float32}
_RANK = {bool_: 0, int32: 1, int64: 2, float16: 3, bfloat16: 3, float32: 4, float64: 5}


class finfo:
    """The limits of a floating dtype, as ``torch.finfo`` gives them."""

    def __init__(self, dtype=None):
        dtype = float32 if dtype is None else as_dtype(dtype)
        if dtype.category != FLOATING:
            raise TypeError(f"finfo() requires a floating point input type, got {dtype.name}")
        if dtype is bfloat16:  # 8 exponent bits as float32's, 7 mantissa bits
            self.bits, self.eps, self.max = 16, 2.0**-7, 3.3895313892515355e38
            self.tiny, self.resolution = float(np.finfo(np.float32).tiny), 0.01
        else:
            info = np.finfo(np.float16 if dtype is float16 else dtype.np)
            self.bits, self.eps, self.max = info.bits, float(info.eps), float(info.max)
            self.tiny, self.resolution = float(info.tiny), 10.0**-info.precision
        self.min, self.smallest_normal, self.dtype = -self.max, self.tiny, dtype.name

    def __repr__(self):
        return (
            f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
            f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
            f"dtype={self.dtype})"
        )


class iinfo:
    """The limits of an integer dtype, as ``torch.iinfo`` gives them."""

    def __init__(self, dtype):
        dtype = as_dtype(dtype)
        if dtype.category != INTEGER:
            raise TypeError(f"iinfo() requires an integer input type, got {dtype.name}")
        info = np.iinfo(dtype.np)
        self.bits, self.min, self.max, self.dtype = (
            info.bits,
            int(info.min),
            int(info.max),
            dtype.name,
        )

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


def by_name(name: str) -> DType:
    return _BY_NAME[name]


def from_numpy_dtype(np_dtype) -> DType:
    np_dtype = np.dtype(np_dtype)
    if not np_dtype.isnative:  # kernels and BLAS read native byte order
        raise ValueError(
            "given numpy array has byte order different from the native byte order. "
            "Conversion between byte orders is currently not supported."
        )
    found = _BY_NUMPY.get(np_dtype) or _NUMPY_ALIASES.get(np_dtype)
    if found is None:
        raise TypeError(
            f"can't convert numpy array of type {np_dtype}: fusegrad supports "
            "float16, float32, float64, int64, int32 and bool"
        )
    return found


def as_dtype(dtype) -> DType:
    """Accepts a fusegrad dtype, a numpy dtype, or the Python types float/int/bool."""
    if isinstance(dtype, DType):
        return dtype
    if dtype is float:
        return float32
    if dtype is int:
        return int64
    if dtype is bool:
        return bool_
    try:
        return from_numpy_dtype(dtype)
    except (TypeError, ValueError):
        raise TypeError(f"dtype must be a fusegrad dtype, not {dtype!r}") from None


def promote(a: DType, b: DType) -> DType:
    if _RANK[a] == _RANK[b] and a is not b:  # float16 and bfloat16: neither holds the other
        return float32
    return a if _RANK[a] >= _RANK[b] else b


def scalar_category(value) -> int:
    category = getattr(type(value), "scalar_category", None)  # a traced Python number
    if category is not None:
        return category
    if isinstance(value, (bool, np.bool_)):
        return BOOL
    if isinstance(value, (int, np.integer)):
        return INTEGER
    return FLOATING


def result_type(*operands) -> DType:
    """PyTorch's promotion: dimensioned tensors outrank 0-d tensors, which
    outrank scalars; a lower-priority operand only matters when it is of
    a higher category (so ``float32_tensor * 2.0`` stays float32 while
    ``int_tensor * 2.5`` becomes the default float). Numpy scalars count as
    Python scalars of their category, as in PyTorch (``float32_tensor *
    np.float64(2.0)`` stays float32), though they carry a dtype of their own."""
    dimensioned = zero_dim = None
    scalar_cat = -1
    for op in operands:
        dtype = getattr(op, "dtype", None)
        if not isinstance(dtype, DType):
            scalar_cat = max(scalar_cat, scalar_category(op))
        elif op.ndim:
            dimensioned = dtype if dimensioned is None else promote(dimensioned, dtype)
        else:
            zero_dim = dtype if zero_dim is None else promote(zero_dim, dtype)
    result = dimensioned
    if zero_dim is not None and (result is None or zero_dim.category > result.category):
        result = zero_dim
    if scalar_cat >= 0 and (result is None or scalar_cat > result.category):
        result = DEFAULT_FOR_CATEGORY[scalar_cat]
    return result
