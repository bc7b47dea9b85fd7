"""Tracing one call of a jit function into a program: the function runs
once with real values while a trace records it, the Python state it
reached is walked before and after (python_state.py), and the program the
trace becomes gives the call's result."""

from __future__ import annotations

import threading
import time
import warnings
from collections import Counter

import numpy as np

from .. import timing
from ..eager.tensor import Tensor, storage_pattern
from ..runtime import threads
from .compiled import Program
from .dynamic import DynamicProgram
from .numbers import number_input, traced
from .outputs import flatten_output, plain, unflattener
from .pyrandom import drawing, generator_states, replayed_states, same_states
from .python_state import Refused, State, Walk, make_plain
from .trace import Trace, TracingError, active


class Tracer:
    """Traces one jit function's calls. ``signatures``: the function's
    Signatures (the arguments' leaves, dynamic dimensions), ``log``: its
    CompileLog, ``jit``: how a program compiles its backward for
    create_graph."""

    def __init__(self, fn, signatures, log, jit):
        self.fn = fn
        self._signatures = signatures
        self._log = log
        self._jit = jit
        self._lock = threading.Lock()  # for the counters below, never held in user code
        threads.renew_in_forked_child(self)
        # places of Python numbers the function changed (a counter): inputs of
        # later traces, not guards (python_state.Walk.install_numbers)
        self._number_places: frozenset = frozenset()
        self.compile_seconds = 0.0
        self._compilations = 0

    def forked_in_child(self) -> None:
        self._lock = threading.Lock()

    def trace(self, args, kwargs, lower=False, draws=None, dynamic=True) -> tuple:
        """Runs the function once, recording; returns the program it became
        and the call's result. The result comes from the program too, so its
        backward is the compiled one: the trace's side effects on tensors and
        ``.grad`` are undone and the program applies them. When the trace's
        own Python side effects changed what the program guards (an
        optimizer's first step creates its state), the program serves later
        calls only and this call keeps the trace's eager result. For
        ``lower``, every side effect is undone and a run without side
        effects compiles the kernels."""
        clock = time.perf_counter(), Counter(timing.seconds), Counter(timing.counts)
        trace = Trace()
        if draws is not None:
            trace.draws = draws
        given = args, kwargs
        try:
            before = self._walk(args, kwargs)
        except Refused as exc:
            return self._eager_instead(str(exc), given, lower, stacklevel=6)
        leaves, paths, args, kwargs = self._inputs(trace, args, kwargs, dynamic)
        states, already_drawn = generator_states(), len(trace.draws.made)
        returned = False
        try:
            before.install_numbers(self._number_places, trace)
            with timing.phase("trace"), active(trace), drawing():
                result = self.fn(*args, **kwargs)
            returned = True
            self._check_draws(trace, states, already_drawn)
            out_tensors: list = []
            tree = flatten_output(result, out_tensors)
            with active(trace):  # what the writes decide on sizes is part of the trace
                state, refused = _python_state(before, trace, out_tensors)
            if refused is not None:
                return self._refused(refused, result, trace, before, given, lower)
            program = self._program(trace, before, state, leaves, out_tensors, tree)
        except Exception as exc:
            if not trace.symbol_hints and not isinstance(exc, TracingError) and not returned:
                # the function itself raised: as eagerly, what it did before stays
                make_plain(before)
                raise
            trace.restore(python_too=True)
            before.restore()
            if not trace.symbol_hints:
                raise
            # what the sizes' symbols could not express (or an op that does not
            # take them yet): these sizes are fixed from now on, and traced so
            self._signatures.fix_sizes(trace, paths, f"{type(exc).__name__}: {exc}")
            trace.draws.reset()
            return self.trace(*given, lower=lower, draws=trace.draws, dynamic=False)
        except BaseException:
            trace.restore(python_too=True)
            before.restore()
            raise
        if trace.symbol_hints and program.pinned:
            reason = f"Python needed their values: {program.pinned_because}"
            self._signatures.fix_sizes(trace, paths, reason, program.pinned)
        result = self._first_run(program, state, trace, before, leaves, given, lower, result)
        self._count_compilation(program, trace, clock)
        return program, result

    def _walk(self, args, kwargs) -> Walk:
        """The Python state the function reaches, before it runs."""
        before = Walk(self.fn, args, kwargs)
        appended = before.appended_lists()
        if appended:  # walked again, without guarding those lists' items
            before = Walk(self.fn, args, kwargs, appended)
        return before

    def _check_draws(self, trace, states, already_drawn: int) -> None:
        """Raises when the trace's draws do not explain how the generators
        moved: a call of the program could not draw those again."""
        fresh = [spec for spec, _ in trace.draws.made[already_drawn:]]
        if not same_states(replayed_states(states, fresh), generator_states()):
            raise TracingError(
                f"{self._log.name} draws from Python's random module or numpy's global "
                "generator through a name bound before the call (from random import "
                "...): jit cannot draw again on later calls; call random.<function> "
                "or np.random.<function>, or use fusegrad's samplers"
            )

    def _refused(self, reason: str, result, trace, before, given: tuple, lower: bool) -> tuple:
        """(None, the call's result) when a program could not redo what the
        trace did to Python state (``reason``)."""
        if lower or trace.symbol_hints:
            # lower() leaves no effect; a dynamic trace's values hold sizes
            # as symbols: the call runs again, eagerly
            trace.restore(python_too=True)
            before.restore()
            return self._eager_instead(reason, given, lower, stacklevel=7)
        # the trace ran the function eagerly: its result and effects stand
        self._warn_eager(reason, stacklevel=6)
        make_plain(before)
        return None, plain(result)

    def _program(self, trace, before, state, leaves: list, out_tensors: list, tree):
        """The program ``trace`` becomes, with ``state`` (what a call checks
        and redoes of Python state) and how a run's outputs become the
        result (``tree``: the result's structure)."""
        trace.locate(state.lookup)
        # numbers it changed or an optimizer read: inputs of its next traces
        numbers = state.changed_numbers | before.paths_of(trace.input_places)
        if not numbers <= self._number_places:
            with self._lock:
                self._number_places |= numbers
        with timing.phase("adjoint and passes"):
            outputs = out_tensors + state.hidden_outputs
            if trace.symbol_hints:
                program = DynamicProgram(trace, leaves, outputs, self._jit)
            else:
                program = Program(trace, leaves, outputs, self._jit)
        program.state = None if state.trivial else state
        program.unflatten = unflattener(tree, len(out_tensors), len(state.hidden_outputs))
        return program

    def _first_run(self, program, state, trace, before, leaves, given, lower, result):
        """The call's result, from the program's first run when its guards
        on Python state hold after the trace (else the trace's result)."""
        if lower or program.python_guards_hold():
            trace.restore(python_too=lower)
            before.restore()  # the program's run redoes the trace's writes
            objects = state.check(self.fn, *given)
            with timing.phase("first run"):
                if lower:
                    outputs = program.warm_up(leaves, given)
                elif objects.__class__ is str:
                    outputs = None
                else:
                    outputs = program.run(leaves, trace.draws, given)
            if lower:
                return None
            if outputs is None:
                # A value the compiled program computed decided a guard otherwise
                # than the eager one (their last bits differ): this call runs
                # eagerly, from the state it started in.
                return self.fn(*given[0], **given[1])
            if state.writes:
                state.write(objects, outputs)
            return program.unflatten(outputs)
        make_plain(before)
        return plain(result)

    def _count_compilation(self, program, trace, clock: tuple) -> None:
        start, seconds, counts = clock
        self._signatures.decided_by_value(trace.specialized)
        with self._lock:
            self.compile_seconds += time.perf_counter() - start
            self._compilations += 1
            number = self._compilations
        self._log.compiled(
            time.perf_counter() - start, timing.seconds - seconds, timing.counts - counts
        )
        self._log.dump(program, number, trace)

    def _eager_instead(self, reason: str, given: tuple, lower: bool, stacklevel: int) -> tuple:
        """(None, the call's eager result): the function cannot be compiled for
        these arguments (``reason``); it runs eagerly for them from now on."""
        if lower:
            raise TracingError(f"{self._log.name} cannot be compiled: {reason}")
        self._warn_eager(reason, stacklevel)
        return None, self.fn(*given[0], **given[1])

    def _warn_eager(self, reason: str, stacklevel: int) -> None:
        """``stacklevel``: the user's call, seen from here (JitFunction.__call__
        calls _trace_and_cache, which calls trace)."""
        warnings.warn(
            f"fusegrad.jit: {self._log.name} runs eagerly for these argument types: {reason}",
            stacklevel=stacklevel,
        )

    def _inputs(self, trace, args, kwargs, dynamic: bool) -> tuple:
        """The arguments' leaves as inputs of ``trace`` (with ``dynamic``,
        their dynamic dimensions as symbols), their paths, and the arguments
        the function is traced with: its input numbers as traced numbers."""
        signatures = self._signatures
        paths: list = []
        leaves, _ = signatures.of(args, kwargs, paths)
        numbers = {}
        for leaf, path in zip(leaves, paths):
            if isinstance(leaf, Tensor):
                trace.add_input(leaf, signatures.dynamic_sizes(path, leaf) if dynamic else ())
            else:
                tensor = number_input(leaf, signatures.where(path))
                trace.add_input(tensor)
                numbers[path] = traced(tensor, signatures.where(path), frozenset([path]))
        if numbers:
            placed = trace.installed
            args = tuple(_with_numbers(a, (i,), numbers, placed) for i, a in enumerate(args))
            kwargs = {k: _with_numbers(v, (k,), numbers, placed) for k, v in kwargs.items()}
        return leaves, paths, args, kwargs


def _python_state(before, trace, out_tensors: list) -> tuple:
    """(State, None) for what the trace did to Python state, or (None, why
    a compiled call could not do the same)."""
    owned = {
        id(value)
        for eqn in trace.eqns
        for value in eqn.params.values()
        if not isinstance(value, (bool, int, float, str, tuple, type(None)))
    }
    try:
        state = State(before, trace.installed, out_tensors, owned)
    except Refused as exc:
        return None, str(exc)
    if _writes_through_an_overlap(trace):
        return None, (
            "it writes in place into a tensor it also reads through another that shares "
            "its memory (a view and its base, as arguments or as a global)"
        )
    if trace.hooks_kept:
        return None, (
            "it registers a hook on a tensor it did not make ("
            + "; ".join(dict.fromkeys(trace.hooks_kept))
            + "), which stays on the caller's tensor after the call"
        )
    if trace.value_reads:
        return None, (
            "Python reads the value of a floating-point tensor ("
            + "; ".join(dict.fromkeys(trace.value_reads))
            + "), which a compiled program would be made again for on nearly every call"
        )
    return state, None


def _writes_through_an_overlap(trace) -> bool:
    """Whether the function wrote in place into an input or captured tensor
    whose memory overlaps another's (a view and its base): the trace reads
    them as two values and would miss the write through the other. Views of
    one buffer that do not overlap (a module's weights in one allocation)
    are two values indeed."""
    inputs = [t for t, _ in trace.initial_vars.values()]
    if not trace.snapshots or not storage_pattern(inputs):
        return False
    return any(
        other is not written and np.may_share_memory(written._data, other._data)
        for written, _ in trace.snapshots.values()
        for other in inputs
    )


def _with_numbers(value, path: tuple, numbers: dict, placed: dict):
    """The argument with its input numbers replaced by their traced numbers:
    in its lists and dicts in place (what the function stores in them is a
    write the walk of Python state sees; ``placed`` records the places,
    which the walk's restore undoes), its tuples made again."""
    if path in numbers:
        return numbers[path]
    if isinstance(value, (list, dict)):
        for k, v in list(enumerate(value) if isinstance(value, list) else value.items()):
            new = _with_numbers(v, (*path, k), numbers, placed)
            if new is not v:
                value[k] = new
                placed[id(value), k] = new
        return value
    if isinstance(value, tuple):
        items = [_with_numbers(v, (*path, k), numbers, placed) for k, v in enumerate(value)]
        if all(a is b for a, b in zip(items, value)):
            return value
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    return value
