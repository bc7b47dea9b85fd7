"""The Python state a traced function reads and writes.

A trace runs the function once; a compiled program replays its tensor work.
Everything else the function touched must be checked or redone on every
later call, or the compiled call silently differs from the eager one. So
before the trace, every object the function can reach is walked from its
roots (the function: its closure cells, defaults, the globals its code
names, a bound method's object; the call's arguments), and a shallow copy
of each object's contents is kept; after the trace the walk is repeated.

- What was there before is the **guard**: a later call's state must look
  the same (types, numbers, strings, container lengths and keys, which
  places hold one object), else the function is traced again. Tensors are
  not guarded by value: the program reads them (see ``Trace.locate``);
  numbers the program takes as inputs (an optimizer's learning rate) are
  not guarded either.
- What changed is a **write**, redone after every run of the program:
  ``self.h = tanh(...)``, ``cache[k] = t``, ``log.append(loss.item())``,
  ``global total``. A tensor or traced number written is an output of the
  program (``hidden_outputs``); an object that existed before is found
  again where it was; new lists, tuples and dicts are built again; numbers
  and strings are constants (the guard makes them the same on every call).
- What cannot be redone (a new object of another class, a numpy
  ``Generator`` that drew, an array changed in place) makes the function
  run eagerly: ``Refused`` names it.

Library code (numpy, fusegrad, the standard library) is not walked into:
its modules and functions are held by identity, except a library function's
closure, which may hold the user's function (``grad(f)``); so are fusegrad's
compiling machinery and objects the walk cannot see into (no ``__dict__``).
"""

from __future__ import annotations

import collections
import dis
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

MAX_OBJECTS = 50000  # a walk reaching more refuses: its guard would cost more than a call
_SCALARS = (bool, int, float, complex, str, bytes, type(None), np.generic, range, slice)
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
_MISSING = object()
_HOOK_TABLES = ("_hooks", "_post_accumulate_hooks")  # a tensor's, in its __dict__
# fusegrad's own machinery (a jit function's cache, a compiled program): held
# by identity, not walked; its state changes as it compiles and runs
_MACHINERY = ("fusegrad.runtime", "fusegrad.ir", "fusegrad.codegen")


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


def _is_user_function(fn) -> bool:
    code = getattr(fn, "__code__", None)
    return code is not None and not _is_library_file(code.co_filename)


def _is_user_class(cls) -> bool:
    module = sys.modules.get(cls.__module__)
    return module is None or not _is_library_module(module)


_GLOBAL_OPS = {"LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL", "LOAD_NAME", "STORE_NAME"}


_NAME_OPS = _GLOBAL_OPS | {
    "LOAD_ATTR",
    "STORE_ATTR",
    "DELETE_ATTR",
    "LOAD_METHOD",
    "LOAD_DEREF",
    "STORE_DEREF",
    "DELETE_DEREF",
    "LOAD_CLASSDEREF",
}
_APPENDING = ("append", "extend")


def _code_names(code) -> tuple:
    """(the global names, every name, the names used otherwise than to call
    ``.append`` or ``.extend`` on what they hold) of a code object and the
    code nested in it: a namespace of globals is read for the first, a
    module's attributes for the second (``config.scale`` names ``scale``);
    a list only appended to is never read, so its old items guard nothing."""
    globals_, names, used = set(), set(code.co_names), set()
    instructions = list(dis.get_instructions(code))
    for k, instruction in enumerate(instructions):
        if instruction.opname in _GLOBAL_OPS:
            globals_.add(instruction.argval)
        if instruction.opname not in _NAME_OPS:
            continue
        following = instructions[k + 1] if k + 1 < len(instructions) else None
        appends = (
            instruction.opname.startswith("LOAD")
            and instruction.opname != "LOAD_METHOD"
            and following is not None
            and following.opname in ("LOAD_METHOD", "LOAD_ATTR")
            and following.argval in _APPENDING
        )
        if not appends:
            used.add(instruction.argval)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            inner = _code_names(constant)
            globals_ |= inner[0]
            names |= inner[1]
            used |= inner[2]
    return globals_, names, used


class Entry:
    """One object the walk entered: ``access`` reads it from its parent's
    local (``o{parent}``) in generated code; ``contents`` is its shallow copy,
    key -> value, as ``_contents`` reads it."""

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


def _kind(obj):
    """How the walk enters ``obj``, or None for a leaf."""
    if isinstance(obj, (Tensor, TracedNumber, *_SCALARS, np.ndarray)):
        return None
    if isinstance(obj, types.ModuleType):
        return None if _is_library_module(obj) else "module"
    if isinstance(obj, types.FunctionType):
        # a library function's closure may hold the user's (grad(f) holds f)
        return "function" if _is_user_function(obj) or obj.__closure__ else None
    if isinstance(obj, types.MethodType):
        return "method"
    if isinstance(obj, functools.partial):
        return "partial"
    if isinstance(obj, property):
        return "property"
    if isinstance(obj, type):
        return "class" if _is_user_class(obj) else None
    if isinstance(obj, types.CellType):
        return "cell"
    if isinstance(obj, dict):
        return "dict"
    if isinstance(obj, (list, tuple, collections.deque)):
        return "sequence"
    if type(obj).__module__.startswith(_MACHINERY):
        return None
    if _slot_names(type(obj)) and _is_user_class(type(obj)):
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


def walk_enters(obj) -> bool:
    """Whether the walk looks inside ``obj`` (and so guards what it holds)."""
    return _kind(obj) is not None


def _contents(entry, names=None) -> dict:
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
        found = {name: getattr(obj, name, _MISSING) for name in _slot_names(type(obj))}
        found.update(getattr(obj, "__dict__", {}))
        return found
    if kind == "hooks":
        return {name: obj.__dict__.get(name, _MISSING) for name in _HOOK_TABLES}
    if kind in ("module", "globals"):
        space = obj.__dict__ if kind == "module" else obj
        return {name: space.get(name, _MISSING) for name in names or entry.keys}
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
            return {"cell_contents": _MISSING}
    return {}


class Walk:
    """The objects reachable from a call's roots, each entered once (a
    second place holding an entered object is an alias, which the guard
    checks still holds it)."""

    def __init__(self, fn, args: tuple, kwargs: dict, appended: frozenset = frozenset()):
        self.appended = appended  # ids of lists only appended to: see ``appended_lists``
        self.pinned_for_numbers: set = set()  # ids of objects the program reads numbers from
        self.not_only_appended: set = set()  # names the walked code uses otherwise
        self.list_places: dict = {}  # id(list) -> [(entry, key)]
        self.entries: list = []
        self.by_id: dict = {}  # id(obj) -> Entry
        self.tensors: dict = {}  # id(tensor) -> [(entry index, key)]
        self.generators: list = []  # (Entry, key, generator, state)
        self.arrays: dict = {}  # id -> (Entry, key, array, its picture: _array_picture)
        self.sets: dict = {}  # id -> (set, a frozen copy): compared by value
        self.iterators: dict = {}  # id -> (Entry, key, iterator, its position: _position)
        self.arguments: set = set()  # the call's argument containers (entry indices)
        self.global_names: set = set()  # what the walked code reads as globals
        self.names: set = set()  # and every name it uses, attributes too
        self._enter(fn, "function_root", None, "fn", "the function")
        self._enter(args, "sequence", None, "args", "the arguments")
        self._enter(kwargs, "dict", None, "kwargs", "the keyword arguments")
        self._walk()

    def restore(self) -> None:
        """Puts back what was in every entered object before (a trace's
        writes, which the program's run redoes, or a failed trace's)."""
        for value, copy in self.sets.values():
            if isinstance(value, set) and value != copy:
                # undone item by item: a set cleared and filled again may
                # iterate in another order than the one eager code goes on with
                value.difference_update(value - copy)
                value.update(copy - value)
        for entry in self.entries:
            if entry.contents is None or isinstance(entry.obj, tuple):
                continue
            if entry.kind == "appended":
                entry.obj[:] = entry.items
                continue
            now = _contents(entry)
            if entry.kind in ("dict", "sequence"):
                # whole, by identity: a key the function added may be a size
                # of its trace, which hashing would decide on
                items, before = list(now.items()), list(entry.contents.items())
                if len(items) != len(before) or any(
                    a is not c or b is not d for (a, b), (c, d) in zip(items, before)
                ):
                    if isinstance(entry.obj, _MUTABLE_SEQUENCES):
                        _refill(entry.obj, [value for _, value in before])
                    else:
                        entry.obj.clear()
                        entry.obj.update(before)
                continue
            for key in now.keys() | entry.contents.keys():
                old = entry.contents.get(key, _MISSING)
                if now.get(key, _MISSING) is not old:
                    _store(entry, entry.obj, key, ("delete",) if old is _MISSING else (), old)

    def _enter(self, obj, kind, parent, access, label, key=None):
        entry = Entry(len(self.entries), obj, kind, parent, access, label, key)
        if (parent is None and kind != "function_root") or (
            parent in self.arguments and kind in ("dict", "sequence")
        ):
            self.arguments.add(entry.index)
        self.entries.append(entry)
        self.by_id[id(obj)] = entry
        if len(self.entries) > MAX_OBJECTS:
            raise Refused(f"it reaches more than {MAX_OBJECTS} Python objects")
        return entry

    def _walk(self):
        """Entries in the order found; a namespace (globals, a module) is
        entered for the names the code found so far uses, and again for
        names found later (a helper function's), until no new name appears."""
        k = 0
        spaces: list = []
        while True:
            while k < len(self.entries):
                entry = self.entries[k]
                k += 1
                if entry.kind in ("globals", "module"):
                    entry.keys, entry.contents = [], {}
                    spaces.append(entry)
                else:
                    self._children(entry)
            grown = False
            for entry in spaces:
                wanted = self.global_names if entry.kind == "globals" else self.names
                new = sorted(wanted.difference(entry.keys))
                if new:
                    grown = True
                    entry.keys += new
                    for key, value in _contents(entry, new).items():
                        entry.contents[key] = value
                        self._leaf_or_child(entry, key, value)
            if not grown:
                return

    def _children(self, entry):
        obj, kind = entry.obj, entry.kind
        if kind in ("function", "function_root"):
            self._function(entry)
            return
        if kind == "method":
            self._child(entry, obj.__self__, ".__self__", "self")
            self._child(entry, obj.__func__, ".__func__", "function")
            return
        if kind == "property":
            for part in ("fget", "fset", "fdel"):
                self._child(entry, getattr(obj, part), f".{part}", part)
            return
        if kind == "partial":
            self._child(entry, obj.func, ".func", "func")
            self._child(entry, obj.args, ".args", "args")
            self._child(entry, obj.keywords, ".keywords", "keywords")
            return
        if kind in ("object", "slots"):
            for cls in type(obj).__mro__:
                if cls is not object and _is_user_class(cls):
                    self._child(
                        entry,
                        cls,
                        f".__class__.__mro__[{type(obj).__mro__.index(cls)}]",
                        cls.__name__,
                    )
        entry.contents = _contents(entry)
        if kind == "appended":
            entry.items = list(obj)
        for key, value in entry.contents.items():
            self._leaf_or_child(entry, key, value)

    def _function(self, entry):
        fn = entry.obj
        if entry.kind == "function_root":
            if not isinstance(fn, types.FunctionType):
                entry.kind = _kind(fn) or "opaque"
                if entry.kind != "opaque":
                    self._children(entry)
                return
        entry.kind = "function"
        user = _is_user_function(fn)
        if user:  # a library function's names are its own module's
            global_names, names, used = _code_names(fn.__code__)
            self.global_names |= global_names
            self.names |= names
            self.not_only_appended |= used
        for k, cell in enumerate(fn.__closure__ or ()):
            self._child(entry, cell, f".__closure__[{k}]", f"closure {fn.__code__.co_freevars[k]}")
        if fn.__defaults__:
            self._child(entry, fn.__defaults__, ".__defaults__", "defaults")
        if fn.__kwdefaults__:
            self._child(entry, fn.__kwdefaults__, ".__kwdefaults__", "keyword defaults")
        if user and id(fn.__globals__) not in self.by_id:
            self._enter(fn.__globals__, "globals", entry.index, ".__globals__", "global")

    def _child(self, entry, obj, access, label):
        known = self.by_id.get(id(obj))
        if known is not None:
            return
        kind = _kind(obj)
        if kind is not None:
            self._enter(obj, kind, entry.index, access, label)

    def _leaf_or_child(self, entry, key, value):
        if isinstance(value, Tensor):
            self.tensors.setdefault(id(value), []).append((entry.index, key))
            hooked = any(value.__dict__.get(name) for name in _HOOK_TABLES)
            if hooked and id(value) not in self.by_id:  # its hooks run in the function's backward
                self._enter(
                    value, "hooks", entry.index, _access(entry, key), _label(entry, key), key
                )
            return
        if isinstance(value, np.random.Generator):
            self.generators.append((entry, key, value, value.bit_generator.state))
            return
        if isinstance(value, np.ndarray):
            # an argument's values are compared whole: the next call's array
            # may be a buffer refilled in place, not a data set left alone
            picture = _array_picture(value, whole=entry.index in self.arguments)
            self.arrays.setdefault(id(value), (entry, key, value, picture))
            return
        if isinstance(value, (set, frozenset)):
            self.sets[id(value)] = (value, frozenset(value))
            return
        if hasattr(type(value), "__next__") and _kind(value) is None:
            # (one whose position Python does not show, a file, stays opaque)
            self.iterators.setdefault(id(value), (entry, key, value, _position(value)))
            return
        kind = _kind(value)
        if kind is None:
            return
        if type(value) is list:
            self.list_places.setdefault(id(value), []).append((entry, key))
        if id(value) in self.by_id:  # an alias: the guard checks it holds the same object
            return
        if id(value) in self.appended:
            kind = "appended"
        self._enter(value, kind, entry.index, _access(entry, key), _label(entry, key), key)

    def holds_number_inputs(self, entry) -> bool:
        """Whether numbers the entry's object holds may become inputs: it holds
        them by name, key or index (a tuple where its holder can take a copy)
        and is no argument container (whose numbers are inputs already)."""
        if entry.index in self.arguments:
            return False
        if type(entry.obj) is tuple:  # put back whole where it is
            parent = self.entries[entry.parent] if entry.parent is not None else None
            return parent is not None and entry.key is not None and self.holds_number_inputs(parent)
        kinds = ("object", "slots", "class", "module", "globals", "cell", "dict")
        return entry.kind in kinds or type(entry.obj) is list

    def path(self, entry, key) -> tuple:
        """A place as the steps from a root to it, the same on every walk."""
        steps = [key]
        while entry is not None:
            steps.append(entry.access if entry.access is not None else ("key", entry.key))
            entry = None if entry.parent is None else self.entries[entry.parent]
        return tuple(reversed(steps))

    def install_numbers(self, paths: set, trace) -> None:
        """Puts a traced number, an input of the program read on every call
        (``trace.read_number``), at each place of ``paths`` that holds an int
        or a float, before the function runs, so that every read of it is
        traced: numbers the function changes (a step counter, a learning
        rate it decays) or an optimizer reads, which a guard on their value
        would trace again whenever they change. A tuple's (an optimizer's
        betas) is put in a copy of the tuple, put where the tuple is.
        ``trace.installed`` records the places."""
        for entry in self.entries:
            if entry.contents is None or not self.holds_number_inputs(entry):
                continue
            numbers = {}
            for key, value in entry.contents.items():
                if type(value) in (int, float) and self.path(entry, key) in paths:
                    number = self._number_input(entry, key, trace)
                    if isinstance(number, TracedNumber):
                        numbers[key] = number
                        trace.installed[id(entry.obj), key] = number
            if not numbers:
                continue
            if type(entry.obj) is tuple:
                parent = self.entries[entry.parent]
                copy = tuple(numbers.get(k, v) for k, v in enumerate(entry.obj))
                _store(parent, parent.obj, entry.key, (), copy)
                trace.installed[id(parent.obj), entry.key] = copy
            else:
                for key, number in numbers.items():
                    _store(entry, entry.obj, key, (), number)

    def _number_input(self, entry, key, trace):
        obj = entry.obj
        read = self._reader(entry, key)
        if read is None:  # under an argument: read from this object, pinned
            read = functools.partial(_read_now, obj, key)
            self.pinned_for_numbers.add(id(obj))
        return trace.read_number(("python state", self.path(entry, key)), read, _label(entry, key))

    def _reader(self, entry, key):
        """A function reading what is now at the entry's ``key``, from the
        function down (None if the place is under an argument): the objects
        on the way may be others than now (a scheduler's new list)."""
        chain = []
        while entry.parent is not None:
            chain.append(entry)
            entry = self.entries[entry.parent]
        if entry.index != 0:
            return None
        constants = [entry.obj, key]
        steps = []
        for link in reversed(chain):
            if link.access is None:
                constants.append(link.key)
                steps.append(f"[C[{len(constants) - 1}]]")
            else:
                steps.append(link.access)
        holder = f"C[0]{''.join(steps)}"
        lines = [
            "def read():",
            "    try:",
            f"        return R({holder}, C[1])",
            "    except (AttributeError, KeyError, IndexError, TypeError, ValueError):",
            "        return None",
        ]
        namespace = {"C": constants, "R": _read_now}
        exec(compile("\n".join(lines), "<fusegrad number place>", "exec"), namespace)
        return namespace["read"]

    def paths_of(self, places: set) -> set:
        """The paths of places given as (id(container), key) the walk entered."""
        found = set()
        for container, key in places:
            entry = self.by_id.get(container)
            if entry is not None and self.holds_number_inputs(entry):
                found.add(self.path(entry, key))
        return found

    def appended_lists(self) -> frozenset:
        """The lists (ids) the walked code only appends to: held at one place,
        a global, a closure variable of the user's function or an attribute
        of an object of the user's class, whose name no walked code uses but
        to call ``.append`` or ``.extend``. Their items are not
        guarded and a call's appends are redone as appends, so a loss
        history does not make every call trace again."""
        found = set()
        for key, places in self.list_places.items():
            if len(places) != 1:
                continue
            entry, name = places[0]
            # only the user's code is scanned: a list of a library object (an
            # optimizer's param_groups) is read by code the walk never sees
            if entry.kind == "cell":
                if not _is_user_function(self.entries[entry.parent].obj):
                    continue
                name = entry.label.removeprefix("closure ")
            elif entry.kind == "object":
                if not _is_user_class(type(entry.obj)):
                    continue
            elif entry.kind not in ("globals", "module", "class"):
                continue
            if isinstance(name, str) and name not in self.not_only_appended:
                found.add(key)
        return frozenset(found)


def _access(entry, key) -> str:
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


def _label(entry, key) -> str:
    if entry.kind in ("globals", "module"):
        return f"{entry.label} {key}" if entry.kind == "module" else f"global {key!r}"
    if entry.kind in ("object", "slots", "class", "module", "hooks"):
        return f"{entry.label}.{key}"
    if entry.kind == "cell":
        return entry.label
    return f"{entry.label}[{key!r}]"


def _position(iterator, depth: int = 0):
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
    if isinstance(value, _SCALARS) and not isinstance(value, (range, slice)):
        return value
    if hasattr(type(value), "__next__") and not isinstance(value, Tensor):
        return ("iterator", _position(value, depth + 1))
    if type(value) in (tuple, list):
        return tuple(_brief(v, depth) for v in value)
    if type(value) is dict:
        return tuple((k, _brief(v, depth)) for k, v in value.items())
    return ("object", id(value))


def _is_number(value) -> bool:
    return type(value) in (int, float) or isinstance(value, TracedNumber)


def _same(a, b) -> bool:
    """Scalars equal in type and value (NaN equals NaN, -0.0 differs from 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (a == b and math.copysign(1, a) == math.copysign(1, b)) or (a != a and b != b)
    try:
        return bool(a == b)
    except Exception:
        return False


class State:
    """What one trace read and wrote of Python state: ``check(fn, args,
    kwargs)`` returns the objects the writes need (a tuple) when a call's
    state looks as the trace's did, else a string naming what differs;
    ``write(objects, outputs)`` redoes the trace's writes with this call's
    hidden outputs. ``hidden_outputs``: the tensors and traced numbers the
    writes store, which the program computes beside the function's result."""

    def __init__(self, before: Walk, installed: dict, outputs: list, owned: set = frozenset()):
        self.before = before
        # (id(container), key) -> the traced number put there before the
        # function ran: the program reads it, no guard needs to
        self.installed = installed
        self.inputs = set(installed)
        # objects the program's operations hold (a process group): what they
        # do to themselves is the operations' doing, redone by every run
        self.owned = {e.index for e in before.entries if id(e.obj) in owned}
        for entry in before.entries:
            if entry.parent in self.owned:
                self.owned.add(entry.index)
        self.hidden_outputs: list = []
        # places of ints and floats the call changed: inputs from the next trace on
        self.changed_numbers: set = set()
        self._output_ids = {id(t): k for k, t in enumerate(outputs)}
        self._first_output = len(outputs)
        self.writes: list = []  # (entry index, key, template); key None: a whole list
        self._find_writes()
        self.needed = sorted(
            {i for i, _, _ in self.writes}
            | {i for _, _, t in self.writes for i in _entries_read(t)}
        )
        self.check = self._compile_check()
        self.trivial = not self.writes and self._checks == 0

    # -- writes

    def _find_writes(self) -> None:
        before = self.before
        for entry, _, generator, state in before.generators:
            if generator.bit_generator.state != state:
                raise Refused(f"it draws from the numpy Generator at {entry.label}")
        for entry, key, iterator, position in before.iterators.values():
            if position is not None and _position(iterator) != position:
                # a compiled call would not take the next item again
                raise Refused(f"it advances the iterator at {_label(entry, key)} (next())")
        for entry, key, array, picture in before.arrays.values():
            if not _same_array(array, picture):
                raise Refused(f"it changes the numpy array at {_label(entry, key)} in place")
        for entry in before.entries:
            if entry.contents is None or isinstance(entry.obj, tuple) or entry.index in self.owned:
                continue
            if entry.kind == "appended":
                self._find_appends(entry)
                continue
            now = _contents(entry)
            if isinstance(entry.obj, _MUTABLE_SEQUENCES):
                if len(now) != len(entry.contents) or any(
                    not self._unchanged(entry.contents[k], now[k]) for k in now
                ):
                    items = [self._template(now[k], f"{entry.label}[{k}]") for k in range(len(now))]
                    self.writes.append((entry.index, None, ("list", items)))
                continue
            numbers = before.holds_number_inputs(entry)
            for key in entry.contents.keys() | now.keys():
                old = entry.contents.get(key, _MISSING)
                new = now.get(key, _MISSING)
                if new is not _MISSING and self.installed.get((id(entry.obj), key)) is new:
                    continue  # the input it read, left as it was
                if not self._unchanged(old, new):
                    if numbers and type(old) in (int, float) and _is_number(new):
                        self.changed_numbers.add(before.path(entry, key))
                    self._note_list_of_changed_numbers(old, new)
                    # a size as a key (``cache[x.shape[0]]``) is its value: hashing
                    # it pins the size (the trace is active while writes are found)
                    stored = int(key) if isinstance(key, TracedNumber) else key
                    if new is _MISSING:
                        template = ("delete",)
                    elif new is old and type(old) is set:
                        template = self._set_update(entry, stored, old, _label(entry, key))
                    else:
                        template = self._template(new, _label(entry, key))
                    self.writes.append((entry.index, stored, template))

    def _set_update(self, entry, key, value: set, label: str):
        """A set changed in place: its removals and additions, redone in place
        on the set then there, as the call made them (a set built anew may
        iterate in another order)."""
        before = self.before.sets[id(value)][1]
        removed = [self._template(v, f"an item of {label}") for v in before if v not in value]
        added = [self._template(v, f"an item of {label}") for v in value if v not in before]
        return ("set_update", entry.index, key, added, removed)

    def _note_list_of_changed_numbers(self, old, new) -> None:
        """A list of numbers replaced by another (a scheduler's ``_last_lr``):
        the numbers that changed are inputs from the next trace on, at the
        old list's places."""
        entry = self.before.by_id.get(id(old))
        if entry is None or type(old) is not list or type(new) is not list:
            return
        if len(old) != len(new) or not self.before.holds_number_inputs(entry):
            return
        for k, (a, b) in enumerate(zip(old, new)):
            if type(a) in (int, float) and _is_number(b) and not self._unchanged(a, b):
                self.changed_numbers.add(self.before.path(entry, k))

    def _find_appends(self, entry) -> None:
        now, before = entry.obj, entry.items
        if len(now) < len(before) or any(a is not b for a, b in zip(now, before)):
            raise Refused(f"it changes {entry.label} other than by appending to it")
        if len(now) > len(before):
            items = [
                self._template(v, f"{entry.label}[{k}]")
                for k, v in enumerate(now[len(before) :], len(before))
            ]
            self.writes.append((entry.index, None, ("extend", items)))

    def _unchanged(self, old, new) -> bool:
        """Whether a place holds what it held: the same object, a scalar equal
        in type and value, or a set with the contents the old one had."""
        if isinstance(old, (set, frozenset)) and id(old) in self.before.sets:
            return type(new) is type(old) and new == self.before.sets[id(old)][1]
        if old is new:
            return True
        if isinstance(old, _SCALARS) and isinstance(new, _SCALARS):
            return _same(old, new)
        return False

    def _template(self, value, label: str):
        """How a call builds the value the trace wrote at ``label``."""
        if isinstance(value, Tensor):
            places = self.before.tensors.get(id(value))
            if places:
                return ("tensor_at", *places[0])
            return ("output", self._output(value))
        if isinstance(value, TracedNumber):
            kind = "float" if value.tensor._dtype.is_floating_point else "int"
            return ("number", self._output(value.tensor), kind)
        if isinstance(value, _SCALARS):
            return ("const", value)
        known = self.before.by_id.get(id(value))
        if known is not None:
            return ("entry", known.index)
        if type(value) in (list, tuple):
            items = [self._template(v, f"{label}[{k}]") for k, v in enumerate(value)]
            return (type(value).__name__, items)
        if type(value) is dict:
            return ("dict", [(k, self._template(v, f"{label}[{k!r}]")) for k, v in value.items()])
        if type(value) in (set, frozenset):
            return ("set", type(value), [self._template(v, f"an item of {label}") for v in value])
        if _kind(value) is None and not isinstance(value, (np.ndarray, np.random.Generator)):
            if isinstance(value, (types.ModuleType, types.BuiltinFunctionType, type)) or (
                isinstance(value, types.FunctionType) and not _is_user_function(value)
            ):
                return ("const", value)
        raise Refused(f"it stores a new {type(value).__name__} object at {label}")

    def _output(self, tensor) -> int:
        k = self._output_ids.get(id(tensor))
        if k is None:
            k = self._output_ids[id(tensor)] = self._first_output + len(self.hidden_outputs)
            self.hidden_outputs.append(tensor)
        return k

    def write(self, objects: tuple, outputs: list) -> None:
        """Redoes the writes: every value is built before any is stored, so a
        value read from a place reads what was there before the call."""
        local = dict(zip(self.needed, objects))
        values = [_build(t, local, outputs) for _, _, t in self.writes]
        for (index, key, template), value in zip(self.writes, values):
            _store(self.before.entries[index], local[index], key, template, value)

    def lookup(self, targets: list):
        """``(lookup, found)`` for tensors the function read without receiving
        them: ``lookup(args, kwargs)`` returns the objects now at the places
        where the walk from the function and a call's arguments found
        ``targets`` before the trace (None when
        a place is gone, or two places that held one target now differ);
        ``found[k]``: whether target ``k`` was found (``lookup`` is None when
        none was)."""
        entries = self.before.entries
        places = [list(self.before.tensors.get(id(t), ())) for t in targets]
        found = [bool(p) for p in places]
        if not any(found):
            return None, found
        needed: set = set()
        for i, _ in (place for p in places for place in p):
            while i is not None and i not in needed:
                needed.add(i)
                i = entries[i].parent
        constants: list = []

        def constant(value) -> str:
            constants.append(value)
            return f"C[{len(constants) - 1}]"

        lines = ["def lookup(fn, args, kwargs):", "    try:"]
        for i in sorted(needed):
            entry = entries[i]
            lines.append(f"        o{i} = {_source(entry, constant)}")
        for k, p in enumerate(places):
            for n, (i, key) in enumerate(p):
                read = self._read(
                    entries[i], f"o{i}", _container(entries[i], f"o{i}"), key, constant
                )
                lines.append(
                    f"        t{k} = {read}"
                    if n == 0
                    else f"        if {read} is not t{k}: return None"
                )
        names = ", ".join(f"t{k}" if f else "None" for k, f in enumerate(found))
        lines += [
            f"        return [{names}]",
            "    except (AttributeError, KeyError, IndexError, TypeError, ValueError):",
            "        return None",
        ]
        namespace = {"C": constants, "M": _MISSING}
        exec(compile("\n".join(lines), "<fusegrad tensor places>", "exec"), namespace)
        find, fn = namespace["lookup"], entries[0].obj
        return (lambda args, kwargs: find(fn, args, kwargs)), found

    # -- the guard

    def _compile_check(self):
        lines = ["def check(fn, args, kwargs):", "    try:"]
        constants: list = []
        self._checks = 0

        def constant(value) -> str:
            constants.append(value)
            return f"C[{len(constants) - 1}]"

        def fail(label: str) -> str:
            return f"return {constant(label)}"

        entries = self.before.entries
        # objects numbers are read from on every call: the program reads that object's
        installed = self.before.pinned_for_numbers
        aliases: list = []  # checks that places share an object, as they did
        settled: set = set()
        # containers the arguments are made of: the cache key holds their
        # structure, their numbers are inputs and their other scalars keyed
        arguments = self.before.arguments
        # Objects no call can replace (the function, its closure cells and
        # globals, what a fusegrad closure holds): constants of the check
        pinned: set = set()
        for entry in entries:
            name = f"o{entry.index}"
            if entry.index == 0 or (
                entry.parent in pinned
                and (entry.access in _READ_ONLY or entry.parent in settled or _is_cell(entry))
            ):
                pinned.add(entry.index)
                lines.append(f"        {name} = {constant(entry.obj)}")
            else:
                lines.append(f"        {name} = {_source(entry, constant)}")
                if id(entry.obj) in installed:
                    lines.append(
                        f"        if {name} is not {constant(entry.obj)}: " + fail(entry.label)
                    )
            if entry.index in self.owned:
                continue
            if entry.kind == "cell" and entries[entry.parent].kind == "function":
                if not _is_user_function(entries[entry.parent].obj):
                    # fusegrad's closures (grad(f)) never rebind their cells:
                    # what they hold is settled, the objects it reaches are not
                    settled.add(entry.index)
                    continue
            if entry.index in arguments:
                for key, value in entry.contents.items():
                    read = self._read(entry, name, name, key, constant)
                    child = self.before.by_id.get(id(value))
                    if child is not None and child.parent != entry.index:
                        aliases.append(
                            f"        if {read} is not o{child.index}: " + fail(_label(entry, key))
                        )
                    elif isinstance(value, np.ndarray):  # the key holds its dtype and shape only
                        picture = constant(self.before.arrays[id(value)][3])
                        lines.append(
                            f"        if not A({read}, {picture}): " + fail(_label(entry, key))
                        )
                        self._checks += 1
                continue
            if entry.parent in settled or entry.index in pinned:
                pass
            elif entry.kind in (
                "function",
                "method",
                "partial",
                "property",
                "opaque",
                "globals",
                "cell",
            ):
                if entry.parent is not None and entry.kind in (
                    "function",
                    "method",
                    "partial",
                    "property",
                ):
                    lines.append(
                        f"        if {name}.__class__ is not {constant(type(entry.obj))}: "
                        + fail(entry.label)
                    )
                    self._checks += 1
            elif entry.kind not in ("class", "module"):
                lines.append(
                    f"        if {name}.__class__ is not {constant(type(entry.obj))}: "
                    + fail(entry.label)
                )
                self._checks += 1
            if entry.kind == "function" and entry.index not in pinned | settled:
                lines.append(
                    f"        if {name}.__code__ is not {constant(entry.obj.__code__)}: "
                    + fail(entry.label)
                )
            if entry.contents is None or (entry.index in pinned and isinstance(entry.obj, tuple)):
                continue  # (a tuple no call can replace holds what it held)
            container = _container(entry, name)
            if entry.kind in ("dict", "object"):
                lines.append(
                    f"        if list({container}) != {constant(list(entry.contents))}: "
                    + fail(f"the keys of {entry.label}")
                )
                self._checks += 1
            elif entry.kind == "sequence":
                lines.append(
                    f"        if len({name}) != {len(entry.contents)}: "
                    + fail(f"the length of {entry.label}")
                )
                self._checks += 1
            for key, value in entry.contents.items():
                read = self._read(entry, name, container, key, constant)
                label = _label(entry, key)
                if (id(entry.obj), key) in self.inputs:
                    continue
                child = self.before.by_id.get(id(value))
                if child is not None and child.parent == entry.index and _kind(value) is not None:
                    continue  # entered from here: checked as an entry of its own
                if child is not None:
                    aliases.append(f"        if {read} is not o{child.index}: " + fail(label))
                elif value is _MISSING:
                    lines.append(f"        if {read} is not M: " + fail(label))
                elif isinstance(value, Tensor):
                    lines.append(
                        f"        if {read}.__class__ is not {constant(type(value))}: "
                        + fail(label)
                    )
                elif isinstance(value, (set, frozenset)):
                    copy = constant((type(value), self.before.sets[id(value)][1]))  # at the walk
                    lines.append(f"        if not Q({read}, {copy}): " + fail(label))
                elif isinstance(value, np.ndarray):
                    picture = constant(self.before.arrays[id(value)][3])  # at the walk
                    lines.append(f"        if not A({read}, {picture}): " + fail(label))
                elif isinstance(value, _SCALARS) and not isinstance(value, (range, slice)):
                    lines.append(
                        f"        if not {_same_code(read, value, constant)}: " + fail(label)
                    )
                else:
                    lines.append(f"        if {read} is not {constant(value)}: " + fail(label))
                self._checks += 1
        lines += aliases  # once every entry's local is assigned
        # one tensor at several places (an argument that is also a global):
        # the trace read it as one input, so later calls must hold one there too
        for places in self.before.tensors.values():
            first, *others = [
                self._read(entries[i], f"o{i}", _container(entries[i], f"o{i}"), key, constant)
                for i, key in places
                if i not in self.owned
            ] or [None]
            for other in others:
                lines.append(f"        if {other} is not {first}: " + fail("a tensor held twice"))
                self._checks += 1
        needed = ", ".join(f"o{i}" for i in self.needed)
        lines += [
            f"        return ({needed}{',' if len(self.needed) == 1 else ''})",
            "    except (AttributeError, KeyError, IndexError, TypeError, ValueError):",
            f"        {fail('the objects it reads')}",
        ]
        namespace = {
            "C": constants,
            "M": _MISSING,
            "S": _same,
            "A": _same_array,
            "Q": _same_set,
        }
        exec(compile("\n".join(lines), "<fusegrad python state>", "exec"), namespace)
        return namespace["check"]

    def _read(self, entry, name, container, key, constant) -> str:
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


# attributes Python does not let code assign: what they hold stays
_READ_ONLY = {
    ".__globals__",
    ".__self__",
    ".__func__",
    ".func",
    ".args",
    ".keywords",
    ".fget",
    ".fset",
    ".fdel",
}


def _is_cell(entry) -> bool:
    """A function's closure cell (the closure tuple is read-only; a cell's
    contents are not)."""
    return entry.kind == "cell" and entry.access.startswith(".__closure__[")


def _source(entry, constant) -> str:
    """How generated code reads the entry's object from its parent's local."""
    if entry.parent is None:
        return entry.access
    if entry.access is None:
        return f"o{entry.parent}[{constant(entry.key)}]"
    return f"o{entry.parent}{entry.access}"


def _container(entry, name: str) -> str:
    return f"{name}.__dict__" if entry.kind in ("object", "module") else name


def make_plain(walk: Walk) -> None:
    """After a call that ran eagerly as its trace: the traced numbers it
    stored in the objects the walk entered become the numbers they hold.
    Each entered object is made plain in place, as an entry of its own."""
    entered = walk.by_id
    for entry in walk.entries:
        if entry.contents is None or isinstance(entry.obj, tuple):
            continue
        if isinstance(entry.obj, _MUTABLE_SEQUENCES):
            items = [_plain(v, entered) for v in entry.obj]
            if any(a is not b for a, b in zip(items, entry.obj)):
                _refill(entry.obj, items)
            continue
        for key, value in _contents(entry).items():
            plain = _plain(value, entered)
            if plain is not value:
                _store(entry, entry.obj, key, (), plain)


def _plain(value, entered: dict):
    """``value`` with its traced numbers as numbers: a container the call
    made is made again; one the walk entered (``entered``) is left as it is."""
    if isinstance(value, TracedNumber):
        return value.value
    if id(value) in entered:
        return value
    if type(value) in (list, tuple):
        items = [_plain(v, entered) for v in value]
        return type(value)(items) if any(a is not b for a, b in zip(items, value)) else value
    if type(value) is dict:
        items = {k: _plain(v, entered) for k, v in value.items()}
        return items if any(items[k] is not value[k] for k in value) else value
    return value


def _same_code(read: str, value, constant) -> str:
    """Generated code for ``_same(read, value)``, inline where that is exact
    (a call costs more than the comparison)."""
    if value is None or type(value) is bool:
        return f"{read} is {constant(value)}"
    plain_float = type(value) is float and value == value and value != 0.0
    if type(value) in (int, str) or plain_float:
        return f"((v := {read}).__class__ is {type(value).__name__} and v == {constant(value)})"
    return f"S({read}, {constant(value)})"


def _same_set(value, copy: tuple) -> bool:
    """``copy``: (the set's type, its items)."""
    return value.__class__ is copy[0] and value == copy[1]


ARRAY_COPY_BYTES = 4096  # numpy arrays up to this size are compared whole
ARRAY_SAMPLES = 64  # of a larger one, this many elements


def _array_picture(array: np.ndarray, whole: bool = False) -> tuple:
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


def _same_array(value, picture: tuple) -> bool:
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


def _entries_read(template):
    """The entries whose objects a template reads: an object found where it
    was, or the entry holding a tensor that was there."""
    kind = template[0]
    if kind in ("entry", "tensor_at"):
        yield template[1]
    elif kind in ("list", "tuple", "extend"):
        for t in template[1]:
            yield from _entries_read(t)
    elif kind == "set":
        for t in template[2]:
            yield from _entries_read(t)
    elif kind == "set_update":
        yield template[1]
        for t in (*template[3], *template[4]):
            yield from _entries_read(t)
    elif kind == "dict":
        for _, t in template[1]:
            yield from _entries_read(t)


def _build(template, local: dict, outputs):
    """The value a template stands for in this call."""
    kind = template[0]
    if kind == "const":
        return template[1]
    if kind == "entry":
        return local[template[1]]
    if kind == "tensor_at":
        _, index, key = template
        return _read_now(local[index], key)
    if kind == "output":
        return outputs[template[1]]
    if kind == "number":
        value = outputs[template[1]]._data.item()
        return float(value) if template[2] == "float" else int(value)
    if kind in ("list", "extend"):
        return [_build(t, local, outputs) for t in template[1]]
    if kind == "tuple":
        return tuple(_build(t, local, outputs) for t in template[1])
    if kind == "dict":
        return {k: _build(t, local, outputs) for k, t in template[1]}
    if kind == "set":
        return template[1](_build(t, local, outputs) for t in template[2])
    if kind == "set_update":
        _, index, key, added, removed = template
        value = _read_now(local[index], key)
        value.difference_update([_build(t, local, outputs) for t in removed])
        value.update(_build(t, local, outputs) for t in added)
        return value
    raise AssertionError(kind)


_MUTABLE_SEQUENCES = (list, collections.deque)


def _refill(sequence, items) -> None:
    """A list or deque made to hold ``items``, in place."""
    if isinstance(sequence, list):
        sequence[:] = items
    else:
        sequence.clear()
        sequence.extend(items)


def _read_now(obj, key):
    if isinstance(obj, (dict, list, tuple)):
        return obj[key]
    if isinstance(obj, types.CellType):
        return obj.cell_contents
    space = getattr(obj, "__dict__", None)
    if space is not None and key in space:
        return space[key]
    return getattr(obj, key)  # a slot


def _store(entry, obj, key, template, value) -> None:
    if key is None:
        if template[0] == "extend":
            obj.extend(value)
        else:
            _refill(obj, value)
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
