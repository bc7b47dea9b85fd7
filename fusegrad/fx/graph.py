"""``torch.fx.Graph``: the operations a symbolic trace recorded, in order."""

from __future__ import annotations

import inspect

from .node import Node, is_reserved, name_base


class Graph:
    def __init__(self):
        self._nodes: list = []
        self._names: set = set()

    @property
    def nodes(self) -> list:
        return list(self._nodes)

    def _unique(self, base: str) -> str:
        name, count = base, 0
        while name in self._names or is_reserved(name):
            count += 1
            name = f"{base}_{count}"
        self._names.add(name)
        return name

    def create_node(self, op, target, args=(), kwargs=None, name=None) -> Node:
        unique = self._unique(name or name_base(op, target))
        node = Node(self, unique, op, target, tuple(args), dict(kwargs or {}))
        self._nodes.append(node)
        return node

    def placeholder(self, name: str, default_value=inspect.Parameter.empty) -> Node:
        args = () if default_value is inspect.Parameter.empty else (default_value,)
        return self.create_node("placeholder", name, args)

    def get_attr(self, qualified_name: str) -> Node:
        return self.create_node("get_attr", qualified_name)

    def call_module(self, module_name: str, args=(), kwargs=None) -> Node:
        return self.create_node("call_module", module_name, args, kwargs)

    def call_method(self, method_name: str, args=(), kwargs=None) -> Node:
        return self.create_node("call_method", method_name, args, kwargs)

    def call_function(self, the_function, args=(), kwargs=None) -> Node:
        return self.create_node("call_function", the_function, args, kwargs)

    def output(self, result) -> Node:
        return self.create_node("output", "output", (result,))

    def __str__(self) -> str:
        return "graph():\n" + "".join(f"    {node.format_node()}\n" for node in self._nodes)
