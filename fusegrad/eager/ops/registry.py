"""The registry of ops: ``public`` makes an op ``fusegrad.<name>`` and
``Tensor.<name>``, and declares its variants: the in-place method
``Tensor.<name>_`` and the function's ``out=``. The tables it fills are read
by ``fusegrad/__init__.py`` (the functions), ``methods.py`` (the methods)
and this package's ``__init__`` (the ops, as defined). An op registered under
a name autocast has a policy for runs under it (autocast_policy.py), wherever
it is called from; its in-place and ``out=`` variants, which PyTorch's
policy does not name, run with autocast off."""

from __future__ import annotations

import functools
import inspect
import warnings

import numpy as np

from ...ir import primitives as P
from .. import autocast_state, autograd
from ..autocast_policy import CPU_POLICY, autocasts
from ..tensor import Tensor, recording
from .composite import _rebuilt

FUNCTIONS: dict = {}  # name -> op: what ``fusegrad.<name>`` is
METHODS: dict = {}  # name -> op: what ``Tensor.<name>`` is, the in-place ``<name>_`` too
DEFINED: dict = {}  # name -> op under its autocast policy, without the wrappers of the two above


def public(op=None, *, name=None, function=True, method=True, inplace=False, out=False):
    """Makes an op ``fusegrad.<name>`` and ``Tensor.<name>`` (or one of the
    two), under its own name unless ``name`` is given: the one place either
    list is written. ``inplace`` adds the method ``Tensor.<name>_``, the op
    written into the tensor; ``out`` lets the function (not the method, as
    in PyTorch) take ``out=``."""

    def register(op):
        key = name or op.__name__
        if key in CPU_POLICY:
            op = autocasts(key)(op)
        exposed = _with_numpy_names(op)
        if function:
            _add(FUNCTIONS, key, _with_out(exposed) if out else exposed)
        if method:
            _add(METHODS, key, exposed)
        if inplace:
            _add(METHODS, key + "_", _inplace(op))
        DEFINED[key] = op
        return op

    return register if op is None else register(op)


def _add(table, key, entry):
    if key in table:  # a second definition would silently win
        raise RuntimeError(f"op {key!r} is registered twice")
    table[key] = entry


_NUMPY_NAMES = {"axis": "dim", "keepdims": "keepdim"}


def _with_numpy_names(op):
    """op, also taking numpy's names for its ``dim`` and ``keepdim``
    (``x.sum(axis=0, keepdims=True)``), as PyTorch's functions do."""
    parameters = inspect.signature(op).parameters
    if "dim" not in parameters and "keepdim" not in parameters:
        return op

    @functools.wraps(op)
    def op_taking_numpy_names(*args, **kwargs):
        if "axis" in kwargs or "keepdims" in kwargs:
            for numpy_name, name in _NUMPY_NAMES.items():
                if numpy_name in kwargs:
                    if name in kwargs:
                        raise TypeError(
                            f"{op.__name__}() got multiple values for argument '{name}'"
                        )
                    kwargs[name] = kwargs.pop(numpy_name)
        return op(*args, **kwargs)

    return op_taking_numpy_names


def _with_out(op):
    """op, also taking ``out=``: a tensor (a tuple of them for ops returning
    several) the result is written into and that is returned, as PyTorch's
    functions do. Not differentiable: refused when the result needs a gradient."""

    @functools.wraps(op)
    def op_with_out(*args, out=None, **kwargs):
        if out is None:
            return op(*args, **kwargs)
        result = _without_autocast(op, args, kwargs)
        if isinstance(result, Tensor):
            return _write_out(op.__name__, result, out)
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(
                f"{op.__name__}(): argument 'out' must be a tuple of {len(result)} Tensors"
            )
        return _rebuilt(result, [_write_out(op.__name__, r, o) for r, o in zip(result, out)])

    return op_with_out


def _write_out(name, result, out):
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if result.requires_grad:
        raise RuntimeError(
            f"{name}(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad."
        )
    out._check_inplace()
    if out.shape != result.shape:
        if recording.trace is not None:
            recording.trace.unsupported("resizing an out= tensor")
        if out.numel():
            warnings.warn(
                f"An output with one or more elements was resized since it had shape "
                f"{list(out.shape)}, which does not match the required output shape "
                f"{list(result.shape)}. This behavior is deprecated, and in a future "
                "PyTorch release outputs will not be resized unless they have zero "
                "elements. You can explicitly reuse an out tensor t by resizing it, "
                "inplace, to zero elements with t.resize_(0).",
                UserWarning,
                stacklevel=3,
            )
        out._data = np.empty(result.shape, out._data.dtype)
    return out._commit_inplace(result)


def _without_autocast(op, args, kwargs):
    """op's result with autocast off, as PyTorch runs in-place and out= variants
    (the suspension only when autocast is on: this is every in-place call's path)."""
    if not autocast_state.state.enabled:
        return op(*args, **kwargs)
    with autocast_state.suspended():
        return op(*args, **kwargs)


def _recorded_copy(tensor):
    """A copy a trace records too, so that its value is the trace's."""
    return P.convert(tensor, dtype=tensor._dtype)


def _inplace(op):
    """``Tensor.<name>_``: op's result written into the tensor."""

    def method(self, *args, **kwargs):
        self._check_inplace()
        mark = autograd.sequence_mark()
        result = _without_autocast(op, (self, *args), kwargs)
        node = getattr(result, "grad_fn", None)
        if node is not None and node.sequence_nr > mark:
            autograd.keep_originals(node, mark, self, _recorded_copy)
        return self._commit_inplace(result)

    method.__name__ = op.__name__ + "_"
    return method
