"""``torch.fx``: symbolic tracing of modules and functions into a graph of
operations (``Graph``, ``Node``), and ``GraphModule``, which runs a graph.
Python over proxies, as PyTorch's is; see ``_symbolic_trace`` for how
functions called on proxies are seen without ``__torch_function__``."""

from __future__ import annotations

from . import graph, graph_module, node, proxy
from ._symbolic_trace import Tracer, symbolic_trace, wrap
from .graph import Graph
from .graph_module import GraphModule
from .node import Node, map_arg
from .proxy import Proxy

__all__ = [
    "Graph",
    "GraphModule",
    "Node",
    "Proxy",
    "Tracer",
    "graph",
    "graph_module",
    "map_arg",
    "node",
    "proxy",
    "symbolic_trace",
    "wrap",
]
