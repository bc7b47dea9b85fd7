"""``torch.fx.symbolic_trace``: a module's forward run on proxies, recorded
as a graph. Submodules of ``torch.nn`` are leaves (one ``call_module`` node
each); other modules are traced through. PyTorch sees functions called on
proxies through ``__torch_function__``, which fusegrad's tensors lack, so
while tracing, the public functions of ``torch``, ``torch.nn.functional``,
``math`` (the tracer's ``autowrap_modules``) and those marked with ``wrap``
are swapped for versions that record a ``call_function`` node when an
argument is a proxy (code that bound such a function to another name before
tracing calls it unrecorded)."""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import math
import sys

from ..eager.tensor import Tensor
from ..nn import functional as _functional
from ..nn.modules.container import ModuleDict, ModuleList, Sequential
from ..nn.modules.module import Module
from .graph import Graph
from .node import map_aggregate
from .proxy import Proxy, TracerBase

# (the globals of a module, a name in them) that wrap() marked
_WRAPPED: list = []


def wrap(fn_or_name):
    """Marks a function of the calling module (or its name) to be recorded
    as one ``call_function`` node when a traced forward calls it on proxies."""
    name = fn_or_name if isinstance(fn_or_name, str) else fn_or_name.__name__
    _WRAPPED.append((sys._getframe(1).f_globals, name))
    return fn_or_name


def _has_proxy(args) -> bool:
    found = []
    map_aggregate(args, lambda x: found.append(x) if isinstance(x, Proxy) else None)
    return bool(found)


def _is_function(value) -> bool:
    return inspect.isfunction(value) or inspect.isbuiltin(value)


class Tracer(TracerBase):
    def __init__(
        self, autowrap_modules=(math,), autowrap_functions=(), param_shapes_constant=False
    ):
        self.autowrap_modules = tuple(autowrap_modules)
        self.autowrap_functions = tuple(autowrap_functions)

    def is_leaf_module(self, m: Module, module_qualified_name: str) -> bool:
        return type(m).__module__.startswith("fusegrad.nn.") and not isinstance(
            m, (Sequential, ModuleList, ModuleDict)
        )

    def path_of_module(self, mod: Module) -> str:
        path = self._module_paths.get(id(mod))
        if path is None:
            raise NameError("module is not installed as a submodule")
        return path

    def call_module(self, m: Module, forward, args, kwargs):
        path = self.path_of_module(m)
        if not self.is_leaf_module(m, path):
            return forward(*args, **kwargs)
        return self.create_proxy("call_module", path, args, kwargs)

    def create_arg(self, a):
        """Tensors of the root module become ``get_attr`` nodes; other tensors
        become constants of the root (``_tensor_constant0``...)."""

        def argument(x):
            if isinstance(x, Proxy):
                return x.node
            if isinstance(x, Tensor):
                path = self._tensor_paths.get(id(x))
                if path is None:
                    path = f"_tensor_constant{next(self._constants)}"
                    setattr(self.root, path, x)
                    self._tensor_paths[id(x)] = path
                return self.graph.get_attr(path)
            return x

        return map_aggregate(a, argument)

    def trace(self, root, concrete_args: dict | None = None) -> Graph:
        is_module = isinstance(root, Module)
        self.root = root if is_module else Module()
        function = type(root).forward if is_module else root
        self.graph = Graph()
        self._module_paths = {id(m): name for name, m in self.root.named_modules()}
        tensors = itertools.chain(self.root.named_parameters(), self.root.named_buffers())
        self._tensor_paths = {id(t): name for name, t in tensors}
        self._constants = itertools.count()
        parameters = list(inspect.signature(function).parameters.values())[is_module:]
        arguments = [self._argument(p, concrete_args or {}) for p in parameters]
        with self._patched():
            result = function(root, *arguments) if is_module else function(*arguments)
        self.graph.output(self.create_arg(result))
        return self.graph

    def _argument(self, parameter: inspect.Parameter, concrete_args: dict):
        if parameter.name in concrete_args:
            return concrete_args[parameter.name]
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise RuntimeError(
                f"fusegrad.fx.symbolic_trace: the forward's *{parameter.name} cannot be traced; "
                "give its values with concrete_args or name the arguments"
            )
        return Proxy(self.graph.placeholder(parameter.name, parameter.default), self)

    def _recording(self, function):
        @functools.wraps(function)
        def call(*args, **kwargs):
            if _has_proxy((args, kwargs)):
                return self.create_proxy("call_function", function, args, kwargs)
            return function(*args, **kwargs)

        return call

    @contextlib.contextmanager
    def _patched(self):
        # the package itself, imported already: its public functions
        public = sys.modules["fusegrad"]
        modules = (public, _functional, *self.autowrap_modules)
        namespaces = [(vars(m), name) for m in modules for name in vars(m)]
        watched = [(g, n) for g, n in namespaces + _WRAPPED if _is_function(g.get(n))]
        watched += [(vars(sys.modules[f.__module__]), f.__name__) for f in self.autowrap_functions]
        saved = [(g, n, g[n]) for g, n in watched]
        original_call = Module.__call__
        tracer = self

        def module_call(module, *args, **kwargs):
            forward = functools.partial(original_call, module)
            return tracer.call_module(module, forward, args, kwargs)

        try:
            for namespace, name, function in saved:
                namespace[name] = self._recording(function)
            Module.__call__ = module_call
            yield
        finally:
            Module.__call__ = original_call
            for namespace, name, function in reversed(saved):
                namespace[name] = function


def symbolic_trace(root, concrete_args: dict | None = None):
    """``root`` (a module or a function) as a ``GraphModule``: its graph, and
    a forward that runs it."""
    from .graph_module import GraphModule

    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = type(root).__name__ if isinstance(root, Module) else root.__name__
    return GraphModule(tracer.root, graph, name)
