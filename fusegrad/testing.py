"""``torch.testing``: ``assert_close`` (tensors, numpy arrays, numbers and
containers of them compared within tolerances, failures reported in
PyTorch's words), the deprecated ``assert_allclose``, and ``make_tensor``.

>>> import fusegrad
>>> from fusegrad.testing import assert_close
>>> assert_close(fusegrad.tensor([1.0, 2.0]), fusegrad.tensor([1.0, 2.0000001]))
>>> assert_close(fusegrad.tensor([1.0, 2.0, 3.0]), fusegrad.tensor([1.0, 2.0, 4.0]))
Traceback (most recent call last):
  ...
AssertionError: Tensor-likes are not close!
<BLANKLINE>
Mismatched elements: 1 / 3 (33.3%)
Greatest absolute difference: 1.0 at index (2,) (up to 1e-05 allowed)
Greatest relative difference: 0.25 at index (2,) (up to 1.3e-06 allowed)
"""

from __future__ import annotations

import collections.abc
import math
import warnings

import numpy as np

from .eager import creation
from .eager.devices import check_device
from .eager.tensor import Tensor
from .ir import dtypes

__all__ = ["assert_allclose", "assert_close", "make_tensor"]

# (rtol, atol) by dtype; other dtypes compare exactly
_TOLERANCES = {
    dtypes.float16: (1e-3, 1e-5),
    dtypes.bfloat16: (1.6e-2, 1e-5),
    dtypes.float32: (1.3e-6, 1e-5),
    dtypes.float64: (1e-7, 1e-7),
}
# Python numbers compare as PyTorch's dtypes for them do: int64, float64, complex128.
_NUMBER_TOLERANCES = {int: (0, 0), float: (1e-7, 1e-7), complex: (1e-7, 1e-7)}


class _Mismatch(Exception):
    """A failed comparison: its message, and where in the inputs it was."""

    def __init__(self, message: str, path: tuple):
        super().__init__(message)
        self.message, self.path = message, path


class _Options:
    def __init__(self, rtol, atol, equal_nan, check_dtype, check_stride, allow_subclasses):
        self.rtol, self.atol, self.equal_nan = rtol, atol, equal_nan
        self.check_dtype, self.check_stride = check_dtype, check_stride
        self.allow_subclasses = allow_subclasses

    def tolerances(self, defaults: list) -> tuple:
        """The given (rtol, atol), else the largest of the compared types' defaults."""
        if self.rtol is not None:
            return self.rtol, self.atol
        return max(d[0] for d in defaults), max(d[1] for d in defaults)


def assert_close(
    actual,
    expected,
    *,
    allow_subclasses=True,
    rtol=None,
    atol=None,
    equal_nan=False,
    check_device=True,
    check_dtype=True,
    check_layout=True,
    check_stride=False,
    msg=None,
):
    """Raises an AssertionError unless ``actual`` and ``expected`` are close:
    tensors (or numpy arrays) of one shape and dtype whose elements satisfy
    ``|actual - expected| <= atol + rtol * |expected|``, numbers, and
    sequences and mappings of them, compared item by item. Without
    ``rtol`` and ``atol``, the dtype's defaults apply (float32: 1.3e-6 and
    1e-5; integers and bools: exact). ``msg``, a string or a function of
    the generated message, replaces the message. Every tensor is on the
    CPU and strided, so ``check_device`` and ``check_layout`` always hold.
    """
    __tracebackhide__ = True  # pytest's traceback ends at the caller's line
    if (rtol is None) != (atol is None):
        missing = "atol" if atol is None else "rtol"
        raise ValueError(
            f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {missing}."
        )
    options = _Options(rtol, atol, equal_nan, check_dtype, check_stride, allow_subclasses)
    try:
        _compare(actual, expected, options, ())
    except _Mismatch as mismatch:
        message = mismatch.message
        if mismatch.path:
            where = "".join(f"[{key!r}]" for key in mismatch.path)
            message += f"\n\nThe failure occurred for item {where}"
        if callable(msg):
            message = msg(message)
        elif msg is not None:
            message = msg
        raise AssertionError(message) from None


def _compare(actual, expected, options: _Options, path: tuple) -> None:
    if actual is None or expected is None:
        if actual is not expected:
            raise _Mismatch(f"None mismatch: {actual} is not {expected}", path)
        return
    tensors = _tensor_pair(actual, expected, options)
    if tensors is not None:
        _compare_tensors(*tensors, options, path)
    elif isinstance(actual, (bool, np.bool_)) and isinstance(expected, (bool, np.bool_)):
        if bool(actual) != bool(expected):
            raise _Mismatch(f"Booleans mismatch: {actual} is not {expected}", path)
    elif _is_number(actual) and _is_number(expected):
        _compare_numbers(_plain(actual), _plain(expected), options, path)
    elif isinstance(actual, collections.abc.Mapping) and isinstance(
        expected, collections.abc.Mapping
    ):
        _compare_mappings(actual, expected, options, path)
    elif _is_sequence(actual) and _is_sequence(expected):
        if len(actual) != len(expected):
            raise _Mismatch(
                f"The length of the sequences mismatch: {len(actual)} != {len(expected)}", path
            )
        for index, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, options, (*path, index))
    else:
        raise TypeError(
            f"No comparison pair was able to handle inputs of type {type(actual)} and "
            f"{type(expected)}."
        )


def _tensor_pair(actual, expected, options: _Options):
    """Two tensors (numpy arrays become tensors), or None for inputs of other kinds."""
    if isinstance(actual, np.ndarray) and isinstance(expected, np.ndarray):
        return creation.tensor(actual), creation.tensor(expected)
    if not (isinstance(actual, Tensor) and isinstance(expected, Tensor)):
        return None
    if not options.allow_subclasses and type(actual) is not type(expected):
        raise TypeError(
            f"No comparison pair was able to handle inputs of type {type(actual)} and "
            f"{type(expected)}."
        )
    return actual, expected


def _is_number(value) -> bool:
    """An int, float or complex (Python's or numpy's); bools are compared apart."""
    return isinstance(value, (int, float, complex, np.number)) and not isinstance(value, bool)


def _plain(number):
    """A numpy scalar as the Python number it holds."""
    return number.item() if isinstance(number, np.generic) else number


def _is_sequence(value) -> bool:
    return isinstance(value, collections.abc.Sequence) and not isinstance(value, str)


def _compare_mappings(actual, expected, options: _Options, path: tuple) -> None:
    if actual.keys() != expected.keys():
        missing = _in_order(expected.keys() - actual.keys())
        additional = _in_order(actual.keys() - expected.keys())
        raise _Mismatch(
            "The keys of the mappings do not match:\n"
            f"Missing keys in the actual mapping: {missing}\n"
            f"Additional keys in the actual mapping: {additional}",
            path,
        )
    for key in actual:
        _compare(actual[key], expected[key], options, (*path, key))


def _in_order(keys) -> list:
    try:
        return sorted(keys)
    except TypeError:
        return list(keys)


def _up_to(tolerance, exact: bool) -> str:
    return "" if exact else f" (up to {tolerance} allowed)"


def _relative(difference, magnitude):
    if magnitude:
        return difference / magnitude
    return difference * math.inf if difference else math.nan  # NaN stays NaN


def _compare_numbers(actual, expected, options: _Options, path: tuple) -> None:
    if options.check_dtype and type(actual) is not type(expected):
        raise _Mismatch(f"The (d)types do not match: {type(actual)} != {type(expected)}.", path)
    defaults = [_NUMBER_TOLERANCES[type(n)] for n in (actual, expected)]
    rtol, atol = options.tolerances(defaults)
    if actual == expected:
        return
    both_nan = all(isinstance(n, float) and math.isnan(n) for n in (actual, expected))
    if both_nan and options.equal_nan:
        return
    difference = abs(actual - expected)
    if math.isfinite(difference) and difference <= atol + rtol * abs(expected):
        return
    relative = _relative(difference, abs(expected))
    raise _Mismatch(_scalar_message(actual, expected, difference, relative, rtol, atol), path)


def _scalar_message(actual, expected, difference, relative, rtol, atol) -> str:
    exact = rtol == 0 and atol == 0
    return (
        f"Scalars are not {'equal' if exact else 'close'}!\n\n"
        f"Expected {expected} but got {actual}.\n"
        f"Absolute difference: {difference}{_up_to(atol, exact)}\n"
        f"Relative difference: {relative}{_up_to(rtol, exact)}"
    )


def _attribute_mismatch(name: str, actual, expected, path: tuple) -> _Mismatch:
    return _Mismatch(
        f"The values for attribute '{name}' do not match: {actual} != {expected}.", path
    )


def _compare_tensors(actual: Tensor, expected: Tensor, options: _Options, path: tuple) -> None:
    if actual.shape != expected.shape:
        raise _attribute_mismatch("shape", actual.shape, expected.shape, path)
    if options.check_dtype and actual.dtype is not expected.dtype:
        raise _attribute_mismatch("dtype", actual.dtype, expected.dtype, path)
    if options.check_stride and actual.stride() != expected.stride():
        raise _attribute_mismatch("stride()", actual.stride(), expected.stride(), path)
    dtype = dtypes.promote(actual.dtype, expected.dtype)
    defaults = [_TOLERANCES.get(t.dtype, (0.0, 0.0)) for t in (actual, expected)]
    rtol, atol = options.tolerances(defaults)
    exact = rtol == 0 and atol == 0
    a, e = _values(actual, dtype), _values(expected, dtype)
    with np.errstate(all="ignore"):
        difference = _rounded(np.abs(a - e), dtype)
        close = (a == e) | (np.isfinite(difference) & (difference <= atol + rtol * np.abs(e)))
        if options.equal_nan and dtype.is_floating_point:
            close |= np.isnan(a) & np.isnan(e)
        mismatched = ~close
        count = int(mismatched.sum())
        if not count:
            return
        if dtype.is_floating_point:
            relative = _rounded(difference / np.abs(e), dtype)
        else:  # as PyTorch divides integers: in float32
            relative = difference.astype(np.float32) / np.abs(e).astype(np.float32)
    if a.ndim == 0:
        message = _scalar_message(
            actual.item(), expected.item(), difference.item(), relative.item(), rtol, atol
        )
        raise _Mismatch(message, path)
    difference = np.where(mismatched, difference, 0)
    relative = np.where(mismatched, relative, 0)
    lines = [
        f"Tensor-likes are not {'equal' if exact else 'close'}!",
        "",
        f"Mismatched elements: {count} / {a.size} ({100 * count / a.size:.1f}%)",
        f"Greatest absolute difference: {_greatest(difference)}{_up_to(atol, exact)}",
        f"Greatest relative difference: {_greatest(relative)}{_up_to(rtol, exact)}",
    ]
    raise _Mismatch("\n".join(lines), path)


def _values(t: Tensor, dtype) -> np.ndarray:
    """The elements of ``t`` in ``dtype``, for arithmetic: integers and bools as int64."""
    values = t._data
    if t.dtype is not dtype:
        values = dtype.round(values.astype(dtype.np))
    return values if dtype.is_floating_point else values.astype(np.int64)


def _rounded(values: np.ndarray, dtype) -> np.ndarray:
    """A float16 or bfloat16 result rounded to its dtype, as PyTorch computes one."""
    return dtype.round(values) if dtype.reduced and dtype.is_floating_point else values


def _greatest(values: np.ndarray) -> str:
    """The largest value (a NaN, if any) and its index."""
    flat = int(np.argmax(values))
    index = tuple(int(i) for i in np.unravel_index(flat, values.shape))
    return f"{values.flat[flat].item()} at index {index}"


# ------------------------------------------------------------------ assert_allclose

_ALLCLOSE_TOLERANCES = {
    dtypes.float16: (1e-3, 1e-3),
    dtypes.float32: (1e-4, 1e-5),
    dtypes.float64: (1e-5, 1e-8),
}


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """Deprecated in PyTorch: ``assert_close`` with the old defaults (NaNs
    equal, dtypes free to differ, float32 within rtol 1e-4), after making
    tensors of what is not one (``expected`` in ``actual``'s dtype)."""
    warnings.warn(
        "`torch.testing.assert_allclose()` is deprecated since 1.12 and will be removed in a "
        "future release. Please use `torch.testing.assert_close()` instead. You can find "
        "detailed upgrade instructions in https://github.com/pytorch/pytorch/issues/61844.",
        FutureWarning,
        stacklevel=2,
    )
    if not isinstance(actual, Tensor):
        actual = creation.tensor(actual)
    if not isinstance(expected, Tensor):
        expected = creation.tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        defaults = [_ALLCLOSE_TOLERANCES.get(t.dtype, (0.0, 0.0)) for t in (actual, expected)]
        rtol, atol = max(d[0] for d in defaults), max(d[1] for d in defaults)
    assert_close(
        actual,
        expected,
        rtol=rtol,
        atol=atol,
        equal_nan=equal_nan,
        check_dtype=False,
        check_stride=False,
        msg=msg or None,
    )


# ---------------------------------------------------------------------- make_tensor


def make_tensor(
    *shape,
    dtype,
    device,
    low=None,
    high=None,
    requires_grad=False,
    noncontiguous=False,
    exclude_zero=False,
    memory_format=None,
):
    """A tensor of ``shape`` with values drawn uniformly from ``[low, high)``
    (by default [-9, 9) for floats, [-9, 10) for signed integers, [0, 10)
    for unsigned ones, False and True for bools), clamped to the dtype's
    finite range. ``noncontiguous`` gives it strides over a larger storage;
    ``exclude_zero`` replaces zeros by 1 (the dtype's smallest normal
    number for floats); ``memory_format`` lays it out so.

    >>> import fusegrad
    >>> t = make_tensor(2, 3, dtype=fusegrad.int64, device="cpu", low=0, high=1)
    >>> t
    tensor([[0, 0, 0],
            [0, 0, 0]])
    """
    if noncontiguous and memory_format is not None:
        raise ValueError(
            "The parameters `noncontiguous` and `memory_format` are mutually exclusive, but "
            f"got noncontiguous={noncontiguous} and memory_format={memory_format}"
        )
    dtype = dtypes.as_dtype(dtype)
    if requires_grad and not dtype.is_floating_point:
        raise ValueError(
            "`requires_grad=True` is not supported for boolean and integral dtypes, but got "
            f"dtype={dtype}"
        )
    check_device(device)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    result = _drawn(shape, dtype, low, high)
    if exclude_zero:
        replacement = dtypes.finfo(dtype).tiny if dtype.is_floating_point else 1
        result = result.masked_fill(result == 0, replacement)
    if noncontiguous and result.numel() > 1:
        result = result.repeat_interleave(2, dim=-1)[..., ::2]
    elif memory_format is not None:
        result = result.contiguous(memory_format=memory_format)
    return result.requires_grad_(requires_grad)


def _drawn(shape: tuple, dtype, low, high) -> Tensor:
    if dtype is dtypes.bool_:
        return creation.randint(0, 2, shape).to(dtype)
    if dtype.is_floating_point:
        info, default = dtypes.finfo(dtype), (-9, 9)
    else:
        info = dtypes.iinfo(dtype)
        default = (0, 10) if info.min == 0 else (-9, 10)
    low = default[0] if low is None else max(low, info.min)
    high = default[1] if high is None else min(high, info.max)
    if math.isnan(low) or math.isnan(high):
        raise ValueError(f"`low` and `high` cannot be NaN, but got low={low} and high={high}")
    if dtype.is_floating_point:
        if low > high:
            raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
        if low == high:
            warnings.warn(
                "Passing `low==high` to `torch.testing.make_tensor` for floating or complex "
                "types is deprecated since 2.1 and will be removed in 2.3. Use "
                "`torch.full(...)` instead.",
                FutureWarning,
                stacklevel=3,
            )
        unit = creation.rand(shape, dtype=dtypes.float64)
        return (low + (high - low) * unit).to(dtype)
    low, high = math.ceil(low), math.ceil(high)
    if low >= high:
        raise ValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    return creation.randint(low, high, shape, dtype=dtype)
