"""The guard on Python state (python_state.py says what is guarded): a
Python function generated for each program, which checks on every call that
the state the call reaches looks as the trace's did and returns the objects
the writes need. It is generated rather than interpreted from the walk's
entries because it runs on every compiled call: straight-line code, one
local per entered object, costs the least.
"""

from __future__ import annotations

import numpy as np

from ..eager.tensor import Tensor
from .python_objects import (
    MISSING,
    SCALARS,
    container_of,
    entry_source,
    is_user_function,
    place_label,
    read_code,
    same_array,
    same_scalar,
    walk_kind,
)

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

_CALLABLES = ("function", "method", "partial", "property")


def compile_check(before, owned: set, inputs: set, needed: list) -> tuple:
    """(``check(fn, args, kwargs)``, how many comparisons it makes):
    ``check`` returns the objects at the entries ``needed`` (a tuple) when
    a call's state looks as ``before`` found it, else a string naming what
    differs. ``owned``: entries whose objects the program's operations
    hold; ``inputs``: places, (id(container), key), whose numbers the
    program reads."""
    source = _CheckSource(before, owned, inputs)
    for entry in before.entries:
        source.add_entry(entry)
    return source.compiled(needed), source.checks


class _CheckSource:
    """The generated check's lines, written entry by entry in the walk's
    order: the entry's local (``o{index}``), then what must hold of it."""

    def __init__(self, before, owned: set, inputs: set):
        self.before, self.owned, self.inputs = before, owned, inputs
        self.lines = ["def check(fn, args, kwargs):", "    try:"]
        self.constants: list = []
        self.checks = 0
        self.aliases: list = []  # checks that places share an object, as they did
        self.settled: set = set()
        # Objects no call can replace (the function, its closure cells and
        # globals, what a fusegrad closure holds): constants of the check
        self.pinned: set = set()

    def constant(self, value) -> str:
        self.constants.append(value)
        return f"C[{len(self.constants) - 1}]"

    def fail(self, label: str) -> str:
        return f"return {self.constant(label)}"

    def add_entry(self, entry) -> None:
        name = f"o{entry.index}"
        self._local(entry, name)
        if entry.index in self.owned:
            return
        entries = self.before.entries
        if entry.kind == "cell" and entries[entry.parent].kind == "function":
            if not is_user_function(entries[entry.parent].obj):
                # fusegrad's closures (grad(f)) never rebind their cells:
                # what they hold is settled, the objects it reaches are not
                self.settled.add(entry.index)
                return
        # containers the arguments are made of: the cache key holds their
        # structure, their numbers are inputs and their other scalars keyed
        if entry.index in self.before.arguments:
            self._argument_checks(entry, name)
            return
        self._type_checks(entry, name)
        if entry.contents is None or (entry.index in self.pinned and isinstance(entry.obj, tuple)):
            return  # (a tuple no call can replace holds what it held)
        self._contents_checks(entry, name)

    def _local(self, entry, name: str) -> None:
        """The entry's object as a local: a constant if pinned, else read
        from its parent's."""
        if entry.index == 0 or (
            entry.parent in self.pinned
            and (entry.access in _READ_ONLY or entry.parent in self.settled or _is_cell(entry))
        ):
            self.pinned.add(entry.index)
            self.lines.append(f"        {name} = {self.constant(entry.obj)}")
        else:
            self.lines.append(f"        {name} = {entry_source(entry, self.constant)}")
            # objects numbers are read from on every call: the program reads that object's
            if id(entry.obj) in self.before.pinned_for_numbers:
                self.lines.append(
                    f"        if {name} is not {self.constant(entry.obj)}: "
                    + self.fail(entry.label)
                )

    def _argument_checks(self, entry, name: str) -> None:
        for key, value in entry.contents.items():
            read = read_code(entry, name, name, key, self.constant)
            child = self.before.by_id.get(id(value))
            if child is not None and child.parent != entry.index:
                self.aliases.append(
                    f"        if {read} is not o{child.index}: "
                    + self.fail(place_label(entry, key))
                )
            elif isinstance(value, np.ndarray):  # the key holds its dtype and shape only
                picture = self.constant(self.before.arrays[id(value)][3])
                self.lines.append(
                    f"        if not A({read}, {picture}): " + self.fail(place_label(entry, key))
                )
                self.checks += 1

    def _type_checks(self, entry, name: str) -> None:
        if entry.parent in self.settled or entry.index in self.pinned:
            pass
        elif entry.kind in (*_CALLABLES, "opaque", "globals", "cell"):
            if entry.parent is not None and entry.kind in _CALLABLES:
                self._class_check(entry, name)
        elif entry.kind not in ("class", "module"):
            self._class_check(entry, name)
        if entry.kind == "function" and entry.index not in self.pinned | self.settled:
            self.lines.append(
                f"        if {name}.__code__ is not {self.constant(entry.obj.__code__)}: "
                + self.fail(entry.label)
            )

    def _class_check(self, entry, name: str) -> None:
        self.lines.append(
            f"        if {name}.__class__ is not {self.constant(type(entry.obj))}: "
            + self.fail(entry.label)
        )
        self.checks += 1

    def _contents_checks(self, entry, name: str) -> None:
        container = container_of(entry, name)
        if entry.kind in ("dict", "object"):
            self.lines.append(
                f"        if list({container}) != {self.constant(list(entry.contents))}: "
                + self.fail(f"the keys of {entry.label}")
            )
            self.checks += 1
        elif entry.kind == "sequence":
            self.lines.append(
                f"        if len({name}) != {len(entry.contents)}: "
                + self.fail(f"the length of {entry.label}")
            )
            self.checks += 1
        for key, value in entry.contents.items():
            read = read_code(entry, name, container, key, self.constant)
            label = place_label(entry, key)
            if (id(entry.obj), key) in self.inputs:
                continue
            child = self.before.by_id.get(id(value))
            if child is not None and child.parent == entry.index and walk_kind(value) is not None:
                continue  # entered from here: checked as an entry of its own
            self._value_check(read, value, child, label)

    def _value_check(self, read: str, value, child, label: str) -> None:
        """That the place ``read`` holds what it held, ``value`` (``child``:
        the entry of the object it held, elsewhere)."""
        if child is not None:
            self.aliases.append(f"        if {read} is not o{child.index}: " + self.fail(label))
        elif value is MISSING:
            self.lines.append(f"        if {read} is not M: " + self.fail(label))
        elif isinstance(value, Tensor):
            self.lines.append(
                f"        if {read}.__class__ is not {self.constant(type(value))}: "
                + self.fail(label)
            )
        elif isinstance(value, (set, frozenset)):
            copy = self.constant((type(value), self.before.sets[id(value)][1]))  # at the walk
            self.lines.append(f"        if not Q({read}, {copy}): " + self.fail(label))
        elif isinstance(value, np.ndarray):
            picture = self.constant(self.before.arrays[id(value)][3])  # at the walk
            self.lines.append(f"        if not A({read}, {picture}): " + self.fail(label))
        elif isinstance(value, SCALARS) and not isinstance(value, (range, slice)):
            self.lines.append(
                f"        if not {_same_code(read, value, self.constant)}: " + self.fail(label)
            )
        else:
            self.lines.append(
                f"        if {read} is not {self.constant(value)}: " + self.fail(label)
            )
        self.checks += 1

    def _tensors_held_twice(self) -> None:
        """One tensor at several places (an argument that is also a global):
        the trace read it as one input, so later calls must hold one there too."""
        entries = self.before.entries
        for places in self.before.tensors.values():
            first, *others = [
                read_code(
                    entries[i], f"o{i}", container_of(entries[i], f"o{i}"), key, self.constant
                )
                for i, key in places
                if i not in self.owned
            ] or [None]
            for other in others:
                self.lines.append(
                    f"        if {other} is not {first}: " + self.fail("a tensor held twice")
                )
                self.checks += 1

    def compiled(self, needed: list):
        """The check, returning the objects of the entries ``needed``."""
        lines = self.lines
        lines += self.aliases  # once every entry's local is assigned
        self._tensors_held_twice()
        objects = ", ".join(f"o{i}" for i in needed)
        lines += [
            f"        return ({objects}{',' if len(needed) == 1 else ''})",
            "    except (AttributeError, KeyError, IndexError, TypeError, ValueError):",
            f"        {self.fail('the objects it reads')}",
        ]
        namespace = {
            "C": self.constants,
            "M": MISSING,
            "S": same_scalar,
            "A": same_array,
            "Q": _same_set,
        }
        exec(compile("\n".join(lines), "<fusegrad python state>", "exec"), namespace)
        return namespace["check"]


def _is_cell(entry) -> bool:
    """A function's closure cell (the closure tuple is read-only; a cell's
    contents are not)."""
    return entry.kind == "cell" and entry.access.startswith(".__closure__[")


def _same_code(read: str, value, constant) -> str:
    """Generated code for ``same_scalar(read, value)``, inline where that is
    exact (a call costs more than the comparison)."""
    if value is None or type(value) is bool:
        return f"{read} is {constant(value)}"
    plain_float = type(value) is float and value == value and value != 0.0
    if type(value) in (int, str) or plain_float:
        return f"((v := {read}).__class__ is {type(value).__name__} and v == {constant(value)})"
    return f"S({read}, {constant(value)})"


def _same_set(value, copy: tuple) -> bool:
    """``copy``: (the set's type, its items)."""
    return value.__class__ is copy[0] and value == copy[1]
