"""``trace`` and ``trace_module``. TorchScript's trace runs the example inputs
and keeps the operations they ran, so later inputs that would take another
path through Python's control flow get the recorded one. fusegrad's jit
traces each path it meets, so what ``trace`` returns computes what the
Python computes for any input; the examples are run once, as PyTorch runs
them (compiling that call's program)."""

from __future__ import annotations

import warnings

from ..nn.modules.module import Module
from . import _deprecation
from ._script import ScriptFunction, ScriptModule, scripted_copy


def is_tracing() -> bool:
    """False: ``trace`` never runs TorchScript's tracer, so model code takes its Python path."""
    return False


class TracerWarning(Warning):
    """PyTorch's warning of a trace that may not generalize (a Python value
    read from a tensor, say). fusegrad's trace guards such reads instead of
    warning, so it never issues one; scripts filter it by name."""


def trace(
    func,
    example_inputs=None,
    optimize=None,
    check_trace=True,
    check_inputs=None,
    check_tolerance=1e-5,
    strict=True,
    _force_outplace=False,
    _module_class=None,
    _compilation_unit=None,
    example_kwarg_inputs=None,
    _store_inputs=True,
):
    """``func`` compiled (a function: a ``ScriptFunction``; a module or its
    ``forward``: a scripted copy of the module), after a call on
    ``example_inputs`` (a tuple of arguments, or one argument) or
    ``example_kwarg_inputs`` (a dict of keyword arguments).

    >>> import fusegrad
    >>> double = fusegrad.jit.trace(lambda x: x * 2, fusegrad.ones(2))
    >>> double(fusegrad.tensor([1.0, 2.0, 3.0]))
    tensor([2., 4., 6.])
    """
    _deprecation.warn("trace")
    if isinstance(func, ScriptModule):
        warnings.warn(
            "The input to trace is already a ScriptModule, tracing it is a no-op. "
            "Returning the object as is.",
            stacklevel=2,
        )
        return func
    by_keyword = example_kwarg_inputs is not None
    example = example_kwarg_inputs if by_keyword else example_inputs
    if example is None:
        raise TypeError(
            "trace() needs example_inputs (a tuple of arguments, or one argument) or "
            "example_kwarg_inputs (a dict)"
        )
    bound_to = getattr(func, "__self__", None)
    if isinstance(bound_to, Module) and func.__name__ == "forward":
        func = bound_to
    if isinstance(func, Module):
        return trace_module(func, {"forward": example}, example_inputs_is_kwarg=by_keyword)
    compiled = ScriptFunction(func)
    _run(compiled, example, by_keyword)
    return compiled


def trace_module(
    mod,
    inputs,
    optimize=None,
    check_trace=True,
    check_inputs=None,
    check_tolerance=1e-5,
    strict=True,
    _force_outplace=False,
    _module_class=None,
    _compilation_unit=None,
    example_inputs_is_kwarg=False,
    _store_inputs=True,
):
    """A scripted copy of ``mod``, after a call of each method ``inputs``
    names on its example inputs (``{"forward": (x,)}``)."""
    _deprecation.warn("trace_method")
    if not isinstance(mod, Module):
        raise AttributeError("expected torch.nn.Module as the first argument")
    if not isinstance(inputs, dict):
        raise AttributeError("expected a dictionary of (method_name, input) pairs")
    traced = scripted_copy(mod)
    for method, example in inputs.items():
        _run(getattr(traced, method), example, example_inputs_is_kwarg)
    return traced


def _run(fn, example, by_keyword: bool) -> None:
    if by_keyword:
        fn(**example)
    elif isinstance(example, tuple):
        fn(*example)
    else:
        fn(example)
