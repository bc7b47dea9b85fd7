"""Backward code of the user's in a trace: a custom autograd.Function's
backward and a hook registered on a value the function made are traced on
stand-in cotangents, apart from the function's equations, and kept as the
VJP (``CustomVJP``) or cotangent hook (``CotangentHook``) the adjoint pass
applies; a graph run again on traced tensors replays its custom calls.
"""

from __future__ import annotations

import numpy as np

from ..eager import grad_mode
from ..eager.autograd import Node, gradient_edge
from ..eager.tensor import Tensor
from ..ir.autodiff import CotangentHook, CustomVJP
from ..ir.graph import Var
from .tracing_error import TracingError, user_line


class UserBackwards:
    """The part of a ``Trace`` (trace.py) that traces the user's backward
    code, recording through the trace's vars."""

    def __init__(self):
        super().__init__()
        self.customs: list = []  # CustomVJP: calls of custom autograd.Functions
        self.hooks: list = []  # CotangentHook: register_hook on values the function made
        self.hooks_kept: list = []  # where it registered hooks on tensors the caller holds

    def custom_vjp(self, node, input_vars, outputs) -> None:
        """A custom autograd.Function's call: its forward was recorded (passing
        no gradient); its backward is traced now, on cotangents standing for
        the outputs', and becomes the VJP the adjoint pass uses for them."""
        placeholders = [  # at this call's sizes; the symbolic ones are noted below
            None if dtype is None else Tensor._make(np.zeros(out._data.shape, dtype.np), dtype)
            for out, (_, dtype) in zip(outputs, node._output_meta)
        ]
        cotangents = [None if p is None else self._new_var(p) for p in placeholders]
        for out, cotangent in zip(outputs, cotangents):
            shape = self.symbolic_shape(out) if isinstance(out, Tensor) else None
            if cotangent is not None and shape is not None:
                self.sym_shapes[cotangent] = shape
        grads, eqns = self._traced_apart(
            lambda: node.apply(placeholders), f"the backward of {node.name()} at {user_line()}"
        )
        self.customs.append(
            CustomVJP(
                inputs=input_vars,
                outputs=[
                    self.var_of(o) if isinstance(o, Tensor) and o.grad_fn is node else None
                    for o in outputs
                ],
                cotangents=cotangents,
                eqns=eqns,
                grads=[None if g is None else self.var_of(g) for g in grads],
            )
        )

    def _traced_apart(self, backward, what: str) -> tuple:
        """``backward()`` run on stand-in cotangents, its equations kept apart
        from the function's: (its result, its equations). What it decides on
        the stand-ins' values is an error: later calls' gradients differ."""
        recorded, guards = self.eqns, len(self.guards)
        self.eqns = []
        try:
            result = backward()
        finally:
            eqns, self.eqns = self.eqns, recorded
        if len(self.guards) != guards:
            raise TracingError(
                f"{what} decides something on the values of its gradients, which a "
                "compiled program cannot know in advance"
            )
        return result, eqns

    def cotangent_hook(self, tensor, hook, handle) -> None:
        """``tensor.register_hook(hook)`` (``handle`` removes it): on a value
        the function made, the hook is traced now, on a cotangent standing
        for the value's, and changes that cotangent in every backward derived
        from this trace. On a tensor the caller holds, the hook outlives the
        call, which a program could not register again: the call runs eagerly
        (``hooks_kept``), and a trace that is undone takes the hook back."""
        var = self.vars.get(id(tensor))
        if self._existed(tensor) or var is None or var not in {e.out for e in self.eqns}:
            self.hooks_kept.append(f"register_hook at {user_line()}")
            self.undo.append(handle.remove)
            return
        placeholder = Tensor._make(np.zeros(tensor._data.shape, tensor._dtype.np), tensor._dtype)
        cotangent = self._new_var(placeholder)
        shape = self.sym_shapes.get(var)
        if shape is not None:
            self.sym_shapes[cotangent] = shape
        result, eqns = self._traced_apart(
            lambda: hook(placeholder), f"the hook registered at {user_line()}"
        )
        if result is None:
            raise TracingError(
                f"the hook registered at {user_line()} returns nothing: a hook that only "
                "reads the gradient (to print or keep it) would see the trace's stand-in; "
                "return the gradient, or run the function eagerly"
            )
        if not isinstance(result, Tensor) or result._data.shape != placeholder._data.shape:
            raise RuntimeError(
                f"hook returned a value of shape {getattr(result, 'shape', type(result))} "
                f"for a gradient of shape {tuple(placeholder.shape)}"
            )
        self.hooks.append(CotangentHook(var, cotangent, eqns, self.var_of(result), hook))

    def custom_replay(self, custom: CustomVJP, read) -> None:
        """A custom call of a graph being run again on traced tensors (``read``
        gives a var's tensor): the same call for this trace, its backward
        run again on new cotangent stand-ins."""
        placeholders = {}
        for var in custom.cotangents:
            if var is not None:
                placeholders[var] = Tensor._make(np.zeros(var.shape, var.dtype.np), var.dtype)
                self._new_var(placeholders[var])  # stand-ins, no inputs of the program
        values: dict = {}

        def value(v):
            if isinstance(v, Var) and v in placeholders:
                return placeholders[v]
            return values[v] if isinstance(v, Var) and v in values else read(v)

        recorded, self.eqns = self.eqns, []
        try:
            for eqn in custom.eqns:
                values[eqn.out] = eqn.prim(*[value(v) for v in eqn.inputs], **eqn.params)
        finally:
            eqns, self.eqns = self.eqns, recorded
        replayed = CustomVJP(
            inputs=[None if v is None else self.var_of(read(v)) for v in custom.inputs],
            outputs=[None if v is None else self.var_of(read(v)) for v in custom.outputs],
            cotangents=[
                None if v is None else self.var_of(placeholders[v]) for v in custom.cotangents
            ],
            eqns=eqns,
            grads=[None if g is None else self.var_of(value(g)) for g in custom.grads],
        )
        self.customs.append(replayed)
        inputs = [None if v is None else read(v) for v in custom.inputs]
        if grad_mode.is_grad_enabled() and any(t is not None and t.requires_grad for t in inputs):
            node = ReplayedFunctionBackward(custom, read, inputs)
            for nr, v in enumerate(custom.outputs):
                if v is not None:
                    output = read(v)
                    output.grad_fn, output._output_nr, output._requires_grad = node, nr, True


class ReplayedFunctionBackward(Node):
    """A custom Function's call in a graph run again on traced tensors: what
    follows it records a gradient as it did after the call itself, and its
    backward is the recorded backward, run on the tensors of this run."""

    __slots__ = ("custom", "read", "num_outputs")

    def __init__(self, custom: CustomVJP, read, inputs: list):
        super().__init__(
            tuple(
                gradient_edge(t) if t is not None and t.requires_grad else (None, 0) for t in inputs
            )
        )
        self.custom, self.read = custom, read
        self.num_outputs = len(custom.outputs)

    def apply(self, grads):
        values = {}
        for var, g in zip(self.custom.cotangents, grads):
            if var is not None:
                zeros = Tensor._make(np.zeros(var.shape, var.dtype.np), var.dtype)
                values[var] = zeros if g is None else g

        def value(v):
            return values[v] if isinstance(v, Var) and v in values else self.read(v)

        for eqn in self.custom.eqns:
            values[eqn.out] = eqn.prim(*[value(v) for v in eqn.inputs], **eqn.params)
        return [None if g is None else value(g) for g in self.custom.grads]
