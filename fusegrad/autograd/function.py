"""Custom differentiable operations: subclasses of ``autograd.Function``.

The context object a subclass's ``forward`` and ``backward`` receive is the
backward node itself, as in PyTorch.
"""

from __future__ import annotations

import weakref

from ..eager import autograd as engine
from ..eager import grad_mode
from ..eager.creation import zeros
from ..eager.tensor import Tensor, recording
from ..ir.primitives import unbroadcast
from . import forward_ad


class FunctionCtx(engine.Node):
    """What ``forward`` saves for ``backward``, and the node that runs ``backward``."""

    def __init__(self, function_cls, args):
        super().__init__(())
        self._function_cls = function_cls
        self._saved = None
        self._freed = False
        self._non_differentiable = set()
        self._dirty = set()
        self.materialize_grads = True
        self.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        self._input_meta = [(a.shape, a.dtype) if isinstance(a, Tensor) else None for a in args]

    def name(self) -> str:
        return self._function_cls.__name__ + "Backward"

    def __repr__(self) -> str:
        return f"<fusegrad.autograd.function.{self.name()} object at {hex(id(self))}>"

    def save_for_backward(self, *tensors) -> None:
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    "save_for_backward can only save variables, but argument "
                    f"{len(self._saved or ())} is of type {type(t).__name__}"
                )
        self._saved = [None if t is None else (t, t._version_counter[0]) for t in tensors]

    @property
    def saved_tensors(self) -> tuple:
        if self._freed:
            raise RuntimeError(engine.FREED_MESSAGE)
        return tuple(None if s is None else engine.unpack_saved(*s) for s in self._saved or ())

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors) -> None:
        self._dirty.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)

    def release(self) -> None:
        if self._saved:
            self._freed = True
            self._saved = None

    def apply(self, grads):
        if self.materialize_grads:
            grads = [
                zeros(shape, dtype=dtype) if g is None else g
                for g, (shape, dtype) in zip(grads, self._output_meta)
            ]
        result = self._function_cls.backward(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        if len(result) != len(self._input_meta):
            if len(result) > len(self._input_meta) and all(
                r is None for r in result[len(self._input_meta) :]
            ):
                result = result[: len(self._input_meta)]
            else:
                raise RuntimeError(
                    f"function {self.name()} returned an incorrect number of "
                    f"gradients (expected {len(self._input_meta)}, got "
                    f"{len(result)})"
                )
        out = []
        for i, (g, meta) in enumerate(zip(result, self._input_meta)):
            if g is None or meta is None or not self.needs_input_grad[i]:
                out.append(None)
                continue
            if not isinstance(g, Tensor):
                raise TypeError(
                    f"function {self.name()} returned a gradient of type "
                    f"{type(g).__name__} at index {i}; expected a Tensor or None"
                )
            shape, dtype = meta
            if g.shape != shape:
                try:
                    g = unbroadcast(g, shape, dtype)
                except RuntimeError:
                    raise RuntimeError(
                        f"Function {self.name()} returned an invalid gradient at "
                        f"index {i} - got {list(g.shape)} but expected shape "
                        f"compatible with {list(shape)}"
                    ) from None
            out.append(g)
        return out


# Function subclass -> the FunctionCtx subclass its nodes are
_node_classes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _node_class(function_cls) -> type:
    """``<Name>Backward``, the class of a Function's nodes (as PyTorch names
    it: tools read ``type(t.grad_fn).__name__``), made once per Function."""
    cls = _node_classes.get(function_cls)
    if cls is None:
        name = function_cls.__name__ + "Backward"
        cls = _node_classes[function_cls] = type(name, (FunctionCtx,), {"__module__": __name__})
    return cls


class Function:
    """Base class of custom differentiable operations.

    >>> import fusegrad
    >>> class Cube(fusegrad.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x ** 3
    ...     @staticmethod
    ...     def backward(ctx, grad):
    ...         (x,) = ctx.saved_tensors
    ...         return grad * 3 * x ** 2
    >>> x = fusegrad.tensor(2.0, requires_grad=True)
    >>> Cube.apply(x).backward()
    >>> x.grad
    tensor(12.)
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function."
        )

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError(
            "You must implement either the backward or vjp method for "
            "your custom autograd.Function to use it with backward mode "
            "AD."
        )

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError(
            "You must implement the jvp function for custom autograd.Function to use it with "
            "forward mode AD."
        )

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = _node_class(cls)(cls, args)
        trace = recording.trace
        # the inputs as they are before forward, which may modify them in place
        input_vars = None
        if trace is not None:
            input_vars = [trace.var_of(a) if isinstance(a, Tensor) else None for a in args]
        uses_setup_context = cls.setup_context is not Function.setup_context
        with grad_mode.no_grad():
            if uses_setup_context:
                outputs = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, outputs)
            else:
                outputs = cls.forward(ctx, *args, **kwargs)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        record = grad_mode.is_grad_enabled() and any(ctx.needs_input_grad)
        if record:  # before any dirty input is rebased onto this node
            ctx.edges = tuple(
                engine.gradient_edge(a) if isinstance(a, Tensor) and a.requires_grad else (None, 0)
                for a in args
            )
        inputs_by_id = {id(a) for a in args if isinstance(a, Tensor)}
        wrapped = []
        for nr, out in enumerate(outs):
            if not isinstance(out, Tensor):
                wrapped.append(out)
                continue
            differentiable = id(out) not in ctx._non_differentiable
            if id(out) in ctx._dirty:
                out._check_inplace()
                out._version_counter[0] += 1
            elif id(out) in inputs_by_id:  # an input returned as it is: a new alias
                out = out.detach()
            if record and differentiable and out.dtype.is_floating_point:
                out.grad_fn = ctx
                out._output_nr = nr
                out._requires_grad = True
            wrapped.append(out)
        if record:
            ctx.num_outputs = len(outs)
            ctx._output_meta = [
                (o.shape, o.dtype) if isinstance(o, Tensor) else ((), None) for o in wrapped
            ]
            if trace is not None:  # compiled: its backward is the VJP
                trace.custom_vjp(ctx, input_vars, wrapped)
        forward_ad.give_custom_tangents(cls.jvp, ctx, args, wrapped)
        return wrapped[0] if single else tuple(wrapped)

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError
