"""``fusegrad.jit``: fusegrad's compiler and PyTorch's ``torch.jit``, one name.

Called, it is the decorator it always was (``fusegrad.tracer.jit.jit``):
``@fusegrad.jit``, ``fusegrad.jit(f, dynamic=True)``. Its attributes are
TorchScript's API, answered honestly: TorchScript compiles the Python a
program wrote, so a scripted or traced function is that function compiled
by fusegrad's jit, and a scripted module runs its ``forward`` as written,
compiled the same way, with its parameters shared and its ``state_dict``
keys unchanged. Nothing here runs TorchScript's language, so the markers
that steer its compiler (``ignore``, ``unused``, ``export``, ``interface``)
leave the Python as it is, ``is_scripting()`` and ``is_tracing()`` are
False, and ``load`` reads what ``save`` wrote, not PyTorch's archives.

>>> import fusegrad
>>> @fusegrad.jit.script
... def f(x):
...     return (x * x).sum()
>>> f(fusegrad.tensor([1.0, 2.0]))
tensor(5.)
"""

import sys
import types
import typing

from ..tracer.jit import jit as _compile
from . import _deprecation
from ._async import Future, fork, wait
from ._freeze import freeze, optimize_for_inference
from ._script import (
    Attribute,
    RecursiveScriptModule,
    ScriptFunction,
    ScriptModule,
    save,
    script,
    script_method,
)
from ._serialization import load
from ._trace import TracerWarning, is_tracing, trace, trace_module

__all__ = [
    "Attribute",
    "Final",
    "Future",
    "RecursiveScriptModule",
    "ScriptFunction",
    "ScriptModule",
    "TracerWarning",
    "annotate",
    "export",
    "fork",
    "freeze",
    "ignore",
    "interface",
    "is_scripting",
    "is_tracing",
    "load",
    "optimize_for_inference",
    "save",
    "script",
    "script_if_tracing",
    "script_method",
    "trace",
    "trace_module",
    "unused",
    "wait",
]

Final = typing.Final


def is_scripting() -> bool:
    """False: no code runs as TorchScript, so model code takes its Python path."""
    return False


def annotate(the_type, the_value):
    """``the_value``: a type hint for TorchScript's compiler, which Python ignores."""
    return the_value


def ignore(drop=False, **kwargs):
    """``@ignore`` or ``@ignore(drop=True)``: the function stays Python, as it
    is anyway."""
    if callable(drop):
        return drop
    if not isinstance(drop, bool):
        raise RuntimeError(
            f"Argument to @torch.jit.ignore must be a bool or a function but got {drop}"
        )
    return lambda fn: fn


def unused(fn):
    """``fn``: TorchScript would replace it by a raise; Python runs it."""
    return fn


def export(fn):
    """``fn``: TorchScript would compile this method too; it is Python already."""
    return fn


def interface(obj):
    """``obj``: a class TorchScript reads as an interface type."""
    _deprecation.warn("interface")
    if not isinstance(obj, type):
        raise RuntimeError("interface must be applied to a class")
    return obj


def script_if_tracing(fn):
    """``fn``: TorchScript scripts it only inside ``trace``, which never runs TorchScript."""
    return fn


def _overload(fn):
    """An overload's declaration: the definition that follows replaces it."""
    return fn


def _overload_method(fn):
    """A method overload's declaration: the definition that follows replaces it."""
    return fn


class _CompilerModule(types.ModuleType):
    """This module's type: calling the module calls fusegrad's jit."""

    def __call__(self, *args, **kwargs):
        return _compile(*args, **kwargs)


sys.modules[__name__].__class__ = _CompilerModule
