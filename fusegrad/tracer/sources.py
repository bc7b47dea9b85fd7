"""Where a traced function found the tensors it did not receive.

A compiled program reads a module's parameters, a global tensor or a
closed-over one on every call. Holding on to the objects the trace saw would
miss a rebinding (``model.weight = nn.Parameter(...)``, ``W = fg.randn(...)``
at module level): the program would silently compute with the old tensor.
So after a trace each such tensor is looked for from the function's roots
(the function object: its closure cells and the globals its code names)
through attributes, dicts, lists and tuples, and the path that reaches it is
compiled into one Python function that a call runs to find the tensors
there now. A tensor found nowhere (reached through something this search
does not enter) is held by identity, as before.
"""

from __future__ import annotations

import types
from collections import deque

from .tensor import Tensor

MAX_OBJECTS = 20000  # the search visits at most this many objects
_OPAQUE = (type, types.ModuleType, types.BuiltinFunctionType, str, bytes, int, float, complex)


def locate(fn, targets: list):
    """``(lookup, found)``: ``lookup()`` returns the objects now at the places
    where ``targets`` (tensors) were found from ``fn``'s roots, in order, or
    None when a place is gone or two places that held one target now hold
    different objects (eager code would use both); ``found[k]`` says whether
    target ``k`` was found at all (``lookup`` is None when none was)."""
    wanted = {id(t): k for k, t in enumerate(targets)}
    paths: dict = {}  # target index -> every expression reaching it
    seen: set = set()
    queue = deque([("fn", fn)])
    visited = 0
    while queue and visited < MAX_OBJECTS:
        expression, obj = queue.popleft()
        if isinstance(obj, Tensor):
            k = wanted.get(id(obj))
            if k is not None:
                paths.setdefault(k, []).append(expression)
            continue
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        visited += 1
        queue.extend(_children(expression, obj))
    found = [k in paths for k in range(len(targets))]
    if not paths:
        return None, found
    lines = ["def lookup(fn):", "    try:"]
    for k, expressions in sorted(paths.items()):
        first, *others = expressions
        lines.append(f"        t{k} = {first}")
        lines += [f"        if {other} is not t{k}: return None" for other in others]
    found_names = ", ".join(f"t{k}" if k in paths else "None" for k in range(len(targets)))
    lines += [
        f"        return [{found_names}]",
        "    except (AttributeError, KeyError, IndexError, TypeError, ValueError):",
        "        return None",
    ]
    namespace: dict = {}
    exec(compile("\n".join(lines), "<fusegrad sources>", "exec"), namespace)
    lookup = namespace["lookup"]
    return (lambda: lookup(fn)), found


def _function_parts(expression: str, fn):
    """A function's closure cells and the globals its code names."""
    code = getattr(fn, "__code__", None)
    closure = getattr(fn, "__closure__", None) or ()
    for k, cell in enumerate(closure):
        try:
            yield f"{expression}.__closure__[{k}].cell_contents", cell.cell_contents
        except ValueError:  # an empty cell
            continue
    if code is None:
        return
    namespace = getattr(fn, "__globals__", {})
    for name in _names(code):
        if name in namespace:
            yield f"{expression}.__globals__[{name!r}]", namespace[name]


def _names(code) -> list:
    """The global names a code object and the code nested in it use."""
    names = list(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names += _names(constant)
    return list(dict.fromkeys(names))


def _children(expression: str, obj):
    if isinstance(obj, _OPAQUE) or obj is None:
        return
    if isinstance(obj, dict):
        for key, value in list(obj.items()):
            if isinstance(key, (str, int)) and not isinstance(key, bool):
                yield f"{expression}[{key!r}]", value
        return
    if isinstance(obj, (list, tuple)):
        for k, value in enumerate(obj):
            yield f"{expression}[{k}]", value
        return
    if isinstance(obj, (types.FunctionType, types.MethodType)):
        if isinstance(obj, types.MethodType):
            yield f"{expression}.__self__", obj.__self__
            obj = obj.__func__
            expression = f"{expression}.__func__"
        yield from _function_parts(expression, obj)
        return
    if hasattr(obj, "func") and hasattr(obj, "args"):  # functools.partial
        yield f"{expression}.func", obj.func
        yield f"{expression}.args", obj.args
    attributes = getattr(obj, "__dict__", None)
    if isinstance(attributes, dict):
        for name, value in list(attributes.items()):
            yield f"{expression}.__dict__[{name!r}]", value
