"""The graph IR: SSA values, equations over primitives, graphs.

A ``Graph`` has input ``Var``s, a list of equations (one primitive applied to
vars and constants, defining one new var) and outputs. Values carry shape and
dtype. It prints one line per equation, jaxpr-style::

    graph(%0: f32[3,4], %1: f32[4]):
      %2: f32[3,4] = mul %0 %1
      %3: f32[] = reduce_sum[axes=(0, 1)] %2
      return %3

``Var`` supports the arithmetic operators by binding primitives into the
graph being built (``building``), which is how the VJP rules of
``primitives.py`` — written for any value type — build adjoint graphs.
"""

from __future__ import annotations

import contextlib

import numpy as np

from . import dtypes
from . import primitives as P


class Operators:
    """Arithmetic on IR values binds primitives into the graph being built.
    Operands already share a dtype here (rules run after promotion); Python
    scalars take the other operand's."""

    __slots__ = ()
    __hash__ = object.__hash__

    def __add__(self, other):
        return P.add(self, other)

    def __radd__(self, other):
        return P.add(other, self)

    def __sub__(self, other):
        return P.sub(self, other)

    def __rsub__(self, other):
        return P.sub(other, self)

    def __mul__(self, other):
        return P.mul(self, other)

    def __rmul__(self, other):
        return P.mul(other, self)

    def __truediv__(self, other):
        return P.div(self, other)

    def __rtruediv__(self, other):
        return P.div(other, self)

    def __pow__(self, other):
        return P.pow_(self, other)

    def __neg__(self):
        return P.neg(self)

    def __eq__(self, other):
        return P.eq(self, other)

    def __ne__(self, other):
        return P.ne(self, other)

    def __lt__(self, other):
        return P.lt(self, other)

    def __le__(self, other):
        return P.le(self, other)

    def __gt__(self, other):
        return P.gt(self, other)

    def __ge__(self, other):
        return P.ge(self, other)

    def __and__(self, other):
        return P.logical_and(self, other)

    def __or__(self, other):
        return P.logical_or(self, other)

    def __invert__(self):
        return P.logical_not(self)


class Var(Operators):
    """An SSA value: the output of one equation, or a graph input."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: tuple, dtype):
        self.shape = tuple(shape)
        self.dtype = dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"Var({type_string(self)})"


class Const(Operators):
    """A constant operand: a numpy array (most often 0-d) with its dtype."""

    __slots__ = ("value", "shape", "dtype")

    def __init__(self, value: np.ndarray, dtype=None):
        self.value = np.asarray(value)
        self.dtype = dtype or dtypes.from_numpy_dtype(self.value.dtype)
        self.shape = self.value.shape

    @property
    def ndim(self) -> int:
        return self.value.ndim

    def __repr__(self) -> str:
        return f"Const({self.value!r})"


class Eqn:
    """``out = prim[params](*inputs)``."""

    __slots__ = ("prim", "inputs", "params", "out")

    def __init__(self, prim, inputs: tuple, params: dict, out: Var):
        self.prim = prim
        self.inputs = tuple(inputs)
        self.params = params
        self.out = out


class Graph:
    def __init__(self, inputs: list, eqns: list, outputs: list):
        self.inputs = list(inputs)
        self.eqns = list(eqns)
        self.outputs = list(outputs)

    def __str__(self) -> str:
        return format_graph(self)

    def __repr__(self) -> str:
        return f"<Graph: {len(self.inputs)} inputs, {len(self.eqns)} equations>"


# ------------------------------------------------------------------ building


class GraphBuilder:
    """Collects the equations that binding primitives on vars produces."""

    def __init__(self):
        self.eqns: list = []


_builders: list = []


@contextlib.contextmanager
def building(builder: GraphBuilder):
    _builders.append(builder)
    try:
        yield builder
    finally:
        _builders.pop()


def ir_bind(prim, args, params):
    """Appends ``prim`` applied to ``args`` to the graph being built."""
    if not _builders:
        raise RuntimeError(f"{prim.name} applied to IR values outside of a graph being built")
    dtype = P.number_dtype([a.dtype for a in args if isinstance(a, (Var, Const))])
    inputs = tuple(
        a if isinstance(a, (Var, Const)) else Const(np.array(a, dtype.np), dtype) for a in args
    )
    shape, out_dtype = prim.shape_rule(*inputs, **params)
    out = Var(shape, out_dtype)
    _builders[-1].eqns.append(Eqn(prim, inputs, params, out))
    return out


P.register_value_type(Var, ir_bind)
P.register_value_type(Const, ir_bind)


# ------------------------------------------------------------------ printing


def type_string(value) -> str:
    return f"{value.dtype.short}[{','.join(map(str, value.shape))}]"


def _format_param(value) -> str:
    if isinstance(value, dtypes.DType):
        return value.short
    return repr(value)


def _format_const(c: Const) -> str:
    if c.value.ndim == 0:
        return f"{c.value.item()!r}:{c.dtype.short}"
    return f"const<{type_string(c)}>"


def format_graph(graph: Graph, name: str = "graph", sizes: dict | None = None) -> str:
    """The graph as text; ``sizes`` maps values to their shapes written out
    (sizes that vary between calls, as ``s0``), in place of their shapes."""
    names: dict = {}
    sizes = sizes or {}

    def typed(value) -> str:
        shape = sizes.get(value)
        return type_string(value) if shape is None else f"{value.dtype.short}[{','.join(shape)}]"

    def ref(value) -> str:
        if isinstance(value, Const):
            return _format_const(value)
        if value not in names:
            names[value] = f"%{len(names)}"
        return names[value]

    header = ", ".join(f"{ref(v)}: {typed(v)}" for v in graph.inputs)
    lines = [f"{name}({header}):"]
    for eqn in graph.eqns:
        out = ref(eqn.out)
        params = ""
        if eqn.params:
            params = "[" + ", ".join(f"{k}={_format_param(v)}" for k, v in eqn.params.items()) + "]"
        operands = " ".join(ref(v) for v in eqn.inputs)
        lines.append(f"  {out}: {typed(eqn.out)} = {eqn.prim.name}{params} {operands}")
    lines.append("  return " + ", ".join(ref(v) for v in graph.outputs))
    return "\n".join(lines)


# ------------------------------------------------------------------ checking


class VerificationError(RuntimeError):
    pass


def verify(graph: Graph) -> None:
    """Checks SSA form and re-runs every equation's shape/dtype rule."""
    defined = set(graph.inputs)
    for k, eqn in enumerate(graph.eqns):
        for v in eqn.inputs:
            if isinstance(v, Var) and v not in defined:
                raise VerificationError(f"equation {k} ({eqn.prim.name}) uses an undefined value")
        shape, dtype = eqn.prim.shape_rule(*eqn.inputs, **eqn.params)
        if tuple(shape) != eqn.out.shape or dtype is not eqn.out.dtype:
            raise VerificationError(
                f"equation {k} ({eqn.prim.name}) declares {type_string(eqn.out)} but its "
                f"rule gives {dtype.short}[{','.join(map(str, shape))}]"
            )
        if eqn.out in defined:
            raise VerificationError(f"equation {k} ({eqn.prim.name}) redefines a value")
        defined.add(eqn.out)
    for v in graph.outputs:
        if isinstance(v, Var) and v not in defined:
            raise VerificationError("an output is not defined by the graph")


# ------------------------------------------------------------------ running


def run_equation(eqn: Eqn, values: list) -> np.ndarray:
    """One equation on numpy arrays, by the primitive's implementation."""
    out = eqn.prim.compute(values, [v.dtype for v in eqn.inputs], eqn.out.dtype, eqn.params)
    return np.asarray(out, eqn.out.dtype.np)


def evaluate(graph: Graph, inputs: list) -> list:
    """The reference interpreter: numpy, one equation at a time."""
    env = dict(zip(graph.inputs, inputs))

    def read(v):
        return v.value if isinstance(v, Const) else env[v]

    for eqn in graph.eqns:
        env[eqn.out] = run_equation(eqn, [read(v) for v in eqn.inputs])
    return [read(v) for v in graph.outputs]


def apply_graph(graph: Graph, inputs: list, constant) -> list:
    """Runs the graph by binding each primitive on ``inputs``' value type
    (eager tensors, so the run is itself differentiable; or vars, to inline
    the graph into the one being built). ``constant(array, dtype)`` makes a
    constant operand of that value type."""
    env = dict(zip(graph.inputs, inputs))

    def read(v):
        return constant(v.value, v.dtype) if isinstance(v, Const) else env[v]

    for eqn in graph.eqns:
        env[eqn.out] = eqn.prim(*[read(v) for v in eqn.inputs], **eqn.params)
    return [read(v) for v in graph.outputs]
