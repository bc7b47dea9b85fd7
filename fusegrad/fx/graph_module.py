"""``torch.fx.GraphModule``: a module holding a graph and the submodules,
parameters and buffers its nodes name (copied from the module traced, at
the same paths); its forward runs the graph's nodes in order."""

from __future__ import annotations

import functools

from ..nn.modules.module import Module
from .graph import Graph
from .node import map_arg


def _copy_attribute(source, module: Module, target: str) -> None:
    *path, last = target.split(".")
    for part in path:
        source = source[part] if isinstance(source, dict) else getattr(source, part)
        if part not in module._modules:
            module.add_module(part, Module())
        module = module._modules[part]
    value = source[last] if isinstance(source, dict) else getattr(source, last)
    if isinstance(source, Module) and last in source._buffers:
        module.register_buffer(last, value)
    else:
        setattr(module, last, value)


class GraphModule(Module):
    def __init__(self, root, graph: Graph, class_name: str = "GraphModule"):
        super().__init__()
        for node in graph.nodes:
            if node.op in ("get_attr", "call_module"):
                _copy_attribute(root, self, node.target)
        self.graph = graph
        self._class_name = class_name

    def _attribute(self, target: str):
        return functools.reduce(getattr, target.split("."), self)

    def forward(self, *args, **kwargs):
        values: dict = {}
        positional = list(args)
        for node in self.graph.nodes:
            args_of = map_arg(node.args, values.__getitem__)
            kwargs_of = map_arg(node.kwargs, values.__getitem__)
            if node.op == "placeholder":
                if positional:
                    value = positional.pop(0)
                elif node.target in kwargs:
                    value = kwargs[node.target]
                elif node.args:
                    value = node.args[0]
                else:
                    raise TypeError(f"forward() missing required argument: '{node.target}'")
            elif node.op == "get_attr":
                value = self._attribute(node.target)
            elif node.op == "call_function":
                value = node.target(*args_of, **kwargs_of)
            elif node.op == "call_method":
                receiver, *rest = args_of
                value = getattr(receiver, node.target)(*rest, **kwargs_of)
            elif node.op == "call_module":
                value = self._attribute(node.target)(*args_of, **kwargs_of)
            else:
                return args_of[0]
            values[node] = value
        return None

    def __repr__(self) -> str:
        return f"{self._class_name}(GraphModule)\n{self.graph}"
