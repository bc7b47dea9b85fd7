"""Simplification passes. Each takes a graph and returns an equivalent one
whose every value is bit-for-bit what the original computes.

- ``fold_constants``: equations whose operands are all (small) constants
  become constants.
- ``algebraic``: identities exact in IEEE arithmetic (x*1, x/1, x-0, x+(-0),
  --x, with constants of any shape that leave x's shape alone; not x+0,
  which turns -0 into +0) and shape canonicalization
  (reshape/transpose/broadcast that change nothing, a copy of a copy,
  reshape of reshape, transpose of transpose, an assignment of a value to
  all of one of its shape and dtype (``copy_``), which is that value, a
  concatenation's operands that are concatenations on its axis; a sum of
  values scattered into adjacent slices, which is their concatenation); an
  elementwise operand that is a constant array of one repeated value (or a
  broadcast of one) becomes that value when the other operands set the
  shape; negations move out of products and into differences; a < a and
  a > a are false, and a sum of +0s is +0.
- ``cse``: one equation per distinct (primitive, operands, parameters),
  the operands of a sum or product in either order.
- ``dce``: equations no output depends on are dropped.

Collectives are left alone by all of them: each communicates with other
processes, which run it too (see ``Primitive.collective``).

``without_stop_gradients`` is for graphs that only run (the forward and
backward programs, once the adjoint is derived): it makes ``stop_gradient``
the identity it computes, so no kernel copies a value to detach it.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from . import dtypes
from . import primitives as P
from .fusion import is_elementwise
from .graph import Const, Eqn, Graph, Var, run_equation
from .shapes import broadcast_shapes, is_symbolic

FOLD_LIMIT = 4096  # elements; larger constants are not materialized


def _substitute(graph: Graph, rewrite) -> Graph:
    """Rebuilds ``graph``; ``rewrite(eqn)`` returns a replacement value, or
    None to keep the equation (with its operands renamed)."""
    renamed: dict = {}

    def read(v):
        return renamed.get(v, v) if isinstance(v, Var) else v

    eqns = []
    for eqn in graph.eqns:
        eqn = Eqn(eqn.prim, tuple(read(v) for v in eqn.inputs), eqn.params, eqn.out)
        replacement = rewrite(eqn)
        if replacement is None:
            eqns.append(eqn)
        else:
            renamed[eqn.out] = replacement
    return Graph(graph.inputs, eqns, [read(v) for v in graph.outputs])


def dce(graph: Graph) -> Graph:
    live = {v for v in graph.outputs if isinstance(v, Var)}
    kept = []
    for eqn in reversed(graph.eqns):
        if eqn.out in live or eqn.prim.collective:
            kept.append(eqn)
            live.update(v for v in eqn.inputs if isinstance(v, Var))
    return Graph(graph.inputs, kept[::-1], graph.outputs)


def _operand_key(v):
    if isinstance(v, Const):
        return ("const", v.dtype.name, v.value.shape, v.value.tobytes())
    return id(v)


def _param_key(params: dict):
    return tuple(sorted((k, repr(v)) for k, v in params.items()))


# a + b and b + a are the same bits (a NaN's payload aside); not maximum and
# minimum, whose result for +0 and -0 depends on the order
_COMMUTATIVE = frozenset([P.add, P.mul])


def cse(graph: Graph) -> Graph:
    seen: dict = {}

    def rewrite(eqn):
        if eqn.prim.collective:
            return None
        operands = tuple(_operand_key(v) for v in eqn.inputs)
        if eqn.prim in _COMMUTATIVE:  # by hash: a constant's key holds its bytes
            operands = tuple(sorted(operands, key=hash))
        key = (eqn.prim.name, operands, _param_key(eqn.params))
        if key in seen:
            return seen[key]
        seen[key] = eqn.out
        return None

    return _substitute(graph, rewrite)


def fold_constants(graph: Graph) -> Graph:
    def rewrite(eqn):
        if not all(isinstance(v, Const) for v in eqn.inputs) or np.prod(eqn.out.shape) > FOLD_LIMIT:
            return None
        if eqn.prim.collective:
            return None
        return Const(run_equation(eqn, [v.value for v in eqn.inputs]), eqn.out.dtype)

    return _substitute(graph, rewrite)


def _all_equal_to(v, value, negative_zero=False) -> bool:
    """A floating constant, of any shape (folded seeds are arrays of ones),
    every element of which is ``value`` (with the sign bit, if asked)."""
    if not isinstance(v, Const) or v.value.size == 0 or not v.dtype.is_floating_point:
        return False
    return bool(np.all(v.value == value)) and (
        not negative_zero or bool(np.all(np.signbit(v.value)))
    )


class _Match:
    """An equation being rewritten, and what rules ask of it."""

    def __init__(self, eqn: Eqn, producer: dict, uses: Counter):
        self.eqn, self.producer, self.uses = eqn, producer, uses
        self.ins, self.out = eqn.inputs, eqn.out

    def same(self, v):
        """``v``, if it may stand for the output: only with its exact type."""
        return v if v.shape == self.out.shape and v.dtype is self.out.dtype else None

    def producer_of(self, v, prim) -> Eqn | None:
        """The equation defining ``v``, if it applies ``prim``."""
        eqn = self.producer.get(v) if isinstance(v, Var) else None
        return eqn if eqn is not None and eqn.prim is prim else None

    def constant(self, k: int):
        """Operand ``k``, or what it is a broadcast or reshape of (a
        gradient's seed: ones broadcast to the output's shape)."""
        v = self.ins[k]
        inner = self.producer_of(v, P.broadcast_to) or self.producer_of(v, P.reshape)
        return inner.inputs[0] if inner is not None else v

    def is_identity(self, k: int, value: float, negative_zero: bool = False) -> bool:
        return _all_equal_to(self.constant(k), value, negative_zero)


def _neg_of_neg(m: _Match):
    inner = m.producer_of(m.ins[0], P.neg)
    return m.same(inner.inputs[0]) if inner is not None else None


def _copy_of_copy(m: _Match):
    fresh = m.ins[0].dtype is m.out.dtype and m.producer_of(m.ins[0], P.convert)
    return m.same(m.ins[0]) if fresh else None


def _broadcast_of_leading_ones(m: _Match):
    """A broadcast of a reshape that only added leading ones, which
    broadcasting adds itself, broadcasts the original."""
    reshaped = m.producer_of(m.ins[0], P.reshape)
    if reshaped is None:
        return None
    inner = reshaped.inputs[0]
    padding = len(m.ins[0].shape) - len(inner.shape)
    if padding < 0 or m.ins[0].shape != (1,) * padding + tuple(inner.shape):
        return None
    return Eqn(P.broadcast_to, (inner,), m.eqn.params, m.out)


def _reshape_of_a_broadcast_number(m: _Match):
    """A reshape of a number broadcast (zeros summed down to a broadcast
    operand's shape, then given its size-1 axes back) broadcasts the number
    to the new shape: kernels take it in, where the reshape was a step."""
    inner = m.producer_of(m.ins[0], P.broadcast_to)
    if inner is None or not isinstance(inner.inputs[0], Const) or inner.inputs[0].value.ndim:
        return None
    return Eqn(P.broadcast_to, inner.inputs, {"shape": tuple(m.out.shape)}, m.out)


def _reshape_of_reshape(m: _Match):
    """A reshape of a reshape reshapes the original, unless the inner reshape
    is also used elsewhere: when it copies (its operand strided, as
    attention's heads transposed back), the outer one is then a view of that
    copy instead of a second copy."""
    inner = m.producer_of(m.ins[0], P.reshape)
    if inner is None or m.uses[m.ins[0]] > 1:
        return None
    return Eqn(P.reshape, inner.inputs, m.eqn.params, m.out)


def _merged_axes(before: tuple, after: tuple, axis: int):
    """(start, end) when reshaping ``before`` to ``after`` only merges the
    axes [start, end) of ``before`` into ``after``'s ``axis`` (start is
    ``axis``); else None."""
    end = len(before) - (len(after) - axis - 1)
    if end - axis < 2 or before[:axis] != after[:axis] or before[end:] != after[axis + 1 :]:
        return None
    return (axis, end) if math.prod(before[axis:end]) == after[axis] else None


def _concatenate_of_merged_axes(m: _Match):
    """A concatenation of reshapes that each merge the same trailing axes
    into the concatenated one (attention's heads joined back, for the q, k
    and v gradients) concatenates the unmerged values along the first merged
    axis and reshapes that: each reshape of a strided value was a copy, and
    the concatenation then copied again."""
    axis = m.eqn.params["axis"]
    sources = [m.producer_of(v, P.reshape) for v in m.ins]
    if axis < 0 or None in sources or any(m.uses[v] > 1 for v in m.ins):
        return None
    shapes = [tuple(r.inputs[0].shape) for r in sources]
    if is_symbolic(shapes) or is_symbolic(m.out.shape):
        return None
    spans = {_merged_axes(before, tuple(v.shape), axis) for before, v in zip(shapes, m.ins)}
    if len(spans) != 1 or None in spans:
        return None
    _, end = spans.pop()
    if len({before[axis + 1 : end] for before in shapes}) != 1:
        return None
    joined_shape = list(shapes[0])
    joined_shape[axis] = sum(before[axis] for before in shapes)
    joined = Var(tuple(joined_shape), m.out.dtype)
    return [
        Eqn(P.concatenate, tuple(r.inputs[0] for r in sources), {"axis": axis}, joined),
        Eqn(P.reshape, (joined,), {"shape": tuple(m.out.shape)}, m.out),
    ]


def _concatenate_of_concatenate(m: _Match):
    """Operands that are concatenations along the same axis are spliced in:
    one copy instead of one per level (the parts of a split's gradient)."""
    axis, spliced, found = m.eqn.params["axis"], [], False
    for v in m.ins:
        inner = m.producer_of(v, P.concatenate)
        if inner is not None and inner.params["axis"] == axis:
            spliced += inner.inputs
            found = True
        else:
            spliced.append(v)
    return Eqn(P.concatenate, tuple(spliced), m.eqn.params, m.out) if found else None


def _slice_ranges(spec, shape):
    """(start, count, step) per axis of ``shape`` when a basic index ``spec``
    takes a slice of every axis (step 1 where it takes one element); else None."""
    if any(entry[0] not in ("slice", "ellipsis") for entry in spec) or is_symbolic(shape):
        return None
    entries = list(spec)
    if ("ellipsis",) in entries:
        at = entries.index(("ellipsis",))
        entries[at : at + 1] = [("slice", None, None, None)] * (len(shape) - len(entries) + 1)
    if len(entries) > len(shape):
        return None
    entries += [("slice", None, None, None)] * (len(shape) - len(entries))
    ranges = []
    for entry, n in zip(entries, shape):
        start, stop, step = slice(*entry[1:]).indices(n)
        count = len(range(start, stop, step))
        if step < 1 or count < 1:
            return None
        ranges.append((start, count, step if count > 1 else 1))
    return tuple(ranges)


def _scattered_terms(m: _Match, v, terms: list) -> bool:
    """Appends to ``terms`` the (values, ranges) that ``v`` adds up: values
    scattered into zeros at basic slices, that plus +0.0 (what the rule
    below leaves), or a sum of such used only there. False if ``v`` is
    anything else."""
    padded = m.producer_of(v, P.add)
    if padded is not None and _all_equal_to(padded.inputs[1], 0.0):
        v = padded.inputs[0]
    elif padded is not None:
        return m.uses[v] == 1 and all(_scattered_terms(m, u, terms) for u in padded.inputs)
    scatter = m.producer_of(v, P.scatter_add)
    if scatter is None or len(scatter.inputs) != 1 or scatter.inputs[0].dtype is not v.dtype:
        return False
    ranges = _slice_ranges(scatter.params["spec"], scatter.params["shape"])
    if ranges is None or tuple(scatter.inputs[0].shape) != tuple(c for _, c, _ in ranges):
        return False
    terms.append((scatter.inputs[0], ranges))
    return True


def _joined(terms: list):
    """Two or more terms, equal on every axis but one, whose slices there
    tile a slice: adjacent blocks (in order), or ``g`` slices of step
    ``g * u`` starting ``u`` apart (interleaved). (indices, axis, ranges) or None."""
    for axis in range(len(terms[0][1])):
        groups: dict = {}
        for k, (_, ranges) in enumerate(terms):
            groups.setdefault(ranges[:axis] + ranges[axis + 1 :], []).append(k)
        for members in groups.values():
            if len(members) < 2:
                continue
            members.sort(key=lambda k: terms[k][1][axis][0])
            (start, _, step), *_ = parts = [terms[k][1][axis] for k in members]
            total = sum(count for _, count, _ in parts)
            position, adjacent = start, True
            for s, count, t in parts:
                adjacent = adjacent and s == position and t == step
                position = s + count * step
            if adjacent:
                return members, axis, (start, total, step), "adjacent"
            g = len(parts)
            u = step // g
            if step % g == 0 and all(
                (s, count, t) == (start + j * u, parts[0][1], step)
                for j, (s, count, t) in enumerate(parts)
            ):
                return members, axis, (start, total, u), "interleaved"
    return None


def _scatters_of_tiling_slices(m: _Match):
    """A sum of values scattered into zeros at slices that tile a slice (the
    gradients of a split's parts, q, k and v: adjacent blocks; of a pooling's
    strided views: interleaved) is their concatenation (interleaved: along a
    new axis, then merged), scattered once unless it covers everything.
    Plus +0.0: the sum turned -0 into +0, and so does that."""
    terms: list = []
    if m.out.dtype is not m.ins[0].dtype or m.ins[0].shape != m.ins[1].shape:
        return None
    if not all(_scattered_terms(m, v, terms) for v in m.ins):
        return None
    eqns = []
    while len(terms) > 1:
        found = _joined(terms)
        if found is None:
            return None
        members, axis, joined_range, kind = found
        parts = [terms[k] for k in members]
        shape = [c for _, c, _ in parts[0][1]]
        shape[axis] = joined_range[1]
        joined = Var(tuple(shape), m.out.dtype)
        if kind == "adjacent":
            eqns.append(Eqn(P.concatenate, tuple(v for v, _ in parts), {"axis": axis}, joined))
        else:
            units = []
            for v, _ in parts:
                unit = Var((*v.shape[: axis + 1], 1, *v.shape[axis + 1 :]), m.out.dtype)
                eqns.append(Eqn(P.reshape, (v,), {"shape": unit.shape}, unit))
                units.append(unit)
            stacked = Var(
                (*parts[0][0].shape[: axis + 1], len(parts), *parts[0][0].shape[axis + 1 :]),
                m.out.dtype,
            )
            eqns.append(Eqn(P.concatenate, tuple(units), {"axis": axis + 1}, stacked))
            eqns.append(Eqn(P.reshape, (stacked,), {"shape": joined.shape}, joined))
        ranges = list(parts[0][1])
        ranges[axis] = joined_range
        terms = [t for k, t in enumerate(terms) if k not in members] + [(joined, tuple(ranges))]
    ((joined, ranges),) = terms
    if any(
        (start, count, step) != (0, n, 1) for (start, count, step), n in zip(ranges, m.out.shape)
    ):
        spec = tuple(
            ("slice", start, start + (count - 1) * step + 1, step) for start, count, step in ranges
        )
        scattered = Var(m.out.shape, m.out.dtype)
        eqns.append(Eqn(P.scatter_add, (joined,), {"spec": spec, "shape": m.out.shape}, scattered))
        joined = scattered
    zero = Const(np.zeros((), m.out.dtype.np), m.out.dtype)
    return eqns + [Eqn(P.add, (joined, zero), {}, m.out)]


def _transpose_of_transpose(m: _Match):
    inner = m.producer_of(m.ins[0], P.transpose)
    if inner is None:
        return None
    perm = tuple(inner.params["perm"][p] for p in m.eqn.params["perm"])
    return Eqn(P.transpose, inner.inputs, {"perm": perm}, m.out)


def _uniform_constants_as_numbers(m: _Match):
    """A constant array of one repeated value, or a broadcast of one (a
    gradient's seed), where the other operands set the shape anyway, becomes
    that value: no array to read, and the identities above apply to it. When
    only such values and numbers remain, the result is computed once and
    broadcast."""
    if not is_elementwise(m.eqn) or m.eqn.prim.collective:
        return None
    numbers = [_as_number(m, k) for k in range(len(m.ins))]
    if all(number is m.ins[k] for k, number in enumerate(numbers)):
        return None
    others = [v.shape for v, number in zip(m.ins, numbers) if number is None]
    if m.eqn.prim is P.broadcast_to or (others and broadcast_shapes(*others) == m.out.shape):
        operands = tuple(v if number is None else number for v, number in zip(m.ins, numbers))
        return Eqn(m.eqn.prim, operands, m.eqn.params, m.out)
    if others:
        return None
    value = run_equation(
        Eqn(m.eqn.prim, tuple(numbers), m.eqn.params, m.out), [n.value for n in numbers]
    )
    folded = Const(value.reshape(()), m.out.dtype)
    return Eqn(P.broadcast_to, (folded,), {"shape": tuple(m.out.shape)}, m.out)


def _as_number(m: _Match, k: int):
    """Operand ``k`` as a 0-d constant: itself if it is one; if it is a
    constant array of one repeated value (the same bits throughout), or a
    broadcast or reshape of one, that value; else None."""
    v = m.constant(k)
    if not isinstance(v, Const) or v.value.size == 0:
        return None
    if v is m.ins[k] and v.value.ndim == 0:
        return v
    flat = np.ascontiguousarray(v.value).reshape(-1)
    bits = flat.view(np.uint8).reshape(flat.size, -1)
    if not (bits == bits[0]).all():
        return None
    return Const(flat[:1].reshape(()).copy(), v.dtype)


def _negations_out_of_products(m: _Match):
    """(-a) * b and a * (-b) are -(a * b), (-a) * (-b) is a * b, bit for bit
    (rounding is symmetric), and likewise for division: the negations move
    out, where a sum absorbs them (below) and equal products merge. Not for
    integers, whose negation of the most negative one overflows."""
    if not _all_floating(m):
        return None
    inner = [m.producer_of(v, P.neg) for v in m.ins]
    if inner == [None, None]:
        return None
    a, b = (v if found is None else found.inputs[0] for v, found in zip(m.ins, inner))
    if None not in inner:
        return Eqn(m.eqn.prim, (a, b), m.eqn.params, m.out)
    product = Var(m.out.shape, m.out.dtype)
    return [Eqn(m.eqn.prim, (a, b), m.eqn.params, product), Eqn(P.neg, (product,), {}, m.out)]


def _negation_into_difference(m: _Match):
    """a + (-b) is a - b, (-a) + b is b - a, a - (-b) is a + b: IEEE defines
    subtraction as adding the negation, and addition commutes. (-a) + (-b)
    is not -(a + b): +0 + -0 is +0."""
    if not _all_floating(m):
        return None
    first, second = (m.producer_of(v, P.neg) for v in m.ins)
    if m.eqn.prim is P.sub:
        return Eqn(P.add, (m.ins[0], second.inputs[0]), {}, m.out) if second else None
    if second is not None:
        return Eqn(P.sub, (m.ins[0], second.inputs[0]), {}, m.out)
    return Eqn(P.sub, (m.ins[1], first.inputs[0]), {}, m.out) if first else None


def _strictly_below_itself(m: _Match):
    """a < a and a > a are false for every a, NaN included: the zeros a
    piecewise constant function's gradient is made of (``P.zeros_like``)
    become a constant, and what computed the cotangent is dead."""
    if m.ins[0] is not m.ins[1] or not isinstance(m.ins[0], Var):
        return None
    false = Const(np.zeros((), np.bool_), dtypes.bool_)
    return [Eqn(P.broadcast_to, (false,), {"shape": tuple(m.out.shape)}, m.out)]


def _sum_of_zeros(m: _Match):
    """A sum of +0s is +0 in any order (of -0s, -0 or +0: the order decides):
    a piecewise constant function's zero gradient summed down to a
    broadcast operand's shape."""
    zeros = m.constant(0)
    if not _all_equal_to(zeros, 0.0) or np.signbit(zeros.value).any():
        return None
    zero = Const(np.zeros((), m.out.dtype.np), m.out.dtype)
    return [Eqn(P.broadcast_to, (zero,), {"shape": tuple(m.out.shape)}, m.out)]


def _all_floating(m: _Match) -> bool:
    return all(v.dtype.is_floating_point for v in (*m.ins, m.out))


def _overwrite_of_everything(m: _Match):
    """``x[...] = v`` (``x.copy_(v)``) with v of x's shape and dtype is v: an
    assignment copies the bits. Then v's kernel writes the result itself."""
    if len(m.ins) == 2 and P.selects_everything(m.eqn.params["spec"]):
        return m.same(m.ins[1])
    return None


# (primitives, rule): a rule returns a value to use instead of the output, an
# equation to use instead of the equation (or equations, the last defining
# the output), or None. Read top to bottom; the first rule that returns
# something wins.
RULES = [
    ((P.mul,), lambda m: m.same(m.ins[0]) if m.is_identity(1, 1.0) else None),
    ((P.mul,), lambda m: m.same(m.ins[1]) if m.is_identity(0, 1.0) else None),
    ((P.div,), lambda m: m.same(m.ins[0]) if m.is_identity(1, 1.0) else None),
    ((P.sub,), lambda m: m.same(m.ins[0]) if m.is_identity(1, 0.0) else None),
    ((P.add,), lambda m: m.same(m.ins[0]) if m.is_identity(1, 0.0, negative_zero=True) else None),
    ((P.add,), lambda m: m.same(m.ins[1]) if m.is_identity(0, 0.0, negative_zero=True) else None),
    ((P.add,), _scatters_of_tiling_slices),
    ((P.neg,), _neg_of_neg),
    ((P.mul, P.div), _negations_out_of_products),
    ((P.add, P.sub), _negation_into_difference),
    ((P.index_put,), _overwrite_of_everything),
    ((P.lt, P.gt), _strictly_below_itself),
    ((P.reduce_sum,), _sum_of_zeros),
    (
        (P.reshape, P.broadcast_to),
        lambda m: m.same(m.ins[0]) if m.ins[0].shape == m.out.shape else None,
    ),
    ((P.convert,), _copy_of_copy),
    (
        (P.transpose,),
        lambda m: (
            m.same(m.ins[0]) if m.eqn.params["perm"] == tuple(range(len(m.out.shape))) else None
        ),
    ),
    ((P.broadcast_to,), _broadcast_of_leading_ones),
    ((P.reshape,), _reshape_of_a_broadcast_number),
    ((P.reshape,), _reshape_of_reshape),
    ((P.transpose,), _transpose_of_transpose),
    ((P.concatenate,), _concatenate_of_concatenate),
    ((P.concatenate,), _concatenate_of_merged_axes),
    (None, _uniform_constants_as_numbers),  # any primitive
]


def _rewrite(eqn: Eqn, producer: dict, uses: Counter):
    m = _Match(eqn, producer, uses)
    for prims, rule in RULES:
        if prims is None or eqn.prim in prims:
            found = rule(m)
            if found is not None:
                return found
    return None


def algebraic(graph: Graph) -> Graph:
    renamed: dict = {}
    producer: dict = {}
    eqns = []
    # uses in the graph as it came: rules that would duplicate a shared
    # value's work ask for them
    uses = Counter(v for eqn in graph.eqns for v in eqn.inputs if isinstance(v, Var))
    uses.update(v for v in graph.outputs if isinstance(v, Var))

    def read(v):
        return renamed.get(v, v) if isinstance(v, Var) else v

    def add(eqn, depth):
        eqn = Eqn(eqn.prim, tuple(read(v) for v in eqn.inputs), eqn.params, eqn.out)
        found = _rewrite(eqn, producer, uses)
        if isinstance(found, (Var, Const)):
            renamed[eqn.out] = found
        elif isinstance(found, list) and depth < NEW_EQUATION_DEPTH:
            for new in found:  # the rules see the equations a rule made, too
                add(new, depth + 1)
        else:
            for kept in found if isinstance(found, list) else [found or eqn]:
                producer[kept.out] = kept
                eqns.append(kept)

    for eqn in graph.eqns:
        add(eqn, 0)
    return Graph(graph.inputs, eqns, [read(v) for v in graph.outputs])


NEW_EQUATION_DEPTH = 4  # rules rewriting what rules made: a bound, though each makes progress


def without_stop_gradients(graph: Graph) -> Graph:
    identities = (P.stop_gradient, P.forward_only)
    return _substitute(graph, lambda eqn: eqn.inputs[0] if eqn.prim in identities else None)


def bfloat16_products(graph: Graph) -> Graph:
    """The graph, its float32 products of operands that hold bfloat16 values
    (autocast's: PyTorch's product of bfloat16 sums in float32) saying so
    (``operands=bfloat16``), so the runtime can multiply bfloat16 pairs. An
    operand holds them when converted from bfloat16, then perhaps moved
    (reshaped, transposed, broadcast, indexed): eager mode's rule
    (``eager/tensor.py``, ``holds_bfloat16_after``), so it runs on a graph as
    traced or derived, before simplification (which drops stop_gradient,
    copies and multiplications by one, where eager mode sees no move), and
    both run the same routine on the same products."""
    producer = {eqn.out: eqn for eqn in graph.eqns}

    def holds_bfloat16(v) -> bool:
        while isinstance(v, Var):
            eqn = producer.get(v)
            if eqn is None or (eqn.prim is not P.convert and eqn.prim not in P.MOVING):
                return False
            if eqn.prim is P.convert:
                return eqn.inputs[0].dtype is dtypes.bfloat16
            v = eqn.inputs[0]
        return False

    def marked(eqn: Eqn) -> Eqn:
        if (
            eqn.prim is not P.matmul
            or eqn.out.dtype is not dtypes.float32
            or eqn.params.get("operands") is not None
            or not all(holds_bfloat16(v) for v in eqn.inputs)
        ):
            return eqn
        return Eqn(P.matmul, eqn.inputs, {"operands": dtypes.bfloat16}, eqn.out)

    if not any(v.dtype is dtypes.bfloat16 for eqn in graph.eqns for v in eqn.inputs):
        return graph  # no bfloat16: nothing to look for
    return Graph(graph.inputs, [marked(eqn) for eqn in graph.eqns], graph.outputs)


def rounded_products(graph: Graph, rounds_as_it_stores) -> Graph:
    """The graph, each product of bfloat16 values whose float32 result is
    only rounded to bfloat16 and made float32 again (autocast's product
    where a float32 value takes it, as a weight's gradient) one product
    rounding its result (``rounded=True``), where the runtime rounds it as
    it stores it (``rounds_as_it_stores(eqn)``, the caller's knowledge)
    rather than in a kernel's pass over the result. The same bits: the same
    sums, rounded once to nearest even. For the runtime only
    (``pipeline.executable``): no derivative reads it."""
    readers = Counter(v for eqn in graph.eqns for v in eqn.inputs if isinstance(v, Var))
    readers.update(v for v in graph.outputs if isinstance(v, Var))
    producer = {eqn.out: eqn for eqn in graph.eqns}

    def converted(eqn: Eqn, dtype):
        """The equation ``eqn`` converts to ``dtype`` from, when only it reads that."""
        if eqn.prim is not P.convert or eqn.params["dtype"] is not dtype:
            return None
        source = producer.get(eqn.inputs[0])
        return source if source is not None and readers[source.out] == 1 else None

    absorbed = set()
    eqns = []
    for eqn in graph.eqns:
        rounding = converted(eqn, dtypes.float32)
        product = rounding and converted(rounding, dtypes.bfloat16)
        if (
            product is not None
            and product.prim is P.matmul
            and product.params == {"operands": dtypes.bfloat16}
            and eqn.out.dtype is product.out.dtype
            and rounds_as_it_stores(product)
        ):
            params = {**product.params, "rounded": True}
            eqns.append(Eqn(P.matmul, product.inputs, params, eqn.out))
            absorbed.update((id(rounding), id(product)))
        else:
            eqns.append(eqn)
    if not absorbed:
        return graph
    return Graph(graph.inputs, [e for e in eqns if id(e) not in absorbed], graph.outputs)


def simplify(graph: Graph) -> Graph:
    return dce(cse(algebraic(fold_constants(graph))))
