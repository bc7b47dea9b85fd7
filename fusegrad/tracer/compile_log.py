"""What jit tells people about one function's compilations:
``FUSEGRAD_LOG=recompiles`` (why a call compiles, which dimensions became
dynamic or static), ``FUSEGRAD_LOG=compile`` (where a compilation's time
went), ``FUSEGRAD_DUMP`` (each program, described), and a warning naming
the argument whose changes keep making the function compile again."""

from __future__ import annotations

import os
import sys
import warnings
import weakref
from collections import Counter
from pathlib import Path

from . import picture, report


def _logs(topic: str) -> bool:
    return topic in os.environ.get("FUSEGRAD_LOG", "").split(",")


# what a cache key holds after the arguments' parts (signature.py)
_MODES = ("grad mode", "autocast", "default dtype")


class CompileLog:
    """``function``: the jit function, named in every line and warning (read
    when one is written); ``names``: its positional parameters' names, which
    name the arguments."""

    def __init__(self, function, names: list):
        # weakly: the function owns its log, and a cycle would keep its
        # programs alive until the garbage collector ran
        self._function = weakref.ref(function)
        self._names = names
        self._recompiles: Counter = Counter()  # argument label -> compilations it caused
        self._reason = None  # why the compilation under way started, for FUSEGRAD_REPORT

    @property
    def name(self) -> str:
        return self._function().__name__

    def note(self, message: str) -> None:
        if _logs("recompiles"):
            sys.stderr.write(f"fusegrad.jit: {self.name}: {message}\n")

    def compiling(self, key, variants, cache) -> None:
        """FUSEGRAD_LOG=recompiles: why this call compiles (the guard that
        failed, or what changed in the arguments since the last call)."""
        if not _logs("recompiles") and not report.enabled():
            return
        if variants:
            failures = dict.fromkeys(getattr(p, "failure", "?") for p in variants)
            reason = "a guard failed: " + "; ".join(failures)
        else:
            others = [k for k in cache if k != key and cache[k]]
            reason = self._difference(others[-1], key) if others else "first call"
        self._reason = reason
        if _logs("recompiles"):
            sys.stderr.write(f"fusegrad.jit: compiling {self.name}: {reason}\n")

    def count_recompiles(self, key, variants, cache, signatures, limit: int) -> None:
        """Warns, once per argument, when changes of that argument have made
        the function compile ``limit`` times: naming it, what changed and
        why that compiles (the caller holds the jit function's lock)."""
        others = [k for k in cache if k != key and cache[k]]
        if variants or not others:
            return
        for change in self._changes_between(others[-1], key):
            label = change.split(":", 1)[0]
            self._recompiles[label] += 1
            if self._recompiles[label] != limit:
                continue
            if label in signatures.static_because:
                cause = f"its sizes are static: {signatures.static_because[label]}"
            elif signatures.dynamic is False:
                cause = "jit(dynamic=False) compiles a program per shape"
            elif "[" in change.split(":", 1)[1]:
                cause = "a shape or dtype a dynamic dimension does not cover"
            else:
                cause = "its value decides Python control flow, a shape or an index"
            warnings.warn(
                f"fusegrad.jit: {self.name} recompiled {limit} times "
                f"because {label} changed (last: {change.split(': ', 1)[1]}); {cause}",
                # the user's call: through JitFunction._start_trace, _turn_to_trace, __call__
                stacklevel=5,
            )

    def _difference(self, old, new) -> str:
        """What changed between two cache keys, argument by argument."""
        return "; ".join(self._changes_between(old, new)) or "argument structure changed"

    def _changes_between(self, old, new) -> list:
        (old_parts, *old_modes), (new_parts, *new_modes) = old, new
        for mode, was, now in zip(_MODES, old_modes, new_modes):
            if was != now:
                return [f"{mode}: {was} -> {now}"]
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

    def compiled(self, elapsed: float, seconds: Counter, counts: Counter) -> None:
        """FUSEGRAD_LOG=compile: where this compilation's time went. Kernels
        compile during the first run (and eager operations run natively
        during the trace); each phase counts its own time only."""
        if not _logs("compile"):
            return
        kernel_phases = ["kernel IR", "LLVM optimization", "machine code", "disk cache"]
        order = ["trace", "adjoint and passes", *kernel_phases, "first run"]
        phases = ", ".join(f"{p} {seconds[p] * 1e3:.1f}" for p in order)
        sys.stderr.write(
            f"fusegrad.jit: compiled {self.name} in {elapsed * 1e3:.1f} ms ({phases} ms); "
            f"machine code: {counts['modules compiled']} modules compiled, "
            f"{counts['modules from the disk cache']} from the disk cache (kernels and drivers)\n"
        )

    def dump(self, program, number: int, trace) -> None:
        """FUSEGRAD_DUMP and FUSEGRAD_REPORT: compilation ``number`` made
        ``program`` of ``trace``."""
        if report.enabled():
            reason, self._reason = self._reason, None
            reason = reason or "lower()"
            report.compiled(self._function, self.name, program, number, reason, trace)
        directory = os.environ.get("FUSEGRAD_DUMP")
        if directory:
            path = Path(directory)
            path.mkdir(parents=True, exist_ok=True)
            (path / f"{self.name}.{number}.txt").write_text(program.describe(verbose=True) + "\n")
            (path / f"{self.name}.{number}.dot").write_text(picture.program_dot(program))


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
    if kind == "complex":  # as its pair's key: the pair's parts dimension last
        _, shape, parts, requires_grad = part[1]
        complex_dtype = {"float32": "complex64", "float64": "complex128"}[parts]
        return _describe(("tensor", shape[:-1], complex_dtype, requires_grad))
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
