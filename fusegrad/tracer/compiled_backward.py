"""The backward of a compiled program, and the autograd node a call's outputs
get. The backward program is the adjoint pass's graph, split from the
forward at the cheapest cut (``runtime/pipeline.py``); a backward for the
cotangents of some outputs only reads the same residuals; with
``create_graph=True`` the backward is itself a jit function of the inputs
and the cotangents, so it differentiates again.
"""

from __future__ import annotations

import numpy as np

from ..eager import grad_mode
from ..eager.autograd import FREED_MESSAGE, Node, gradient_edge, modified_message
from ..eager.tensor import Tensor, constant_array, recording
from ..ir.graph import Const, Graph, Var
from ..runtime import pipeline
from ..runtime.executor import Executor
from .numbers import TracedNumber


class Backward:
    """``graph``: what the program computes (its forward, before the split);
    ``wrt``: the input positions that get gradients; ``stopped``, ``customs``,
    ``hooks``: what the trace recorded of no_grad regions, custom Functions
    and tensor hooks; ``jit``: how the create_graph backward is compiled (the
    jit the program came from, passed in: this module is below jit.py)."""

    def __init__(self, graph: Graph, num_outputs: int, wrt: list, trace, jit):
        self.graph, self.num_outputs, self.wrt, self.jit = graph, num_outputs, wrt, jit
        self.stopped, self.customs, self.hooks = trace.stopped, trace.customs, trace.hooks
        # Checkpointed equations the backward may compute again, but none that
        # reads a tensor the program changes in place (a generator's offset):
        # run in the backward, it would read the new value.
        written = {
            var for tensor, var in trace.initial_vars.values() if trace.vars[id(tensor)] is not var
        }
        self.checkpointed = {e for e in trace.checkpointed if written.isdisjoint(e.inputs)}
        joint = pipeline.derive(graph, wrt, self.stopped, self.customs, self.hooks)
        parts = pipeline.split(joint, graph, num_outputs, self.checkpointed)
        self.program = pipeline.verified(pipeline.simplified(parts.backward))
        self.executor = pipeline.executable(self.program)
        self.residuals = parts.forward.outputs[num_outputs:]
        self._partial_executors: dict = {}
        self._functions: dict = {}

    def executor_for(self, seeded: tuple, all_seeded: tuple) -> Executor:
        """The backward program when only the ``seeded`` outputs have a
        cotangent: derived for those alone (the others are symbolic zeros),
        reading the same residuals."""
        if seeded == all_seeded:
            return self.executor
        executor = self._partial_executors.get(seeded)
        if executor is None:
            joint = pipeline.derive(
                self.graph, self.wrt, self.stopped, self.customs, self.hooks, seeded
            )
            backward = pipeline.split_reading(joint, self.graph, self.residuals, self.checkpointed)
            backward = pipeline.verified(pipeline.simplified(backward))
            executor = self._partial_executors[seeded] = pipeline.executable(backward)
        return executor

    def function(self, seeded: tuple):
        """The backward for cotangents of the ``seeded`` outputs, as a jit
        function of (inputs, cotangents), for create_graph."""
        function = self._functions.get(seeded)
        if function is None:
            joint = pipeline.derive(
                self.graph, self.wrt, self.stopped, self.customs, self.hooks, seeded
            )
            joint = Graph(joint.inputs, joint.eqns, joint.outputs[self.num_outputs :])

            def backward(*values):
                values = [_as_tensor(v, var) for v, var in zip(values, joint.inputs)]
                return tuple(self._replay(joint, values))

            backward.__name__ = "compiled_backward"
            function = self._functions[seeded] = self.jit(backward)
        return function

    def _replay(self, joint: Graph, values: list) -> list:
        """The joint graph run on tensors, being traced: what eager mode did
        not differentiate (``stopped``) runs under no_grad again, each
        custom Function's call is one again, its given backward its VJP, and
        each hooked value is hooked again, so the backward differentiates as
        the eager one does."""
        env = dict(zip(joint.inputs, values))

        def read(v):
            return constant_array(v.value, v.dtype) if isinstance(v, Const) else env[v]

        complete = self._customs_complete_at(joint)
        hooked: dict = {}
        for hook in self.hooks:
            hooked.setdefault(hook.var, []).append(hook.function)
        for custom in complete.get(-1, ()):
            recording.trace.custom_replay(custom, read)
        for k, eqn in enumerate(joint.eqns):
            operands = [read(v) for v in eqn.inputs]
            with grad_mode.set_grad_enabled(
                eqn not in self.stopped and grad_mode.is_grad_enabled()
            ):
                env[eqn.out] = eqn.prim(*operands, **eqn.params)
            if env[eqn.out].requires_grad:
                for function in hooked.get(eqn.out, ()):
                    env[eqn.out].register_hook(function)
            for custom in complete.get(k, ()):
                recording.trace.custom_replay(custom, read)
        return [read(v) for v in joint.outputs]

    def _customs_complete_at(self, joint: Graph) -> dict:
        """Equation index -> the custom calls whose values all exist after it
        (-1: before the first)."""
        position = {eqn.out: k for k, eqn in enumerate(joint.eqns)}
        complete: dict = {}
        for custom in self.customs:
            # its outputs, and what its backward reads (a value its forward
            # saved may be made after the outputs)
            own = {eqn.out for eqn in custom.eqns} | set(custom.cotangents)
            read_by_backward = [
                v for eqn in custom.eqns for v in eqn.inputs if isinstance(v, Var) and v not in own
            ]
            made = [position.get(v, -1) for v in custom.outputs + read_by_backward if v is not None]
            complete.setdefault(max(made, default=-1), []).append(custom)
        return complete


def _as_tensor(value, var):
    """A number input of the program (traced, or plain when run eagerly) as
    the 0-d tensor the graph's input stands for."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, TracedNumber):
        return value.operand(var.dtype)
    return constant_array(np.asarray(value, var.dtype.np), var.dtype)


class CompiledFunctionBackward(Node):
    """The backward of a compiled function's call. The gradient arriving at
    an output the call's other outputs were computed from holds only what
    came from outside the call: eagerly it would also hold what flowed
    through those others, so reading it (a hook, retain_grad, autograd.grad
    with respect to it) is an error while they carry a gradient."""

    def __init__(self, program, inputs: list, residuals: list):
        super().__init__(tuple(gradient_edge(inputs[i]) for i in program.wrt))
        self.program = program
        self.inner_dependents = program.inner_dependents
        self.num_outputs = program.num_outputs
        self.inputs = [
            (t, t._version_counter[0] if isinstance(t, Tensor) else None) for t in inputs
        ]
        self.residuals = residuals
        self.freed = False

    def release(self) -> None:
        self.inputs = self.residuals = None
        self.freed = True

    def _checked_inputs(self, read: frozenset | None) -> list:
        """The inputs, each the backward reads (``read``: those positions,
        None: all) unchanged since the call."""
        for k, (tensor, version) in enumerate(self.inputs):
            if version is None or (read is not None and k not in read):
                continue
            if tensor._version_counter[0] != version:
                raise RuntimeError(
                    modified_message(
                        tensor.shape,
                        tensor.type(),
                        tensor.grad_fn,
                        tensor._version_counter[0],
                        version,
                    )
                )
        return [t for t, _ in self.inputs]

    def apply(self, grads):
        if self.freed:
            raise RuntimeError(FREED_MESSAGE)
        program = self.program
        for g, message in zip(grads, program.stale_saved):
            if g is not None and message is not None:
                raise RuntimeError(message)
        # with create_graph, or inside a trace (which must record what the
        # backward computes), the backward computes again from every input
        from_inputs = grad_mode.is_grad_enabled() or recording.trace is not None
        cotangents = [
            g if g is not None else Tensor._make(np.zeros(shape, dtype.np))
            for g, (shape, dtype) in zip(grads, program.output_types)
        ]
        inputs = self._checked_inputs(None if from_inputs else program.read_inputs)
        seeded = tuple(g is not None for g in grads)
        if from_inputs:  # differentiable, via the jit backward
            return list(program.derived.function(seeded)(*inputs, *cotangents))
        executor = program.derived.executor_for(seeded, tuple(program.output_requires_grad))
        values = executor.run(self.residuals + [c._data for c in cotangents])
        return [
            Tensor._make(np.asarray(v, dtype=dtype.np))
            for v, (_, dtype) in zip(values, (program.input_meta[i] for i in program.wrt))
        ]
