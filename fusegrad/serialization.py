"""``save`` and ``load``: objects holding tensors (a model's or an optimizer's
``state_dict``, a checkpoint dict) in a file of fusegrad's own.

The file is a zip archive, as PyTorch's is: ``archive/data.pkl`` pickles the
object with each tensor replaced by a reference to a record
``archive/data/<n>`` holding its elements (little-endian, C order). A tensor
saved twice in one object is stored once and loads as one tensor.

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
            array = tensor._data
            little = array.astype(array.dtype.newbyteorder("<"), order="C", copy=False)
            archive.writestr(f"archive/data/{key}", little.tobytes())


def _open(f, mode: str) -> zipfile.ZipFile:
    if isinstance(f, (str, os.PathLike)):
        return zipfile.ZipFile(os.fspath(f), mode, zipfile.ZIP_STORED)
    return zipfile.ZipFile(f, mode, zipfile.ZIP_STORED)


# ---------------------------------------------------------------------- loading


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
            raise pickle.UnpicklingError(
                "Weights only load failed. This file can still be loaded with "
                "weights_only=False, but only do that if you trust its source: it can run "
                f"arbitrary code. Unsupported global: GLOBAL {module}.{name} was not an "
                f"allowed global by default. Please use "
                f"fusegrad.serialization.add_safe_globals([{name}]) or the "
                f"fusegrad.serialization.safe_globals([{name}]) context manager to allowlist "
                "this global if you trust this class/function."
            )
        return found

    def persistent_load(self, pid):
        kind = pid[0]
        if kind == "dtype":
            return dtypes.as_dtype(pid[1])
        if kind != "tensor":
            raise pickle.UnpicklingError(f"unknown record kind {kind!r}")
        _, key, dtype_name, shape, requires_grad, parameter = pid
        if key not in self.loaded:
            self.loaded[key] = self._tensor(key, dtype_name, shape, requires_grad, parameter)
        return self.loaded[key]

    def _tensor(self, key, dtype_name, shape, requires_grad, parameter) -> Tensor:
        dtype = dtypes.as_dtype(dtype_name)
        raw = self.archive.read(f"archive/data/{key}")
        array = np.frombuffer(raw, dtype=dtype.np.newbyteorder("<")).astype(dtype.np)
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
    """Reads what ``save`` wrote to ``f`` (a path or a binary file object).

    ``map_location`` (a device or its name, a dict from saved to wanted
    locations, or a function of ``(tensor, location)``) may only map to the CPU.
    ``weights_only=False`` unpickles any object the file names, which can run
    arbitrary code: only for files from a trusted source.
    """
    _check_map_location(map_location)
    if isinstance(f, (str, os.PathLike)) and not os.path.exists(f):
        raise FileNotFoundError(f"[Errno 2] No such file or directory: '{os.fspath(f)}'")
    try:
        archive = _open(f, "r")
    except zipfile.BadZipFile:
        raise RuntimeError(
            "not a file written by fusegrad.save (PyTorch's legacy, non-zip checkpoints "
            "cannot be read)"
        ) from None
    with archive:
        names = set(archive.namelist())
        if "archive/format" not in names or archive.read("archive/format") != FORMAT:
            raise RuntimeError(
                "not a file written by fusegrad.save (checkpoints written by PyTorch's "
                "torch.save cannot be read)"
            )
        data = io.BytesIO(archive.read("archive/data.pkl"))
        return _Unpickler(data, archive, weights_only, map_location).load()


def _check_map_location(map_location) -> None:
    if map_location is None or callable(map_location):
        return
    targets = map_location.values() if isinstance(map_location, dict) else [map_location]
    for target in targets:
        check_device(target)
