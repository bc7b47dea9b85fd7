"""Running a Python program eagerly and compiled, side by side, and comparing
everything it leaves behind.

A program is source text defining ``step`` (the function compiled) and
``arguments(call)`` (the arguments of call number ``call``, made fresh in the
program's own namespace); it may define ``between(call)``, run eagerly
before each call (a user changing a global, a flag, a module). The source
runs twice, in two namespaces, so the eager and the compiled run each have
their own globals, modules and optimizers. After every call the two are
compared: the return value, the error raised, and every object reachable
from the namespace (tensors with their ``.grad``, modules with their
parameters, buffers and attributes, optimizers' state, lists, dicts, plain
objects). The compiled run may instead refuse: a ``TracingError`` (the
contract allows it), which ends the comparison.
"""

from __future__ import annotations

import math
import types
import warnings

import numpy as np

import fusegrad as fg
from fusegrad.tracer.trace import TracingError


class Divergence(AssertionError):
    """The compiled run differs from the eager one."""


def namespace(source: str) -> dict:
    fg.manual_seed(0)  # modules made by the program start alike in both runs
    space = {"__name__": "program"}
    exec(compile(source, "<program>", "exec"), space)
    return space


def _call(space: dict, function, call: int):
    if "between" in space:
        space["between"](call)
    args = space["arguments"](call)
    if not isinstance(args, tuple):
        args = (args,)
    try:
        return ("value", function(*args))
    except TracingError:
        raise
    except Exception as exc:
        return ("error", type(exc).__name__)


def run_both(source: str, calls: int = 5, rtol: float = 1e-9) -> str:
    """'same' when every call matched, 'refused' when the compiled run raised
    a TracingError; raises Divergence otherwise."""
    eager = namespace(source)
    compiled = namespace(source)
    jitted = fg.jit(compiled["step"])
    for call in range(calls):
        expected = _call(eager, eager["step"], call)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = _call(compiled, jitted, call)
        except TracingError as exc:
            if "please report" in str(exc):
                raise Divergence(f"call {call + 1}: {exc}") from exc
            return "refused"
        if got[0] == "error" and "please report" in got[1]:
            raise Divergence(f"call {call + 1}: {got[1]}")
        compare(expected, got, f"call {call + 1}: result", rtol)
        compare(state_of(eager), state_of(compiled), f"call {call + 1}: state after the call", rtol)
    return "same"


def state_of(space: dict) -> dict:
    return {
        name: snapshot(value)
        for name, value in space.items()
        if not name.startswith("__")
        and not isinstance(value, (types.ModuleType, types.FunctionType, type))
        and not callable(getattr(value, "__wrapped__", None))
    }


def snapshot(value, depth: int = 0, seen=None):
    """A comparable picture of ``value`` and what it reaches."""
    seen = set() if seen is None else seen
    if depth > 8:
        return "..."
    if isinstance(value, fg.Tensor):
        grad = value.grad
        return (
            "tensor",
            np.array(value.detach().numpy()),
            str(value.dtype),
            value.requires_grad,
            None if grad is None else np.array(grad.numpy()),
        )
    if isinstance(value, (bool, int, float, str, type(None), complex, np.generic)):
        return (type(value).__name__, value)
    if isinstance(value, np.ndarray):
        return ("array", value.copy())
    if id(value) in seen:
        return "<seen>"
    seen = seen | {id(value)}
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [snapshot(v, depth + 1, seen) for v in value])
    if isinstance(value, dict):
        return (
            "dict",
            [
                (
                    repr(k) if not isinstance(k, fg.Tensor) else "tensor-key",
                    snapshot(v, depth + 1, seen),
                )
                for k, v in value.items()
            ],
        )
    if isinstance(value, (types.FunctionType, types.MethodType, types.BuiltinFunctionType)):
        return ("function", getattr(value, "__qualname__", "?"))
    if type(value).__name__ == "RemovableHandle":  # ids count handles process-wide
        return "handle"
    if isinstance(value, np.random.Generator):
        return ("generator", repr(value.bit_generator.state))
    if isinstance(value, fg.optim.Optimizer):
        return ("optimizer", snapshot(value.state_dict(), depth + 1, seen))
    if isinstance(value, types.GeneratorType):  # where it is: its frame's locals
        frame = value.gi_frame
        return (
            "generator",
            None if frame is None else snapshot(dict(frame.f_locals), depth + 1, seen),
        )
    if hasattr(type(value), "__next__") and not hasattr(value, "__dict__"):
        try:
            return ("iterator", snapshot(list(value.__reduce__()[2:]), depth + 1, seen))
        except TypeError:
            pass
    attributes = getattr(value, "__dict__", None)
    slots = [
        name
        for cls in type(value).__mro__
        for name in (lambda s: (s,) if isinstance(s, str) else s)(cls.__dict__.get("__slots__", ()))
        if name not in ("__dict__", "__weakref__")
    ]
    if slots:
        mangled = {
            name: f"_{type(value).__name__.lstrip('_')}{name}"
            if name.startswith("__") and not name.endswith("__")
            else name
            for name in slots
        }
        attributes = {
            **(attributes or {}),
            **{name: getattr(value, real, None) for name, real in mangled.items()},
        }
    if attributes is not None:
        return (
            type(value).__name__,
            [
                (k, snapshot(v, depth + 1, seen))
                for k, v in sorted(attributes.items())
                # hook tables are keyed by a process-wide handle count
                if not k.startswith("_compiled") and "hooks" not in k
            ],
        )
    return (type(value).__name__, repr(value))


def compare(a, b, where: str, rtol: float) -> None:
    if isinstance(a, tuple) and a and a[0] == "tensor" and isinstance(b, tuple) and b[:1] == a[:1]:
        _, x, dx, rx, gx = a
        _, y, dy, ry, gy = b
        if dx != dy or rx != ry or x.shape != y.shape:
            raise Divergence(
                f"{where}: tensor {dx}{list(x.shape)} {rx} vs {dy}{list(y.shape)} {ry}"
            )
        _close(x, y, where, rtol)
        if (gx is None) != (gy is None):
            raise Divergence(f"{where}: .grad {gx} vs {gy}")
        if gx is not None:
            _close(gx, gy, where + ".grad", rtol)
        return
    if isinstance(a, fg.Tensor) or isinstance(b, fg.Tensor):
        compare(snapshot(a), snapshot(b), where, rtol)
        return
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if type(a) is not type(b) or len(a) != len(b):
            raise Divergence(f"{where}: {_short(a)} vs {_short(b)}")
        for k, (x, y) in enumerate(zip(a, b)):
            compare(x, y, f"{where}[{k}]", rtol)
        return
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            raise Divergence(f"{where}: keys {list(a)} vs {list(b)}")
        for k in a:
            compare(a[k], b[k], f"{where}[{k!r}]", rtol)
        return
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        _close(np.asarray(a), np.asarray(b), where, rtol)
        return
    if type(a) is not type(b):
        raise Divergence(
            f"{where}: {type(a).__name__} {_short(a)} vs {type(b).__name__} {_short(b)}"
        )
    if isinstance(a, float):
        if not (
            a == b
            or (math.isnan(a) and math.isnan(b))
            or math.isclose(a, b, rel_tol=rtol, abs_tol=rtol)
        ):
            raise Divergence(f"{where}: {a!r} vs {b!r}")
        return
    if a != b:
        raise Divergence(f"{where}: {_short(a)} vs {_short(b)}")


def _close(x, y, where: str, rtol: float) -> None:
    if x.shape != y.shape or x.dtype != y.dtype:
        raise Divergence(f"{where}: {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}")
    if x.dtype.kind in "fc":
        if not np.allclose(x, y, rtol=rtol, atol=rtol, equal_nan=True):
            raise Divergence(f"{where}: {x} vs {y}")
    elif not np.array_equal(x, y):
        raise Divergence(f"{where}: {x} vs {y}")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) < 300 else text[:300] + "..."
