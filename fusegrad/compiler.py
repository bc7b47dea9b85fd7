"""``torch.compile`` and ``torch.compiler``: PyTorch's front door to its
compiler, opening onto ``fusegrad.jit``. A function compiles to a jit
function; a module to an ``OptimizedModule`` whose calls run the original
module's ``__call__`` compiled, as PyTorch's do.

The options that tune PyTorch's own compiler (``mode``, ``options``,
``fullgraph``) are checked as PyTorch checks them and otherwise have no
bearing here: fusegrad's jit either compiles a call whole or runs it eagerly,
with the same results either way.
"""

from __future__ import annotations

import functools

from .eager.tensor import recording
from .nn.modules.module import Module
from .tracer.jit import jit, reset

__all__ = ["compile", "disable", "is_compiling", "is_dynamo_compiling", "reset"]

# torch._inductor.list_mode_options' modes, in its order (its error lists them)
_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")

# The backends PyTorch registers: "eager" and its kin run the captured graph op
# by op, the others compile it.
_EAGER_BACKENDS = ("eager", "aot_eager", "aot_eager_decomp_partition")
_COMPILING_BACKENDS = ("inductor", "cudagraphs", "onnxrt", "openxla", "tvm")


class OptimizedModule(Module):
    """A compiled module: ``_orig_mod`` is the original, whose attributes it
    reads and writes through (parameters, buffers, submodules, training mode);
    calling it runs the original's ``__call__`` compiled. As in PyTorch, the
    original is its submodule, so its ``state_dict`` keys start ``_orig_mod.``."""

    # set on the wrapper itself; every other attribute is the original's
    _OWN_ATTRIBUTES = frozenset({"_orig_mod", "_compiled_call"})

    def __init__(self, module: Module, compiled_call):
        super().__init__()
        self._orig_mod = module
        self._compiled_call = compiled_call

    @property
    def training(self) -> bool:
        return self._orig_mod.training

    @training.setter
    def training(self, mode: bool) -> None:
        # Module.__init__ sets the flag before the original is registered
        if "_orig_mod" in self.__dict__.get("_modules", ()):
            self._orig_mod.training = mode

    def forward(self, *args, **kwargs):
        return self._compiled_call(*args, **kwargs)

    def __getattr__(self, name: str):
        if name == "_orig_mod" or "_orig_mod" not in self.__dict__.get("_modules", ()):
            return super().__getattr__(name)
        return getattr(self._orig_mod, name)

    def __setattr__(self, name: str, value) -> None:
        if name in self._OWN_ATTRIBUTES or hasattr(type(self), name):
            super().__setattr__(name, value)
        else:
            setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        if name in self._OWN_ATTRIBUTES or hasattr(type(self), name):
            super().__delattr__(name)
        else:
            delattr(self._orig_mod, name)

    def __dir__(self):
        return sorted(set(dir(self._orig_mod)) | set(super().__dir__()))


def _check_settings(backend, mode, options) -> bool:
    """Checks ``compile``'s settings as PyTorch does; whether the backend runs
    its graphs op by op."""
    if mode is not None and options is not None:
        raise RuntimeError(
            "Either mode or options can be specified, but both can't be specified at the same time."
        )
    if mode is not None and mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(_MODES)}")
    if callable(backend):
        # a custom backend is handed a torch.fx graph, which fusegrad does not make
        raise NotImplementedError(
            "fusegrad.compile compiles with fusegrad.jit: a custom backend (a callable "
            "taking a torch.fx GraphModule) cannot be used; pass a backend's name"
        )
    if backend not in _EAGER_BACKENDS + _COMPILING_BACKENDS:
        raise RuntimeError(
            f"Invalid backend: {backend!r}, see `torch._dynamo.list_backends()` for available "
            "backends."
        )
    return backend in _EAGER_BACKENDS


def compile(
    model=None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend="inductor",
    mode: str | None = None,
    options: dict | None = None,
    disable: bool = False,
):
    """``torch.compile``: ``model`` (a function or an ``nn.Module``) compiled
    with ``fusegrad.jit``; without ``model``, a decorator. ``dynamic`` is the
    jit's (None: a dimension becomes dynamic when it changes). ``disable=True``
    and functions marked with ``compiler.disable`` come back unchanged.

    >>> import fusegrad
    >>> @fusegrad.compile
    ... def f(x):
    ...     return (x * x).sum()
    >>> f(fusegrad.tensor([1.0, 2.0]))
    tensor(5.)
    """
    if model is None:

        def compile_decorated(model):
            if model is None:
                raise RuntimeError("Model can't be None")
            return compile(
                model,
                fullgraph=fullgraph,
                dynamic=dynamic,
                backend=backend,
                mode=mode,
                options=options,
                disable=disable,
            )

        return compile_decorated
    runs_op_by_op = _check_settings(backend, mode, options)
    if disable or getattr(model, "_compile_disabled", False):
        return model
    if isinstance(model, Module):
        return OptimizedModule(model, jit(model.__call__, dynamic=dynamic, eager=runs_op_by_op))
    if not callable(model):
        raise AssertionError(f"A callable function is expected, but {type(model)} is provided.")
    return jit(model, dynamic=dynamic, eager=runs_op_by_op)


def disable(fn=None, recursive: bool = True, *, reason: str | None = None):
    """``torch.compiler.disable``: ``compile`` leaves ``fn`` as it is. Called
    inside a compiled function it is traced with its caller, which gives what
    PyTorch's graph break around it gives: the eager results."""
    if fn is None:
        return functools.partial(disable, recursive=recursive, reason=reason)

    @functools.wraps(fn)
    def run_uncompiled(*args, **kwargs):
        return fn(*args, **kwargs)

    run_uncompiled._compile_disabled = True
    return run_uncompiled


def is_compiling() -> bool:
    """Whether the caller runs inside a trace of ``fusegrad.jit`` (or ``compile``)."""
    return recording.trace is not None


def is_dynamo_compiling() -> bool:
    """PyTorch's name for ``is_compiling`` while its frontend (dynamo) traces."""
    return is_compiling()
