"""``script`` and what it makes: a ``ScriptFunction`` (the function compiled
by fusegrad's jit) or a ``RecursiveScriptModule`` (a copy of the module's
tree whose ``forward`` runs as written, compiled; parameters and buffers
are the original's tensors, so ``state_dict`` keys and values are the
original's too)."""

from __future__ import annotations

import copy
import functools
import sys
from collections import OrderedDict, namedtuple

from ..nn.modules.module import Module
from ..tracer.jit import jit as compile_function
from . import _deprecation, _serialization

# A value with its TorchScript type, for a ScriptModule's attribute (which
# stores the value): ``self.steps = Attribute(0, int)``.
Attribute = namedtuple("Attribute", ["value", "type"])


class ScriptModule(Module):
    """The type of compiled modules, and the base of the legacy API's
    classes (``class M(torch.jit.ScriptModule)`` with ``@script_method``
    methods): a module that ``save``s, and whose attributes assigned an
    ``Attribute`` hold its value."""

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, Attribute):
            value = value.value
        super().__setattr__(name, value)

    @property
    def original_name(self) -> str:
        return type(self).__name__

    def save(self, f, _extra_files=None) -> None:
        """Writes the module for ``fusegrad.jit.load`` (see ``fusegrad.jit.save``)."""
        _serialization.write(self, f, _extra_files)


class RecursiveScriptModule(ScriptModule):
    """A scripted module. Its class is made per original class, a subclass
    of this one and of the original's (its methods, properties and
    ``isinstance`` checks hold), and every submodule is scripted too."""

    _original_class: type = Module  # the class each scripted class was made from

    @property
    def original_name(self) -> str:
        return self._original_class.__name__

    def forward(self, *args, **kwargs):
        return self._compiled_forward(*args, **kwargs)

    def extra_repr(self) -> str:
        return f"original_name={self.original_name}"

    def _compile_forward(self) -> None:
        # the original class's forward, on this module
        object.__setattr__(self, "_compiled_forward", compile_function(super().forward))

    # Pickled as the original class and the module's state: the scripted
    # class is made again where it loads, and the forward compiled again.
    def __reduce__(self):
        state = {k: v for k, v in self.__dict__.items() if k != "_compiled_forward"}
        return (_new_scripted, (self._original_class,), state)

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._compile_forward()


@functools.cache
def _scripted_class(original: type) -> type:
    namespace = {
        "_original_class": original,
        "__module__": __name__,
        "__qualname__": "RecursiveScriptModule",
        "__doc__": f"{original.__qualname__}, scripted.",
    }
    return type("RecursiveScriptModule", (RecursiveScriptModule, original), namespace)


def _new_scripted(original: type) -> RecursiveScriptModule:
    return object.__new__(_scripted_class(original))


# What Module.__init__ makes a module's own (registries, hooks): each copy
# gets its own, holding the same parameters, buffers and hooks.
_MODULE_CONTAINERS = tuple(
    name for name, value in vars(Module()).items() if isinstance(value, (dict, set))
)


def scripted_copy(module: Module, copies: dict | None = None) -> RecursiveScriptModule:
    """``module``'s tree, each module a scripted copy (a submodule reached
    twice is copied once): PyTorch's scripted module is a new module tree
    on the original's tensors, whose training flags are its own."""
    copies = {} if copies is None else copies
    if id(module) in copies:
        return copies[id(module)]
    original = getattr(module, "_original_class", type(module))
    scripted = copies[id(module)] = _new_scripted(original)
    state = {k: v for k, v in module.__dict__.items() if k != "_compiled_forward"}
    for name in _MODULE_CONTAINERS:
        if name in state:
            state[name] = copy.copy(state[name])
    state["_modules"] = OrderedDict(
        (name, None if child is None else scripted_copy(child, copies))
        for name, child in module._modules.items()
    )
    scripted.__dict__.update(state)
    scripted._compile_forward()
    return scripted


class ScriptFunction:
    """A scripted or traced function: the Python function, compiled by
    fusegrad's jit (it computes what the function computes)."""

    def __init__(self, fn):
        self._compiled = compile_function(fn)
        functools.update_wrapper(self, fn)

    @property
    def name(self) -> str:
        return getattr(self, "__name__", type(self.__wrapped__).__name__)

    def __call__(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    def save(self, f, _extra_files=None) -> None:
        """Writes the function for ``fusegrad.jit.load`` (see ``fusegrad.jit.save``)."""
        _serialization.write(self, f, _extra_files)

    # Pickled by reference, as functions are: by the name that holds it
    # (``@script`` put it there), else as the function it compiles.
    def __reduce__(self):
        module = sys.modules.get(getattr(self, "__module__", None))
        try:
            named = functools.reduce(getattr, self.__qualname__.split("."), module)
        except (AttributeError, TypeError):
            named = None
        if named is self:
            return self.__qualname__
        return (ScriptFunction, (self.__wrapped__,))


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """TorchScript's compiler, answered by fusegrad's: a function compiles to a
    ``ScriptFunction``, a module to a ``RecursiveScriptModule``; what is
    scripted already, a class (TorchScript's classes are the Python ones) and
    a dict or list come back as they are.

    >>> import fusegrad
    >>> layer = fusegrad.nn.Linear(2, 1)
    >>> scripted = fusegrad.jit.script(layer)
    >>> list(scripted.state_dict()) == list(layer.state_dict())
    True
    >>> scripted.weight is layer.weight
    True
    """
    _deprecation.warn("script")
    if isinstance(obj, (ScriptModule, ScriptFunction, type, dict, list)):
        return obj
    if isinstance(obj, Module):
        return scripted_copy(obj)
    return ScriptFunction(obj)


def script_method(fn):
    """The legacy API's mark of a ScriptModule's compiled method: ``fn``, run as written."""
    _deprecation.warn("script_method")
    return fn


def save(m, f, _extra_files=None) -> None:
    """Writes a scripted or traced module or function to ``f`` (a path or a
    binary file) for ``load``. The file is a ``fusegrad.save`` archive of the
    object: a module's class and state, a function's name; ``load`` imports
    the classes and functions it names, so they must be importable where it
    runs (TorchScript's archives hold their code, which only PyTorch runs).
    ``_extra_files`` maps names to contents (str or bytes) stored beside it."""
    _deprecation.warn("save")
    m.save(f, _extra_files=_extra_files)  # what is not scripted has no save, as in PyTorch
