"""Element types and PyTorch's type-promotion rules.

The IR and the tracer share these objects; a dtype knows its numpy equivalent
and its short IR spelling (``f32``), nothing about tensors.
"""

from __future__ import annotations

import numpy as np

BOOL, INTEGER, FLOATING = 0, 1, 2  # promotion categories, lowest first
# complex tensors' (eager/complex_tensor.py, a pair of real parts each): no IR value has it
COMPLEX = 3
QUANTIZED = 4  # names only: no tensor has such a dtype


class DType:
    """An element type. ``np`` is the numpy dtype its values are stored in;
    ``exchanged_as`` the numpy dtype ``.numpy()`` gives and ``from_numpy``
    takes (None: numpy has none). A reduced type is stored in a wider one,
    holding only values it can represent, each result rounded to it
    (``round``): float16 and bfloat16 in float32, rounded to nearest, as
    PyTorch computes these types on the CPU; uint8, int8 and int16 in int32,
    wrapped around as PyTorch's integer arithmetic wraps. Wrapping after
    each result is exact: the ring operations (+, -, *, negation, shifts
    left, bit operations) agree modulo 2**8 and 2**16 once reduced, and
    division, comparisons, extrema and conversions see values already in
    range, so int32's signed operations are right for all three types and
    no kernel, routine or numpy path needs an unsigned or a narrow variant
    (the cost: four bytes an element, and no memory shared with numpy)."""

    __slots__ = (
        "name",
        "short",
        "scalar_name",
        "np",
        "exchanged_as",
        "category",
        "itemsize",
        "reduced",
        "_rounding",
    )

    def __init__(
        self,
        name,
        short,
        scalar_name,
        np_dtype,
        category,
        *,
        itemsize=None,
        rounding=None,
        exchanged_as=None,
    ):
        self.name = name
        self.short = short  # the IR's spelling
        self.scalar_name = scalar_name  # PyTorch's (its tensor type: FloatTensor)
        self.np = np.dtype(np_dtype)
        self.reduced = rounding is not None
        if exchanged_as is None and not self.reduced:
            exchanged_as = np_dtype
        self.exchanged_as = None if exchanged_as is None else np.dtype(exchanged_as)
        self.category = category
        self.itemsize = itemsize or (self.exchanged_as or self.np).itemsize
        self._rounding = rounding

    def round(self, values) -> np.ndarray:
        """``values`` (numbers or an array) as this dtype's storage: for a
        reduced float, rounded to the nearest value it represents (ties to
        even); for a reduced integer, truncated toward zero and wrapped
        around into its range."""
        return self._rounding(values) if self.reduced else np.asarray(values, self.np)

    @property
    def is_floating_point(self) -> bool:
        return self.category == FLOATING

    @property
    def is_complex(self) -> bool:
        return self.category == COMPLEX

    def to_real(self) -> DType:
        """A complex dtype's parts' dtype; any other dtype itself."""
        return _PARTS_OF.get(self, self)

    def to_complex(self) -> DType:
        """The complex dtype whose parts are this float dtype (a complex one: itself)."""
        if self.is_complex:
            return self
        if self not in _COMPLEX_OF:
            raise RuntimeError(f"Unknown Complex ScalarType for {self.scalar_name}")
        return _COMPLEX_OF[self]

    def __repr__(self) -> str:
        return f"fusegrad.{self.name}"

    def __reduce__(self):
        return (by_name, (self.name,))


def _to_float16(values) -> np.ndarray:
    return np.asarray(values, np.float32).astype(np.float16).astype(np.float32)


def _to_bfloat16(values) -> np.ndarray:
    """The upper 16 bits of the float32 values, rounded to nearest even
    (NaN stays NaN: its rounding could carry into the sign)."""
    values = np.asarray(values, np.float32)
    bits = values.view(np.uint32)
    rounded = np.asarray(bits >> 16)  # in place from here: half the time of fresh arrays
    rounded &= np.uint32(1)
    rounded += np.uint32(0x7FFF)
    rounded += bits
    rounded &= np.uint32(0xFFFF0000)
    nan = np.isnan(values)
    if nan.any():
        rounded = np.where(nan, np.uint32(0x7FC00000), rounded)  # float32's NaN
    return rounded.view(np.float32)


def _narrow_integer(name, short, scalar_name, narrow) -> DType:
    """An integer type stored in int32, each result wrapped around into its
    range. Floats (truncated toward zero) and Python ints beyond int32 go
    through int64 first, as PyTorch converts them."""

    def wrap(values) -> np.ndarray:
        values = np.asarray(values)
        if values.dtype.kind != "i":
            values = values.astype(np.int64)
        return values.astype(narrow).astype(np.int32)

    return DType(name, short, scalar_name, np.int32, INTEGER, rounding=wrap, exchanged_as=narrow)


float32 = DType("float32", "f32", "Float", np.float32, FLOATING)
float64 = DType("float64", "f64", "Double", np.float64, FLOATING)
int64 = DType("int64", "i64", "Long", np.int64, INTEGER)
int32 = DType("int32", "i32", "Int", np.int32, INTEGER)
bool_ = DType("bool", "bool", "Bool", np.bool_, BOOL)
float16 = DType(
    "float16",
    "f16",
    "Half",
    np.float32,
    FLOATING,
    itemsize=2,
    rounding=_to_float16,
    exchanged_as=np.float16,
)
bfloat16 = DType(
    "bfloat16", "bf16", "BFloat16", np.float32, FLOATING, itemsize=2, rounding=_to_bfloat16
)
uint8 = _narrow_integer("uint8", "u8", "Byte", np.uint8)
int8 = _narrow_integer("int8", "i8", "Char", np.int8)
int16 = _narrow_integer("int16", "i16", "Short", np.int16)
complex64 = DType("complex64", "c64", "ComplexFloat", np.complex64, COMPLEX)
complex128 = DType("complex128", "c128", "ComplexDouble", np.complex128, COMPLEX)
# PyTorch's quantized dtypes, which scripts name (quantize_dynamic's dtype=)
qint8 = DType("qint8", "qi8", "QInt8", np.int8, QUANTIZED)
quint8 = DType("quint8", "qu8", "QUInt8", np.uint8, QUANTIZED)
qint32 = DType("qint32", "qi32", "QInt32", np.int32, QUANTIZED)
QUANTIZED_DTYPES = (qint8, quint8, qint32)
_PARTS_OF = {complex64: float32, complex128: float64}
_COMPLEX_OF = {float32: complex64, float64: complex128}

ALL_DTYPES = (float32, float64, int64, int32, bool_)  # one per storage type
REDUCED_DTYPES = (float16, bfloat16, uint8, int8, int16)
COMPLEX_DTYPES = (complex64, complex128)
_BY_NAME = {d.name: d for d in ALL_DTYPES + REDUCED_DTYPES + COMPLEX_DTYPES + QUANTIZED_DTYPES}
_BY_NUMPY = {d.np: d for d in ALL_DTYPES}
# numpy types we accept on input: the reduced types' own, others mapped to
# the nearest fusegrad dtype
_NUMPY_ALIASES = {
    **{d.exchanged_as: d for d in REDUCED_DTYPES if d.exchanged_as is not None},
    np.dtype(np.uint16): int32,
    np.dtype(np.uint32): int64,
    **{d.np: d for d in COMPLEX_DTYPES},
}


class _Defaults(dict):
    """The dtype of each category's Python numbers and of tensors made of
    them; the complex one is complex128 beside a float64 default, else
    complex64 (fusegrad has no complex32), whatever set_default_dtype wrote."""

    def __missing__(self, category):
        if category != COMPLEX:
            raise KeyError(category)
        return complex128 if self[FLOATING] is float64 else complex64


DEFAULT_FOR_CATEGORY = _Defaults({BOOL: bool_, INTEGER: int64, FLOATING: float32})


def default_float() -> DType:
    """The dtype of floating tensors made without one: ``set_default_dtype``
    writes it into DEFAULT_FOR_CATEGORY, which Python floats promote to."""
    return DEFAULT_FOR_CATEGORY[FLOATING]


def default_complex() -> DType:
    """The dtype of complex tensors made without one."""
    return DEFAULT_FOR_CATEGORY[COMPLEX]


class _Ranks(dict):
    """The real dtypes' ranks in promotion. Ops of real tensors promote
    their operands first: a complex one stops them there."""

    def __missing__(self, dtype):
        if not dtype.is_complex:
            raise KeyError(dtype)
        raise NotImplementedError(
            f"fusegrad: this operation is not implemented for complex tensors ({dtype.scalar_name})"
        )


_RANK = _Ranks(
    {
        bool_: 0,
        uint8: 1,
        int8: 1,
        int16: 2,
        int32: 3,
        int64: 4,
        float16: 5,
        bfloat16: 5,
        float32: 6,
        float64: 7,
    }
)
# Types of one rank neither of which holds the other promote to the
# smallest type holding both.
_HOLDING_BOTH = {_RANK[uint8]: int16, _RANK[float16]: float32}


class finfo:
    """The limits of a floating dtype, as ``torch.finfo`` gives them."""

    def __init__(self, dtype=None):
        dtype = default_float() if dtype is None else as_dtype(dtype)
        dtype = dtype.to_real()  # a complex dtype's limits are its parts'
        if dtype.category != FLOATING:
            raise TypeError(f"finfo() requires a floating point input type, got {dtype.name}")
        if dtype is bfloat16:  # 8 exponent bits as float32's, 7 mantissa bits
            self.bits, self.eps, self.max = 16, 2.0**-7, 3.3895313892515355e38
            self.tiny, self.resolution = float(np.finfo(np.float32).tiny), 0.01
        else:
            info = np.finfo(dtype.exchanged_as)
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
        info = np.iinfo(dtype.exchanged_as)
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
            "float16, float32, float64, int64, int32, int16, int8, uint8 and bool"
        )
    return found


def as_dtype(dtype) -> DType:
    """Accepts a fusegrad dtype, a numpy dtype, or the Python types float/int/bool."""
    if isinstance(dtype, DType):
        if dtype.category == QUANTIZED:
            raise RuntimeError(
                f"fusegrad has no quantized tensors, so none can have dtype {dtype}: "
                "quantized tensors need PyTorch's quantized backends (FBGEMM, QNNPACK)"
            )
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
    if _RANK[a] == _RANK[b] and a is not b:
        return _HOLDING_BOTH[_RANK[a]]
    return a if _RANK[a] >= _RANK[b] else b


def scalar_category(value) -> int:
    category = getattr(type(value), "scalar_category", None)  # a traced Python number
    if category is not None:
        return category
    if isinstance(value, (bool, np.bool_)):
        return BOOL
    if isinstance(value, (int, np.integer)):
        return INTEGER
    if isinstance(value, (complex, np.complexfloating)):
        return COMPLEX
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
