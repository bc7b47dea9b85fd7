"""One Python object as the walk of Python state sees it (walk.py): whether
it is the user's or a library's, how the walk enters it (its kind) and what
it holds; how generated code, the writes and their undoing read and store
one of its places; and what is kept of an iterator or a numpy array to tell
later whether it changed.
"""

from __future__ import annotations

import collections
import functools
import math
import os
import sys
import sysconfig
import types
import weakref

import numpy as np

from ..eager.tensor import Tensor
from .numbers import PACKAGE_DIR, TracedNumber

SCALARS = (bool, int, float, complex, str, bytes, type(None), np.generic, range, slice)
_LIBRARY_DIRS = tuple(
    {
        os.path.abspath(p)
        for p in (
            sysconfig.get_paths()["stdlib"],
            sysconfig.get_paths()["purelib"],
            sysconfig.get_paths()["platlib"],
            PACKAGE_DIR,
        )
    }
)
MISSING = object()
HOOK_TABLES = ("_hooks", "_post_accumulate_hooks")  # a tensor's, in its __dict__
# fusegrad's own machinery (a jit function's cache, a compiled program, an
# autograd node or hook handle, a grad-mode context): held by identity, not
# walked; its state changes as it compiles and runs
_MACHINERY = (
    "fusegrad.runtime",
    "fusegrad.ir",
    "fusegrad.codegen",
    "fusegrad.tracer",
    "fusegrad.eager.autograd",
    "fusegrad.eager.grad_mode",
)
MUTABLE_SEQUENCES = (list, collections.deque)


class Refused(Exception):
    """What a trace did to Python state that a compiled call cannot redo."""


def _is_library_file(filename) -> bool:
    """Code in the standard library, an installed package or fusegrad (code
    made by ``exec``, ``<string>``, is the user's)."""
    if not filename:
        return False
    return filename.startswith("<frozen") or os.path.abspath(filename).startswith(_LIBRARY_DIRS)


def _is_library_module(module) -> bool:
    name = module.__name__.split(".")[0]
    return name in sys.builtin_module_names or _is_library_file(getattr(module, "__file__", None))


def is_user_function(fn) -> bool:
    code = getattr(fn, "__code__", None)
    return code is not None and not _is_library_file(code.co_filename)


def is_user_class(cls) -> bool:
    module = sys.modules.get(cls.__module__)
    return module is None or not _is_library_module(module)


class Entry:
    """One object the walk entered: ``access`` reads it from its parent's
    local (``o{parent}``) in generated code; ``contents`` is its shallow copy,
    key -> value, as ``contents_now`` reads it."""

    __slots__ = (
        "index",
        "obj",
        "kind",
        "parent",
        "access",
        "label",
        "contents",
        "keys",
        "key",
        "items",
    )

    def __init__(self, index, obj, kind, parent, access, label, key=None):
        self.index, self.obj, self.kind = index, obj, kind
        self.parent, self.access, self.label = parent, access, label
        self.key = key  # the parent's key it was reached by, when ``access`` is None
        self.keys = None  # for "globals" and "module": the names walked
        self.contents = None
        self.items = None  # for "appended": the list's items before


def walk_kind(obj):
    """How the walk enters ``obj``, or None for a leaf."""
    if isinstance(obj, (Tensor, TracedNumber, *SCALARS, np.ndarray)):
        # a sparse tensor's indices and values, a complex one's pair, are
        # tensors its __dict__ holds
        holds_tensors = isinstance(obj, Tensor) and (obj.is_sparse or obj.is_complex())
        return "object" if holds_tensors else None
    if isinstance(obj, types.ModuleType):
        return None if _is_library_module(obj) else "module"
    if isinstance(obj, types.FunctionType):
        # a library function's closure may hold the user's (grad(f) holds f)
        return "function" if is_user_function(obj) or obj.__closure__ else None
    if isinstance(obj, types.MethodType):
        return "method"
    if isinstance(obj, functools.partial):
        return "partial"
    if isinstance(obj, property):
        return "property"
    if isinstance(obj, type):
        return "class" if is_user_class(obj) else None
    if isinstance(obj, types.CellType):
        return "cell"
    if isinstance(obj, dict):
        return "dict"
    if isinstance(obj, (list, tuple, collections.deque)):
        return "sequence"
    if type(obj).__module__.startswith(_MACHINERY):
        return None
    if _slot_names(type(obj)) and is_user_class(type(obj)):
        return "slots"
    if isinstance(getattr(obj, "__dict__", None), dict):
        return "object"
    return None


_SLOTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # class -> its slot names


def _slot_names(cls) -> tuple:
    """The attributes ``__slots__`` give instances of ``cls`` (private ones
    by their mangled names)."""
    known = _SLOTS.get(cls)
    if known is not None:
        return known
    names = []
    for c in cls.__mro__:
        slots = c.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__"):
                continue
            if name.startswith("__") and not name.endswith("__"):
                name = f"_{c.__name__.lstrip('_')}{name}"
            names.append(name)
    known = _SLOTS[cls] = tuple(dict.fromkeys(names))
    return known


def contents_now(entry, names=None) -> dict:
    """The entry's object's contents now, key -> value (of a namespace, the
    ``names`` given or the entry's)."""
    obj, kind = entry.obj, entry.kind
    if kind == "dict":
        return dict(obj)
    if kind == "sequence":
        return dict(enumerate(obj))
    if kind == "appended":
        return {}  # its items: see Entry.items
    if kind == "object":
        return dict(obj.__dict__)
    if kind == "slots":  # and what its __dict__ holds, if it has one too
        found = {name: getattr(obj, name, MISSING) for name in _slot_names(type(obj))}
        found.update(getattr(obj, "__dict__", {}))
        return found
    if kind == "hooks":
        return {name: obj.__dict__.get(name, MISSING) for name in HOOK_TABLES}
    if kind in ("module", "globals"):
        space = obj.__dict__ if kind == "module" else obj
        return {name: space.get(name, MISSING) for name in names or entry.keys}
    if kind == "class":
        # its methods, __call__ and __getitem__ too (their code reads state);
        # not what Python keeps there itself (__module__, __dict__, ...)
        return {
            k: v
            for k, v in obj.__dict__.items()
            if not k.startswith("__") or isinstance(v, types.FunctionType)
        }
    if kind == "cell":
        try:
            return {"cell_contents": obj.cell_contents}
        except ValueError:
            return {"cell_contents": MISSING}
    return {}


def place_label(entry, key) -> str:
    if entry.kind in ("globals", "module"):
        return f"{entry.label} {key}" if entry.kind == "module" else f"global {key!r}"
    if entry.kind in ("object", "slots", "class", "module", "hooks"):
        return f"{entry.label}.{key}"
    if entry.kind == "cell":
        return entry.label
    return f"{entry.label}[{key!r}]"


# -- a place read and stored by generated code


def access_code(entry, key) -> str:
    """How generated code reads ``key`` of the entry's object from its local."""
    kind = entry.kind
    if kind in ("object", "hooks"):
        return f".__dict__[{key!r}]"
    if kind == "class":
        return f".__dict__[{key!r}]"
    if kind == "slots":
        if not (isinstance(key, str) and key.isidentifier()):
            raise Refused(f"{entry.label} has an attribute named {key!r}")
        return f".{key}"
    if kind == "cell":
        return ".cell_contents"
    if kind == "module":
        return f".__dict__[{key!r}]"
    if isinstance(key, (str, int, float, bool, type(None))):
        return f"[{key!r}]"
    return None  # a key of another type: read through the keys table


def entry_source(entry, constant) -> str:
    """How generated code reads the entry's object from its parent's local."""
    if entry.parent is None:
        return entry.access
    if entry.access is None:
        return f"o{entry.parent}[{constant(entry.key)}]"
    return f"o{entry.parent}{entry.access}"


def container_of(entry, name: str) -> str:
    return f"{name}.__dict__" if entry.kind in ("object", "module") else name


def read_code(entry, name, container, key, constant) -> str:
    """How generated code reads what is now at the entry's ``key``, from its
    local ``name`` (``container``: see ``container_of``)."""
    if entry.kind == "globals":
        return f"{name}.get({key!r}, M)"
    if entry.kind == "module":
        return f"{name}.__dict__.get({key!r}, M)"
    if entry.kind == "cell":
        return f"{name}.cell_contents"
    if entry.kind in ("class", "hooks"):
        return f"{name}.__dict__.get({key!r}, M)"
    if entry.kind == "slots":
        return f"getattr({name}, {key!r}, M)"
    literal = isinstance(key, (str, int, float, bool, type(None)))
    return f"{container}[{repr(key) if literal else constant(key)}]"


# -- a place read and stored now


def refill(sequence, items) -> None:
    """A list or deque made to hold ``items``, in place."""
    if isinstance(sequence, list):
        sequence[:] = items
    else:
        sequence.clear()
        sequence.extend(items)


def read_now(obj, key):
    if isinstance(obj, (dict, list, tuple)):
        return obj[key]
    if isinstance(obj, types.CellType):
        return obj.cell_contents
    space = getattr(obj, "__dict__", None)
    if space is not None and key in space:
        return space[key]
    return getattr(obj, key)  # a slot


def store(entry, obj, key, template, value) -> None:
    if key is None:
        if template[0] == "extend":
            obj.extend(value)
        else:
            refill(obj, value)
        return
    delete = template == ("delete",)
    kind = entry.kind
    if kind == "cell":
        if delete:
            del obj.cell_contents
        else:
            obj.cell_contents = value
    elif kind in ("class", "slots"):
        if delete:
            delattr(obj, key)
        else:
            setattr(obj, key, value)
    else:
        space = obj.__dict__ if kind in ("object", "module", "hooks") else obj
        if delete:
            space.pop(key, None)
        else:
            space[key] = value


# -- telling whether a value changed


def same_scalar(a, b) -> bool:
    """Scalars equal in type and value (NaN equals NaN, -0.0 differs from 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (a == b and math.copysign(1, a) == math.copysign(1, b)) or (a != a and b != b)
    try:
        return bool(a == b)
    except Exception:
        return False


def iterator_position(iterator, depth: int = 0):
    """Where an iterator is, as far as Python shows it (None where it does
    not): a generator's suspended frame (its instruction and locals), else
    what ``__reduce__`` gives to pickle it (a list iterator's index, an
    enumerate's count and inner iterator); items and containers by identity."""
    if depth > 4:
        return None
    if isinstance(iterator, types.GeneratorType):
        frame = iterator.gi_frame
        if frame is None:
            return ("finished",)
        return ("at", frame.f_lasti, _brief(frame.f_locals, depth))
    try:
        reduced = iterator.__reduce__()
    except Exception:
        return None
    return _brief(reduced, depth)


def _brief(value, depth: int):
    """``value`` for comparing positions: scalars by value, iterators by
    position, containers by their items, anything else by identity."""
    if isinstance(value, SCALARS) and not isinstance(value, (range, slice)):
        return value
    if hasattr(type(value), "__next__") and not isinstance(value, Tensor):
        return ("iterator", iterator_position(value, depth + 1))
    if type(value) in (tuple, list):
        return tuple(_brief(v, depth) for v in value)
    if type(value) is dict:
        return tuple((k, _brief(v, depth)) for k, v in value.items())
    return ("object", id(value))


ARRAY_COPY_BYTES = 4096  # numpy arrays up to this size are compared whole
ARRAY_SAMPLES = 64  # of a larger one, this many elements


def array_picture(array: np.ndarray, whole: bool = False) -> tuple:
    """What the guard compares of a numpy array the function can reach, on
    every call: a small one's bytes (``whole``: any one's); of a large one
    (a data set: megabytes read on every call otherwise), the array itself
    (the same object must be there, of the same shape) and a sample of its
    elements spread over it, which catches a change in place unless it
    falls between samples."""
    if whole or array.nbytes <= ARRAY_COPY_BYTES:
        return ("bytes", array.dtype, array.shape, array.tobytes())
    positions = np.linspace(0, array.size - 1, ARRAY_SAMPLES).astype(np.intp)
    return ("sample", array, array.shape, positions, array.flat[positions].tobytes())


def same_array(value, picture: tuple) -> bool:
    if picture[0] == "bytes":
        _, dtype, shape, data = picture
        return (
            type(value) is np.ndarray
            and value.dtype == dtype
            and value.shape == shape
            and value.tobytes() == data
        )
    _, array, shape, positions, sample = picture
    return value is array and value.shape == shape and value.flat[positions].tobytes() == sample
