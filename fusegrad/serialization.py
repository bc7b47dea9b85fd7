"""``save`` and ``load``: objects holding tensors (a model's or an optimizer's
``state_dict``, a checkpoint dict) in a file of fusegrad's own.

The file is a zip archive, as PyTorch's is: ``archive/data.pkl`` pickles the
object with each tensor replaced by a reference to a record
``archive/data/<n>`` holding its elements (little-endian, C order). A tensor
saved twice in one object is stored once and loads as one tensor.

``load`` also reads the checkpoints PyTorch's ``torch.save`` writes: its zip
archives (``<name>/data.pkl`` with each tensor a view of a storage record
``<name>/data/<key>``) and its older sequential format (PyTorch before 1.6,
and ``_use_new_zipfile_serialization=False``), as pretrained weights come.

``load`` reads with a restricted unpickler by default (``weights_only=True``):
it builds only containers, numbers, strings, tensors and the few types listed
in ``get_safe_globals()`` (plus what ``add_safe_globals`` allows), so loading
an untrusted file runs no code of the file's choosing. ``weights_only=False``
unpickles anything: only for files you trust.
"""

from __future__ import annotations

import codecs
import collections
import io
import os
import pickle
import zipfile
from contextlib import contextmanager

import numpy as np

from .eager.complex_tensor import ComplexTensor, from_array
from .eager.devices import check_device, device
from .eager.tensor import Size, Tensor
from .ir import dtypes

FORMAT = b"fusegrad 1\n"
DEFAULT_PROTOCOL = 2

_ALLOWED = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("collections", "Counter"): collections.Counter,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "complex"): complex,
    ("builtins", "slice"): slice,
    ("builtins", "range"): range,
    ("builtins", "bytearray"): bytearray,
    ("_codecs", "encode"): codecs.encode,  # how pickle protocol 2 writes bytes
    (Size.__module__, "Size"): Size,
    (device.__module__, "device"): device,
}
_user_safe_globals: dict = {}
# modules of fusegrad's classes when earlier versions saved them: their files still load
_MOVED = {
    "fusegrad.tracer.tensor": "fusegrad.eager.tensor",
    "fusegrad.tracer.devices": "fusegrad.eager.devices",
}


def add_safe_globals(safe_globals: list) -> None:
    """Lets ``load(weights_only=True)`` build these classes or call these
    functions (each a callable, or a ``(callable, "module.name")`` pair)."""
    for entry in safe_globals:
        obj, name = entry if isinstance(entry, tuple) else (entry, None)
        module, _, qualname = (
            name.rpartition(".") if name else (obj.__module__, "", obj.__qualname__)
        )
        _user_safe_globals[(module, qualname)] = obj


def clear_safe_globals() -> None:
    _user_safe_globals.clear()


def get_safe_globals() -> list:
    """What ``add_safe_globals`` allowed (the built-in allowlist is not listed)."""
    return list(_user_safe_globals.values())


@contextmanager
def safe_globals(safe_globals: list):
    """``add_safe_globals`` for the ``with`` block only."""
    before = dict(_user_safe_globals)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        _user_safe_globals.clear()
        _user_safe_globals.update(before)


# ---------------------------------------------------------------------- saving


class _Pickler(pickle.Pickler):
    """Pickles tensors and dtypes as references: their elements go to records."""

    def __init__(self, file, protocol: int, records: dict):
        super().__init__(file, protocol)
        self.records = records  # id(tensor) -> (key, tensor)

    def persistent_id(self, obj):
        if isinstance(obj, Tensor):
            key, _ = self.records.setdefault(id(obj), (str(len(self.records)), obj))
            parameter = type(obj).__name__ == "Parameter"
            return ("tensor", key, obj.dtype.name, tuple(obj.shape), obj.requires_grad, parameter)
        if isinstance(obj, dtypes.DType):
            return ("dtype", obj.name)
        return None


def save(obj, f, pickle_protocol: int = DEFAULT_PROTOCOL) -> None:
    """Writes ``obj`` to ``f`` (a path, or a file object opened for writing in binary).

    >>> import io, fusegrad
    >>> buffer = io.BytesIO()
    >>> fusegrad.save({"w": fusegrad.ones(2)}, buffer)
    >>> _ = buffer.seek(0)
    >>> fusegrad.load(buffer)
    {'w': tensor([1., 1.])}
    """
    data = io.BytesIO()
    records: dict = {}
    _Pickler(data, pickle_protocol, records).dump(obj)
    with _open(f, "w") as archive:
        archive.writestr("archive/format", FORMAT)
        archive.writestr("archive/data.pkl", data.getvalue())
        for key, tensor in records.values():
            array = tensor._values() if isinstance(tensor, ComplexTensor) else tensor._data
            little = array.astype(array.dtype.newbyteorder("<"), order="C", copy=False)
            archive.writestr(f"archive/data/{key}", little.tobytes())


def _open(f, mode: str) -> zipfile.ZipFile:
    if isinstance(f, (str, os.PathLike)):
        return zipfile.ZipFile(os.fspath(f), mode, zipfile.ZIP_STORED)
    return zipfile.ZipFile(f, mode, zipfile.ZIP_STORED)


# ---------------------------------------------------------------------- loading


def _weights_only_refusal(module: str, name: str) -> str:
    return (
        "Weights only load failed. This file can still be loaded with "
        "weights_only=False, but only do that if you trust its source: it can run "
        f"arbitrary code. Unsupported global: GLOBAL {module}.{name} was not an "
        f"allowed global by default. Please use "
        f"fusegrad.serialization.add_safe_globals([{name}]) or the "
        f"fusegrad.serialization.safe_globals([{name}]) context manager to allowlist "
        "this global if you trust this class/function."
    )


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, archive: zipfile.ZipFile, weights_only: bool, map_location):
        super().__init__(file)
        self.archive = archive
        self.weights_only = weights_only
        self.map_location = map_location
        self.loaded: dict = {}

    def find_class(self, module: str, name: str):
        module = _MOVED.get(module, module)
        if not self.weights_only:
            return super().find_class(module, name)
        if module == "__builtin__":  # Python 2's name, which protocol 2 writes
            module = "builtins"
        found = _ALLOWED.get((module, name)) or _user_safe_globals.get((module, name))
        if found is None:
            raise pickle.UnpicklingError(_weights_only_refusal(module, name))
        return found

    def persistent_load(self, pid):
        kind = pid[0]
        if kind == "dtype":
            return dtypes.by_name(pid[1])
        if kind != "tensor":
            raise pickle.UnpicklingError(f"unknown record kind {kind!r}")
        _, key, dtype_name, shape, requires_grad, parameter = pid
        if key not in self.loaded:
            self.loaded[key] = self._tensor(key, dtype_name, shape, requires_grad, parameter)
        return self.loaded[key]

    def _tensor(self, key, dtype_name, shape, requires_grad, parameter) -> Tensor:
        dtype = dtypes.by_name(dtype_name)
        raw = self.archive.read(f"archive/data/{key}")
        array = np.frombuffer(raw, dtype=dtype.np.newbyteorder("<")).astype(dtype.np)
        if dtype.is_complex:
            t = from_array(array.reshape(shape))
        else:
            t = Tensor._make(array.reshape(shape), dtype)
        if parameter:
            from .nn import Parameter

            t = Parameter(t, requires_grad)
        elif requires_grad:
            t.requires_grad = True
        if callable(self.map_location):
            t = self.map_location(t, "cpu")
        return t


def load(f, map_location=None, *, weights_only: bool = True):
    """Reads what ``save`` or PyTorch's ``torch.save`` wrote to ``f`` (a path
    or a binary file object).

    ``map_location`` (a device or its name, a dict from saved to wanted
    locations, or a function of ``(tensor, location)``) may only map to the CPU.
    ``weights_only=False`` unpickles any object the file names, which can run
    arbitrary code: only for files from a trusted source.
    """
    _check_map_location(map_location)
    if isinstance(f, (str, os.PathLike)) and not os.path.exists(f):
        raise FileNotFoundError(f"[Errno 2] No such file or directory: '{os.fspath(f)}'")
    start = None if isinstance(f, (str, os.PathLike)) else f.tell()
    try:
        archive = _open(f, "r")
    except zipfile.BadZipFile:
        if start is not None:
            f.seek(start)
        return _load_torch_sequential(f, map_location, weights_only)
    with archive:
        names = set(archive.namelist())
        if "archive/format" in names and archive.read("archive/format") == FORMAT:
            data = io.BytesIO(archive.read("archive/data.pkl"))
            return _Unpickler(data, archive, weights_only, map_location).load()
        return _load_torch_zip(archive, names, map_location, weights_only)


def _check_map_location(map_location) -> None:
    if map_location is None or callable(map_location):
        return
    targets = map_location.values() if isinstance(map_location, dict) else [map_location]
    for target in targets:
        check_device(target)


# ------------------------------------------------------- PyTorch's checkpoints
#
# A PyTorch tensor is a view (offset, sizes, strides, in elements) of a
# storage: a flat run of elements of one dtype, which several tensors may
# share. The pickle names each storage by a persistent id
# ``('storage', <torch.XStorage>, key, location, numel)`` and rebuilds each
# tensor by calling ``torch._utils._rebuild_tensor_v2`` on one; here the
# storage is a numpy array and each tensor a copy of its view.

_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C  # the first pickle of a sequential checkpoint
_LEGACY_PROTOCOL = 1001


class _StorageType:
    """A ``torch.XStorage`` class as a pickle names it: the dtype of its elements."""

    def __init__(self, dtype: dtypes.DType, stored_as: str):
        self.dtype = dtype
        self.stored_as = np.dtype(stored_as)  # elements in the file, little-endian


_STORAGE_TYPES = {
    "FloatStorage": _StorageType(dtypes.float32, "<f4"),
    "DoubleStorage": _StorageType(dtypes.float64, "<f8"),
    "HalfStorage": _StorageType(dtypes.float16, "<f2"),
    "BFloat16Storage": _StorageType(dtypes.bfloat16, "<u2"),
    "LongStorage": _StorageType(dtypes.int64, "<i8"),
    "IntStorage": _StorageType(dtypes.int32, "<i4"),
    "ShortStorage": _StorageType(dtypes.int16, "<i2"),
    "CharStorage": _StorageType(dtypes.int8, "i1"),
    "ByteStorage": _StorageType(dtypes.uint8, "u1"),
    "BoolStorage": _StorageType(dtypes.bool_, "?"),
}
_TORCH_DTYPES = {
    "float32": dtypes.float32, "float": dtypes.float32,
    "float64": dtypes.float64, "double": dtypes.float64,
    "float16": dtypes.float16, "half": dtypes.float16,
    "bfloat16": dtypes.bfloat16,
    "int64": dtypes.int64, "long": dtypes.int64,
    "int32": dtypes.int32, "int": dtypes.int32,
    "int16": dtypes.int16, "short": dtypes.int16,
    "int8": dtypes.int8, "uint8": dtypes.uint8, "bool": dtypes.bool_,
}  # fmt: skip


class _Storage:
    """A storage's elements as fusegrad keeps them (float16 in float32, ...),
    and the tensors waiting for them (a sequential file's storages follow its
    pickle)."""

    def __init__(self, storage_type: _StorageType, numel: int, location: str):
        self.storage_type = storage_type
        self.array = np.empty(numel, storage_type.dtype.np)
        self.location = location
        self.filled = False

    def fill(self, raw: bytes, big_endian: bool = False) -> None:
        stored_as = self.storage_type.stored_as
        if big_endian:
            stored_as = stored_as.newbyteorder(">")
        values = np.frombuffer(raw, stored_as, count=len(self.array))
        if self.storage_type.dtype is dtypes.bfloat16:  # the high half of a float32
            values = (values.astype(np.uint32) << 16).view(np.float32)
        self.array[:] = values
        self.filled = True


class _TorchUnpickler(pickle.Unpickler):
    """Unpickles a PyTorch checkpoint's object: storages from ``storages``
    (key -> _Storage, made by ``make_storage``), tensors as views of them,
    ``torch.*`` names as fusegrad's."""

    def __init__(self, file, make_storage, weights_only: bool, map_location):
        super().__init__(file)
        self.make_storage = make_storage
        self.weights_only = weights_only
        self.map_location = map_location
        self.storages: dict = {}
        self.waiting: list = []  # (tensor, storage, offset, size, stride) of unfilled storages

    def find_class(self, module: str, name: str):
        found = self._torch_global(module, name)
        if found is not None:
            return found
        if not self.weights_only:
            if module == "torch" or module.startswith("torch."):
                return _fusegrad_global(module, name)
            return super().find_class(module, name)
        found = _ALLOWED.get((module, name)) or _user_safe_globals.get((module, name))
        if found is None:
            raise pickle.UnpicklingError(_weights_only_refusal(module, name))
        return found

    def _torch_global(self, module: str, name: str):
        """What a pickle of plain tensors and state dicts names in torch."""
        if module == "torch":
            if name in _STORAGE_TYPES:
                return _STORAGE_TYPES[name]
            if name in _TORCH_DTYPES:
                return _TORCH_DTYPES[name]
            return {"Size": Size, "device": device, "Tensor": Tensor}.get(name)
        if module == "torch._utils":
            rebuilds = {
                "_rebuild_tensor_v2": self._rebuild_tensor,
                "_rebuild_parameter": _rebuild_parameter,
                "_rebuild_parameter_with_state": _rebuild_parameter,
            }
            return rebuilds.get(name)
        if (module, name) == ("torch._tensor", "_rebuild_from_type_v2"):
            return _rebuild_from_type
        if (module, name) == ("torch.nn.parameter", "Parameter"):
            from .nn import Parameter

            return Parameter
        return None

    def persistent_load(self, pid):
        if pid[0] != "storage":
            raise pickle.UnpicklingError(f"unknown persistent id kind {pid[0]!r}")
        storage_type, key, location, numel = pid[1:5]
        if len(pid) > 5 and pid[5] is not None:
            raise pickle.UnpicklingError(
                "the checkpoint holds a view of a storage, as PyTorch before 1.0 wrote: "
                "load and save it again with PyTorch to read it here"
            )
        if key not in self.storages:
            self.storages[key] = self.make_storage(key, storage_type, numel, location)
        return self.storages[key]

    def _rebuild_tensor(
        self, storage, storage_offset, size, stride, requires_grad, backward_hooks, metadata=None
    ):
        location = _mapped_location(storage.location, self.map_location)
        tensor = Tensor._make(
            np.empty(tuple(size), storage.array.dtype), storage.storage_type.dtype
        )
        self.waiting.append((tensor, storage, storage_offset, tuple(size), tuple(stride)))
        if storage.filled:
            self.copy_views()
        tensor.requires_grad = requires_grad
        if callable(self.map_location):
            tensor = self.map_location(tensor, location)
        return tensor

    def copy_views(self) -> None:
        for tensor, storage, offset, size, stride in self.waiting:
            itemsize = storage.array.itemsize
            view = np.lib.stride_tricks.as_strided(
                storage.array[offset:], size, [s * itemsize for s in stride], writeable=False
            )
            tensor._data[...] = view
        self.waiting.clear()


def _rebuild_parameter(data, requires_grad, backward_hooks, state=None):
    from .nn import Parameter

    parameter = Parameter(data, requires_grad)
    for name, value in (state or {}).items():
        setattr(parameter, name, value)
    return parameter


def _rebuild_from_type(func, new_type, args, state):
    """A tensor subclass's rebuild: the tensor, then its type (a Parameter)."""
    tensor = func(*args)
    if new_type is not Tensor and not isinstance(tensor, new_type):
        tensor = new_type(tensor, tensor.requires_grad)
    for name, value in (state or {}).items():
        setattr(tensor, name, value)
    return tensor


def _fusegrad_global(module: str, name: str):
    """``torch.x.y.Name`` as ``fusegrad.x.y.Name``, for ``weights_only=False``."""
    import importlib

    fusegrad_module = "fusegrad" + module[len("torch") :]
    try:
        return getattr(importlib.import_module(fusegrad_module), name)
    except (ImportError, AttributeError):
        raise pickle.UnpicklingError(
            f"the checkpoint names {module}.{name}, which fusegrad does not have "
            f"({fusegrad_module}.{name})"
        ) from None


def _mapped_location(location: str, map_location) -> str:
    """Where a storage saved at ``location`` goes: the CPU, or an error as
    PyTorch gives on a machine without CUDA."""
    if isinstance(map_location, dict):
        location = map_location.get(location, location)
    elif map_location is not None and not callable(map_location):
        return "cpu"
    location = str(location)
    if location.startswith("cuda") and not callable(map_location):
        raise RuntimeError(
            "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() "
            "is False. If you are running on a CPU-only machine, please use torch.load with "
            "map_location=torch.device('cpu') to map your storages to the CPU."
        )
    return location


def _load_torch_zip(archive: zipfile.ZipFile, names: set, map_location, weights_only: bool):
    """A checkpoint of PyTorch's zip format: its records are under one
    directory, named after the file it was first written to."""
    if any(name.endswith("/constants.pkl") for name in names):
        raise RuntimeError(
            "a TorchScript archive (torch.jit.save) cannot be loaded by fusegrad.load: "
            "save the model's state_dict() with torch.save instead"
        )
    pickles = [name for name in names if name.endswith("/data.pkl") and name.count("/") == 1]
    if len(pickles) != 1 or pickles[0].replace("data.pkl", "version") not in names:
        raise RuntimeError("not a file written by fusegrad.save or torch.save")
    prefix = pickles[0][: -len("data.pkl")]
    big_endian = f"{prefix}byteorder" in names and archive.read(f"{prefix}byteorder") == b"big"

    def storage(key, storage_type, numel, location):
        loaded = _Storage(storage_type, numel, location)
        loaded.fill(archive.read(f"{prefix}data/{key}"), big_endian)
        return loaded

    data = io.BytesIO(archive.read(pickles[0]))
    return _TorchUnpickler(data, storage, weights_only, map_location).load()


def _load_torch_sequential(f, map_location, weights_only: bool):
    """PyTorch's format before 1.6: pickles one after another (a magic number,
    the protocol version, the machine's sizes, the object, the storages'
    keys), then each storage's element count (8 bytes) and elements."""
    opened = open(f, "rb") if isinstance(f, (str, os.PathLike)) else None
    file = opened or f
    try:
        if _safe_load(file) != _LEGACY_MAGIC:
            raise RuntimeError("not a file written by fusegrad.save or torch.save")
        if _safe_load(file) != _LEGACY_PROTOCOL:
            raise RuntimeError("a torch.save file of an unknown protocol version")
        big_endian = not _safe_load(file).get("little_endian", True)
        unpickler = _TorchUnpickler(
            file, lambda key, t, numel, at: _Storage(t, numel, at), weights_only, map_location
        )
        obj = unpickler.load()
        order = "big" if big_endian else "little"
        for key in _safe_load(file):
            storage = unpickler.storages[key]
            numel = int.from_bytes(file.read(8), order)
            storage.fill(file.read(numel * storage.storage_type.stored_as.itemsize), big_endian)
        unpickler.copy_views()
        return obj
    except (pickle.UnpicklingError, EOFError, ValueError, AttributeError) as error:
        if isinstance(error, pickle.UnpicklingError) and "Weights only" in str(error):
            raise
        raise RuntimeError(
            "not a file written by fusegrad.save or torch.save (PyTorch's zip archives and "
            f"its older sequential format are read): {error}"
        ) from None
    finally:
        if opened is not None:
            opened.close()


def _safe_load(file):
    """One pickle of numbers, strings and containers only."""
    return _SafeUnpickler(file).load()


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"unexpected global {module}.{name}")
