"""``fusegrad.jit``: trace a function once per signature, run the program after.

The cache key is the call's signature: the structure of the arguments, each
tensor's shape, dtype and requires_grad flag, static arguments by value,
Python numbers by value, grad mode and autocast's state. A key can hold a
few variants, one per path the function's Python control flow took on
tensor values (guards);
past ``MAX_VARIANTS`` the key runs eagerly, with a warning naming the line.
Threads calling with one key at once trace it once: the others wait for
that trace and run its program (other keys trace meanwhile).
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
import warnings
import weakref
from collections import OrderedDict, namedtuple

from ..eager import autocast_state, grad_mode
from ..eager import tensor as eager_tensor
from ..eager.tensor import Tensor, recording
from ..ir import dtypes
from ..ir.graph import format_graph
from ..runtime import threads
from . import picture
from .compile_log import CompileLog
from .compiled import Program
from .dynamic import DynamicProgram
from .pyrandom import Draws
from .signature import Signatures, parameter_names
from .trace import TracingError
from .tracing import Tracer

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
_EVERY_FUNCTION: weakref.WeakSet = weakref.WeakSet()  # the live jit functions, for reset()


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

    def graph(self, path=None) -> str:
        """The forward and backward programs as Graphviz DOT text
        (``picture.py``); with ``path``, also written to ``<path>.dot`` and,
        when Graphviz's ``dot`` is installed, drawn into ``<path>.svg``."""
        text = picture.program_dot(self.program)
        if path is not None:
            picture.write(text, path)
        return text


class JitFunction:
    """The compiled function ``jit`` returns: a call runs the program its
    key's guards choose, else traces one (tracing.py); its programs are
    kept per key (signature.py), at most ``cache_size``."""

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
        if not hasattr(self, "__name__"):  # a module or a partial: messages name its type
            self.__name__ = type(fn).__name__
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
        self._draws = False  # whether a trace saw draws from Python's random or numpy's
        self.dynamic = dynamic
        names = parameter_names(fn)
        self._log = CompileLog(self, names)
        self._signatures = Signatures(static_argnums, dynamic, names, self._log)
        self._signature = self._signatures.of  # bound once: every call computes a key
        self._tracer = Tracer(fn, self._signatures, self._log, jit)
        # The last call's program, when its tensors alone chose it: calls
        # with tensors of the same layouts run it at once.
        self._direct: _Direct | None = None
        self._last_hit = None  # the program the last call traced or hit
        self._direct_hits = itertools.count()  # counted without the lock: next() is atomic
        _EVERY_FUNCTION.add(self)

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
                self._tracer.compile_seconds,
            )

    def __call__(self, *args, **kwargs):
        direct = self._direct
        if (
            direct is not None
            and not kwargs
            and recording.trace is None  # (_runs_inline, read here without a call)
            and eager_tensor.dual_levels is None
            and grad_mode.is_grad_enabled() is direct.grad_enabled
            and _DEFAULTS[dtypes.FLOATING] is direct.default_dtype
            and not autocast_state.state.enabled  # autocast regions take the checked path
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
        if self.eager or _runs_inline():
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
                    self._count_hit(key, variants, index, program, (args, kwargs))
                    return program.unflatten(outputs)
            tried = len(variants)
            turn = self._turn_to_trace(key, tried)
            if turn is _EAGERLY:
                return self.fn(*args, **kwargs)
            if turn is not None:
                return self._trace_and_cache(key, args, kwargs, draws, *turn)

    def _count_hit(self, key, variants: list, index: int, program, call: tuple) -> None:
        with self._lock:
            self._hits += 1
            if key in self._cache:
                self._cache.move_to_end(key)
            # Tried first from now on: a loop's first call often differs (an
            # optimizer's first step makes its state), and every later call
            # would test that path's guards.
            if index and index < len(variants) and variants[index] is program:
                variants.insert(0, variants.pop(index))
            # Only for the program the previous call ran too (its trace or a
            # hit): calls alternating between programs would make one on
            # every hit.
            repeated = program is self._last_hit
            self._last_hit = program
            self._direct = self._direct_for(program, *call, key) if repeated else None

    def _trace_and_cache(self, key, args: tuple, kwargs: dict, draws, variants: list, done):
        """Traces the call (its key's turn, from ``_turn_to_trace``) and keeps
        the program among the variants of the key the trace settled; returns
        the call's result. Threads waiting for this trace go on after it."""
        # the arguments' structure as called: the function may store into them
        as_called = _containers_copied(args), _containers_copied(kwargs)
        try:
            program, result = self._tracer.trace(args, kwargs, draws=draws)
            if program is None:  # it ran eagerly, and will for this key
                with self._lock:
                    self._eager_keys.add(key)
                    if not variants and self._cache.get(key) is variants:
                        del self._cache[key]
                return result
            if program.draw_specs:
                self._draws = True
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
                        if path in self._signatures.by_value
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
            or self._signatures.dynamic_dims
            or key[2] is not None  # made under autocast: calls there check their key
            or not all(
                isinstance(a, Tensor) and not a.is_sparse and not a.is_complex() for a in args
            )
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
        check = None if state is None else state.check
        return _Direct(run, program.unflatten, key[1], key[3], check)

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

    def clear_cache(self) -> None:
        """Forgets every program, and which keys ran eagerly: calls trace afresh."""
        with self._lock:
            self._cache.clear()
            self._eager_keys.clear()
            self._direct = self._last_hit = None

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
        self._log.compiling(key, variants, self._cache)
        self._log.count_recompiles(
            key, variants, self._cache, self._signatures, RECOMPILES_BEFORE_WARNING
        )
        done = self._tracing[key] = threading.Event()
        return variants, done

    def lower(self, *args, **kwargs) -> Lowered:
        """Traces for these arguments and returns the program, leaving the
        arguments, captured tensors and ``.grad`` as they were."""
        if recording.trace is not None:
            # the operations lower() runs would be missing from the outer trace
            raise RuntimeError("fusegrad.jit: lower() cannot be called inside a traced function")
        program, _ = self._tracer.trace(args, kwargs, lower=True)
        if program.draw_specs:
            self._draws = True
        return Lowered(program)


def reset() -> None:
    """Every jit function forgets its programs, as in a fresh process
    (machine code cached on disk stays)."""
    for function in list(_EVERY_FUNCTION):
        function.clear_cache()


_DEFAULTS = dtypes.DEFAULT_FOR_CATEGORY  # set_default_dtype writes into it in place


def _runs_inline() -> bool:
    """Whether a call runs the Python function: inside another trace (which
    records it inline), or while a forward-AD dual level is active (a
    program would drop the tangents of its arguments and captured tensors)."""
    return recording.trace is not None or eager_tensor.dual_levels is not None


def _count(counter: itertools.count) -> int:
    """How many times ``next`` was called on a counter started at 0."""
    return int(repr(counter)[6:-1])


_Direct = namedtuple("_Direct", ["run", "unflatten", "grad_enabled", "default_dtype", "check"])


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


__all__ = ["CacheInfo", "JitFunction", "Lowered", "jit", "TracingError"]
