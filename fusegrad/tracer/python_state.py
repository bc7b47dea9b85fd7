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

The walk is walk.py (one object as it sees it: python_objects.py), the
guard state_guards.py, the writes state_writes.py, the numbers that become
inputs state_numbers.py; ``State`` here puts one trace's together.
"""

from __future__ import annotations

from .python_objects import MISSING, Refused, container_of, entry_source, read_code, store
from .state_guards import compile_check
from .state_numbers import make_plain
from .state_writes import Writes, build, entries_read
from .walk import Walk, walk_enters

__all__ = ["Refused", "State", "Walk", "make_plain", "walk_enters"]


class State:
    """What one trace read and wrote of Python state: ``check(fn, args,
    kwargs)`` returns the objects the writes need (a tuple) when a call's
    state looks as the trace's did, else a string naming what differs;
    ``write(objects, outputs)`` redoes the trace's writes with this call's
    hidden outputs. ``hidden_outputs``: the tensors and traced numbers the
    writes store, which the program computes beside the function's result."""

    def __init__(self, before: Walk, installed: dict, outputs: list, owned: set = frozenset()):
        self.before = before
        # objects the program's operations hold (a process group): what they
        # do to themselves is the operations' doing, redone by every run
        self.owned = {e.index for e in before.entries if id(e.obj) in owned}
        for entry in before.entries:
            if entry.parent in self.owned:
                self.owned.add(entry.index)
        found = Writes(before, installed, self.owned, outputs)
        self.hidden_outputs = found.hidden_outputs
        # places of ints and floats the call changed: inputs from the next trace on
        self.changed_numbers = found.changed_numbers
        self.writes = found.writes  # (entry index, key, template); key None: a whole list
        self.needed = sorted(
            {i for i, _, _ in self.writes} | {i for _, _, t in self.writes for i in entries_read(t)}
        )
        self.check, checks = compile_check(before, self.owned, set(installed), self.needed)
        self.trivial = not self.writes and checks == 0

    def write(self, objects: tuple, outputs: list) -> None:
        """Redoes the writes: every value is built before any is stored, so a
        value read from a place reads what was there before the call."""
        local = dict(zip(self.needed, objects))
        values = [build(t, local, outputs) for _, _, t in self.writes]
        for (index, key, template), value in zip(self.writes, values):
            store(self.before.entries[index], local[index], key, template, value)

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
            lines.append(f"        o{i} = {entry_source(entry, constant)}")
        for k, p in enumerate(places):
            for n, (i, key) in enumerate(p):
                read = read_code(
                    entries[i], f"o{i}", container_of(entries[i], f"o{i}"), key, constant
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
        namespace = {"C": constants, "M": MISSING}
        exec(compile("\n".join(lines), "<fusegrad tensor places>", "exec"), namespace)
        find, fn = namespace["lookup"], entries[0].obj
        return (lambda args, kwargs: find(fn, args, kwargs)), found
