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
import os
import sys
import threading
import time
import warnings
from collections import Counter, namedtuple
from pathlib import Path

import numpy as np

from .. import timing
from ..ir.graph import format_graph
from ..tracer.tensor import Tensor, recording
from ..tracer.trace import Trace, TracingError, active
from . import grad_mode
from .compiled import Program

CacheInfo = namedtuple("CacheInfo", ["hits", "misses", "entries", "compile_seconds"])
MAX_VARIANTS = 8
# A trace runs the user's code, which may wait for a thread calling the
# function with the same signature (one it started and joins): a call waits
# this long for another thread's trace of its key, then traces the key too,
# so such code is slowed down, never deadlocked.
TRACE_PATIENCE = 10.0  # seconds
_EAGERLY = object()  # _turn_to_trace: run the Python function
# numpy's scalars too: the traced function gets them as they are (a numpy
# scalar is an operand as a Python number is)
_SCALARS = (bool, int, float, str, type(None), np.bool_, np.integer, np.floating)


def jit(fn=None, *, static_argnums=(), eager: bool = False):
    """Compiles ``fn``: traced on the first call for each signature, run as a
    compiled program after. Outputs that need a gradient get a
    ``CompiledFunctionBackward`` node running the derived backward program.

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
        return lambda f: jit(f, static_argnums=static_argnums, eager=eager)
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    return JitFunction(fn, tuple(static_argnums), eager)


class Lowered:
    """A compiled program, for reading: ``forward_ir`` and ``backward_ir`` (the
    graphs), ``saved_bytes`` (what the forward keeps for the backward beyond
    the inputs), ``kernels`` (each fused kernel, with its name and IR
    equations), ``llvm_ir`` and ``asm`` (of the kernels). ``str()`` shows the
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
    def __init__(self, fn, static_argnums: tuple, eager: bool):
        if not callable(fn):  # said where jit is applied, not at the first call
            raise TypeError(f"fusegrad.jit: expected a callable value, got {fn!r}")
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.static_argnums = static_argnums
        # read when the function is made, as JAX reads JAX_DISABLE_JIT once:
        # a microsecond per call otherwise
        self.eager = eager or os.environ.get("FUSEGRAD_DISABLE_JIT") == "1"
        self._cache: dict = {}  # key -> [Program, ...]
        self._eager_keys: set = set()
        self._tracing: dict = {}  # key -> Event set when the thread tracing it ends
        self._lock = threading.Lock()  # for the above and the counters, never held in user code
        self._hits = self._misses = 0
        self._compile_seconds = 0.0
        self._compilations = 0

    def __repr__(self) -> str:
        return f"<fusegrad.jit of {getattr(self.fn, '__qualname__', self.fn)!r}>"

    def __get__(self, instance, owner):  # methods: bind like a function would
        return self if instance is None else functools.partial(self, instance)

    def cache_info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(
                self._hits,
                self._misses,
                sum(len(v) for v in self._cache.values()),
                self._compile_seconds,
            )

    def __call__(self, *args, **kwargs):
        if self.eager or recording.trace is not None:  # inside another trace: traced inline
            return self.fn(*args, **kwargs)
        tensors, key = self._signature(args, kwargs)
        tried = 0  # how many of the key's variants these arguments failed the guards of
        while True:
            variants = self._cache.get(key, ())
            for program in variants[tried:]:
                outputs = program.run(tensors)
                if outputs is not None:
                    with self._lock:
                        self._hits += 1
                    return program.unflatten(outputs)
            tried = len(variants)
            turn = self._turn_to_trace(key, tried)
            if turn is not None:
                break
        if turn is _EAGERLY:
            return self.fn(*args, **kwargs)
        variants, done = turn
        try:
            program, result = self._trace(tensors, args, kwargs)
            variants.append(program)
        finally:
            with self._lock:
                if self._tracing.get(key) is done:
                    del self._tracing[key]
            done.set()
        return result

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
                where = "; ".join(sorted({r for p in variants for r in p.guard_reasons()}))
                del self._cache[key]  # its programs are no longer tried
                self._eager_keys.add(key)
        if too_many:
            warnings.warn(
                f"fusegrad.jit: {self.__name__} took {MAX_VARIANTS} different paths "
                f"through Python control flow on tensor values ({where}); running it "
                "eagerly from now on for these argument types",
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

    def _start_trace(self, key, variants: list):
        """Marks the key as traced by this thread (the caller holds the lock)."""
        self._log_recompile(key, variants)
        done = self._tracing[key] = threading.Event()
        return variants, done

    def lower(self, *args, **kwargs) -> Lowered:
        """Traces for these arguments and returns the program, leaving the
        arguments, captured tensors and ``.grad`` as they were."""
        if recording.trace is not None:
            # the operations lower() runs would be missing from the outer trace
            raise RuntimeError("fusegrad.jit: lower() cannot be called inside a traced function")
        tensors, _ = self._signature(args, kwargs)
        program, _ = self._trace(tensors, args, kwargs, restore=True)
        return Lowered(program)

    # ------------------------------------------------------------------ tracing

    def _trace(self, tensors, args, kwargs, restore=False):
        start = time.perf_counter()
        seconds, counts = Counter(timing.seconds), Counter(timing.counts)
        trace = Trace()
        for t in tensors:
            trace.add_input(t)
        try:
            with timing.phase("trace"), active(trace):
                result = self.fn(*args, **kwargs)
        except TracingError:
            trace.restore()
            raise
        out_tensors: list = []
        tree = _flatten_output(result, out_tensors)
        with timing.phase("adjoint and passes"):
            program = Program(trace, tensors, out_tensors, jit)
        program.unflatten = _unflattener(tree)
        if restore:
            trace.restore()
        with timing.phase("first run"):
            program.warm_up(tensors)
        elapsed = time.perf_counter() - start
        with self._lock:
            self._compile_seconds += elapsed
            self._compilations += 1
            number = self._compilations
        self._log_compile(elapsed, timing.seconds - seconds, timing.counts - counts)
        self._dump(program, number)
        return program, result

    def _signature(self, args, kwargs):
        tensors: list = []
        parts = []
        static = self.static_argnums
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
            elif type(arg) is Tensor:  # the common case, inline
                tensors.append(arg)
                parts.append(_tensor_key(arg))
            else:
                parts.append(_flatten_input(arg, tensors, f"argument {i}"))
        if kwargs:
            for name in sorted(kwargs):
                parts.append((name, _flatten_input(kwargs[name], tensors, f"argument {name!r}")))
        return tensors, (tuple(parts), grad_mode.is_grad_enabled())

    # ------------------------------------------------------------------ reporting

    def _log_recompile(self, key, variants) -> None:
        if "recompiles" not in os.environ.get("FUSEGRAD_LOG", "").split(","):
            return
        name = self.__name__
        if variants:
            reason = "a guard saw another value: " + "; ".join(
                sorted({reason for p in variants for reason in p.guard_reasons()})
            )
        else:
            others = [k for k in self._cache if k != key and self._cache[k]]
            reason = _difference(others[-1], key) if others else "first call"
        sys.stderr.write(f"fusegrad.jit: compiling {name}: {reason}\n")

    def _log_compile(self, elapsed: float, seconds: Counter, counts: Counter) -> None:
        """FUSEGRAD_LOG=compile: where this compilation's time went. Kernels
        compile during the first run, so their phases are part of it."""
        if "compile" not in os.environ.get("FUSEGRAD_LOG", "").split(","):
            return
        kernel_phases = ["kernel IR", "LLVM optimization", "machine code", "disk cache"]
        seconds["first run"] -= sum(seconds[p] for p in kernel_phases)
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


def _tensor_key(t: Tensor) -> tuple:
    return ("tensor", t._data.shape, t._dtype.name, t._requires_grad)


def _flatten_input(value, tensors: list, where: str):
    if isinstance(value, Tensor):
        tensors.append(value)
        return _tensor_key(value)
    if isinstance(value, _SCALARS):
        return ("value", type(value), value)  # the type: np.bool_ and bool share a name
    if isinstance(value, (tuple, list)):
        return (
            type(value).__name__,
            tuple(_flatten_input(v, tensors, f"{where}[{k}]") for k, v in enumerate(value)),
        )
    if isinstance(value, dict):
        return (
            "dict",
            tuple((k, _flatten_input(value[k], tensors, f"{where}[{k!r}]")) for k in sorted(value)),
        )
    raise TypeError(
        f"jit: {where} is a {type(value).__name__}, which cannot be traced; pass "
        "tensors, numbers, or tuples/lists/dicts of them, or mark the argument "
        "static with static_argnums"
    )


def _flatten_output(value, tensors: list):
    if isinstance(value, Tensor):
        tensors.append(value)
        return ("tensor",)
    if isinstance(value, (tuple, list)):
        return (type(value), tuple(_flatten_output(v, tensors) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _flatten_output(v, tensors)) for k, v in value.items()))
    return ("value", value)


def _unflattener(tree):
    """A function building the output's structure from the flat output
    tensors, made once per program rather than walking the tree per call."""
    kind = tree[0]
    if kind == "tensor":
        return lambda tensors: tensors[0]
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
    if kind == "tensor":
        return 1
    if kind == "value":
        return 0
    subtrees = (v for _, v in tree[1]) if kind == "dict" else tree[1]
    return sum(_tensor_count(sub) for sub in subtrees)


def _difference(old, new) -> str:
    """Which argument's shape, dtype or flag changed between two cache keys."""
    (old_parts, old_grad), (new_parts, new_grad) = old, new
    if old_grad != new_grad:
        return f"grad mode changed from {old_grad} to {new_grad}"
    changes = []
    for position, (a, b) in enumerate(zip(old_parts, new_parts)):
        if a != b:
            changes.append(f"argument {position}: {_describe(a)} -> {_describe(b)}")
    return "; ".join(changes) or "argument structure changed"


def _describe(part) -> str:
    if part[0] == "tensor":
        _, shape, dtype, requires_grad = part
        return f"{dtype}{list(shape)}" + (" requires_grad" if requires_grad else "")
    return repr(part)


__all__ = ["CacheInfo", "JitFunction", "Lowered", "jit", "TracingError"]
