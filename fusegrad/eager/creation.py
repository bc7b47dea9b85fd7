"""Creating tensors: ``tensor``, ``ones``, ``arange``, ``randn``, ... and the
legacy constructors ``Tensor(...)`` and ``autograd.Variable`` (``FloatTensor``
and its kin: tensor_types.py). The random ones draw from a generator (random.py).
"""

from __future__ import annotations

import math
import numbers
import operator
import warnings

import numpy as np

from ..ir import dtypes
from ..ir import primitives as P
from ..ir.shapes import is_symbolic, sizes_from_args
from . import complex_tensor, grad_mode, ops, random
from . import memory_format as memory_formats
from .devices import check_device
from .tensor import TRACED_NUMBERS, Size, Tensor, recording


def _finish(data: np.ndarray, dtype, requires_grad: bool) -> Tensor:
    if dtype.is_complex:
        return complex_tensor.from_array(data, requires_grad)
    if dtype.reduced:
        data = dtype.round(data)
    t = Tensor._new(data, dtype)
    if requires_grad:
        t.requires_grad = True
    return t


def _flatten_data(data):
    """Nested lists that may hold tensors or numpy values, as plain Python numbers."""
    if isinstance(data, Tensor):
        return data.tolist() if data.is_complex() else data._data.tolist()
    if isinstance(data, (list, tuple)):
        return [_flatten_data(d) for d in data]
    if isinstance(data, np.ndarray):
        return data.tolist()
    if isinstance(data, np.generic):
        return data.item()
    if not isinstance(data, (numbers.Number, bool)):
        raise TypeError(f"Could not infer dtype of {type(data).__name__}")
    return data


def _check_rectangular(values, dim):
    if not isinstance(values, list) or not values:
        return
    lengths = [len(v) if isinstance(v, list) else None for v in values]
    for length in lengths[1:]:
        if length != lengths[0]:
            raise ValueError(
                f"expected sequence of length {lengths[0]} at dim {dim + 1} (got {length})"
            )
    for v in values:
        _check_rectangular(v, dim + 1)


def _infer_dtype(values) -> dtypes.DType:
    """The dtype of the widest kind of number among ``values``; without
    numbers (``tensor([])``), the default dtype."""
    category = -1  # no number yet
    stack = [values]
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(v)
        else:
            category = max(category, dtypes.scalar_category(v))
    return dtypes.DEFAULT_FOR_CATEGORY[category] if category >= 0 else dtypes.default_float()


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, numbers, numpy arrays).

    >>> import fusegrad
    >>> fusegrad.tensor([[1., 2.], [3., 4.]])
    tensor([[1., 2.],
            [3., 4.]])
    """
    check_device(device)
    if recording.trace is not None and _holds_tensors(data):
        return _traced_copy(data, dtype, requires_grad)
    if isinstance(data, np.ndarray):
        inferred = dtypes.from_numpy_dtype(data.dtype)
        array = data
    elif isinstance(data, Tensor):
        inferred, array = data._dtype, data.numpy(force=True) if data.is_complex() else data._data
    else:
        values = _flatten_data(data)
        _check_rectangular(values, 0)
        inferred = _infer_dtype(values)
        target = inferred if dtype is None else dtypes.as_dtype(dtype)
        if target.reduced and target.category == dtypes.INTEGER:
            _check_range(np.array(values), target)
        # straight to the requested dtype: through float32 a float64's digits would be lost
        array = np.array(values, dtype=target.np)
    dtype = dtypes.as_dtype(dtype) if dtype is not None else inferred
    return _finish(np.array(array, dtype=dtype.np, copy=True), dtype, requires_grad)


def _check_range(values: np.ndarray, dtype) -> None:
    """PyTorch refuses Python numbers beyond a narrow integer dtype's range,
    but an unsigned one takes integers down to -max (wrapped around)."""
    info = dtypes.iinfo(dtype)
    low = -info.max if info.min == 0 and values.dtype.kind != "f" else info.min
    if values.size and (values.min() < low or values.max() > info.max):
        raise RuntimeError(f"value cannot be converted to type {dtype.name} without overflow")


def _holds_tensors(data) -> bool:
    if isinstance(data, (Tensor, *TRACED_NUMBERS)):
        return True
    return isinstance(data, (list, tuple)) and any(_holds_tensors(d) for d in data)


def _traced_copy(data, dtype, requires_grad: bool) -> Tensor:
    """``tensor(data)`` of traced tensors or numbers, inside a traced
    function: a copy the trace records, so later calls copy their values."""

    def stacked(d):
        if isinstance(d, Tensor):
            return d.detach()
        if isinstance(d, (list, tuple)):
            return ops.stack([stacked(v) for v in d])
        return d.tensor if type(d) in TRACED_NUMBERS else tensor(d)

    with grad_mode.no_grad():
        inferred = tensor(_values_for_dtype(data)).dtype  # the dtype eager mode infers
        result = stacked(data).to(dtypes.as_dtype(dtype) if dtype is not None else inferred)
        result = result.clone()
    return result.requires_grad_(requires_grad) if requires_grad else result


def _values_for_dtype(data):
    """``data`` with its tensors and traced numbers as zeros of their kind."""
    if isinstance(data, Tensor):
        exchanged_as = data._dtype.exchanged_as  # numpy has no bfloat16
        return np.zeros(data._data.shape, exchanged_as) if exchanged_as is not None else 0.0
    if type(data) in TRACED_NUMBERS:
        return 0.0 if data.tensor._dtype.is_floating_point else 0
    if isinstance(data, (list, tuple)):
        return [_values_for_dtype(d) for d in data]
    return data


def as_tensor(data, dtype=None, device=None) -> Tensor:
    check_device(device)
    if isinstance(data, Tensor) and (dtype is None or dtypes.as_dtype(dtype) is data._dtype):
        return data
    if isinstance(data, np.ndarray) and (dtype is None or dtypes.as_dtype(dtype).np == data.dtype):
        return from_numpy(data)
    return tensor(data, dtype=dtype)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with ``array``."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    if array.dtype.kind == "c":
        return complex_tensor.from_array(array)
    return (
        Tensor._make(array, dtypes.from_numpy_dtype(array.dtype))
        if array.dtype in (np.float32, np.float64, np.int64, np.int32, np.bool_)
        else tensor(array)
    )


def _filled(value, size, dtype, requires_grad, default=None):
    shape = sizes_from_args(size)
    dtype = dtypes.as_dtype(dtype) if dtype is not None else default or dtypes.default_float()
    if isinstance(value, (complex, np.complexfloating)) and not dtype.is_complex:
        name = {"float32": "float", "float64": "double"}.get(dtype.name, dtype.name)
        raise RuntimeError(f"value cannot be converted to type {name} without overflow")
    if is_symbolic(shape) and not requires_grad:
        # a traced size that varies between calls: the fill is computed at
        # its run-time size, and writable, as a fresh tensor is
        fill = _finish(np.full((), value, dtype=dtype.np), dtype, False)
        return ops.clone(P.broadcast_to(fill, shape=shape))
    return _finish(np.full(shape, value, dtype=dtype.np), dtype, requires_grad)


def _size(args, kwargs):
    """Sizes as varargs or as the keyword ``size=`` (which can't be named in the signature)."""
    size = kwargs.pop("size", None)
    if kwargs:
        raise TypeError(f"got an unexpected keyword argument {next(iter(kwargs))!r}")
    if size is not None and args:
        raise TypeError("size given both positionally and as a keyword")
    return size if size is not None else args


def zeros(*size, dtype=None, device=None, requires_grad=False, **kwargs):
    check_device(device)
    return _filled(0, _size(size, kwargs), dtype, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False, **kwargs):
    check_device(device)
    return _filled(1, _size(size, kwargs), dtype, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False, **kwargs):
    check_device(device)
    return _filled(0, _size(size, kwargs), dtype, requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    check_device(device)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    if not isinstance(fill_value, (numbers.Number, np.bool_)):
        raise TypeError(f"full(): fill_value must be a number, not {type(fill_value).__name__}")
    default = dtypes.DEFAULT_FOR_CATEGORY[dtypes.scalar_category(fill_value)]
    return _filled(fill_value, size, dtype, requires_grad, default)


def _like(input, dtype):
    if not isinstance(input, Tensor):
        raise TypeError(f"input must be a Tensor, not {type(input).__name__}")
    return dtypes.as_dtype(dtype) if dtype is not None else input._dtype


def _laid_out_like(t: Tensor, input: Tensor, memory_format, caller: str) -> Tensor:
    """``t``, just made in C order, laid out as ``memory_format`` says beside
    ``input`` (in a trace it stays: programs keep no layouts); None is preserve_format."""
    memory_format = memory_format or memory_formats.preserve_format
    memory_formats.check(memory_format, caller)
    memory_formats.check_rank(memory_format, t.ndim)
    if recording.trace is None and not t.is_complex():
        t._data = memory_formats.laid_out(t._data, memory_format, input._data)
    return t


_PRESERVE = memory_formats.preserve_format


def zeros_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=_PRESERVE):
    check_device(device)
    dtype = _like(input, dtype)
    return _laid_out_like(
        _filled(0, input.shape, dtype, requires_grad), input, memory_format, "zeros_like"
    )


def ones_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=_PRESERVE):
    check_device(device)
    dtype = _like(input, dtype)
    return _laid_out_like(
        _filled(1, input.shape, dtype, requires_grad), input, memory_format, "ones_like"
    )


def empty_like(input, *, dtype=None, device=None, requires_grad=False, memory_format=_PRESERVE):
    check_device(device)
    dtype = _like(input, dtype)
    return _laid_out_like(
        _filled(0, input.shape, dtype, requires_grad), input, memory_format, "empty_like"
    )


def full_like(
    input, fill_value, *, dtype=None, device=None, requires_grad=False, memory_format=_PRESERVE
):
    check_device(device)
    dtype = _like(input, dtype)
    filled = _filled(fill_value, input.shape, dtype, requires_grad)
    return _laid_out_like(filled, input, memory_format, "full_like")


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    check_device(device)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if is_symbolic(end) and isinstance(start, int) and step == 1 and dtype is None:
        # a traced size that varies between calls: counted at run time
        counted = ops.positions(end - start)
        return counted + start if start else counted
    values = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    default = dtypes.DEFAULT_FOR_CATEGORY[
        max(dtypes.INTEGER, *(dtypes.scalar_category(v) for v in values))
    ]
    dtype = dtypes.as_dtype(dtype) if dtype is not None else default
    return _finish(np.arange(*values).astype(dtype.np), dtype, requires_grad)


def range_(start=0, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    """The deprecated ``torch.range``: from start to end inclusive, of the
    default dtype unless ``dtype`` is given."""
    check_device(device)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    warnings.warn(
        "torch.range is deprecated and will be removed in a future release because its "
        "behavior is inconsistent with Python's range builtin. Instead, use torch.arange, "
        "which produces values in [start, end).",
        UserWarning,
        stacklevel=2,
    )
    dtype = dtypes.as_dtype(dtype) if dtype is not None else dtypes.default_float()
    count = math.floor((end - start) / step) + 1
    values = start + step * np.arange(count, dtype=np.float64)
    return _finish(values.astype(dtype.np), dtype, requires_grad)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    check_device(device)
    if not isinstance(steps, int) or steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dtype = dtypes.as_dtype(dtype) if dtype is not None else dtypes.default_float()
    return _finish(np.linspace(start, end, steps).astype(dtype.np), dtype, requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    check_device(device)
    if not isinstance(steps, int) or steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dtype = dtypes.as_dtype(dtype) if dtype is not None else dtypes.default_float()
    values = np.logspace(start, end, steps, base=base)
    return _finish(values.astype(dtype.np), dtype, requires_grad)


def _window(name, coefficients, window_length, periodic, dtype, requires_grad):
    """A generalized cosine window: sum of c_k cos(2 pi k n / N), signs alternating."""
    if not isinstance(window_length, int) or window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got {window_length}")
    dtype = dtypes.as_dtype(dtype) if dtype is not None else dtypes.default_float()
    if window_length <= 1:
        return _finish(np.ones(window_length, dtype.np), dtype, requires_grad)
    period = window_length if periodic else window_length - 1
    phase = 2 * np.pi * np.arange(window_length) / period
    values = sum((-1) ** k * c * np.cos(k * phase) for k, c in enumerate(coefficients))
    return _finish(values.astype(dtype.np), dtype, requires_grad)


def hann_window(window_length, periodic=True, *, dtype=None, device=None, requires_grad=False):
    check_device(device)
    return _window("hann_window", (0.5, 0.5), window_length, periodic, dtype, requires_grad)


def hamming_window(
    window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, device=None,
    requires_grad=False,
):  # fmt: skip
    check_device(device)
    return _window("hamming_window", (alpha, beta), window_length, periodic, dtype, requires_grad)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    check_device(device)
    for name, value in (("n", n), ("m", m)):
        if value is not None and (not isinstance(value, int) or value < 0):
            raise RuntimeError(f"{name} must be greater or equal to 0, got {value}")
    dtype = dtypes.as_dtype(dtype) if dtype is not None else dtypes.default_float()
    return _finish(np.eye(n, m, dtype=dtype.np), dtype, requires_grad)


def _random(sample, name, size, generator, dtype, requires_grad):
    shape = sizes_from_args(size)
    dtype = dtypes.as_dtype(dtype) if dtype is not None else dtypes.default_float()
    t = sample(random.stream(generator, name), shape, dtype)
    # a sampler may end in a view of its own scratch (Box-Muller's pairs): a
    # fresh tensor is no view, so in-place updates of it (p.data += ...) compile
    t._base = None
    return t.requires_grad_() if requires_grad else t


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False, **kwargs):
    """Floats drawn uniformly from [0, 1)."""
    check_device(device)
    size = _size(size, kwargs)
    return _random(random.uniform, "rand", size, generator, dtype, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False, **kwargs):
    """Floats drawn from the standard normal distribution."""
    check_device(device)
    size = _size(size, kwargs)
    return _random(random.standard_normal, "randn", size, generator, dtype, requires_grad)


def rand_like(
    input,
    *,
    generator=None,
    dtype=None,
    device=None,
    requires_grad=False,
    memory_format=_PRESERVE,
):
    check_device(device)
    dtype = _like(input, dtype)
    drawn = rand(input.shape, generator=generator, dtype=dtype, requires_grad=requires_grad)
    return _laid_out_like(drawn, input, memory_format, "rand_like")


def randn_like(
    input,
    *,
    generator=None,
    dtype=None,
    device=None,
    requires_grad=False,
    memory_format=_PRESERVE,
):
    check_device(device)
    dtype = _like(input, dtype)
    drawn = randn(input.shape, generator=generator, dtype=dtype, requires_grad=requires_grad)
    return _laid_out_like(drawn, input, memory_format, "randn_like")


def _integers(low, high, shape, generator, dtype, requires_grad, name):
    low, high = operator.index(low), operator.index(high)
    random.check_integer_range(low, high, dtype)
    values = random.integers(random.stream(generator, name), low, high - low, shape)
    t = P.convert(values, dtype=dtype) if dtype is not dtypes.int64 else values
    return t.requires_grad_() if requires_grad else t


def randint(
    low=0, high=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=False
):
    """``randint(high, size)`` or ``randint(low, high, size)``: integers drawn
    uniformly from [low, high), int64 unless ``dtype`` says otherwise."""
    check_device(device)
    if size is None and isinstance(high, (tuple, list)):  # randint(high, size)
        low, high, size = 0, low, high
    elif high is None:  # randint(high, size=size)
        low, high = 0, low
    if not isinstance(size, (tuple, list)):
        raise TypeError(
            "randint() missing required argument 'size' (a tuple of ints)"
            if size is None
            else f"randint(): argument 'size' must be tuple of ints, not {type(size).__name__}"
        )
    dtype = dtypes.as_dtype(dtype) if dtype is not None else dtypes.int64
    shape = sizes_from_args(size)
    return _integers(low, high, shape, generator, dtype, requires_grad, "randint")


def randint_like(
    input,
    low=0,
    high=None,
    *,
    generator=None,
    dtype=None,
    device=None,
    requires_grad=False,
    memory_format=_PRESERVE,
):
    """``randint_like(input, high)`` or ``randint_like(input, low, high)``."""
    if high is None:
        low, high = 0, low
    dtype = _like(input, dtype)
    drawn = _integers(low, high, input.shape, generator, dtype, requires_grad, "randint_like")
    return _laid_out_like(drawn, input, memory_format, "randint_like")


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0, ..., n - 1, each of the n! equally likely."""
    check_device(device)
    n = operator.index(n)
    if n < 0:
        raise RuntimeError(f"n must be non-negative, got{n}")  # sic, PyTorch's
    dtype = dtypes.as_dtype(dtype) if dtype is not None else dtypes.int64
    t = random.permutation(random.stream(generator, "randperm"), n)
    t = P.convert(t, dtype=dtype) if dtype is not dtypes.int64 else t
    return t.requires_grad_() if requires_grad else t


# ----------------------------------------------------------------- legacy


def legacy_construct(dtype, args, kwargs):
    """What a legacy constructor (``Tensor``, ``FloatTensor``) of ``dtype``
    makes: ``(data)`` a copy of data, ``(2, 3)`` or ``(size=...)`` a tensor of
    that size, ``()`` an empty one."""
    if len(args) == 1 and not isinstance(args[0], numbers.Number):
        return tensor(args[0], dtype=dtype, requires_grad=kwargs.get("requires_grad", False))
    if not args and kwargs.get("size") is None:
        return zeros(0, dtype=dtype, **kwargs)
    if kwargs.get("size") is not None or all(isinstance(a, numbers.Integral) for a in args):
        return zeros(*args, dtype=dtype, **kwargs)
    raise TypeError(f"Tensor(): invalid arguments {args!r}")


def legacy_tensor(cls, args, kwargs):
    """``Tensor(data)`` copies data as the default dtype; ``Tensor(2, 3)`` makes a
    2x3 tensor."""
    t = legacy_construct(dtypes.default_float(), args, kwargs)
    if cls is not Tensor:
        raise TypeError(f"{cls.__name__} cannot be constructed this way")
    return t


class _VariableMeta(type):
    # PyTorch's Variable is a class every tensor is an instance of
    # (``isinstance(p, Variable)``, as torchviz asserts of its params)
    def __instancecheck__(cls, other) -> bool:
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """The pre-0.4 wrapper: ``Variable(t)`` returns a tensor sharing ``t``'s storage.

    ``volatile=True`` is the old inference mode: the tensor and everything
    computed from it record no graph."""

    def __new__(cls, data, requires_grad: bool = False, volatile: bool = False) -> Tensor:
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        t = data.detach()
        if volatile:
            warnings.warn(
                "volatile is deprecated: use `with fusegrad.no_grad():` instead. This "
                "Variable, and what is computed from it, records no graph.",
                UserWarning,
                stacklevel=2,
            )
            t._volatile = True
        elif requires_grad:
            t.requires_grad = True
        return t


Tensor._legacy_constructor = staticmethod(legacy_tensor)


# ------------------------------------------------------ Tensor.new_*


def _new_dtype(input, dtype):
    return input._dtype if dtype is None else dtype


@ops.public(function=False)
def new(input, *args, **kwargs):
    """The legacy ``x.new(...)``: a tensor of input's dtype, made as the legacy
    constructors make one (``new(2, 3)`` or ``new(torch.Size(...))``
    uninitialised, ``new(data)`` a copy of data, ``new()`` empty)."""
    if len(args) == 1 and isinstance(args[0], Size):
        args = tuple(args[0])
    return legacy_construct(input._dtype, args, kwargs)


@ops.public(function=False)
def new_zeros(input, *size, dtype=None, device=None, requires_grad=False, **kwargs):
    """A tensor of zeros with input's dtype (unless ``dtype`` is given)."""
    return zeros(*size, dtype=_new_dtype(input, dtype), requires_grad=requires_grad, **kwargs)


@ops.public(function=False)
def new_ones(input, *size, dtype=None, device=None, requires_grad=False, **kwargs):
    return ones(*size, dtype=_new_dtype(input, dtype), requires_grad=requires_grad, **kwargs)


@ops.public(function=False)
def new_empty(input, *size, dtype=None, device=None, requires_grad=False, **kwargs):
    return empty(*size, dtype=_new_dtype(input, dtype), requires_grad=requires_grad, **kwargs)


@ops.public(function=False)
def new_full(input, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    return full(size, fill_value, dtype=_new_dtype(input, dtype), requires_grad=requires_grad)


@ops.public(function=False)
def new_tensor(input, data, dtype=None, device=None, requires_grad=False):
    """A copy of ``data`` with input's dtype (unless ``dtype`` is given)."""
    if isinstance(data, Tensor):
        warnings.warn(
            "To copy construct from a tensor, it is recommended to use "
            "sourceTensor.detach().clone() or "
            "sourceTensor.detach().clone().requires_grad_(True), rather than "
            "tensor.new_tensor(sourceTensor).",
            UserWarning,
            stacklevel=2,
        )
        data = data.detach()
    return tensor(data, dtype=_new_dtype(input, dtype), requires_grad=requires_grad)
