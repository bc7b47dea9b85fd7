"""``torch.fx.proxy``: the values a symbolic trace runs code on. Each
operation on a ``Proxy`` (an operator, a method, an attribute, a function
the tracer watches) appends a node to the graph and gives a proxy of its
result; asking a proxy for a Python value (``if proxy:``, iterating it) is a
``TraceError``, as the value does not exist while tracing."""

from __future__ import annotations

import operator

from .node import map_aggregate


class TraceError(ValueError):
    pass


class TracerBase:
    """What makes proxies: nodes appended to ``self.graph``."""

    graph = None

    def create_arg(self, a):
        """``a`` as a node's argument: proxies as their nodes."""
        return map_aggregate(a, lambda x: x.node if isinstance(x, Proxy) else x)

    def create_node(self, op, target, args, kwargs, name=None):
        return self.graph.create_node(op, target, args, kwargs, name)

    def create_proxy(self, op, target, args, kwargs, name=None) -> Proxy:
        node = self.create_node(op, target, self.create_arg(args), self.create_arg(kwargs), name)
        return Proxy(node, self)


class GraphAppendingTracer(TracerBase):
    """Makes proxies whose operations append to ``graph``."""

    def __init__(self, graph):
        self.graph = graph


class Proxy:
    def __init__(self, node, tracer: TracerBase | None = None):
        self.node = node
        self.tracer = tracer if tracer is not None else GraphAppendingTracer(node.graph)

    def __repr__(self) -> str:
        return f"Proxy({self.node.name})"

    def __getattr__(self, name: str):
        if name.startswith("__"):  # copy, pickle and the like probe these
            raise AttributeError(name)
        return Attribute(self, name)

    def __call__(self, *args, **kwargs) -> Proxy:
        return self.tracer.create_proxy("call_method", "__call__", (self, *args), kwargs)

    def __bool__(self):
        raise TraceError("symbolically traced variables cannot be used as inputs to control flow")

    def __iter__(self):
        raise TraceError(
            "Proxy object cannot be iterated. This can be attempted when the Proxy is used in "
            "a loop or as a *args or **kwargs function argument."
        )

    def __len__(self):
        raise RuntimeError(
            "'len' is not supported in symbolic tracing by default. If you want this call to "
            "be recorded, please call torch.fx.wrap('len') at module scope"
        )


class Attribute(Proxy):
    """``proxy.name``: called, a method call; used as a value, a ``getattr`` node."""

    def __init__(self, root: Proxy, attr: str):
        self.root = root
        self.attr = attr
        self.tracer = root.tracer
        self._node = None

    @property
    def node(self):
        if self._node is None:
            self._node = self.tracer.create_proxy(
                "call_function", getattr, (self.root, self.attr), {}
            ).node
        return self._node

    def __call__(self, *args, **kwargs) -> Proxy:
        return self.tracer.create_proxy("call_method", self.attr, (self.root, *args), kwargs)


def _recording(function, reflected: bool):
    def record(self, *others):
        args = (*others, self) if reflected else (self, *others)
        return self.tracer.create_proxy("call_function", function, args, {})

    return record


_BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "lshift", "rshift")
_BITWISE = {"and": operator.and_, "or": operator.or_, "xor": operator.xor}
_COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne", "getitem")
_UNARY = ("neg", "pos", "invert", "abs")

for _name, _function in [(n, getattr(operator, n)) for n in _BINARY] + list(_BITWISE.items()):
    setattr(Proxy, f"__{_name}__", _recording(_function, reflected=False))
    setattr(Proxy, f"__r{_name}__", _recording(_function, reflected=True))
for _name in _COMPARISONS + _UNARY:
    setattr(Proxy, f"__{_name}__", _recording(getattr(operator, _name), reflected=False))
Proxy.__hash__ = object.__hash__  # __eq__ records; proxies still key dicts by identity
