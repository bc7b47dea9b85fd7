"""A compiled program: what one trace of a jit function becomes.

The forward program computes, from the arguments and the captured tensors,
the function's outputs, the guard values, the new values of tensors the
function changed in place, the new ``.grad`` of leaves, and the residuals
its backward needs. ``run`` checks the guards before any side effect is
applied, so a call that takes another path than the trace changes nothing
and is retraced. Outputs that need a gradient get a
``CompiledFunctionBackward`` node running the backward program
(``compiled_backward.py``).
"""

from __future__ import annotations

import numpy as np

from ..eager import grad_mode
from ..eager.autograd import stale_saved
from ..eager.tensor import Tensor, storage_pattern
from ..ir import primitives as P
from ..ir.autodiff import active_values, differentiable_from
from ..ir.graph import Const, Eqn, Graph, Var, format_graph, type_string
from ..ir.simplify import dce
from ..runtime import pipeline
from ..runtime.executor import describe_layouts
from ..runtime.launch import Launcher
from .call_checks import CallChecks
from .compiled_backward import Backward, CompiledFunctionBackward
from .pyrandom import Draws
from .symbolic import evaluated


class Program:
    """The forward program of one trace, the checks a call passes before it
    runs, and the side effects it applies after (the backward:
    ``compiled_backward.py``). ``jit``: how the backward is compiled for
    create_graph (the jit the program came from, passed in: this module is
    below jit.py)."""

    state = None  # python_state.State: what a call checks and redoes of Python state

    def __init__(self, trace, args: list, output_tensors: list, jit):
        self.fixed_leaves: list = []  # (position, number): arguments keyed by value since
        self._take_inputs_beside_arguments(trace)
        outputs = [trace.var_of(t) for t in output_tensors]
        extras = self._side_effects(trace)
        graph = trace.graph(outputs)
        self._take_inputs(args, graph)
        self._take_outputs(trace, graph, outputs, output_tensors)
        self.derived = None  # the Backward, when outputs need a gradient
        self.backward = self.backward_executor = None
        residuals = []
        if self.makes_node and not self.graph_freed:
            self.derived = Backward(graph, self.num_outputs, self.wrt, trace, jit)
            self.backward, self.backward_executor = self.derived.program, self.derived.executor
            residuals = self.derived.residuals
        inputs = list(args) + [
            c.tensor if c.read is None and c.draw is None else None for c in self.captured
        ]
        # which inputs share memory (a module's weights in one buffer): a call
        # of a program that writes in place must share it as the trace did
        sharing = storage_pattern([t for t in inputs if isinstance(t, Tensor)])
        self.checks = CallChecks(
            trace, self.input_meta, self.input_requires_grad, sharing, bool(self.mutated)
        )
        bases = self._take_views(trace, output_tensors, inputs)
        extras = extras + [_traced_var(trace, b) for b in bases]
        self.num_extras = len(extras)
        forward = Graph(graph.inputs, graph.eqns, outputs + extras + residuals)
        self._compile_forward(forward, output_tensors, inputs, bases)

    def _take_inputs_beside_arguments(self, trace) -> None:
        """The tensors and numbers it reads beyond its arguments (``captured``:
        found through ``lookup``, or numbers read or drawn), and the draws."""
        self.num_args = len(trace.inputs)
        self.captured = trace.captured
        self.lookup = trace.lookup  # where tensors the function did not receive are now
        self.guards = trace.guards
        self.draw_specs = trace.draw_specs
        self.traced_draws = trace.draws

    def _take_inputs(self, args: list, graph: Graph) -> None:
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
        self.wrt = [i for i, r in enumerate(self.input_requires_grad) if r]

    def _take_outputs(self, trace, graph: Graph, outputs: list, output_tensors: list) -> None:
        """Which outputs carry a gradient, and what their node must know."""
        self.num_outputs = len(outputs)
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
        # the error eager's backward from each output raises (None: none)
        self.stale_saved = [
            stale_saved(t.grad_fn, trace.first_node) if requires else None
            for t, requires in zip(output_tensors, self.output_requires_grad)
        ]
        self.aliased_residuals = self.read_inputs = None  # found by the first call's node

    def _take_views(self, trace, output_tensors: list, inputs: list) -> list:
        """The outputs a call returns as views (see ``_views``); returns the
        bases they are views of, which the forward computes beside the side
        effects."""
        self.view_outputs, bases = _views(
            output_tensors, inputs, self.output_requires_grad, lambda t: _traced_var(trace, t)
        )
        self.base_dtypes = [b._dtype for b in bases]
        if trace.binding is not None:  # the steps' sizes are symbols: this program's values
            self.view_outputs = [
                (
                    k,
                    i,
                    tuple((prim, evaluated(params, trace.binding), o) for prim, params, o in steps),
                )
                for k, i, steps in self.view_outputs
            ]
        return bases

    def _compile_forward(self, forward: Graph, output_tensors: list, inputs: list, bases) -> None:
        """The forward program through the pipeline, each output that must be
        a tensor of its own made one (see ``_outputs_of_their_own``)."""
        outputs = forward.outputs[: self.num_outputs]
        first_base = self.num_outputs + self.num_extras - len(bases)  # among its outputs
        behind = first_base - self.num_outputs  # how far a base's source position moves there
        self.forward = pipeline.verified(
            _outputs_of_their_own(
                pipeline.simplified(forward),
                {
                    **dict(enumerate(t._data for t in output_tensors)),
                    **{first_base + j: b._data for j, b in enumerate(bases)},
                },
                [t._data if isinstance(t, Tensor) else None for t in inputs],
                {
                    k: i if i < len(inputs) + self.num_outputs else i + behind
                    for k, i, _ in self.view_outputs
                },
            )
        )
        inputs_kept = set(self.forward.inputs)
        self.saved = [
            v
            for v in self.forward.outputs[self.num_outputs + self.num_extras :]
            if isinstance(v, Var) and v not in inputs_kept
        ]  # what the backward reads beyond the inputs, kept alive by the node
        self.forward_executor = pipeline.executable(self.forward)
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

    # ------------------------------------------------------------------ running

    def guard_reasons(self) -> list:
        """What the traced path depended on, for messages."""
        return [f"{g.how} at {g.where}" for g in self.guards] + self.checks.descriptions()

    def python_guards_hold(self) -> bool:
        return self.checks.python_guards_hold()

    def run(self, args: list, draws=None, call=((), {})):
        """The outputs as tensors, or None when a guard fails (nothing changed
        then). ``draws``: this call's draws from Python's random module and
        numpy's generator, shared by the programs it tries (pyrandom.py);
        ``call``: the call's (args, kwargs), where tensors held by objects
        among them are found."""
        drawn = ()
        if self.draw_specs:
            draws = draws if draws is not None else Draws()
            drawn = self.checks.drawn(draws)
            if drawn is None:
                self.failure = self.checks.failure
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
            not self.checks.arguments_decide
            or self.fixed_leaves
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
        found = self.checks.inputs_found(args, drawn, call)
        if found is None:
            self.failure = self.checks.failure
            return None
        located, captured = found
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
        residuals = values[n + self.num_extras :]
        node_inputs = args + captured
        if self.mutated or self.grad_targets:
            updates = extras[len(self.guards) :]
            targets = [ref.resolve(args, located) for ref in self.mutated]
            if self.makes_node and targets:
                residuals, node_inputs = _as_before_writes(self, targets, residuals, node_inputs)
            _write_back(self, targets, updates, arrays)
            _write_grads(self, args, located, updates[len(self.mutated) :])
        outputs = [Tensor._make(v, dtype) for v, dtype in zip(values, self.output_dtypes)]
        if self.view_outputs:
            # a view's source: an input, another output or a base the outputs share
            bases = values[n + self.num_extras - len(self.base_dtypes) : n + self.num_extras]
            sources = args + captured + outputs
            sources += [Tensor._make(b, dtype) for b, dtype in zip(bases, self.base_dtypes)]
            for k, i, steps in self.view_outputs:
                outputs[k] = sources[len(args) + len(captured) + k] = _view(sources[i], steps)
        if self.makes_node:
            if self.read_inputs is None:
                self.read_inputs = _read_by_residuals(node_inputs, residuals)
            node = CompiledFunctionBackward(self, node_inputs, residuals)
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

    @property
    def kernels(self) -> list:
        found = self.forward_executor.kernels
        return found + (self.backward_executor.kernels if self.backward is not None else [])

    def warm_up(self, args: list, call=((), {})) -> None:
        """Runs the forward and backward programs once (without side effects),
        so their kernels are compiled for these operands' layouts now."""
        located = self.lookup(*call) if self.lookup is not None else ()
        drawn = self.checks.drawn(self.traced_draws) if self.draw_specs else ()
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
        return _described(self, verbose)


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
    take the trace's; steps from a base's shape before it changed in place,
    t_() or squeeze_(), would take another view)."""
    if view is source:
        return ()
    if view._base is None or view._base._layout_version > view._view_version:
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


def _as_before_writes(program, targets: list, residuals: list, inputs: list) -> tuple:
    """The residuals and the backward's inputs as they are before the
    call's in-place writes: a residual that is a written tensor's memory
    (an input the backward reads rather than a value the forward saved)
    is copied first; so is a written input the create_graph backward
    reads, unless it requires grad (its graph must stay)."""
    if program.aliased_residuals is None:
        program.aliased_residuals = [
            k
            for k, r in enumerate(residuals)
            if any(np.may_share_memory(r, t._data) for t in targets)
        ]
    if program.aliased_residuals:
        residuals = list(residuals)
        for k in program.aliased_residuals:
            residuals[k] = np.array(residuals[k])
    written = {id(t._data) for t in targets}
    inputs = [
        Tensor._make(np.array(t._data), t._dtype)
        if isinstance(t, Tensor) and id(t._data) in written and not t.requires_grad
        else t
        for t in inputs
    ]
    return residuals, inputs


def _read_by_residuals(inputs: list, residuals: list) -> frozenset:
    """The positions of the tensor inputs a residual is the memory of: the
    backward reads them as they are when it runs, so a change in place to
    one after the call is an error then, as eager's for a saved tensor."""
    return frozenset(
        k
        for k, t in enumerate(inputs)
        if isinstance(t, Tensor) and any(np.may_share_memory(r, t._data) for r in residuals)
    )


def _write_back(program: Program, targets: list, updates: list, given: list) -> None:
    """Applies the in-place changes to the tensors ``targets`` (``given``: the
    arrays the program ran on)."""
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


def _write_grads(program: Program, args: list, located, values: list) -> None:
    """Sets the new ``.grad`` of leaves (a ``.grad`` set to None has no value)."""
    k = 0
    for ref, none in zip(program.grad_targets, program.grad_none):
        leaf = ref.resolve(args, located)
        if none:
            leaf._grad = None
        else:
            leaf._grad = Tensor._make(np.array(values[k]))
            k += 1


def _described(program: Program, verbose: bool) -> str:
    parts = [format_graph(program.forward, "forward")]
    executors = {"forward": program.forward_executor}
    if program.backward is not None:
        parts.append(format_graph(program.backward, "backward"))
        arrays = ", ".join(map(type_string, program.saved)) or "nothing"
        parts.append(
            f"saved for the backward beyond the inputs: {program.saved_bytes} bytes ({arrays})"
        )
        executors["backward"] = program.backward_executor
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
