"""Numbers in the Python state a traced function reaches (walk.py): put
there as traced numbers before the function runs, inputs the program reads
on every call (``install_numbers``), and made plain numbers again after a
call that ran eagerly as its trace (``make_plain``).
"""

from __future__ import annotations

import functools

from .numbers import TracedNumber
from .python_objects import (
    MUTABLE_SEQUENCES,
    contents_now,
    place_label,
    read_now,
    refill,
    store,
)


def install_numbers(walk, paths: set, trace) -> None:
    """Puts a traced number, an input of the program read on every call
    (``trace.read_number``), at each place of ``paths`` that holds an int
    or a float, before the function runs, so that every read of it is
    traced: numbers the function changes (a step counter, a learning
    rate it decays) or an optimizer reads, which a guard on their value
    would trace again whenever they change. A tuple's (an optimizer's
    betas) is put in a copy of the tuple, put where the tuple is.
    ``trace.installed`` records the places."""
    for entry in walk.entries:
        if entry.contents is None or not walk.holds_number_inputs(entry):
            continue
        numbers = {}
        for key, value in entry.contents.items():
            if type(value) in (int, float) and walk.path(entry, key) in paths:
                number = _number_input(walk, entry, key, trace)
                if isinstance(number, TracedNumber):
                    numbers[key] = number
                    trace.installed[id(entry.obj), key] = number
        if not numbers:
            continue
        if type(entry.obj) is tuple:
            parent = walk.entries[entry.parent]
            copy = tuple(numbers.get(k, v) for k, v in enumerate(entry.obj))
            store(parent, parent.obj, entry.key, (), copy)
            trace.installed[id(parent.obj), entry.key] = copy
        else:
            for key, number in numbers.items():
                store(entry, entry.obj, key, (), number)


def _number_input(walk, entry, key, trace):
    obj = entry.obj
    read = _reader(walk, entry, key)
    if read is None:  # under an argument: read from this object, pinned
        read = functools.partial(read_now, obj, key)
        walk.pinned_for_numbers.add(id(obj))
    return trace.read_number(("python state", walk.path(entry, key)), read, place_label(entry, key))


def _reader(walk, entry, key):
    """A function reading what is now at the entry's ``key``, from the
    function down (None if the place is under an argument): the objects
    on the way may be others than now (a scheduler's new list)."""
    chain = []
    while entry.parent is not None:
        chain.append(entry)
        entry = walk.entries[entry.parent]
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
    namespace = {"C": constants, "R": read_now}
    exec(compile("\n".join(lines), "<fusegrad number place>", "exec"), namespace)
    return namespace["read"]


def make_plain(walk) -> None:
    """After a call that ran eagerly as its trace: the traced numbers it
    stored in the objects the walk entered become the numbers they hold.
    Each entered object is made plain in place, as an entry of its own."""
    entered = walk.by_id
    for entry in walk.entries:
        if entry.contents is None or isinstance(entry.obj, tuple):
            continue
        if isinstance(entry.obj, MUTABLE_SEQUENCES):
            items = [_plain(v, entered) for v in entry.obj]
            if any(a is not b for a, b in zip(items, entry.obj)):
                refill(entry.obj, items)
            continue
        for key, value in contents_now(entry).items():
            plain = _plain(value, entered)
            if plain is not value:
                store(entry, entry.obj, key, (), plain)


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
