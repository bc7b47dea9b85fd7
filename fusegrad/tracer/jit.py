"""``fusegrad.jit``: trace a function once per signature, run the program after.

The cache key is the call's signature: the structure of the arguments, each
tensor's shape, dtype and requires_grad flag, static arguments by value,
Python numbers by value, and grad mode. A key can hold a few variants, one
per path the function's Python control flow took on tensor values (guards);
past ``MAX_VARIANTS`` the key runs eagerly, with a warning naming the line.
Threads calling with one key at once trace it once: the others wait for
that trace and run its program (other keys trace meanwhile).
"""

from __future__ import annotations

import functools
import inspect
import itertools
import os
import sys
import threading
import time
import types
import warnings
from collections import Counter, OrderedDict, namedtuple
from pathlib import Path

import numpy as np

from .. import timing
from ..eager import grad_mode
from ..eager.tensor import Tensor, recording, storage_pattern
from ..ir.graph import format_graph
from ..runtime import threads
from .compiled import Program
from .dynamic import DynamicProgram
from .numbers import TracedFloat, TracedNumber, number_input, traced
from .pyrandom import Draws, drawing, generator_states, replayed_states, same_states
from .python_state import Refused, State, Walk, make_plain, walk_enters
from .trace import Trace, TracingError, active

CacheInfo = namedtuple("CacheInfo", ["hits", "misses", "entries", "compile_seconds"])
MAX_VARIANTS = 8
RECOMPILES_BEFORE_WARNING = 5  # recompilations one argument causes before a warning
CACHE_SIZE = 64  # programs a function keeps; the least recently used go first
# A trace runs the user's code, which may wait for a thread calling the
# function with the same signature (one it started and joins): a call waits
# this long for another thread's trace of its key, then traces the key too,
# so such code is slowed down, never deadlocked.
TRACE_PATIENCE = 10.0  # seconds
_EAGERLY = object()  # _turn_to_trace: run the Python function
# numpy's scalars too: the traced function gets them as they are (a numpy
# scalar is an operand as a Python number is)
_SCALARS = (bool, int, float, str, type(None), np.bool_, np.integer, np.floating)
_NUMBERS = (int, float, np.integer, np.floating)  # program inputs, unless decided on by value
_NOT_NUMBERS = (bool, np.bool_)  # bools decide control flow: keyed by value
# arguments the key holds as they are (a loss function, a class, a module)
_HELD_BY_IDENTITY = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.ModuleType,
    type,
    np.ufunc,
)
_FLOATS = (float, np.floating)


def jit(
    fn=None,
    *,
    static_argnums=(),
    eager: bool = False,
    cache_size: int = CACHE_SIZE,
    dynamic: bool | None = None,
):
    """Compiles ``fn``: traced on the first call for each signature, run as a
    compiled program after. Outputs that need a gradient get a
    ``CompiledFunctionBackward`` node running the derived backward program.

    ``dynamic``: None (the default) makes a dimension of a tensor argument
    dynamic once it takes a second size, so one trace serves every later
    size; True makes every dimension dynamic from the first call; False
    keeps all sizes static (a trace per shape).

    >>> import fusegrad
    >>> @fusegrad.jit
    ... def f(x):
    ...     return (x * x).sum()
    >>> x = fusegrad.tensor([1.0, 2.0], requires_grad=True)
    >>> f(x).backward(); f(x).backward()
    >>> x.grad
    tensor([4., 8.])
    >>> f.cache_info().misses, f.cache_info().hits
    (1, 1)
    """
    if fn is None:
        return lambda f: jit(
            f, static_argnums=static_argnums, eager=eager, cache_size=cache_size, dynamic=dynamic
        )
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    return JitFunction(fn, tuple(static_argnums), eager, cache_size, dynamic)


class Lowered:
    """A compiled program, for reading: ``forward_ir`` and ``backward_ir`` (the
    graphs), ``saved_bytes`` (what the forward keeps for the backward beyond
    the inputs), ``kernels`` (each fused kernel, with its name and IR
    equations), ``llvm_ir`` and ``asm`` (of the kernels); with dynamic sizes,
    ``traced_ir``: the trace every size's program is made from, its shapes
    in the sizes' symbols (``f32[s0,784]``). ``str()`` shows the
    programs, each run's calls and how each kernel ran; ``describe(verbose=True)``
    adds the LLVM IR and assembly."""

    def __init__(self, program: Program):
        self.program = program
        self.forward_ir = format_graph(program.forward, "forward")
        self.backward_ir = (
            format_graph(program.backward, "backward") if program.backward is not None else None
        )
        self.kernels = program.kernels
        self.saved_bytes = program.saved_bytes
        self.traced_ir = program.traced_ir if isinstance(program, DynamicProgram) else None

    @property
    def llvm_ir(self) -> str:
        return "\n".join(k.llvm_ir for k in self.kernels)

    @property
    def asm(self) -> str:
        return "\n".join(k.asm for k in self.kernels)

    def __str__(self) -> str:
        return self.program.describe()

    def describe(self, verbose: bool = False) -> str:
        """``str()``, and with ``verbose`` the kernels' LLVM IR and assembly."""
        return self.program.describe(verbose)


class JitFunction:
    def __init__(
        self,
        fn,
        static_argnums: tuple,
        eager: bool,
        cache_size: int = CACHE_SIZE,
        dynamic: bool | None = None,
    ):
        if not callable(fn):  # said where jit is applied, not at the first call
            raise TypeError(f"fusegrad.jit: expected a callable value, got {fn!r}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.static_argnums = static_argnums
        # read when the function is made, as JAX reads JAX_DISABLE_JIT once:
        # a microsecond per call otherwise
        self.eager = eager or os.environ.get("FUSEGRAD_DISABLE_JIT") == "1"
        self._cache: OrderedDict = OrderedDict()  # key -> [Program, ...], least recent first
        self.cache_size = cache_size
        self._eager_keys: set = set()
        self._tracing: dict = {}  # key -> Event set when the thread tracing it ends
        self._lock = threading.Lock()  # for the above and the counters, never held in user code
        threads.renew_in_forked_child(self)
        self._hits = self._misses = 0
        self._compile_seconds = 0.0
        self._compilations = 0
        # number arguments (by path) a trace decided something on by value:
        # later keys hold their value rather than making them program inputs
        self._by_value: frozenset = frozenset()
        self._draws = False  # whether a trace saw draws from Python's random or numpy's
        # places of Python numbers the function changed (a counter): inputs of
        # later traces, not guards (python_state.Walk.install_numbers)
        self._number_places: frozenset = frozenset()
        # dynamic sizes: the dimensions (by argument path) traced as symbols,
        # those that cannot be (a trace needed their value), and each
        # argument's shape when first traced
        self.dynamic = dynamic
        self._dynamic_dims: dict = {}  # path -> frozenset of dimensions
        self._fixed_dims: set = set()  # (path, dimension)
        self._first_shapes: dict = {}  # path -> shape
        self._static_because: dict = {}  # argument label -> why its sizes are static
        self._recompiles: Counter = Counter()  # argument label -> compilations it caused
        self._names = _parameter_names(fn)
        # The last call's program, when its tensors alone chose it: calls
        # with tensors of the same layouts run it at once.
        self._direct: _Direct | None = None
        self._last_hit = None  # the program the last call traced or hit
        self._direct_hits = itertools.count()  # counted without the lock: next() is atomic

    def __repr__(self) -> str:
        return f"<fusegrad.jit of {getattr(self.fn, '__qualname__', self.fn)!r}>"

    def __get__(self, instance, owner):  # methods: bind like a function would
        return self if instance is None else functools.partial(self, instance)

    def cache_info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(
                self._hits + _count(self._direct_hits),
                self._misses,
                sum(len(v) for v in self._cache.values()),
                self._compile_seconds,
            )

    def __call__(self, *args, **kwargs):
        direct = self._direct
        if (
            direct is not None
            and not kwargs
            and recording.trace is None
            and grad_mode.is_grad_enabled() is direct.grad_enabled
        ):
            check = direct.check
            outputs = (
                direct.run(args)
                if check is None or check(self.fn, args, kwargs).__class__ is not str
                else None
            )
            if outputs is not None:
                next(self._direct_hits)
                return direct.unflatten(outputs)
        if self.eager or recording.trace is not None:  # inside another trace: traced inline
            return self.fn(*args, **kwargs)
        tensors, key = self._signature(args, kwargs)
        draws = Draws() if self._draws else None  # this call's, once a trace saw some
        tried = 0  # how many of the key's variants these arguments failed the guards of
        while True:
            variants = self._cache.get(key, ())
            for index, program in enumerate(variants[tried:], tried):
                state = program.state
                if state is not None:
                    objects = state.check(self.fn, args, kwargs)
                    if objects.__class__ is str:
                        program.failure = f"Python state changed: {objects}"
                        continue
                outputs = program.run(tensors, draws, (args, kwargs))
                if outputs is not None:
                    if state is not None and state.writes:
                        state.write(objects, outputs)
                    with self._lock:
                        self._hits += 1
                        if key in self._cache:
                            self._cache.move_to_end(key)
                        # Tried first from now on: a loop's first call often
                        # differs (an optimizer's first step makes its state),
                        # and every later call would test that path's guards.
                        if index and index < len(variants) and variants[index] is program:
                            variants.insert(0, variants.pop(index))
                        # Only for the program the previous call ran too (its
                        # trace or a hit): calls alternating between programs
                        # would make one on every hit.
                        repeated = program is self._last_hit
                        self._last_hit = program
                        self._direct = (
                            self._direct_for(program, args, kwargs, key) if repeated else None
                        )
                    return program.unflatten(outputs)
            tried = len(variants)
            turn = self._turn_to_trace(key, tried)
            if turn is not None:
                break
        if turn is _EAGERLY:
            return self.fn(*args, **kwargs)
        variants, done = turn
        # the arguments' structure as called: the function may store into them
        as_called = _containers_copied(args), _containers_copied(kwargs)
        try:
            program, result = self._trace(args, kwargs, draws=draws)
            if program is None:  # it ran eagerly, and will for this key
                with self._lock:
                    self._eager_keys.add(key)
                    if not variants and self._cache.get(key) is variants:
                        del self._cache[key]
                return result
            # a number argument the trace decided on by value is part of the key now;
            # the program still takes it, as the value it was traced with
            settled = self._signature(*as_called)[1]
            with self._lock:
                if settled != key:
                    paths: list = []
                    leaves, _ = self._signature(*as_called, paths, by_value=frozenset())
                    program.fixed_leaves = [
                        (k, leaf)
                        for k, (leaf, path) in enumerate(zip(leaves, paths))
                        if path in self._by_value
                    ]
                    if not variants and self._cache.get(key) is variants:
                        del self._cache[key]
                    variants = self._cache.setdefault(settled, [])
                variants.append(program)
                self._last_hit = program  # so the next call's hit makes the direct function
                self._evict(settled)
        finally:
            with self._lock:
                if self._tracing.get(key) is done:
                    del self._tracing[key]
            done.set()
        return result

    def _direct_for(self, program, args: tuple, kwargs: dict, key):
        """What calls like this one, to the key used last, run without
        computing the key (the caller holds the lock): None unless the
        arguments are all tensors and they alone decide the program and
        its plan."""
        if (
            kwargs
            or self.static_argnums
            or self._dynamic_dims
            or not all(isinstance(a, Tensor) for a in args)
            or not isinstance(program, Program)
            or self._cache.get(key, (None,))[0] is not program
        ):
            return None
        state = program.state
        shares = bool(key[0]) and key[0][-1][0] == "sharing memory"
        if (state is not None and state.writes) or shares:
            # a direct call computes no key: a program traced on a tensor passed
            # twice must not serve two tensors (one without side effects may)
            return None
        run = program.direct_run(list(args))
        if run is None:
            return None
        return _Direct(run, program.unflatten, key[1], None if state is None else state.check)

    def _turn_to_trace(self, key, tried: int):
        """What a call does after failing the guards of ``tried`` variants of
        its key: None to look at the variants again (another thread added one),
        _EAGERLY, or (the key's variants, an event to set when this thread's
        trace ends) to trace. While another thread traces the key, the call
        waits for that trace rather than compiling the same program again."""
        too_many = False
        with self._lock:
            if key in self._eager_keys:
                return _EAGERLY
            variants = self._cache.setdefault(key, [])
            if len(variants) > tried:
                return None
            pending = self._tracing.get(key)
            if pending is None:
                self._misses += 1
                too_many = len(variants) >= MAX_VARIANTS
                if not too_many:
                    return self._start_trace(key, variants)
                # what the programs depended on, and the Python state that kept changing
                reasons = {r for p in variants for r in p.guard_reasons()}
                failures = (getattr(p, "failure", "") for p in variants)
                reasons |= {f for f in failures if f.startswith("Python state")}
                where = "; ".join(sorted(reasons))
                del self._cache[key]  # its programs are no longer tried
                self._eager_keys.add(key)
        if too_many:
            warnings.warn(
                f"fusegrad.jit: {self.__name__} took {MAX_VARIANTS} different paths "
                f"through Python control flow on tensor values or Python state ({where}); "
                "running it eagerly from now on for these argument types",
                stacklevel=3,
            )
            return _EAGERLY
        if pending.wait(TRACE_PATIENCE):
            return None
        with self._lock:  # that trace may be waiting for this thread: trace here as well
            if self._tracing.get(key) is not pending:
                return None
            self._misses += 1
            return self._start_trace(key, self._cache.setdefault(key, []))

    def forked_in_child(self) -> None:
        self._lock = threading.Lock()
        self._tracing.clear()  # those threads' traces: the child traces the keys itself

    def _evict(self, kept) -> None:
        """Drops the least recently used keys' programs beyond ``cache_size``
        (the caller holds the lock)."""
        count = sum(len(v) for v in self._cache.values())
        for key in list(self._cache):
            if count <= self.cache_size:
                break
            if key != kept:
                count -= len(self._cache.pop(key))
                self._direct = None

    def _start_trace(self, key, variants: list):
        """Marks the key as traced by this thread (the caller holds the lock)."""
        self._direct = None  # the key called last, which it stood for, is another now
        self._log_recompile(key, variants)
        self._count_recompiles(key, variants)
        done = self._tracing[key] = threading.Event()
        return variants, done

    def lower(self, *args, **kwargs) -> Lowered:
        """Traces for these arguments and returns the program, leaving the
        arguments, captured tensors and ``.grad`` as they were."""
        if recording.trace is not None:
            # the operations lower() runs would be missing from the outer trace
            raise RuntimeError("fusegrad.jit: lower() cannot be called inside a traced function")
        program, _ = self._trace(args, kwargs, lower=True)
        return Lowered(program)

    # ------------------------------------------------------------------ tracing

    def _trace(self, args, kwargs, lower=False, draws=None, dynamic=True) -> tuple:
        """Runs the function once, recording; returns the program it became
        and the call's result. The result comes from the program too, so its
        backward is the compiled one: the trace's side effects on tensors and
        ``.grad`` are undone and the program applies them. When the trace's
        own Python side effects changed what the program guards (an
        optimizer's first step creates its state), the program serves later
        calls only and this call keeps the trace's eager result. For
        ``lower``, every side effect is undone and a run without side
        effects compiles the kernels."""
        start = time.perf_counter()
        seconds, counts = Counter(timing.seconds), Counter(timing.counts)
        trace = Trace()
        if draws is not None:
            trace.draws = draws
        given = args, kwargs
        try:
            before = Walk(self.fn, args, kwargs)
            appended = before.appended_lists()
            if appended:  # walked again, without guarding those lists' items
                before = Walk(self.fn, args, kwargs, appended)
        except Refused as exc:
            return self._eager_instead(str(exc), given, lower)
        leaves, paths, args, kwargs = self._inputs(trace, args, kwargs, dynamic)
        states, already_drawn = generator_states(), len(trace.draws.made)
        returned = False
        try:
            before.install_numbers(self._number_places, trace)
            with timing.phase("trace"), active(trace), drawing():
                result = self.fn(*args, **kwargs)
            returned = True
            fresh = [spec for spec, _ in trace.draws.made[already_drawn:]]
            if not same_states(replayed_states(states, fresh), generator_states()):
                raise TracingError(
                    f"{self.__name__} draws from Python's random module or numpy's global "
                    "generator through a name bound before the call (from random import "
                    "...): jit cannot draw again on later calls; call random.<function> "
                    "or np.random.<function>, or use fusegrad's samplers"
                )
            out_tensors: list = []
            tree = _flatten_output(result, out_tensors)
            with active(trace):  # what the writes decide on sizes is part of the trace
                state, refused = _python_state(before, trace, out_tensors)
            if refused is not None:
                if lower or trace.symbol_hints:
                    # lower() leaves no effect; a dynamic trace's values hold sizes
                    # as symbols: the call runs again, eagerly
                    trace.restore(python_too=True)
                    before.restore()
                    return self._eager_instead(refused, given, lower)
                # the trace ran the function eagerly: its result and effects stand
                self._warn_eager(refused)
                make_plain(before)
                return None, _plain(result)
            trace.locate(state.lookup)
            # numbers it changed or an optimizer read: inputs of its next traces
            numbers = state.changed_numbers | before.paths_of(trace.input_places)
            if not numbers <= self._number_places:
                with self._lock:
                    self._number_places |= numbers
            with timing.phase("adjoint and passes"):
                outputs = out_tensors + state.hidden_outputs
                if trace.symbol_hints:
                    program = DynamicProgram(trace, leaves, outputs, jit)
                else:
                    program = Program(trace, leaves, outputs, jit)
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
            self._fix_sizes(trace, paths, f"{type(exc).__name__}: {exc}")
            trace.draws.reset()
            return self._trace(*given, lower=lower, draws=trace.draws, dynamic=False)
        except BaseException:
            trace.restore(python_too=True)
            before.restore()
            raise
        if trace.symbol_hints and program.pinned:
            self._fix_sizes(
                trace,
                paths,
                f"Python needed their values: {program.pinned_because}",
                program.pinned,
            )
        program.state = None if state.trivial else state
        program.unflatten = _unflattener(tree, len(out_tensors), len(state.hidden_outputs))
        if program.draw_specs:
            self._draws = True
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
                result = None
            elif outputs is None:
                # A value the compiled program computed decided a guard otherwise
                # than the eager one (their last bits differ): this call runs
                # eagerly, from the state it started in.
                result = self.fn(*given[0], **given[1])
            else:
                if state.writes:
                    state.write(objects, outputs)
                result = program.unflatten(outputs)
        else:
            make_plain(before)
            result = _plain(result)
        with self._lock:
            self._by_value |= trace.specialized
            self._compile_seconds += time.perf_counter() - start
            self._compilations += 1
            number = self._compilations
        self._log_compile(
            time.perf_counter() - start, timing.seconds - seconds, timing.counts - counts
        )
        self._dump(program, number)
        return program, result

    def _eager_instead(self, reason: str, given: tuple, lower: bool) -> tuple:
        """(None, the call's eager result): the function cannot be compiled for
        these arguments (``reason``); it runs eagerly for them from now on."""
        if lower:
            raise TracingError(f"{self.__name__} cannot be compiled: {reason}")
        self._warn_eager(reason, stacklevel=5)
        return None, self.fn(*given[0], **given[1])

    def _warn_eager(self, reason: str, stacklevel: int = 4) -> None:
        """``stacklevel``: the user's call, seen from here."""
        warnings.warn(
            f"fusegrad.jit: {self.__name__} runs eagerly for these argument types: {reason}",
            stacklevel=stacklevel,
        )

    def _inputs(self, trace, args, kwargs, dynamic: bool) -> tuple:
        """The arguments' leaves as inputs of ``trace`` (with ``dynamic``,
        their dynamic dimensions as symbols), their paths, and the arguments
        the function is traced with: its input numbers as traced numbers."""
        paths: list = []
        leaves, _ = self._signature(args, kwargs, paths)
        numbers = {}
        for leaf, path in zip(leaves, paths):
            if isinstance(leaf, Tensor):
                trace.add_input(leaf, self._dynamic_sizes(path, leaf) if dynamic else ())
            else:
                tensor = number_input(leaf, self._where(path))
                trace.add_input(tensor)
                numbers[path] = traced(tensor, self._where(path), frozenset([path]))
        if numbers:
            placed = trace.installed
            args = tuple(_with_numbers(a, (i,), numbers, placed) for i, a in enumerate(args))
            kwargs = {k: _with_numbers(v, (k,), numbers, placed) for k, v in kwargs.items()}
        return leaves, paths, args, kwargs

    def _dynamic_sizes(self, path: tuple, tensor: Tensor) -> tuple:
        """The dimensions of the argument at ``path`` a trace makes symbols:
        those whose size differs from the first trace's (all with
        ``dynamic=True``), unless fixed."""
        shape = tensor._data.shape
        if self.dynamic is False:
            return ()
        with self._lock:
            first = self._first_shapes.setdefault(path, shape)
            if len(first) != len(shape):
                return ()  # another rank: traced with static sizes
            dims = set(self._dynamic_dims.get(path, ()))
            if self.dynamic:
                dims.update(range(len(shape)))
            elif len(first) == len(shape):
                dims.update(d for d, (a, b) in enumerate(zip(first, shape)) if a != b)
            dims.difference_update(d for p, d in self._fixed_dims if p == path)
            if dims and dims != self._dynamic_dims.get(path):
                self._dynamic_dims[path] = frozenset(dims)
                self._log(f"{self._where(path)} has dynamic dimensions {sorted(dims)} from now on")
        return tuple(sorted(dims))

    def _fix_sizes(self, trace, paths: list, reason: str, symbols=None) -> None:
        """The dimensions ``trace`` made symbols (of ``symbols``, or all) are
        static from now on."""
        dims = [
            (p, d) for p, d, symbol in trace.symbol_dims if symbols is None or symbol in symbols
        ]
        with self._lock:
            for position, dim in dims:
                path = paths[position]
                self._fixed_dims.add((path, dim))
                remaining = self._dynamic_dims.get(path, frozenset()) - {dim}
                if remaining:
                    self._dynamic_dims[path] = remaining
                else:
                    self._dynamic_dims.pop(path, None)
        where = ", ".join(f"{self._where(paths[p])} dimension {d}" for p, d in dims)
        with self._lock:
            for position, _ in dims:
                self._static_because[self._where(paths[position])] = reason
        self._log(f"{where}: static from now on ({reason})")

    def _signature(self, args, kwargs, paths=None, by_value=None):
        """The leaves (tensors and the numbers that are program inputs, in
        order; with ``paths``, each leaf's path is appended there) and the
        cache key: the structure of the arguments, each tensor's shape,
        dtype and requires_grad flag, static arguments and other Python
        values by value, and grad mode."""
        leaves: list = []
        parts = []
        static = self.static_argnums
        by_value = self._by_value if by_value is None else by_value
        for i, arg in enumerate(args):
            if static and i in static:
                try:
                    hash(arg)
                except TypeError:
                    raise TypeError(
                        f"jit: static argument {i} of {self.__name__} must be "
                        f"hashable, got {type(arg).__name__}"
                    ) from None
                parts.append(("static", arg))
            elif type(arg) is Tensor and paths is None and not self._dynamic_dims:  # common
                leaves.append(arg)
                parts.append(_tensor_key(arg))
            else:
                parts.append(self._flatten_input(arg, leaves, (i,), paths, by_value))
        if kwargs:
            for name in sorted(kwargs):
                part = self._flatten_input(kwargs[name], leaves, (name,), paths, by_value)
                parts.append(("keyword", name, part))
        if len(leaves) > 1:
            # a tensor passed twice is one input of the trace; a view and its
            # base are two, which the trace refuses to write through
            shared = storage_pattern([leaf for leaf in leaves if isinstance(leaf, Tensor)])
            if shared:
                parts.append(("sharing memory", shared))
        return leaves, (tuple(parts), grad_mode.is_grad_enabled())

    def _flatten_input(self, value, leaves: list, path: tuple, paths, by_value):
        if isinstance(value, Tensor):
            leaves.append(value)
            if paths is not None:
                paths.append(path)
            dims = self._dynamic_dims.get(path)
            if dims is None or value._data.ndim != len(self._first_shapes[path]):
                return _tensor_key(value)  # dynamic dimensions are those of one rank
            return _dynamic_tensor_key(value, dims)
        if isinstance(value, _NUMBERS) and not isinstance(value, _NOT_NUMBERS):
            if path not in by_value:
                leaves.append(value)
                if paths is not None:
                    paths.append(path)
                return ("number", "float" if isinstance(value, _FLOATS) else "int")
            return ("value", type(value), value)
        if isinstance(value, _SCALARS):
            return ("value", type(value), value)  # the type: np.bool_ and bool share a name
        if isinstance(value, (tuple, list)):
            return (
                type(value).__name__,
                tuple(
                    self._flatten_input(v, leaves, (*path, k), paths, by_value)
                    for k, v in enumerate(value)
                ),
            )
        if isinstance(value, dict):
            return (
                "dict",
                tuple(
                    (k, self._flatten_input(value[k], leaves, (*path, k), paths, by_value))
                    for k in sorted(value)
                ),
            )
        if isinstance(value, np.ndarray):
            return ("ndarray", value.dtype.str, value.shape)  # its values: guarded (python_state)
        if walk_enters(value):
            return ("object", type(value))  # what the function reads of it: guarded
        if isinstance(value, _HELD_BY_IDENTITY):
            return ("the object", value)
        raise TypeError(
            f"jit: {self._where(path)} is a {type(value).__name__}, which cannot be traced; pass "
            "tensors, numbers, or tuples/lists/dicts of them, or mark the argument "
            "static with static_argnums"
        )

    # ------------------------------------------------------------------ reporting

    def _where(self, path: tuple) -> str:
        """An argument's path, for people: ``argument 'x'``, ``argument 'lr'[1]``
        (positional arguments by their parameter's name when it has one)."""
        head, *rest = path
        if isinstance(head, int):
            names = self._names
            head = names[head] if head < len(names) else head
        where = f"argument {head!r}" if isinstance(head, str) else f"argument {head}"
        return where + "".join(f"[{k!r}]" for k in rest)

    def _log(self, message: str) -> None:
        if "recompiles" in os.environ.get("FUSEGRAD_LOG", "").split(","):
            sys.stderr.write(f"fusegrad.jit: {self.__name__}: {message}\n")

    def _log_recompile(self, key, variants) -> None:
        """FUSEGRAD_LOG=recompiles: why this call compiles (the guard that
        failed, or what changed in the arguments since the last call)."""
        if "recompiles" not in os.environ.get("FUSEGRAD_LOG", "").split(","):
            return
        if variants:
            failures = dict.fromkeys(getattr(p, "failure", "?") for p in variants)
            reason = "a guard failed: " + "; ".join(failures)
        else:
            others = [k for k in self._cache if k != key and self._cache[k]]
            reason = self._difference(others[-1], key) if others else "first call"
        sys.stderr.write(f"fusegrad.jit: compiling {self.__name__}: {reason}\n")

    def _count_recompiles(self, key, variants) -> None:
        """Warns, once per argument, when changes of that argument have made
        the function compile ``RECOMPILES_BEFORE_WARNING`` times: naming it,
        what changed and why that compiles (the caller holds the lock)."""
        others = [k for k in self._cache if k != key and self._cache[k]]
        if variants or not others:
            return
        for change in self._changes_between(others[-1], key):
            label = change.split(":", 1)[0]
            self._recompiles[label] += 1
            if self._recompiles[label] != RECOMPILES_BEFORE_WARNING:
                continue
            if label in self._static_because:
                cause = f"its sizes are static: {self._static_because[label]}"
            elif self.dynamic is False:
                cause = "jit(dynamic=False) compiles a program per shape"
            elif "[" in change.split(":", 1)[1]:
                cause = "a shape or dtype a dynamic dimension does not cover"
            else:
                cause = "its value decides Python control flow, a shape or an index"
            warnings.warn(
                f"fusegrad.jit: {self.__name__} recompiled {RECOMPILES_BEFORE_WARNING} times "
                f"because {label} changed (last: {change.split(': ', 1)[1]}); {cause}",
                stacklevel=5,
            )

    def _difference(self, old, new) -> str:
        """What changed between two cache keys, argument by argument."""
        return "; ".join(self._changes_between(old, new)) or "argument structure changed"

    def _changes_between(self, old, new) -> list:
        (old_parts, old_grad), (new_parts, new_grad) = old, new
        if old_grad != new_grad:
            return [f"grad mode: {old_grad} -> {new_grad}"]
        names = self._names
        changes = []
        for position, (a, b) in enumerate(zip(old_parts, new_parts)):
            if a[0] == "keyword" and b[0] == "keyword" and a[1] == b[1]:
                changes += _changes(a[2], b[2], f"argument {a[1]!r}")
            else:
                name = names[position] if position < len(names) else position
                changes += _changes(a, b, f"argument {name!r}")
        if len(old_parts) != len(new_parts):
            changes.append(f"arguments: {len(old_parts)} -> {len(new_parts)}")
        return changes

    def _log_compile(self, elapsed: float, seconds: Counter, counts: Counter) -> None:
        """FUSEGRAD_LOG=compile: where this compilation's time went. Kernels
        compile during the first run (and eager operations run natively
        during the trace); each phase counts its own time only."""
        if "compile" not in os.environ.get("FUSEGRAD_LOG", "").split(","):
            return
        kernel_phases = ["kernel IR", "LLVM optimization", "machine code", "disk cache"]
        order = ["trace", "adjoint and passes", *kernel_phases, "first run"]
        phases = ", ".join(f"{p} {seconds[p] * 1e3:.1f}" for p in order)
        sys.stderr.write(
            f"fusegrad.jit: compiled {self.__name__} in {elapsed * 1e3:.1f} ms ({phases} ms); "
            f"machine code: {counts['modules compiled']} modules compiled, "
            f"{counts['modules from the disk cache']} from the disk cache (kernels and drivers)\n"
        )

    def _dump(self, program, number: int) -> None:
        directory = os.environ.get("FUSEGRAD_DUMP")
        if directory:
            path = Path(directory)
            path.mkdir(parents=True, exist_ok=True)
            (path / f"{self.__name__}.{number}.txt").write_text(
                program.describe(verbose=True) + "\n"
            )


def _count(counter: itertools.count) -> int:
    """How many times ``next`` was called on a counter started at 0."""
    return int(repr(counter)[6:-1])


_Direct = namedtuple("_Direct", ["run", "unflatten", "grad_enabled", "check"])


def _tensor_key(t: Tensor) -> tuple:
    return ("tensor", t._data.shape, t._dtype.name, t._requires_grad)


def _dynamic_tensor_key(t: Tensor, dims: frozenset) -> tuple:
    """The key of a tensor with dynamic dimensions: -1 for their sizes (but
    0 and 1, which are never symbols)."""
    shape = tuple(-1 if d in dims and n >= 2 else n for d, n in enumerate(t._data.shape))
    return ("tensor", shape, t._dtype.name, t._requires_grad)


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


def _plain(value):
    """A traced function's result with its traced numbers as their values."""
    if isinstance(value, TracedNumber):
        return value.value
    if isinstance(value, (tuple, list)) and not isinstance(value, Tensor):
        items = [_plain(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _containers_copied(value):
    """``value`` with its lists, tuples and dicts copied, recursively (those
    of other types, rare as arguments, as they are)."""
    if type(value) is list:
        return [_containers_copied(v) for v in value]
    if type(value) is tuple:
        return tuple(_containers_copied(v) for v in value)
    if type(value) is dict:
        return {k: _containers_copied(v) for k, v in value.items()}
    return value


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


def _flatten_output(value, tensors: list):
    if isinstance(value, Tensor):
        tensors.append(value)
        return ("tensor",)
    if isinstance(value, TracedNumber):  # an output, returned as a Python number
        tensors.append(value.tensor)
        return ("number", float if isinstance(value, TracedFloat) else int)
    if isinstance(value, (tuple, list)):
        return (type(value), tuple(_flatten_output(v, tensors) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _flatten_output(v, tensors)) for k, v in value.items()))
    return ("value", value)


def _unflattener(tree, count=None, hidden=0):
    """A function building the output's structure from the flat output
    tensors, made once per program rather than walking the tree per call;
    with ``hidden`` outputs (what the function stored, after the ``count``
    it returned), from the first ``count``."""
    if hidden:
        build = _unflattener(tree)
        return lambda tensors: build(tensors[:count])
    kind = tree[0]
    if kind == "tensor":
        return lambda tensors: tensors[0]
    if kind == "number":
        return lambda tensors: tree[1](tensors[0]._data)
    if kind == "value":
        return lambda tensors: tree[1]
    parts, start = [], 0
    for sub in tree[1] if kind != "dict" else (v for _, v in tree[1]):
        count = _tensor_count(sub)
        parts.append((_unflattener(sub), start, start + count))
        start += count
    if kind == "dict":
        keys = [k for k, _ in tree[1]]
        return lambda tensors: {k: build(tensors[a:b]) for k, (build, a, b) in zip(keys, parts)}
    if all(sub == ("tensor",) for sub in tree[1]) and not hasattr(kind, "_fields"):
        return kind  # a flat tuple or list of tensors
    if hasattr(kind, "_fields"):
        return lambda tensors: kind(*[build(tensors[a:b]) for build, a, b in parts])
    return lambda tensors: kind([build(tensors[a:b]) for build, a, b in parts])


def _tensor_count(tree) -> int:
    kind = tree[0]
    if kind in ("tensor", "number"):
        return 1
    if kind == "value":
        return 0
    subtrees = (v for _, v in tree[1]) if kind == "dict" else tree[1]
    return sum(_tensor_count(sub) for sub in subtrees)


def _parameter_names(fn) -> list:
    """The names of ``fn``'s positional parameters (none for what has no signature)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _changes(old, new, label: str) -> list:
    """How one argument's part of the key changed, for people."""
    if old == new:
        return []
    if old[0] == new[0] == "tensor":
        return [f"{label}: {_describe(old)} -> {_describe(new)}"]
    if old[0] == new[0] and old[0] in ("tuple", "list") and len(old[1]) == len(new[1]):
        return [
            change
            for k, (a, b) in enumerate(zip(old[1], new[1]))
            for change in _changes(a, b, f"{label}[{k}]")
        ]
    if old[0] == new[0] == "dict" and [k for k, _ in old[1]] == [k for k, _ in new[1]]:
        return [
            change
            for (k, a), (_, b) in zip(old[1], new[1])
            for change in _changes(a, b, f"{label}[{k!r}]")
        ]
    return [f"{label}: {_describe(old)} -> {_describe(new)}"]


def _describe(part) -> str:
    kind = part[0]
    if kind == "tensor":
        _, shape, dtype, requires_grad = part
        sizes = ", ".join("dynamic" if n == -1 else str(n) for n in shape)
        return f"{dtype}[{sizes}]" + (" requiring grad" if requires_grad else "")
    if kind == "number":
        return f"a {part[1]}"
    if kind in ("value", "static"):
        return repr(part[-1])
    if kind == "dict":
        return f"a dict with keys {[k for k, _ in part[1]]}"
    if kind == "ndarray":
        return f"a numpy array of dtype {part[1]} and shape {part[2]}"
    if kind == "object":
        return f"a {part[1].__name__}"
    if kind == "the object":
        return repr(part[1])
    return f"a {kind} of {len(part[1])}"


__all__ = ["CacheInfo", "JitFunction", "Lowered", "jit", "TracingError"]
