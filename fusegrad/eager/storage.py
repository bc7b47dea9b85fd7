"""A tensor's storage, as PyTorch shows it: the memory a tensor and its
views share (the numpy array that owns it), its elements in memory order.
``storage()`` (PyTorch's deprecated TypedStorage) and ``untyped_storage()``
read and write it; ``resize_`` and ``set_`` change which part of a storage,
or which storage, a tensor shows; ``share_memory_`` and ``pin_memory``
answer as a CPU-only PyTorch does. None of this compiles: a program computes
values, never storages."""

from __future__ import annotations

import math
import operator
import warnings
import weakref

import numpy as np

from . import devices, grad_mode
from .ops import _eager_only, reshape
from .ops.arguments import C_TYPE_NAMES
from .tensor import Tensor


def _owner(data: np.ndarray) -> np.ndarray:
    while isinstance(data.base, np.ndarray):
        data = data.base
    return data


def _elements(data: np.ndarray) -> tuple:
    """(the storage's elements in memory order, how many of them come
    before ``data``'s first)."""
    owner = _owner(data)
    if not (owner.flags.c_contiguous or owner.flags.f_contiguous):
        # memory numpy made with strides of its own (windows of an image):
        # its elements, copied, as a storage of their own
        return np.ascontiguousarray(data).reshape(-1), 0
    elements = owner.ravel(order="K")
    if elements.dtype != data.dtype:
        elements = elements.view(data.dtype)
    return elements, (data.ctypes.data - owner.ctypes.data) // data.itemsize


def _position(index, size: int) -> int:
    position = operator.index(index)
    if not -size <= position < size:
        raise IndexError(f"index {index} out of range for storage of size {size}")
    return position % size


# ids of the arrays share_memory_() marked, forgotten as each dies
_shared: set = set()


def _is_shared(elements: np.ndarray) -> bool:
    return id(_owner(elements)) in _shared


class TypedStorage:
    """A tensor's storage as elements of its dtype (PyTorch's TypedStorage)."""

    is_sparse = False
    is_cuda = False
    device = devices.CPU

    def __init__(self, elements: np.ndarray, dtype):
        self._elements = elements
        self.dtype = dtype

    def size(self) -> int:
        return self._elements.size

    __len__ = size

    def element_size(self) -> int:
        return self.dtype.itemsize

    def nbytes(self) -> int:
        return self.size() * self.element_size()

    def data_ptr(self) -> int:
        return self._elements.ctypes.data

    def __getitem__(self, index):
        if isinstance(index, slice):
            raise RuntimeError("slices are only supported in UntypedStorage.__getitem__")
        return self._elements[_position(index, self.size())].item()

    def __setitem__(self, index, value):
        if not isinstance(index, slice):
            index = _position(index, self.size())
        value = np.asarray(value._data if isinstance(value, Tensor) else value)
        self._elements[index] = self.dtype.round(value) if self.dtype.reduced else value

    def fill_(self, value):
        self[:] = value
        return self

    def tolist(self) -> list:
        return self._elements.tolist()

    def __iter__(self):
        return iter(self.tolist())

    def type(self) -> str:
        return f"fusegrad.{self.dtype.scalar_name}Storage"

    def untyped(self) -> UntypedStorage:
        return UntypedStorage(self._elements, self.dtype)

    def is_shared(self) -> bool:
        return _is_shared(self._elements)

    def is_pinned(self, device=None) -> bool:
        return False

    def cpu(self) -> TypedStorage:
        return self

    def __repr__(self) -> str:
        values = "\n ".join(str(v) for v in self.tolist())
        kind = f"{type(self).__module__}.{type(self).__qualname__}"
        return f" {values}\n[{kind}(dtype={self.dtype!r}, device=cpu) of size {self.size()}]"


class UntypedStorage:
    """A tensor's storage as bytes (PyTorch's UntypedStorage). A float16,
    bfloat16 or narrow integer tensor holds its elements in a wider numpy
    type: its bytes are those of its own type, converted when read."""

    is_sparse = False
    is_cuda = False
    device = devices.CPU

    def __init__(self, elements: np.ndarray, dtype):
        self._elements = elements
        self._dtype = dtype

    def _bytes(self) -> np.ndarray:
        if self._dtype.itemsize == self._elements.itemsize:
            return self._elements.view(np.uint8)
        if self._dtype.exchanged_as is not None:
            return self._elements.astype(self._dtype.exchanged_as).view(np.uint8)
        # bfloat16: the upper half of its float32 (rounded already, so exact)
        return (self._elements.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)

    def size(self) -> int:
        return self._elements.size * self._dtype.itemsize

    __len__ = nbytes = size

    def element_size(self) -> int:
        return 1

    def data_ptr(self) -> int:
        return self._elements.ctypes.data

    def __getitem__(self, index) -> int:
        return int(self._bytes()[_position(index, self.size())])

    def tolist(self) -> list:
        return self._bytes().tolist()

    def __iter__(self):
        return iter(self.tolist())

    def is_shared(self) -> bool:
        return _is_shared(self._elements)

    def is_pinned(self, device=None) -> bool:
        return False

    def cpu(self) -> UntypedStorage:
        return self

    def __repr__(self) -> str:
        values = "\n ".join(str(v) for v in self.tolist())
        kind = f"{type(self).__module__}.{type(self).__qualname__}"
        return f" {values}\n[{kind}(device=cpu) of size {self.size()}]"


_warned_typed_storage = False


def storage(self) -> TypedStorage:
    global _warned_typed_storage
    _eager_only("storage()", "a program computes values, not storages")
    if not _warned_typed_storage:  # once a process, as PyTorch warns
        _warned_typed_storage = True
        warnings.warn(
            "TypedStorage is deprecated. It will be removed in the future and UntypedStorage "
            "will be the only storage class. This should only matter to you if you are using "
            "storages directly.  To access UntypedStorage directly, use "
            "tensor.untyped_storage() instead of tensor.storage()",
            UserWarning,
            stacklevel=2,
        )
    return TypedStorage(_elements(self._data)[0], self._dtype)


def untyped_storage(self) -> UntypedStorage:
    _eager_only("untyped_storage()", "a program computes values, not storages")
    return UntypedStorage(_elements(self._data)[0], self._dtype)


def share_memory_(self) -> Tensor:
    """Marks the storage shared, which is all it can be: fusegrad has no
    torch.multiprocessing to hand it to another process."""
    _eager_only("share_memory_()", "a program computes values, not storages")
    owner = _owner(self._data)
    if id(owner) not in _shared:
        _shared.add(id(owner))
        weakref.finalize(owner, _shared.discard, id(owner))
    return self


def is_shared(self) -> bool:
    _eager_only("is_shared()", "a program computes values, not storages")
    return _is_shared(self._data)


def pin_memory(self, device=None) -> Tensor:
    raise RuntimeError("Cannot access accelerator device when none is available.")


def record_stream(self, stream) -> None:
    """Fails as on a CPU-only PyTorch, where no argument can be a CUDA stream."""
    raise RuntimeError("unknown parameter type")


def int_repr(self) -> Tensor:
    """A quantized tensor's stored integers; fusegrad has no quantized tensors."""
    raise NotImplementedError(
        "Could not run 'aten::int_repr' with arguments from the 'CPU' backend: int_repr is "
        "defined for quantized tensors only, and fusegrad has none"
    )


def _make_wrapper_subclass(cls, size, *args, **kwargs):
    raise RuntimeError(
        f"{cls.__name__}._make_wrapper_subclass: fusegrad has no __torch_dispatch__, so "
        "tensor subclasses that wrap other tensors through it cannot be made"
    )


# ------------------------------------------------- resize_, set_, is_set_to


def _set_data(self, data: np.ndarray) -> Tensor:
    """``data`` becomes this tensor's elements, as its own: views of it taken
    before now no longer follow its shape."""
    self._check_inference_update()
    self._data = data
    self._base = None
    self._version_counter[0] += 1
    self._layout_version = self._version_counter[0]
    return self


def _resize_sizes(sizes) -> tuple:
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    for k, s in enumerate(sizes):
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(
                "resize_(): argument 'size' (position 1) must be tuple of ints, but found "
                f"element of type {type(s).__name__} at pos {k}"
            )
    if any(s < 0 for s in sizes):
        raise RuntimeError("numel: integer multiplication overflow")
    return tuple(int(s) for s in sizes)


def resize_(self, *sizes) -> Tensor:
    """PyTorch's resize_: the tensor becomes the ``sizes`` elements of its
    storage from where it starts, in storage order; a storage too small
    grows, its new elements zeros (PyTorch's are uninitialized memory), in
    a new array: views taken before no longer share it."""
    shape = _resize_sizes(sizes)
    if self._requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    if self.shape == shape:
        return self
    count = math.prod(shape)
    if self._base is None and self._data.flags.c_contiguous and count <= self.numel():
        # its first elements: a value a program computes too
        return self._commit_layout(reshape(reshape(self, -1)[:count], shape))
    _eager_only("resize_() growing a tensor, or of a view or a strided one", "storage order")
    elements, offset = _elements(self._data)
    if offset + count > elements.size:
        grown = np.zeros(offset + count, elements.dtype)
        grown[: elements.size] = elements
        elements = grown
    return _set_data(self, elements[offset : offset + count].reshape(shape))


def resize_as_(self, the_template) -> Tensor:
    if not isinstance(the_template, Tensor):
        raise TypeError(
            "resize_as_(): argument 'the_template' (position 1) must be Tensor, not "
            f"{type(the_template).__name__}"
        )
    return resize_(self, tuple(the_template.shape))


def _storage_elements(source, dtype) -> np.ndarray:
    if isinstance(source, Tensor):
        source_dtype, elements = source._dtype, _elements(source._data)[0]
    elif isinstance(source, TypedStorage):
        source_dtype, elements = source.dtype, source._elements
    elif isinstance(source, UntypedStorage):
        source_dtype, elements = source._dtype, source._elements
    else:
        raise TypeError(
            f"set_(): argument 'source' must be Tensor or Storage, not {type(source).__name__}"
        )
    if source_dtype is not dtype:
        raise RuntimeError(
            f"Could not set tensor of type {C_TYPE_NAMES[source_dtype.name]} "
            f"to a tensor of type {C_TYPE_NAMES[dtype.name]}"
        )
    return elements


def _strided(elements: np.ndarray, offset: int, size, stride) -> np.ndarray:
    """The elements of a storage a tensor of ``size`` and ``stride`` starting
    ``offset`` elements in shows."""
    size = tuple(operator.index(s) for s in size)
    if stride is None:
        stride = tuple(math.prod(size[k + 1 :]) for k in range(len(size)))
    if offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {offset}")
    needed = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else 0
    if needed > elements.size:
        raise RuntimeError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, "
            f"and itemsize {elements.itemsize} requiring a storage size of "
            f"{needed * elements.itemsize} are out of bounds for storage of size "
            f"{elements.nbytes} (fusegrad does not grow a storage in set_())"
        )
    strides = tuple(s * elements.itemsize for s in stride)
    # an array over the storage's (not a strided copy's): storage() finds it
    return np.ndarray(size, elements.dtype, elements, offset * elements.itemsize, strides)


def set_(self, source=None, storage_offset=None, size=None, stride=None) -> Tensor:
    """The tensor shows ``source``'s elements: a tensor's, with its shape and
    strides, or a storage's from ``storage_offset``, of ``size`` and
    ``stride`` (its whole, 1-d, by default); with no source, none."""
    _eager_only("set_()", "it changes the storage")
    self._check_inplace()
    if self._requires_grad and grad_mode.is_grad_enabled():
        raise RuntimeError("set_() of a tensor that requires grad: it has no derivative")
    if source is None:
        return _set_data(self, np.empty(0, self._data.dtype))
    elements = _storage_elements(source, self._dtype)
    if isinstance(source, Tensor) and size is None:
        return _set_data(self, source._data)
    offset = 0 if storage_offset is None else operator.index(storage_offset)
    if size is None:
        size = (elements.size - offset,)
    return _set_data(self, _strided(elements, offset, size, stride))


def is_set_to(self, tensor) -> bool:
    """Whether the two show the same elements of one storage in one shape."""
    _eager_only("is_set_to()", "a program computes values, not storages")
    a, b = self._data, tensor._data
    return (
        _owner(a) is _owner(b)
        and a.ctypes.data == b.ctypes.data
        and a.shape == b.shape
        and a.strides == b.strides
    )


Tensor.storage = storage
Tensor.untyped_storage = untyped_storage
Tensor.share_memory_ = share_memory_
Tensor.is_shared = is_shared
Tensor.pin_memory = pin_memory
Tensor.record_stream = record_stream
Tensor.int_repr = int_repr
Tensor._make_wrapper_subclass = staticmethod(_make_wrapper_subclass)
Tensor.is_pinned = lambda self, device=None: False
Tensor.resize_ = resize_
Tensor.resize_as_ = resize_as_
Tensor.set_ = set_
Tensor.is_set_to = is_set_to
