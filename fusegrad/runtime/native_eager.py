"""Eager operations numpy has no fast loop for, run natively.

numpy has no erf or erfc: the primitives' numpy implementations (and GELU's) call
math.erf or math.erfc element by element, some 80 ns each, so a GELU over a transformer's
activations took most of an eager step (and of a jit function's trace,
which runs the function eagerly). On large arrays eager mode runs such a
primitive as the one-equation program a compiled function would run: the
kernel's approximation (within a few ulps, see codegen/mathfns.py), so eager
and compiled code compute the same values. Primitives with a hand-written
routine (runtime/routines.py) run by it, as compiled programs do.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

import numpy as np

from ..ir import primitives as P
from ..ir.dtypes import float32, float64
from ..ir.graph import Eqn, Graph, Var
from . import routines
from .executor import Executor

PRIMITIVES = frozenset([P.erf, P.erfc, P.gelu, *routines.ROUTINES])
MIN_ELEMENTS = 4096  # below, erf's element-by-element loop costs less than a launch
PROGRAMS_KEPT = 64  # by (primitive, shape, dtype); the least recently used go first
_DTYPES = {np.dtype(np.float32): float32, np.dtype(np.float64): float64}

_programs: OrderedDict = OrderedDict()
_lock = threading.Lock()


def _renew_lock() -> None:
    global _lock
    _lock = threading.Lock()  # another thread's run, which a forked child does not have


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_renew_lock)


def runs_natively(prim, x: np.ndarray) -> bool:
    """Whether ``prim`` (of ``PRIMITIVES``) on ``x`` runs natively."""
    if prim in routines.ROUTINES:
        return routines.runs_natively(prim, x)
    return x.size >= MIN_ELEMENTS and x.dtype in _DTYPES


def run(prim, x: np.ndarray, params: dict, *others) -> np.ndarray:
    """``prim`` on ``x`` (a float array) natively, into a new array; only a
    routine takes ``others``, the operands after ``x``."""
    if prim in routines.ROUTINES:
        return routines.ROUTINES[prim](x, *others, **params)
    key = (prim, x.shape, x.dtype)
    with _lock:  # one run at a time: a program's first runs make its plans
        executor = _programs.get(key)
        if executor is None:
            dtype = _DTYPES[x.dtype]
            argument, result = Var(x.shape, dtype), Var(x.shape, dtype)
            executor = Executor(Graph([argument], [Eqn(prim, (argument,), {}, result)], [result]))
            _programs[key] = executor
            if len(_programs) > PROGRAMS_KEPT:
                _programs.popitem(last=False)
        else:
            _programs.move_to_end(key)
        (out,) = executor.run([x])
    return out
