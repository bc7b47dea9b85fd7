"""What a trace wrote to Python state, and how a compiled call writes it
again (python_state.py says what can be redone). The walk's copies of the
objects it entered (walk.py) are compared with the objects after the trace;
each place that changed is a write: the place and a template of the value
stored there, built anew by every call from its hidden outputs and the
objects its guard found.
"""

from __future__ import annotations

import types

import numpy as np

from ..eager.tensor import Tensor
from .numbers import TracedNumber
from .python_objects import (
    MISSING,
    MUTABLE_SEQUENCES,
    SCALARS,
    Refused,
    contents_now,
    is_user_function,
    iterator_position,
    place_label,
    read_now,
    same_array,
    same_scalar,
    walk_kind,
)


class Writes:
    """The writes of one trace, found when made: ``writes`` holds (entry
    index, key, template), key None for a whole list; ``hidden_outputs``
    the tensors and traced numbers they store, which the program computes
    beside the function's result; ``changed_numbers`` the places of ints
    and floats the call changed, inputs from the next trace on."""

    def __init__(self, before, installed: dict, owned: set, outputs: list):
        self.before = before
        # (id(container), key) -> the traced number put there before the
        # function ran: the program reads it, no guard needs to
        self.installed = installed
        self.owned = owned
        self.hidden_outputs: list = []
        self.changed_numbers: set = set()
        self._output_ids = {id(t): k for k, t in enumerate(outputs)}
        self._first_output = len(outputs)
        self.writes: list = []
        self._refuse_what_cannot_be_redone()
        self._find_writes()

    def _refuse_what_cannot_be_redone(self) -> None:
        for entry, _, generator, state in self.before.generators:
            if generator.bit_generator.state != state:
                raise Refused(f"it draws from the numpy Generator at {entry.label}")
        for entry, key, iterator, position in self.before.iterators.values():
            if position is not None and iterator_position(iterator) != position:
                # a compiled call would not take the next item again
                raise Refused(f"it advances the iterator at {place_label(entry, key)} (next())")
        for entry, key, array, picture in self.before.arrays.values():
            if not same_array(array, picture):
                raise Refused(f"it changes the numpy array at {place_label(entry, key)} in place")

    def _find_writes(self) -> None:
        before = self.before
        for entry in before.entries:
            if entry.contents is None or isinstance(entry.obj, tuple) or entry.index in self.owned:
                continue
            if entry.kind == "appended":
                self._find_appends(entry)
                continue
            now = contents_now(entry)
            if isinstance(entry.obj, MUTABLE_SEQUENCES):
                if len(now) != len(entry.contents) or any(
                    not self._unchanged(entry.contents[k], now[k]) for k in now
                ):
                    items = [self._template(now[k], f"{entry.label}[{k}]") for k in range(len(now))]
                    self.writes.append((entry.index, None, ("list", items)))
                continue
            numbers = before.holds_number_inputs(entry)
            for key in entry.contents.keys() | now.keys():
                old = entry.contents.get(key, MISSING)
                new = now.get(key, MISSING)
                if new is not MISSING and self.installed.get((id(entry.obj), key)) is new:
                    continue  # the input it read, left as it was
                if not self._unchanged(old, new):
                    if numbers and type(old) in (int, float) and _is_number(new):
                        self.changed_numbers.add(before.path(entry, key))
                    self._note_list_of_changed_numbers(old, new)
                    # a size as a key (``cache[x.shape[0]]``) is its value: hashing
                    # it pins the size (the trace is active while writes are found)
                    stored = int(key) if isinstance(key, TracedNumber) else key
                    if new is MISSING:
                        template = ("delete",)
                    elif new is old and type(old) is set:
                        template = self._set_update(entry, stored, old, place_label(entry, key))
                    else:
                        template = self._template(new, place_label(entry, key))
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
        if isinstance(old, SCALARS) and isinstance(new, SCALARS):
            return same_scalar(old, new)
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
        if isinstance(value, SCALARS):
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
        if walk_kind(value) is None and not isinstance(value, (np.ndarray, np.random.Generator)):
            if isinstance(value, (types.ModuleType, types.BuiltinFunctionType, type)) or (
                isinstance(value, types.FunctionType) and not is_user_function(value)
            ):
                return ("const", value)
        raise Refused(f"it stores a new {type(value).__name__} object at {label}")

    def _output(self, tensor) -> int:
        k = self._output_ids.get(id(tensor))
        if k is None:
            k = self._output_ids[id(tensor)] = self._first_output + len(self.hidden_outputs)
            self.hidden_outputs.append(tensor)
        return k


def _is_number(value) -> bool:
    return type(value) in (int, float) or isinstance(value, TracedNumber)


def entries_read(template):
    """The entries whose objects a template reads: an object found where it
    was, or the entry holding a tensor that was there."""
    kind = template[0]
    if kind in ("entry", "tensor_at"):
        yield template[1]
    elif kind in ("list", "tuple", "extend"):
        for t in template[1]:
            yield from entries_read(t)
    elif kind == "set":
        for t in template[2]:
            yield from entries_read(t)
    elif kind == "set_update":
        yield template[1]
        for t in (*template[3], *template[4]):
            yield from entries_read(t)
    elif kind == "dict":
        for _, t in template[1]:
            yield from entries_read(t)


def build(template, local: dict, outputs):
    """The value a template stands for in this call."""
    kind = template[0]
    if kind == "const":
        return template[1]
    if kind == "entry":
        return local[template[1]]
    if kind == "tensor_at":
        _, index, key = template
        return read_now(local[index], key)
    if kind == "output":
        return outputs[template[1]]
    if kind == "number":
        value = outputs[template[1]]._data.item()
        return float(value) if template[2] == "float" else int(value)
    if kind in ("list", "extend"):
        return [build(t, local, outputs) for t in template[1]]
    if kind == "tuple":
        return tuple(build(t, local, outputs) for t in template[1])
    if kind == "dict":
        return {k: build(t, local, outputs) for k, t in template[1]}
    if kind == "set":
        return template[1](build(t, local, outputs) for t in template[2])
    if kind == "set_update":
        _, index, key, added, removed = template
        value = read_now(local[index], key)
        value.difference_update([build(t, local, outputs) for t in removed])
        value.update(build(t, local, outputs) for t in added)
        return value
    raise AssertionError(kind)
