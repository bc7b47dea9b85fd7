"""A compiled program: what one trace of a jit function becomes.

The forward program computes, from the arguments and the captured tensors,
the function's outputs, the guard values, the new values of tensors the
function changed in place, the new ``.grad`` of leaves, and the residuals
its backward needs. ``run`` checks the guards before any side effect is
applied, so a call that takes another path than the trace changes nothing
and is retraced. Outputs that need a gradient get a
``CompiledFunctionBackward`` node running the backward program (the adjoint
pass's graph); with ``create_graph=True`` the backward is itself a jit
function of the inputs and the cotangents, so it differentiates again.
"""

from __future__ import annotations

import numpy as np

from ..eager import grad_mode
from ..eager.autograd import FREED_MESSAGE, Node, gradient_edge, modified_message
from ..eager.tensor import Tensor, constant_array, recording, storage_pattern
from ..ir import primitives as P
from ..ir.autodiff import (
    active_values,
    adjoint,
    backward_reading,
    differentiable_from,
    split_at_min_cut,
)
from ..ir.fusion import is_elementwise
from ..ir.graph import Const, Eqn, Graph, Var, format_graph, type_string, verify
from ..ir.simplify import dce, simplify, without_stop_gradients
from ..runtime.executor import Executor, describe_layouts
from ..runtime.launch import Launcher
from .numbers import TracedNumber
from .pyrandom import Divergence, Draws, same_result
from .symbolic import evaluated


class Program:
    """``jit``: how the backward is compiled for create_graph (the jit the
    program came from, passed in: this module is below jit.py)."""

    state = None  # python_state.State: what a call checks and redoes of Python state

    def __init__(self, trace, args: list, output_tensors: list, jit):
        self.jit = jit
        self.fixed_leaves: list = []  # (position, number): arguments keyed by value since
        self.num_args = len(trace.inputs)
        self.captured = trace.captured
        self.guards = trace.guards
        self.python_guards = trace.python_guards
        self.grad_reads = trace.leaves(trace.grad_reads)  # (leaf ref, grad was None)
        self.lookup = trace.lookup  # where tensors the function did not receive are now
        self.customs = trace.customs
        self.hooks = trace.hooks
        self.draw_specs, self.draw_guards = trace.draw_specs, trace.draw_guards
        self.traced_draws = trace.draws
        outputs = [trace.var_of(t) for t in output_tensors]
        extras = self._side_effects(trace)
        graph = trace.graph(outputs)
        enabled = grad_mode.is_grad_enabled()
        self.input_requires_grad = [
            enabled and isinstance(t, Tensor) and t.requires_grad
            for t in list(args) + [c.tensor for c in self.captured]
        ]
        # numbers among the inputs (arguments, and what read_number read)
        self.has_numbers = any(not isinstance(a, Tensor) for a in args) or any(
            c.read is not None or c.draw is not None for c in self.captured
        )
        self.input_meta = [(v.shape, v.dtype) for v in graph.inputs]
        self._captured_checks = list(
            zip(
                self.captured,
                self.input_meta[self.num_args :],
                self.input_requires_grad[self.num_args :],
            )
        )
        self.num_outputs = len(outputs)
        self.num_extras = len(extras)
        self.wrt = [i for i, r in enumerate(self.input_requires_grad) if r]
        self.output_requires_grad = [False] * len(outputs)
        if self.wrt:
            active = active_values(graph, self.wrt, trace.stopped, trace.customs)
            self.output_requires_grad = [isinstance(v, Var) and v in active for v in outputs]
        self.makes_node = any(self.output_requires_grad)
        self.inner_dependents = _inner_dependents(
            graph, outputs, self.output_requires_grad, trace.stopped, trace.customs
        )
        # outputs the function called retain_grad() on (what it stored among them)
        self.retained = [
            k
            for k, (t, requires) in enumerate(zip(output_tensors, self.output_requires_grad))
            if requires and id(t) in trace.retained
        ]
        # backward() inside the function without retain_graph freed the
        # outputs' graph: as in eager mode, a second backward is an error, so
        # there is nothing to keep for one.
        self.graph_freed = any(_graph_freed(t.grad_fn) for t in output_tensors)
        self.backward = None
        residuals = []
        if self.makes_node and not self.graph_freed:
            residuals = self._derive_backward(graph, trace.stopped)
        inputs = list(args) + [
            c.tensor if c.read is None and c.draw is None else None for c in self.captured
        ]
        # which inputs share memory (a module's weights in one buffer): a call
        # of a program that writes in place must share it as the trace did
        self.sharing = storage_pattern([t for t in inputs if isinstance(t, Tensor)])
        self.view_outputs, bases = _views(
            output_tensors, inputs, self.output_requires_grad, lambda t: _traced_var(trace, t)
        )
        # the bases that outputs are views of, computed beside the side effects
        self.base_dtypes = [b._dtype for b in bases]
        extras = extras + [_traced_var(trace, b) for b in bases]
        self.num_extras = len(extras)
        forward = Graph(graph.inputs, graph.eqns, outputs + extras + residuals)
        if trace.binding is not None:  # the steps' sizes are symbols: this program's values
            self.view_outputs = [
                (
                    k,
                    i,
                    tuple((prim, evaluated(params, trace.binding), o) for prim, params, o in steps),
                )
                for k, i, steps in self.view_outputs
            ]
        first_base = len(outputs) + len(extras) - len(bases)  # among the forward's outputs
        behind = first_base - len(outputs)  # how far a base's source position moves there
        self.forward = _outputs_of_their_own(
            simplify(without_stop_gradients(forward)),
            {
                **dict(enumerate(t._data for t in output_tensors)),
                **{first_base + j: b._data for j, b in enumerate(bases)},
            },
            [t._data if isinstance(t, Tensor) else None for t in inputs],
            {
                k: i if i < len(inputs) + len(outputs) else i + behind
                for k, i, _ in self.view_outputs
            },
        )
        verify(self.forward)
        inputs_kept = set(self.forward.inputs)
        self.saved = [
            v
            for v in self.forward.outputs[len(outputs) + len(extras) :]
            if isinstance(v, Var) and v not in inputs_kept
        ]  # what the backward reads beyond the inputs, kept alive by the node
        self.forward_executor = Executor(self.forward)
        self.communicates = any(eqn.prim.collective for eqn in self.forward.eqns)
        # (the forward's outputs: an input in place of an output taken as its view)
        self.output_types = [(v.shape, v.dtype) for v in outputs]
        self.output_dtypes = [dtype for _, dtype in self.output_types]

    def _side_effects(self, trace) -> list:
        """The values the forward computes beside the outputs: the guards'
        values, the new values of tensors changed in place, the new ``.grad``
        of leaves."""
        mutations = trace.mutations()
        self.mutated = [ref for ref, _ in mutations]
        self.grad_targets = [ref for ref, _ in trace.leaves(trace.grad_writes)]
        grad_values = trace.written_grads()
        self.grad_none = [v is None for v in grad_values]
        return (
            [g.var for g in self.guards]
            + [v for _, v in mutations]
            + [v for v in grad_values if v is not None]
        )

    def _derive_backward(self, graph: Graph, stopped) -> list:
        """The backward program (the adjoint, split from the forward at the
        cheapest cut); returns the residuals the forward must save for it."""
        self.graph, self.stopped = graph, stopped
        joint = adjoint(graph, self.wrt, stopped, customs=self.customs, hooks=self.hooks)
        parts = split_at_min_cut(
            joint,
            len(graph.inputs),
            self.num_outputs,
            len(graph.eqns),
            recomputable=is_elementwise,
        )
        self.backward = simplify(without_stop_gradients(parts.backward))
        verify(self.backward)
        self.backward_executor = Executor(self.backward)
        self.residual_vars = parts.forward.outputs[self.num_outputs :]
        self._partial_backwards: dict = {}
        self._backward_functions: dict = {}
        return self.residual_vars

    def backward_executor_for(self, seeded: tuple) -> Executor:
        """The backward program when only the ``seeded`` outputs have a
        cotangent: derived for those alone (the others are symbolic zeros),
        reading the same residuals."""
        if seeded == tuple(self.output_requires_grad):
            return self.backward_executor
        executor = self._partial_backwards.get(seeded)
        if executor is None:
            graph = self.graph
            joint = adjoint(graph, self.wrt, self.stopped, seeded, self.customs, self.hooks)
            backward = backward_reading(
                joint, len(graph.inputs), len(graph.eqns), self.residual_vars, is_elementwise
            )
            backward = simplify(without_stop_gradients(backward))
            verify(backward)
            executor = self._partial_backwards[seeded] = Executor(backward)
        return executor

    # ------------------------------------------------------------------ running

    def guard_reasons(self) -> list:
        """What the traced path depended on, for messages."""
        return [f"{g.how} at {g.where}" for g in self.guards] + [
            description for _, _, description in self.python_guards
        ]

    def _drawn(self, draws) -> list | None:
        """This call's draws, in the traced order; None when they went another
        way than traced (a guard: the program does not apply)."""
        try:
            drawn = [draws.get(k, spec) for k, spec in enumerate(self.draw_specs)]
        except Divergence:
            self.failure = "Python's random draws took another path"
            return None
        for k, observed in self.draw_guards:
            if not same_result(drawn[k], observed):
                self.failure = f"a random draw gave {drawn[k]!r}, traced {observed!r}"
                return None
        return drawn

    def captured_inputs(self, args, located, drawn=()) -> list:
        """The captured tensors and numbers as they are now, or None if one no
        longer fits the trace."""
        found = []
        enabled = grad_mode.is_grad_enabled()
        for c, (shape, dtype), requires in self._captured_checks:
            t = c.current(args, located, drawn)
            if t is None:
                return None
            if c.read is None and c.draw is None:
                if not isinstance(t, Tensor) or t._data.shape != shape or t._dtype is not dtype:
                    return None
                if enabled and t._requires_grad != requires:
                    return None
            found.append(t)
        for ref, was_none in self.grad_reads:
            if (ref.resolve(args, located)._grad is None) != was_none:
                return None
        return found

    def python_guards_hold(self) -> bool:
        return all(read() == value for read, value, _ in self.python_guards)

    def run(self, args: list, draws=None, call=((), {})):
        """The outputs as tensors, or None when a guard fails (nothing changed
        then). ``draws``: this call's draws from Python's random module and
        numpy's generator, shared by the programs it tries (pyrandom.py);
        ``call``: the call's (args, kwargs), where tensors held by objects
        among them are found."""
        drawn = ()
        if self.draw_specs:
            draws = draws if draws is not None else Draws()
            drawn = self._drawn(draws)
            outputs = None if drawn is None else self._run(args, drawn, call)
            if outputs is None:
                draws.reset()  # what this program drew goes back for the next
            return outputs
        return self._run(args, drawn, call)

    def direct_run(self, tensors: list):
        """For a program that nothing but its arguments decides (no guards,
        captured tensors, numbers, side effects or backward): a function
        taking a later call's arguments to its outputs when they are tensors
        like ``tensors`` (dtype, requires_grad flag, shape, strides), else
        to None (they take the checked path). None for other programs, and
        for those that own the cores (their threads are set per call, and a
        microsecond is nothing beside their routines)."""
        if (
            self.draw_specs
            or self.fixed_leaves
            or self.python_guards
            or self.lookup is not None
            or self.captured
            or self.grad_reads
            or self.grad_targets
            or self.num_extras
            or self.makes_node
            or self.has_numbers
            or self.communicates
            or self.view_outputs
            or self.forward_executor.owns_cores
        ):
            return None
        plan = self.forward_executor.plan_for([t._data for t in tensors])
        if plan is None:
            return None
        arguments = [(t._dtype, t._requires_grad) for t in tensors]
        return plan.tensor_function(arguments, self.output_dtypes, Tensor)

    def _run(self, args: list, drawn, call):
        if self.fixed_leaves:
            args = list(args)
            for position, number in self.fixed_leaves:
                args.insert(position, number)
        for read, value, description in self.python_guards:
            now = read()
            if now != value:
                self.failure = f"{description}: {value!r} -> {now!r}"
                return None
        located = ()
        if self.lookup is not None:
            located = self.lookup(*call)
            if located is None or not all(isinstance(t, Tensor) for t in located if t is not None):
                self.failure = "a tensor the function reads is no longer where it was found"
                return None
        captured = (
            self.captured_inputs(args, located, drawn) if self.captured or self.grad_reads else []
        )
        if captured is None:
            self.failure = "a tensor the function reads changed shape, dtype or requires_grad"
            return None
        if (
            self.mutated
            and captured
            and storage_pattern([t for t in (*args, *captured) if isinstance(t, Tensor)])
            != self.sharing
        ):
            # a tensor it reads is now (a view of) one it writes: the trace read them apart
            self.failure = "the tensors it reads share memory otherwise than traced"
            return None
        arrays = self._arrays(args + captured)
        values = self.forward_executor.run(arrays)
        n = self.num_outputs
        extras = values[n : n + self.num_extras]
        for guard, value in zip(self.guards, extras):
            if not _same_value(value, guard.observed):
                self.failure = (
                    f"{guard.how} at {guard.where}: {_shown(guard.observed)} -> {_shown(value)}"
                )
                if self.communicates:
                    raise RuntimeError(_DIVERGED.format(self.failure))
                return None
        # (a .grad set to None computes nothing: no extra, a write all the same)
        if self.mutated or self.grad_targets:
            self._write_back(args, located, extras[len(self.guards) :], arrays)
        outputs = [Tensor._make(v, dtype) for v, dtype in zip(values, self.output_dtypes)]
        if self.view_outputs:
            # a view's source: an input, another output or a base the outputs share
            bases = values[n + self.num_extras - len(self.base_dtypes) : n + self.num_extras]
            sources = args + captured + outputs
            sources += [Tensor._make(b, dtype) for b, dtype in zip(bases, self.base_dtypes)]
            for k, i, steps in self.view_outputs:
                outputs[k] = sources[len(args) + len(captured) + k] = _view(sources[i], steps)
        if self.makes_node:
            node = CompiledFunctionBackward(self, args + captured, values[n + self.num_extras :])
            if self.graph_freed:
                node.release()
            for nr, (out, requires) in enumerate(zip(outputs, self.output_requires_grad)):
                if requires:
                    out.grad_fn = node
                    out._output_nr = nr
                    out._requires_grad = True
            for k in self.retained:
                outputs[k].retain_grad()
        return outputs

    def _arrays(self, inputs: list) -> list:
        """The inputs' arrays: a tensor's own, a number as a 0-d array."""
        if not self.has_numbers:
            return [t._data for t in inputs]
        return [
            x._data if isinstance(x, Tensor) else np.asarray(x, dtype.np)
            for x, (_, dtype) in zip(inputs, self.input_meta)
        ]

    def _write_back(self, args: list, located, updates: list, given: list) -> None:
        """Applies the in-place changes and the new ``.grad`` of leaves
        (``given``: the arrays the program ran on)."""
        targets = [ref.resolve(args, located) for ref in self.mutated]
        # A new value may still be the array of a tensor written before it:
        # one the program was given, or a view. One it made owns memory no
        # tensor holds, which saves comparing every pair.
        given_ids = {id(a) for a in given}
        copies = [
            np.array(u)
            if (not u.flags.owndata or id(u) in given_ids)
            and any(np.may_share_memory(u, t._data) for t in targets)
            else u
            for u in updates[: len(targets)]
        ]
        for tensor, update in zip(targets, copies):
            np.copyto(tensor._data, update, casting="unsafe")
            tensor._version_counter[0] += 1
        k = len(targets)
        for ref, none in zip(self.grad_targets, self.grad_none):
            leaf = ref.resolve(args, located)
            if none:
                leaf._grad = None
            else:
                leaf._grad = Tensor._make(np.array(updates[k]))
                k += 1

    # ------------------------------------------------------------------ backward

    def backward_function(self, seeded: tuple):
        """The backward for cotangents of the ``seeded`` outputs, as a jit
        function of (inputs, cotangents), for create_graph."""
        function = self._backward_functions.get(seeded)
        if function is None:
            joint = adjoint(self.graph, self.wrt, self.stopped, seeded, self.customs, self.hooks)
            joint = Graph(joint.inputs, joint.eqns, joint.outputs[self.num_outputs :])

            def backward(*values):
                values = [_as_tensor(v, var) for v, var in zip(values, joint.inputs)]
                return tuple(self._replay(joint, values))

            backward.__name__ = "compiled_backward"
            function = self._backward_functions[seeded] = self.jit(backward)
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

        position = {eqn.out: k for k, eqn in enumerate(joint.eqns)}
        complete: dict = {}  # equation index -> custom calls whose values all exist then
        for custom in self.customs:
            # its outputs, and what its backward reads (a value its forward
            # saved may be made after the outputs)
            own = {eqn.out for eqn in custom.eqns} | set(custom.cotangents)
            read_by_backward = [
                v for eqn in custom.eqns for v in eqn.inputs if isinstance(v, Var) and v not in own
            ]
            made = [position.get(v, -1) for v in custom.outputs + read_by_backward if v is not None]
            complete.setdefault(max(made, default=-1), []).append(custom)
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

    @property
    def kernels(self) -> list:
        found = self.forward_executor.kernels
        return found + (self.backward_executor.kernels if self.backward is not None else [])

    def warm_up(self, args: list, call=((), {})) -> None:
        """Runs the forward and backward programs once (without side effects),
        so their kernels are compiled for these operands' layouts now."""
        located = self.lookup(*call) if self.lookup is not None else ()
        drawn = self._drawn(self.traced_draws) if self.draw_specs else ()
        captured = [c.current(args, located, drawn) for c in self.captured]
        values = self.forward_executor.run(self._arrays(list(args) + captured))
        if self.backward is not None:
            residuals = values[self.num_outputs + self.num_extras :]
            ones = [np.ones(shape, dtype.np) for shape, dtype in self.output_types]
            self.backward_executor.run(residuals + ones)

    @property
    def saved_bytes(self) -> int:
        return sum(int(np.prod(v.shape)) * v.dtype.np.itemsize for v in self.saved)

    def describe(self, verbose: bool = False) -> str:
        """The programs, what the forward saves, each run's calls and each
        kernel with how it ran; ``verbose`` adds every kernel's optimized
        LLVM IR and assembly."""
        parts = [format_graph(self.forward, "forward")]
        executors = {"forward": self.forward_executor}
        if self.backward is not None:
            parts.append(format_graph(self.backward, "backward"))
            arrays = ", ".join(map(type_string, self.saved)) or "nothing"
            parts.append(
                f"saved for the backward beyond the inputs: {self.saved_bytes} bytes ({arrays})"
            )
            executors["backward"] = self.backward_executor
        for name, executor in executors.items():
            parts += [
                f"{name} run for {describe_layouts(key)}:\n{plan}"
                for key, plan in executor.plans.items()
            ]
        launchers = [s for e in executors.values() for s in e.steps if isinstance(s, Launcher)]
        if launchers:
            parts.append("kernels:\n" + "\n".join(f"  {k!r}: {k.how_it_ran()}" for k in launchers))
        if verbose:
            for kernel in (k.code for k in launchers if k.code.modules):
                parts += [f"; LLVM IR of {kernel.name}\n{kernel.llvm_ir}"]
                parts += [f"# assembly of {kernel.name}\n{kernel.asm}"]
        return "\n\n".join(parts)


# Running the function again to trace the new path would communicate again in
# this process alone: the other processes' collectives would pair with the wrong ones.
_DIVERGED = (
    "fusegrad.jit: a compiled function that communicates took another path through "
    "Python control flow on tensor values ({}) after its collectives ran; it cannot be "
    "traced again without the other processes. Make that decision outside the compiled "
    "function, or run it eagerly (jit(fn, eager=True))"
)


def _same_value(value: np.ndarray, observed: np.ndarray) -> bool:
    """A guard's value as traced: most are one bool or number, compared
    without numpy's array machinery (NaN differs from itself either way)."""
    if value.ndim == 0 and observed.ndim == 0:
        return value.item() == observed.item()
    return np.array_equal(value, observed)


def _shown(value: np.ndarray) -> str:
    return repr(value.item()) if value.size == 1 else f"an array of shape {list(value.shape)}"


def _as_tensor(value, var):
    """A number input of the program (traced, or plain when run eagerly) as
    the 0-d tensor the graph's input stands for."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, TracedNumber):
        return value.operand(var.dtype)
    return constant_array(np.asarray(value, var.dtype.np), var.dtype)


def _views(outputs: list, inputs: list, requires_grad: list, traced) -> tuple:
    """(output position, source position, view steps) of each output the
    traced function returned as an input or another output, or a view of
    one (sources: the inputs, then the outputs, then the bases returned
    too): calls return that tensor, or that view of it taken again, so that
    writes through it reach its source as eagerly. Outputs that are views
    of one tensor that is neither (``x.t(), x.view(-1)`` of an
    intermediate x) are views of it taken again too, the base computed
    beside the outputs: the bases' list is the second thing returned
    (``traced(base)`` tells whether the trace has a value for one). A tensor
    returned as it is that needs a gradient stays a fresh tensor (it
    carries the compiled backward). In the order to take them: a view's
    source before it (a source has fewer steps from the base they share;
    one returned twice, first where it comes first)."""
    found = []
    sources = inputs + outputs
    for k, output in enumerate(outputs):
        for i, source in enumerate(sources):
            steps = _steps_from(source, output) if isinstance(source, Tensor) else None
            if steps is None or (not steps and (i - len(inputs) >= k or requires_grad[k])):
                continue  # no view, or itself (again later): not a source
            found.append((k, i, steps))
            break
    taken = {k for k, _, _ in found}
    sharing: dict = {}  # id of a base no source is -> the outputs that are its views
    for k, output in enumerate(outputs):
        base = output._base
        steps = _steps_from(base, output) if base is not None else None
        if k not in taken and steps is not None and all(base is not s for s in sources):
            sharing.setdefault(id(base), (base, []))[1].append((k, steps))
    bases = []
    for base, views in sharing.values():
        if len(views) > 1 and traced(base) is not None:
            found += [(k, len(sources) + len(bases), steps) for k, steps in views]
            bases.append(base)
    depth = [len(t._view_steps) if t._base is not None else 0 for t in outputs]
    return sorted(found, key=lambda view: (depth[view[0]], view[0])), bases


def _traced_var(trace, tensor):
    """The trace's value for ``tensor``, if it has one without capturing it."""
    var = trace.vars.get(id(tensor))
    if var is None and (tensor.__dict__.get("_constant") or id(tensor) in trace.created):
        var = trace.var_of(tensor)
    return var


def _steps_from(source: Tensor, view: Tensor):
    """The view steps taking ``source`` to ``view``, or None when ``view``
    is no view of it that can be taken again (a step with operands would
    take the trace's)."""
    if view is source:
        return ()
    if view._base is None:
        return None
    steps = view._view_steps
    if view._base is not source:
        if source._base is not view._base:
            return None
        known = source._view_steps
        if len(known) > len(steps) or any(a is not b for a, b in zip(known, steps)):
            return None
        steps = steps[len(known) :]
    return None if any(others for _, _, others in steps) else steps


def _view(tensor: Tensor, steps: tuple) -> Tensor:
    with grad_mode.no_grad():
        for prim, params, _ in steps:
            tensor = prim(tensor, **params)
    return tensor


def _outputs_of_their_own(graph: Graph, arrays: dict, inputs: list, views: dict) -> Graph:
    """``graph`` with a copy made of each output at a position of ``arrays``
    whose memory may be a constant's, an input's or another such output's
    where the traced function returned a tensor of its own: the passes
    make ``x * 1`` the value ``x`` and two equal expressions one value,
    and numpy's steps for view primitives return views. Writing into one
    output must change nothing else, as eagerly. ``arrays``: output
    position -> its array in the trace (the outputs', and the bases' that
    outputs are views of); ``inputs``: the inputs' (None for numbers);
    ``views``: output position -> the position among the inputs, then the
    outputs, of the value it is taken as a view of after the run (the
    program computes nothing for it)."""
    producer = {eqn.out: eqn for eqn in graph.eqns}

    def storage(v):  # the value whose memory v may share (indexing by arrays gathers)
        while v in producer and producer[v].prim.view and len(producer[v].inputs) == 1:
            v = producer[v].inputs[0]
        return v

    position = {v: i for i, v in enumerate(graph.inputs)}
    eqns, outputs = list(graph.eqns), list(graph.outputs)
    returned: dict = {}  # storage -> the outputs that may share it
    for k in arrays:
        v = outputs[k]
        if k in views:
            i = views[k] - len(graph.inputs)
            outputs[k] = graph.inputs[views[k]] if i < 0 else outputs[i]
            continue
        root = storage(v)
        if isinstance(root, Const):
            shared = False
        elif root in position:
            source = inputs[position[root]]
            shared = source is not None and np.may_share_memory(arrays[k], source)
        else:
            shared = True
        if shared and all(
            np.may_share_memory(arrays[k], arrays[j]) for j in returned.get(root, ())
        ):
            returned.setdefault(root, []).append(k)
            continue
        outputs[k] = Var(v.shape, v.dtype)
        eqns.append(Eqn(P.convert, (v,), {"dtype": v.dtype}, outputs[k]))
    if all(a is b for a, b in zip(outputs, graph.outputs)):
        return graph
    return dce(Graph(graph.inputs, eqns, outputs))


def _graph_freed(node) -> bool:
    """Whether a backward pass freed any node of the eager graph below ``node``."""
    stack, seen = [node], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if getattr(node, "freed", False):
            return True
        stack.extend(n for n, _ in node.edges)
    return False


def _inner_dependents(graph, outputs: list, requires_grad: list, stopped, customs) -> dict:
    """Output k -> the other outputs the program computes from it
    differentiably (a loss from the logits it also returns)."""
    found = {}
    if sum(requires_grad) < 2:
        return found
    for k, (v, requires) in enumerate(zip(outputs, requires_grad)):
        if requires:
            downstream = differentiable_from(graph, {v}, stopped, customs)
            others = tuple(j for j, w in enumerate(outputs) if j != k and w in downstream)
            if others:
                found[k] = others
    return found


class CompiledFunctionBackward(Node):
    """The backward of a compiled function's call. The gradient arriving at
    an output the call's other outputs were computed from holds only what
    came from outside the call: eagerly it would also hold what flowed
    through those others, so reading it (a hook, retain_grad, autograd.grad
    with respect to it) is an error while they carry a gradient."""

    def __init__(self, program: Program, inputs: list, residuals: list):
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

    def _checked_inputs(self) -> list:
        for tensor, version in self.inputs:
            if version is not None and tensor._version_counter[0] != version:
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
        inputs = self._checked_inputs()
        cotangents = [
            g if g is not None else Tensor._make(np.zeros(shape, dtype.np))
            for g, (shape, dtype) in zip(grads, program.output_types)
        ]
        seeded = tuple(g is not None for g in grads)
        if grad_mode.is_grad_enabled():  # create_graph: differentiable, via the jit backward
            return list(program.backward_function(seeded)(*inputs, *cotangents))
        executor = program.backward_executor_for(seeded)
        values = executor.run(self.residuals + [c._data for c in cotangents])
        return [
            Tensor._make(np.asarray(v, dtype=dtype.np))
            for v, (_, dtype) in zip(values, (program.input_meta[i] for i in program.wrt))
        ]
