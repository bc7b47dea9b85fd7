"""Walking the objects a traced function can reach (python_state.py says
why): from its roots, the function and the call's arguments, every object
is entered once and a shallow copy of its contents kept, in the order found.
"""

from __future__ import annotations

import dis
import types

import numpy as np

from ..eager.tensor import Tensor
from .python_objects import (
    HOOK_TABLES,
    MISSING,
    MUTABLE_SEQUENCES,
    Entry,
    Refused,
    access_code,
    array_picture,
    contents_now,
    is_user_class,
    is_user_function,
    iterator_position,
    place_label,
    refill,
    store,
    walk_kind,
)
from .state_numbers import install_numbers

MAX_OBJECTS = 50000  # a walk reaching more refuses: its guard would cost more than a call

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


def walk_enters(obj) -> bool:
    """Whether the walk looks inside ``obj`` (and so guards what it holds)."""
    return walk_kind(obj) is not None


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
        self.arrays: dict = {}  # id -> (Entry, key, array, its picture: array_picture)
        self.sets: dict = {}  # id -> (set, a frozen copy): compared by value
        self.iterators: dict = {}  # id -> (Entry, key, iterator, its position: iterator_position)
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
            now = contents_now(entry)
            if entry.kind in ("dict", "sequence"):
                # whole, by identity: a key the function added may be a size
                # of its trace, which hashing would decide on
                items, before = list(now.items()), list(entry.contents.items())
                if len(items) != len(before) or any(
                    a is not c or b is not d for (a, b), (c, d) in zip(items, before)
                ):
                    if isinstance(entry.obj, MUTABLE_SEQUENCES):
                        refill(entry.obj, [value for _, value in before])
                    else:
                        entry.obj.clear()
                        entry.obj.update(before)
                continue
            for key in now.keys() | entry.contents.keys():
                old = entry.contents.get(key, MISSING)
                if now.get(key, MISSING) is not old:
                    store(entry, entry.obj, key, ("delete",) if old is MISSING else (), old)

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
                    for key, value in contents_now(entry, new).items():
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
                if cls is not object and is_user_class(cls):
                    self._child(
                        entry,
                        cls,
                        f".__class__.__mro__[{type(obj).__mro__.index(cls)}]",
                        cls.__name__,
                    )
        entry.contents = contents_now(entry)
        if kind == "appended":
            entry.items = list(obj)
        for key, value in entry.contents.items():
            self._leaf_or_child(entry, key, value)

    def _function(self, entry):
        fn = entry.obj
        if entry.kind == "function_root":
            if not isinstance(fn, types.FunctionType):
                entry.kind = walk_kind(fn) or "opaque"
                if entry.kind != "opaque":
                    self._children(entry)
                return
        entry.kind = "function"
        user = is_user_function(fn)
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
        kind = walk_kind(obj)
        if kind is not None:
            self._enter(obj, kind, entry.index, access, label)

    def _leaf_or_child(self, entry, key, value):
        if isinstance(value, Tensor) and not value.is_sparse and not value.is_complex():
            self.tensors.setdefault(id(value), []).append((entry.index, key))
            hooked = any(value.__dict__.get(name) for name in HOOK_TABLES)
            if hooked and id(value) not in self.by_id:  # its hooks run in the function's backward
                self._enter(
                    value,
                    "hooks",
                    entry.index,
                    access_code(entry, key),
                    place_label(entry, key),
                    key,
                )
            return
        if isinstance(value, np.random.Generator):
            self.generators.append((entry, key, value, value.bit_generator.state))
            return
        if isinstance(value, np.ndarray):
            # an argument's values are compared whole: the next call's array
            # may be a buffer refilled in place, not a data set left alone
            picture = array_picture(value, whole=entry.index in self.arguments)
            self.arrays.setdefault(id(value), (entry, key, value, picture))
            return
        if isinstance(value, (set, frozenset)):
            self.sets[id(value)] = (value, frozenset(value))
            return
        if hasattr(type(value), "__next__") and walk_kind(value) is None:
            # (one whose position Python does not show, a file, stays opaque)
            self.iterators.setdefault(id(value), (entry, key, value, iterator_position(value)))
            return
        kind = walk_kind(value)
        if kind is None:
            return
        if type(value) is list:
            self.list_places.setdefault(id(value), []).append((entry, key))
        if id(value) in self.by_id:  # an alias: the guard checks it holds the same object
            return
        if id(value) in self.appended:
            kind = "appended"
        self._enter(value, kind, entry.index, access_code(entry, key), place_label(entry, key), key)

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
        """Traced numbers, inputs of the program, put at the places of
        ``paths`` before the function runs: see state_numbers.py."""
        install_numbers(self, paths, trace)

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
                if not is_user_function(self.entries[entry.parent].obj):
                    continue
                name = entry.label.removeprefix("closure ")
            elif entry.kind == "object":
                if not is_user_class(type(entry.obj)):
                    continue
            elif entry.kind not in ("globals", "module", "class"):
                continue
            if isinstance(name, str) and name not in self.not_only_appended:
                found.add(key)
        return frozenset(found)
