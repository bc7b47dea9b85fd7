"""``torch.fx.node``: a graph's node (one operation: its kind, what it
runs, its arguments, which may be other nodes), and ``map_arg`` /
``map_aggregate``, which rebuild an argument structure."""

from __future__ import annotations

import builtins
import keyword
import re


def map_aggregate(a, fn):
    """``fn`` applied to every leaf of ``a``, through tuples, lists, dicts and
    slices, rebuilt with the same types."""
    if isinstance(a, tuple):
        mapped = [map_aggregate(item, fn) for item in a]
        return type(a)(*mapped) if hasattr(a, "_fields") else tuple(mapped)
    if isinstance(a, list):
        return [map_aggregate(item, fn) for item in a]
    if isinstance(a, dict):
        return type(a)((key, map_aggregate(value, fn)) for key, value in a.items())
    if isinstance(a, slice):
        return slice(*(map_aggregate(part, fn) for part in (a.start, a.stop, a.step)))
    return fn(a)


def map_arg(a, fn):
    """``fn`` applied to every ``Node`` in ``a``, the rest kept."""
    return map_aggregate(a, lambda x: fn(x) if isinstance(x, Node) else x)


def target_name(target) -> str:
    """How a node's target is written: a function by module and name, else as it is."""
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None) or "builtins"
    return f"{module.lstrip('_')}.{getattr(target, '__qualname__', repr(target))}"


def name_base(op: str, target) -> str:
    """The name a node's value is given before it is made unique."""
    if op == "output":
        return "output"
    text = target if isinstance(target, str) else getattr(target, "__name__", "value")
    name = re.sub(r"\W", "_", text.replace(".", "_")) or "value"
    return f"_{name}" if name[0].isdigit() else name


def is_reserved(name: str) -> bool:
    return keyword.iskeyword(name) or hasattr(builtins, name)


class Node:
    """One operation of a graph. ``op``: "placeholder" (an argument),
    "get_attr" (a parameter, buffer or constant of the module),
    "call_function", "call_method", "call_module" or "output"; ``target``:
    the argument's name, the attribute's path, the function, the method's
    name or the submodule's path; ``users``: the nodes that read this one."""

    def __init__(self, graph, name: str, op: str, target, args: tuple, kwargs: dict):
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self.args = args
        self.kwargs = kwargs
        self.users: dict = {}
        for used in self.all_input_nodes:
            used.users[self] = None

    @property
    def all_input_nodes(self) -> list:
        found: dict = {}
        map_arg((self.args, self.kwargs), lambda node: found.setdefault(node, None))
        return list(found)

    def __repr__(self) -> str:
        return self.name

    def format_node(self) -> str:
        head = f"%{self.name} : [num_users={len(self.users)}] = "
        if self.op == "output":
            return f"return {self.args[0]}"
        if self.op == "placeholder":
            default = f"(default={self.args[0]})" if self.args else ""
            return f"{head}placeholder[target={self.target}]{default}"
        if self.op == "get_attr":
            return f"{head}get_attr[target={self.target}]"
        args = map_arg(self.args, lambda node: _Shown(f"%{node.name}"))
        kwargs = ", ".join(
            f"{key}: {map_arg(value, lambda node: _Shown(f'%{node.name}'))!r}"
            for key, value in self.kwargs.items()
        )
        return (
            f"{head}{self.op}[target={target_name(self.target)}]"
            f"(args = {args!r}, kwargs = {{{kwargs}}})"
        )


class _Shown(str):
    """A string shown without quotes in a node's arguments."""

    def __repr__(self) -> str:
        return str(self)
