"""Complex tensors, as PyTorch programs use them: rotary position embeddings
(``view_as_complex``, a product with ``polar``'s unit numbers,
``view_as_real``), spectral front ends (``stft(...).abs()``) and
``fusegrad.fft``.

A ``ComplexTensor`` holds one real tensor, its *pair*: the complex tensor's
shape plus a last dimension of 2 holding each element's real and imaginary
parts, which is ``view_as_real``'s layout. Every complex op is a
composition of real primitives on pairs (a product is ``(ar*br - ai*bi,
ar*bi + ai*br)``), so gradients and traces come from those primitives'
rules, with nothing of their own. The gradient a real loss L gives a
complex z = x + iy is then its pair's, dL/dx + i dL/dy, which is PyTorch's
convention (twice the conjugate Wirtinger derivative): ``z.grad`` is what
PyTorch's is. A jit function takes a complex argument, and returns a
complex result, as its pair (tracer/signature.py, tracer/outputs.py).

Real ops never see a complex tensor's numbers: it has no ``_data``, its
dtype stops their promotion (ir/dtypes.py) and primitives refuse it, so an
op with no complex implementation raises rather than computing with the
pair; the methods it lacks raise naming the op
(``refuse_what_complex_tensors_lack``). Python complex numbers are operands
of real tensors' operators (``x * 1j``) through ``operator``. The public
functions of complex numbers, and the dispatch of ``fusegrad.<op>`` to
complex implementations, are complex_functions.py's.
"""

from __future__ import annotations

import collections
import copy
import warnings

import numpy as np

from ..ir import dtypes
from ..ir import primitives as P
from ..ir.shapes import normalize_dim
from . import ops
from .devices import check_device
from .ops.arguments import _NUMBERS, C_TYPE_NAMES, _cast, as_tensor_arg
from .printing import _add_suffixes, _Formatter, _nested, _summarized, options
from .tensor import Size, Tensor, constant, constant_array

COMPLEX_NUMBERS = (complex, np.complexfloating)
_REAL = 0
_IMAG = 1


def refusal(name: str) -> NotImplementedError:
    """The error of an op complex tensors do not have (PyTorch's kind for
    kernels a dtype lacks, a RuntimeError)."""
    return NotImplementedError(f"fusegrad: {name} is not implemented for complex tensors")


class ComplexTensor(Tensor):
    """A tensor of complex numbers (``complex64``, ``complex128``) held as its
    pair: a real tensor of its shape plus a last dimension of 2, its
    elements' real and imaginary parts (float32 or float64). Its autograd
    flags, history, version and gradient are its pair's. The pair is in its
    ``__dict__``, where the walk of a jit function's Python state finds it."""

    @classmethod
    def _of(cls, pair: Tensor) -> ComplexTensor:
        z = object.__new__(cls)
        z._pair = pair
        return z

    @property
    def _data(self):
        raise refusal("this operation of real tensors")

    _dtype = property(lambda self: self._pair._dtype.to_complex())
    _requires_grad = property(lambda self: self._pair._requires_grad)
    grad_fn = property(lambda self: self._pair.grad_fn)
    _output_nr = property(lambda self: self._pair._output_nr)
    _version_counter = property(lambda self: self._pair._version_counter)
    _base = property(lambda self: self._pair._base)

    def _parts(self) -> tuple:
        """(real parts, imaginary parts): views of the pair."""
        pair = self._pair
        return _part(pair, _REAL), _part(pair, _IMAG)

    # ------------------------------------------------------------ autograd

    @property
    def requires_grad(self) -> bool:
        return self._pair._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self._pair.requires_grad = flag

    @property
    def grad(self):
        grad = self._pair.grad
        return None if grad is None else ComplexTensor._of(grad)

    @grad.setter
    def grad(self, value) -> None:
        self._pair.grad = None if value is None else _pair_of(value, self._pair._dtype)

    def _grad_accumulator(self):
        return self._pair._grad_accumulator()  # where its gradient arrives: its pair's

    def retain_grad(self) -> None:
        self._pair.retain_grad()

    def register_hook(self, hook):
        def on_pair(grad):
            result = hook(ComplexTensor._of(grad))
            return None if result is None else _pair_of(result, grad._dtype)

        return self._pair.register_hook(on_pair)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        if gradient is None and self.requires_grad:
            raise RuntimeError(
                "grad can be implicitly created only for real scalar outputs but got "
                f"{self._dtype!r}".replace("fusegrad.", "torch.")
            )
        gradient = None if gradient is None else _pair_of(gradient, self._pair._dtype)
        self._pair.backward(gradient, retain_graph, create_graph, inputs)

    def detach(self) -> ComplexTensor:
        return ComplexTensor._of(self._pair.detach())

    def detach_(self) -> ComplexTensor:
        self._pair.detach_()
        return self

    @property
    def data(self) -> ComplexTensor:
        return ComplexTensor._of(self._pair.data)

    @data.setter
    def data(self, value) -> None:
        self._pair.data = _pair_of(value, self._pair._dtype)

    def clone(self, *, memory_format=None) -> ComplexTensor:
        return ComplexTensor._of(ops.clone(self._pair))

    def contiguous(self, memory_format=None) -> ComplexTensor:
        return ComplexTensor._of(self._pair.contiguous())

    # ----------------------------------------------------------- structure

    @property
    def shape(self) -> Size:
        return Size(self._pair.shape[:-1])

    @property
    def ndim(self) -> int:
        return self._pair.ndim - 1

    def dim(self) -> int:
        return self._pair.ndim - 1

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[normalize_dim(dim, self.ndim)]

    def numel(self) -> int:
        return self.shape.numel()

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return int(self.shape[0])

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(len(self)))

    def stride(self, dim=None):
        strides = tuple(s // 2 for s in self._pair.stride()[:-1])  # in complex elements
        return strides if dim is None else strides[normalize_dim(dim, self.ndim)]

    def is_contiguous(self, memory_format=None) -> bool:
        return self._pair.is_contiguous()

    def storage_offset(self) -> int:
        return self._pair.storage_offset() // 2

    def data_ptr(self) -> int:
        return self._pair.data_ptr()

    def is_floating_point(self) -> bool:
        return False

    def is_complex(self) -> bool:
        return True

    def is_conj(self) -> bool:
        return False  # conj() computes the conjugate: no lazy conjugation bit

    # ----------------------------------------------------- real and complex

    real = property(lambda self: _part(self._pair, _REAL))
    imag = property(lambda self: _part(self._pair, _IMAG))

    def conj(self) -> ComplexTensor:
        signs = constant_array(np.array([1.0, -1.0]), self._pair._dtype)
        return ComplexTensor._of(_label(self._pair * signs, "ConjBackward0"))

    conj_physical = conj

    def resolve_conj(self) -> ComplexTensor:
        return self

    resolve_neg = resolve_conj

    def abs(self) -> Tensor:
        re, im = self._parts()
        return _label(_magnitude(re, im), "AbsBackward0")

    absolute = __abs__ = abs

    def angle(self) -> Tensor:
        re, im = self._parts()
        return _label(_angle(re, im), "AngleBackward0")

    def sgn(self) -> ComplexTensor:
        """z / |z|, 0 at 0 (with gradient 0 there, as PyTorch's)."""
        re, im = self._parts()
        magnitude = _magnitude(re, im)
        zero = magnitude == 0
        safe = P.where(zero, constant(1.0, magnitude._dtype), magnitude)
        none = constant(0.0, re._dtype)
        unit = _joined(P.where(zero, none, re / safe), P.where(zero, none, im / safe))
        return _label(unit, "SgnBackward0")

    def exp(self) -> ComplexTensor:
        re, im = self._parts()
        scale = re.exp()
        return _label(_joined(scale * im.cos(), scale * im.sin()), "ExpBackward0")

    def log(self) -> ComplexTensor:
        re, im = self._parts()
        return _label(_joined(_magnitude(re, im).log(), _angle(re, im)), "LogBackward0")

    def reciprocal(self) -> ComplexTensor:
        re, im = self._parts()
        scale = re * re + im * im
        return _label(_joined(re / scale, -im / scale), "ReciprocalBackward0")

    def square(self) -> ComplexTensor:
        return _times(self, self)

    def pow(self, exponent) -> ComplexTensor:
        """Integer exponents by repeated products (exact, as PyTorch's),
        others from the polar form: |z|**p at p times the angle."""
        if isinstance(exponent, int) and not isinstance(exponent, bool):
            result = _integer_power(self, abs(exponent))
            return result.reciprocal() if exponent < 0 else result
        if isinstance(exponent, (Tensor, *COMPLEX_NUMBERS)) or not isinstance(exponent, _NUMBERS):
            raise refusal("pow with a tensor or complex exponent")
        if exponent == 0.5:
            return self.sqrt()
        re, im = self._parts()
        magnitude = _magnitude(re, im) ** exponent
        angle = _angle(re, im) * exponent
        return _label(_joined(magnitude * angle.cos(), magnitude * angle.sin()), "PowBackward0")

    __pow__ = pow

    def sqrt(self) -> ComplexTensor:
        """The principal square root: the part of larger magnitude from
        sqrt((|z| + |re|) / 2), the other from im / (2 * that), which loses
        no digits to cancellation (nor gives -4e-8 for sqrt(-1)'s real part)."""
        re, im = self._parts()
        larger = ((_magnitude(re, im) + re.abs()) * 0.5).sqrt()
        other = im / (2 * P.where(larger == 0, constant(1.0, re._dtype), larger))
        right = re >= 0
        root = _joined(
            P.where(right, larger, other.abs()), P.where(right, other, larger.copysign(im))
        )
        return _label(root, "SqrtBackward0")

    def isnan(self) -> Tensor:
        re, im = self._parts()
        return re.isnan() | im.isnan()

    def isinf(self) -> Tensor:
        re, im = self._parts()
        return re.isinf() | im.isinf()

    def isfinite(self) -> Tensor:
        re, im = self._parts()
        return re.isfinite() & im.isfinite()

    def norm(self, p="fro", dim=None, keepdim=False, dtype=None) -> Tensor:
        norm = self.abs().norm(p, dim, keepdim)  # |z|'s norms are z's
        return norm if dtype is None else norm.to(dtype)

    # ---------------------------------------------------------- arithmetic

    def __add__(self, other):
        return operation("add", self, other)

    def __radd__(self, other):
        return operation("add", other, self)

    def __sub__(self, other):
        return operation("sub", self, other)

    def __rsub__(self, other):
        return operation("sub", other, self)

    def __mul__(self, other):
        return operation("mul", self, other)

    def __rmul__(self, other):
        return operation("mul", other, self)

    def __truediv__(self, other):
        return operation("div", self, other)

    def __rtruediv__(self, other):
        return operation("div", other, self)

    def __eq__(self, other):
        return operation("eq", self, other)

    def __ne__(self, other):
        return operation("ne", self, other)

    __hash__ = Tensor.__hash__

    def __matmul__(self, other):
        return matmul(self, other) if isinstance(other, Tensor) else NotImplemented

    def __rmatmul__(self, other):
        return matmul(other, self) if isinstance(other, Tensor) else NotImplemented

    def __neg__(self) -> ComplexTensor:
        return ComplexTensor._of(-self._pair)

    neg = negative = __neg__

    def __pos__(self) -> ComplexTensor:
        return self

    positive = __pos__

    def add(self, other, *, alpha=1):
        return add(self, other, alpha=alpha)

    def sub(self, other, *, alpha=1):
        return sub(self, other, alpha=alpha)

    subtract = sub

    def mul(self, other):
        return binary("mul", self, other)

    multiply = mul

    def div(self, other, *, rounding_mode=None):
        return div(self, other, rounding_mode=rounding_mode)

    divide = true_divide = div

    def eq(self, other):
        return binary("eq", self, other)

    def ne(self, other):
        return binary("ne", self, other)

    not_equal = ne

    def matmul(self, other):
        return matmul(self, other)

    mm = bmm = matmul

    def outer(self, vec2):
        return outer(self, vec2)

    def where(self, condition, other):
        return where(condition, self, other)

    # ------------------------------------------------------- in place

    def _update(self, result) -> ComplexTensor:
        """Writes ``result`` into this tensor (its pair, which autograd and
        traces see written)."""
        if not isinstance(result, ComplexTensor):
            result = _complex_like(result, self._pair._dtype)
        self._pair._commit_inplace(result._pair)
        return self

    def _source(self) -> ComplexTensor:
        """This tensor's value for an in-place op to compute from: a copy
        where autograd would save views of the pair the update rewrites."""
        if self._pair._requires_grad:
            return ComplexTensor._of(ops.clone(self._pair))
        return self

    def add_(self, other, *, alpha=1):
        self._pair._check_inplace()
        return self._update(add(self._source(), other, alpha=alpha))

    def sub_(self, other, *, alpha=1):
        self._pair._check_inplace()
        return self._update(sub(self._source(), other, alpha=alpha))

    def mul_(self, other):
        self._pair._check_inplace()
        return self._update(binary("mul", self._source(), other))

    def div_(self, other):
        self._pair._check_inplace()
        return self._update(binary("div", self._source(), other))

    def neg_(self):
        self._pair._check_inplace()
        return self._update(-self._source())

    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)

    def copy_(self, src, non_blocking=False):
        self[...] = src
        return self

    def fill_(self, value):
        self[...] = value
        return self

    def zero_(self):
        return self.fill_(0)

    def __getitem__(self, index):
        return ComplexTensor._of(self._pair[_pair_index(index)])

    def __setitem__(self, index, value) -> None:
        self._pair[_pair_index(index)] = _pair_of(value, self._pair._dtype)

    # ------------------------------------------------------------- shapes

    def reshape(self, *shape) -> ComplexTensor:
        return ComplexTensor._of(self._pair.reshape(*_sizes(shape), 2))

    def view(self, *shape) -> ComplexTensor:
        if len(shape) == 1 and isinstance(shape[0], dtypes.DType):
            raise refusal("view(dtype)")
        return ComplexTensor._of(self._pair.view(*_sizes(shape), 2))

    def view_as(self, other) -> ComplexTensor:
        return self.view(other.shape)

    def reshape_as(self, other) -> ComplexTensor:
        return self.reshape(other.shape)

    def flatten(self, start_dim=0, end_dim=-1) -> ComplexTensor:
        if self.ndim == 0:
            return self.reshape(1)
        start, end = normalize_dim(start_dim, self.ndim), normalize_dim(end_dim, self.ndim)
        return ComplexTensor._of(self._pair.flatten(start, end))

    def ravel(self) -> ComplexTensor:
        return self.reshape(-1)

    def unflatten(self, dim, sizes) -> ComplexTensor:
        return ComplexTensor._of(self._pair.unflatten(normalize_dim(dim, self.ndim), sizes))

    def squeeze(self, dim=None) -> ComplexTensor:
        if dim is None:
            dim = tuple(d for d, n in enumerate(self.shape) if n == 1)
        return ComplexTensor._of(self._pair.squeeze(self._dims(dim)))

    def unsqueeze(self, dim) -> ComplexTensor:
        return ComplexTensor._of(self._pair.unsqueeze(normalize_dim(dim, self.ndim + 1)))

    def transpose(self, dim0, dim1) -> ComplexTensor:
        return ComplexTensor._of(self._pair.transpose(*self._dims((dim0, dim1))))

    swapaxes = swapdims = transpose

    def t(self) -> ComplexTensor:
        if self.ndim > 2:
            raise RuntimeError(
                f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D"
            )
        return self.transpose(0, -1) if self.ndim == 2 else self

    @property
    def T(self) -> ComplexTensor:
        return self.permute(*range(self.ndim)[::-1])

    @property
    def mT(self) -> ComplexTensor:
        if self.ndim < 2:
            raise RuntimeError(
                f"tensor.mT is only supported on matrices or batches of matrices. Got "
                f"{self.ndim}-D tensor."
            )
        return self.transpose(-2, -1)

    @property
    def mH(self) -> ComplexTensor:
        if self.ndim < 2:
            raise RuntimeError(
                f"tensor.mH is only supported on matrices or batches of matrices. Got "
                f"{self.ndim}-D tensor."
            )
        return self.transpose(-2, -1).conj()

    adjoint = mH.fget

    @property
    def H(self) -> ComplexTensor:
        if self.ndim != 2:
            hint = " For batches of matrices, consider using tensor.mH" if self.ndim > 2 else ""
            raise RuntimeError(
                f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor."
                + hint
            )
        return self.mH

    def permute(self, *dims) -> ComplexTensor:
        dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        if len(dims) != self.ndim:
            raise RuntimeError(
                "permute(sparse_coo): number of dimensions in the tensor input does not match "
                "the length of the desired ordering of dimensions i.e. input.dim() = "
                f"{self.ndim} is not equal to len(dims) = {len(dims)}"
            )
        return ComplexTensor._of(self._pair.permute(*self._dims(dims), self.ndim))

    def movedim(self, source, destination) -> ComplexTensor:
        return ComplexTensor._of(self._pair.movedim(self._dims(source), self._dims(destination)))

    moveaxis = movedim

    def expand(self, *sizes) -> ComplexTensor:
        return ComplexTensor._of(self._pair.expand(*_sizes(sizes), 2))

    def expand_as(self, other) -> ComplexTensor:
        return self.expand(other.shape)

    broadcast_to = expand

    def repeat(self, *sizes) -> ComplexTensor:
        return ComplexTensor._of(self._pair.repeat(*_sizes(sizes), 1))

    def flip(self, *dims) -> ComplexTensor:
        dims = dims[0] if len(dims) == 1 else dims
        return ComplexTensor._of(self._pair.flip(self._dims(dims)))

    def roll(self, shifts, dims=None) -> ComplexTensor:
        if dims is None:  # the elements in order, rolled
            return self.flatten().roll(shifts, 0).view(self.shape)
        return ComplexTensor._of(self._pair.roll(shifts, self._dims(dims)))

    def narrow(self, dim, start, length) -> ComplexTensor:
        return ComplexTensor._of(self._pair.narrow(normalize_dim(dim, self.ndim), start, length))

    def select(self, dim, index) -> ComplexTensor:
        return ComplexTensor._of(self._pair.select(normalize_dim(dim, self.ndim), index))

    def chunk(self, chunks, dim=0) -> tuple:
        parts = self._pair.chunk(chunks, normalize_dim(dim, self.ndim))
        return tuple(ComplexTensor._of(p) for p in parts)

    def split(self, split_size_or_sections, dim=0) -> tuple:
        parts = self._pair.split(split_size_or_sections, normalize_dim(dim, self.ndim))
        return tuple(ComplexTensor._of(p) for p in parts)

    def unbind(self, dim=0) -> tuple:
        return tuple(ComplexTensor._of(p) for p in self._pair.unbind(normalize_dim(dim, self.ndim)))

    def _dims(self, dims):
        """Dimensions (an int or a sequence) as the pair's: non-negative."""
        if isinstance(dims, (tuple, list)):
            return tuple(normalize_dim(d, self.ndim) for d in dims)
        return normalize_dim(dims, self.ndim)

    # --------------------------------------------------------- reductions

    def sum(self, dim=None, keepdim=False, *, dtype=None):
        return self._reduced(ops.sum, "SumBackward", dim, keepdim, dtype)

    def mean(self, dim=None, keepdim=False, *, dtype=None):
        return self._reduced(ops.mean, "MeanBackward", dim, keepdim, dtype)

    def _reduced(self, reduce, name, dim, keepdim, dtype):
        pair = self._pair
        if dtype is not None and dtypes.as_dtype(dtype).is_complex:
            pair = P.convert(pair, dtype=dtypes.as_dtype(dtype).to_real())
        if dim is None or (isinstance(dim, (tuple, list)) and not dim):  # () too: everything
            axes = tuple(range(self.ndim))
        else:
            axes = self._dims(dim if isinstance(dim, (tuple, list)) else (dim,))
        result = ComplexTensor._of(reduce(pair, axes, keepdim) if axes else ops.clone(pair))
        _label(result, f"{name}{0 if dim is None else 1}")
        return result if dtype is None else result.to(dtype)

    # -------------------------------------------------------- conversions

    def to(self, *args, **kwargs):
        dtype, copy = kwargs.pop("dtype", None), kwargs.pop("copy", False)
        check_device(kwargs.pop("device", None))
        for a in args:
            if isinstance(a, Tensor):
                dtype = a.dtype
            elif isinstance(a, dtypes.DType) or a in (float, int, bool, complex):
                dtype = a
            elif not isinstance(a, bool) and a is not None:
                check_device(a)
        dtype = self._dtype if dtype is None else _as_dtype(dtype)
        if dtype.is_complex:
            if dtype is self._dtype:
                return self.clone() if copy else self
            return ComplexTensor._of(P.convert(self._pair, dtype=dtype.to_real()))
        if dtype is dtypes.bool_:
            return self != 0
        warnings.warn("Casting complex values to real discards the imaginary part", stacklevel=2)
        return P.convert(self.real, dtype=dtype)

    def type_as(self, other):
        return self.to(other.dtype)

    def to_dense(self, dtype=None, *, masked_grad=None):
        return self if dtype is None else self.to(dtype)

    # ------------------------------------------------------------- Python

    def _values(self) -> np.ndarray:
        """The elements as a numpy complex array (sharing the pair's memory
        when its parts are adjacent)."""
        data = self._pair._data
        if data.strides[-1] != data.itemsize:
            data = np.ascontiguousarray(data)
        return data.view(self._dtype.np)[..., 0]

    def numpy(self, *, force=False) -> np.ndarray:
        if self.requires_grad and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use "
                "tensor.detach().numpy() instead."
            )
        self._pair._guarded("numpy()")
        return self._values()

    def __array__(self, dtype=None, copy=None):
        self._pair._guarded("__array__")
        values = self._values()
        return values if dtype is None else values.astype(dtype)

    def item(self) -> complex:
        if self.numel() != 1:
            raise RuntimeError(
                f"a Tensor with {self.numel()} elements cannot be converted to Scalar"
            )
        re, im = self._pair.reshape(2).tolist()
        return complex(re, im)

    __complex__ = item

    def tolist(self):
        self._pair._guarded("tolist()")
        return self._values().tolist()

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __float__(self):
        raise RuntimeError("value cannot be converted to type double without overflow")

    def __int__(self):
        raise RuntimeError("value cannot be converted to type int64_t without overflow")

    def __format__(self, format_spec: str) -> str:
        if self.ndim == 0:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def __index__(self):
        raise TypeError("only integer tensors of a single element can be converted to an index")

    def __repr__(self) -> str:
        suffixes = []
        if self.grad_fn is not None:
            suffixes.append(f"grad_fn=<{self.grad_fn.name()}>")
        elif self.requires_grad:
            suffixes.append("requires_grad=True")
        return _complex_repr(self._values(), self._dtype, suffixes)

    def __reduce_ex__(self, protocol):
        return (_rebuild, (self._values().copy(), self.requires_grad))

    def __deepcopy__(self, memo):
        copied = memo[id(self)] = ComplexTensor._of(copy.deepcopy(self._pair, memo))
        return copied


def _converting(dtype):
    def method(self):
        return self.to(dtype)

    return method


for _name, _target in (
    ("float", dtypes.float32),
    ("double", dtypes.float64),
    ("half", dtypes.float16),
    ("bfloat16", dtypes.bfloat16),
    ("long", dtypes.int64),
    ("int", dtypes.int32),
    ("short", dtypes.int16),
    ("char", dtypes.int8),
    ("byte", dtypes.uint8),
    ("bool", dtypes.bool_),
    ("cfloat", dtypes.complex64),
    ("cdouble", dtypes.complex128),
):
    setattr(ComplexTensor, _name, _converting(_target))


def _pair_index(index) -> tuple:
    """An index of a complex tensor as its pair's: both parts of what it picks."""
    index = index if isinstance(index, tuple) else (index,)
    if any(i is Ellipsis for i in index):
        return (*index, slice(None))
    return (*index, Ellipsis, slice(None))


def _sizes(sizes) -> tuple:
    """Sizes given as varargs or as one sequence."""
    return tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes


def _rebuild(values: np.ndarray, requires_grad: bool) -> ComplexTensor:
    return from_array(values, requires_grad)


def from_array(values: np.ndarray, requires_grad: bool = False) -> ComplexTensor:
    """A complex tensor sharing the memory of numpy's complex ``values``."""
    parts = dtypes.as_dtype(values.dtype).to_real()
    pair = Tensor._new(values[..., None].view(parts.np), parts)
    z = ComplexTensor._of(pair)
    if requires_grad:
        z.requires_grad = True
    return z


def _as_dtype(dtype):
    return dtypes.default_complex() if dtype is complex else dtypes.as_dtype(dtype)


def _label(t, name: str):
    """``t``, its node named as PyTorch names the op that made it."""
    if t.grad_fn is not None:
        t.grad_fn.label = name
    return t


# ------------------------------------------------------------------ parts


_SPECS = {k: (("ellipsis",), ("int", k)) for k in (_REAL, _IMAG)}


def _part(pair: Tensor, k: int) -> Tensor:
    return P.index(pair, spec=_SPECS[k])


def planes(z: ComplexTensor) -> tuple:
    """(real parts, imaginary parts), each contiguous: a product's operands
    (numpy's products of the pair's strided parts skip BLAS, 20x slower)."""
    pair = z._pair
    last = pair.ndim - 1
    planar = ops.contiguous(P.transpose(pair, perm=(last, *range(last))))
    return P.index(planar, spec=(("int", _REAL),)), P.index(planar, spec=(("int", _IMAG),))


def _joined(re, im) -> ComplexTensor:
    """The complex tensor of these real and imaginary parts (broadcast)."""
    if re.shape != im.shape:
        re, im = ops.broadcast_tensors(re, im)
    shape = (*re.shape, 1)
    return ComplexTensor._of(
        P.concatenate(P.reshape(re, shape=shape), P.reshape(im, shape=shape), axis=len(shape) - 1)
    )


def _magnitude(re, im) -> Tensor:
    """|z|, whose gradient at 0 is 0, as PyTorch's: hypot of (1, 0) there,
    replaced by 0 (computing hypot(0, 0) would make its gradient NaN)."""
    zero = (re == 0) & (im == 0)
    one = constant(1.0, re._dtype)
    return P.where(zero, constant(0.0, re._dtype), P.hypot(P.where(zero, one, re), im))


def _angle(re, im) -> Tensor:
    """atan2(im, re), whose gradient at 0 is 0, as PyTorch's; the angle of a
    signed zero stays atan2's (pi for -0 + 0j)."""
    zero = (re == 0) & (im == 0)
    angle = P.atan2(im, P.where(zero, constant(1.0, re._dtype), re))
    return P.where(zero, P.atan2(im.detach(), re.detach()), angle)


def _integer_power(z: ComplexTensor, n: int) -> ComplexTensor:
    """z**n by squaring, as exact as products are."""
    result, square = None, z
    while n:
        if n & 1:
            result = square if result is None else _times(result, square)
        n >>= 1
        if n:
            square = _times(square, square)
    if result is None:  # z**0: ones
        ones = P.broadcast_to(constant(1.0, z._pair._dtype), shape=z.shape)
        return _complex_like(ones, z._pair._dtype)
    return result


# ------------------------------------------------------------- promotion

_Parts = collections.namedtuple("_Parts", "dtype ndim")  # a complex tensor, for promotion


def result_dtype(*operands):
    """PyTorch's promotion of operands of which some are complex: the
    complex dtype of the promotion of their real counterparts (a complex
    tensor promoting as its parts' dtype, a complex number as a float)."""
    stand_ins = []
    for op in operands:
        if isinstance(op, ComplexTensor):
            stand_ins.append(_Parts(op._pair._dtype, op.ndim))
        elif isinstance(op, COMPLEX_NUMBERS):
            stand_ins.append(0.0)
        else:
            stand_ins.append(op)
    real = dtypes.result_type(*stand_ins)
    if real is dtypes.float16:
        _no_complex32()
    return dtypes.complex128 if real is dtypes.float64 else dtypes.complex64


def _no_complex32():
    raise NotImplementedError(
        "fusegrad has no complex32 (ComplexHalf), the complex dtype of float16: convert to "
        "float32 first"
    )


def _check_operand(value):
    if not isinstance(value, (Tensor, *_NUMBERS, *COMPLEX_NUMBERS)):
        raise TypeError(
            f"unsupported operand type: {type(value).__name__} (expected a Tensor or a "
            "Python number)"
        )
    return value


def _operand(value, parts):
    """An operand with parts of dtype ``parts``: a complex tensor (of a
    complex number: a constant), or a real tensor or number."""
    if isinstance(value, ComplexTensor):
        pair = value._pair
        return value if pair._dtype is parts else ComplexTensor._of(P.convert(pair, dtype=parts))
    if isinstance(value, COMPLEX_NUMBERS):
        return ComplexTensor._of(constant_array(np.array([value.real, value.imag]), parts))
    return _cast(value, parts)


def _complex_like(value, parts) -> ComplexTensor:
    """A real tensor or number as a complex tensor, its imaginary parts 0."""
    value = _cast(value, parts)
    return _joined(value, constant(0.0, parts))


def _pair_of(value, parts) -> Tensor:
    """A value's pair, for writing into a complex tensor with parts ``parts``."""
    operand = _operand(_check_operand(value), parts)
    if not isinstance(operand, ComplexTensor):
        operand = _complex_like(operand, parts)
    return operand._pair


# ------------------------------------------------------------ arithmetic


def _plus(a, b):
    if isinstance(a, ComplexTensor) and isinstance(b, ComplexTensor):
        return ComplexTensor._of(a._pair + b._pair)
    z, x = (a, b) if isinstance(a, ComplexTensor) else (b, a)
    re, im = z._parts()
    return _joined(re + x, im)


def _minus(a, b):
    return _plus(a, -b)


def _times(a, b):
    if isinstance(a, ComplexTensor) and isinstance(b, ComplexTensor):
        ar, ai = a._parts()
        br, bi = b._parts()
        return _joined(ar * br - ai * bi, ar * bi + ai * br)
    z, x = (a, b) if isinstance(a, ComplexTensor) else (b, a)
    return ComplexTensor._of(z._pair * _beside_parts(x))


def _divided(a, b):
    if isinstance(b, ComplexTensor):
        return _times(a, b.reciprocal())
    return ComplexTensor._of(a._pair / _beside_parts(b))


def _beside_parts(x):
    """A real operand, broadcasting to a pair as to its complex tensor."""
    return P.reshape(x, shape=(*x.shape, 1)) if isinstance(x, Tensor) and x.ndim else x


def _split_or_real(value) -> tuple:
    if isinstance(value, ComplexTensor):
        return value._parts()
    return value, 0.0


def _equal(a, b):
    (ar, ai), (br, bi) = _split_or_real(a), _split_or_real(b)
    return (ar == br) & (ai == bi)


def _unequal(a, b):
    (ar, ai), (br, bi) = _split_or_real(a), _split_or_real(b)
    return (ar != br) | (ai != bi)


_BINARY = {
    "add": (_plus, "AddBackward0"),
    "sub": (_minus, "SubBackward0"),
    "mul": (_times, "MulBackward0"),
    "div": (_divided, "DivBackward0"),
    "eq": (_equal, None),
    "ne": (_unequal, None),
}


def binary(name: str, a, b):
    """``a <name> b`` where either is complex (a tensor or a number)."""
    if name not in _BINARY:
        raise refusal(name)
    compute, node_name = _BINARY[name]
    parts = result_dtype(_check_operand(a), _check_operand(b)).to_real()
    result = compute(_operand(a, parts), _operand(b, parts))
    return _label(result, node_name) if node_name else result


def operation(name: str, a, b):
    """A Python operator's ``a <name> b`` where a complex tensor or number
    meets a tensor: NotImplemented for an operand operators do not take."""
    if not isinstance(a, (Tensor, *_NUMBERS, *COMPLEX_NUMBERS)):
        return NotImplemented
    if not isinstance(b, (Tensor, *_NUMBERS, *COMPLEX_NUMBERS)):
        return NotImplemented
    return binary(name, a, b)


def operator(name: str, a, b):
    """``a <name> b`` for a real tensor's operator whose other operand it
    does not take itself: a complex number makes complex tensors of both,
    anything else is NotImplemented (Python's error then)."""
    number = b if isinstance(a, Tensor) else a
    if not isinstance(number, COMPLEX_NUMBERS):
        return NotImplemented
    return binary(name, a, b)


def add(input, other, *, alpha=1):
    return binary("add", input, other if alpha == 1 else other * alpha)


def sub(input, other, *, alpha=1):
    return binary("sub", input, other if alpha == 1 else other * alpha)


def div(input, other, *, rounding_mode=None):
    if rounding_mode is not None:
        raise refusal(f"div with rounding_mode={rounding_mode!r}")
    return binary("div", input, other)


def matmul(input, other):
    """Products of complex matrices (of one dtype, as PyTorch's products
    require): four real products of their planes."""
    input, other = as_tensor_arg(input), as_tensor_arg(other, "other")
    if input.dtype is not other.dtype:
        raise RuntimeError(
            "expected m1 and m2 to have the same dtype, but got: "
            f"{_c_type(input.dtype)} != {_c_type(other.dtype)}"
        )
    ar, ai = planes(input)
    br, bi = planes(other)
    real = ops.matmul(ar, br) - ops.matmul(ai, bi)
    return _label(_joined(real, ops.matmul(ar, bi) + ops.matmul(ai, br)), "MmBackward0")


def _c_type(dtype) -> str:
    names = {"complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}
    return names.get(dtype.name) or C_TYPE_NAMES[dtype.name]


def outer(input, vec2):
    for name, vector in (("self", input), ("vec2", vec2)):
        if as_tensor_arg(vector, name).ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {vector.ndim}-D")
    return binary("mul", input.unsqueeze(1), vec2.unsqueeze(0))


def where(condition, input, other):
    parts = result_dtype(_check_operand(input), _check_operand(other)).to_real()
    pairs = [_pair_of(v, parts) for v in (input, other)]
    return ComplexTensor._of(ops.where(_beside_parts(condition), *pairs))


# The methods complex tensors keep from Tensor: they work through the
# attributes ComplexTensor defines.
_INHERITED = {
    "requires_grad_",
    "cpu",
    "cuda",
    "nelement",
    "ndimension",
    "element_size",
    "get_device",
    "is_inference",
    "is_nonzero",
    "numel",
    "type",
    "__new__",
}


def _refused_method(name: str):
    def method(self, *args, **kwargs):
        raise refusal(name)

    method.__name__ = name
    return method


def refuse_what_complex_tensors_lack() -> None:
    """Makes every Tensor method and operator ComplexTensor does not define
    raise naming itself, rather than reaching for real numbers it does not
    have. Called once every module has added its Tensor methods."""
    own = vars(ComplexTensor)
    for name, value in list(vars(Tensor).items()):
        public = not name.startswith("_") or (name.startswith("__") and name.endswith("__"))
        if public and callable(value) and name not in own and name not in _INHERITED:
            setattr(ComplexTensor, name, _refused_method(name))


def _refuse_primitive(prim, args, params):
    """A primitive given a complex tensor: an op with no complex implementation."""
    raise NotImplementedError(
        "fusegrad: this operation is not implemented for complex tensors (it applies "
        f"{prim.name}, a primitive of real numbers)"
    )


P.register_value_type(ComplexTensor, _refuse_primitive)


# ------------------------------------------------------------- printing


class _ComplexFormat:
    """PyTorch's complex elements: real parts and imaginary parts each
    formatted as a real tensor of them would be, joined as ``1.5000-2.j``."""

    def __init__(self, values: np.ndarray):
        self.real = _Formatter(values.real, True)
        self.imag = _Formatter(values.imag, True)
        self.max_width = self.real.max_width + self.imag.max_width + 1  # + "j"

    def format(self, value) -> str:
        real = self.real.format(value.real)
        imag = (self.imag.format(value.imag) + "j").lstrip()
        return real + imag if imag[0] in "+-" else real + "+" + imag


def _complex_repr(values: np.ndarray, dtype, suffixes: list) -> str:
    prefix = "tensor("
    indent = len(prefix)
    extra = []
    if values.size == 0 and values.shape != (0,):
        extra.append(f"size={tuple(values.shape)}")
    if dtype is not dtypes.default_complex() or values.size == 0:  # as PyTorch shows them
        extra.append(f"dtype={dtype!r}")
    if values.size == 0:
        body = "[]"
    else:
        summarize = values.size > options.threshold
        formatter = _ComplexFormat(_summarized(values) if summarize else values)
        body = _nested(values, indent, summarize, formatter)
    return _add_suffixes(prefix + body, extra + suffixes, indent)
