"""Every simplification pass preserves values bit for bit, and the verifier
accepts its output: on the graph of every op in the table (and its adjoint),
and on random graphs."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.ir import primitives as P
from fusegrad.ir.autodiff import adjoint
from fusegrad.ir.graph import Const, Graph, GraphBuilder, Var, building, evaluate, verify
from fusegrad.ir.simplify import (
    algebraic,
    cse,
    dce,
    fold_constants,
    rounded_products,
    simplify,
)
from fusegrad.tracer.trace import Trace, active

from test_ops import JIT_CASES, _tensors

PASSES = [fold_constants, algebraic, cse, dce, simplify]


def _traced(op, sample):
    args = _tensors(op, sample, fg.float64, requires_grad=op.differentiable)
    tensors = [a for a in args if isinstance(a, fg.Tensor)]
    trace = Trace()
    for t in tensors:
        trace.add_input(t)
    with active(trace):
        out = op.op(*args, **sample.kwargs)
    graph = trace.graph([trace.var_of(out)])
    values = [t._data for t in tensors] + [c.tensor._data for c in trace.captured]
    return graph, values


def _assert_same(graph, transformed, values):
    verify(transformed)
    for a, b in zip(evaluate(graph, values), evaluate(transformed, values)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("op,sample", JIT_CASES)
def test_passes_preserve_values_on_the_op_table(op, sample):
    graph, values = _traced(op, sample)
    verify(graph)
    graphs = [(graph, values)]
    floats = [i for i, v in enumerate(graph.inputs) if v.dtype.is_floating_point]
    if op.differentiable and floats and graph.outputs[0].dtype.is_floating_point:
        joint = adjoint(graph, floats)
        verify(joint)
        seed = np.linspace(-1, 1, int(np.prod(graph.outputs[0].shape))).reshape(
            graph.outputs[0].shape
        )
        graphs.append((joint, values + [seed]))
    for g, vals in graphs:
        for transform in PASSES:
            _assert_same(g, transform(g), vals)


def _random_graph(rng):
    """A random graph of elementwise ops, broadcasts, reductions and shape ops."""
    shapes = [(3, 4), (4,), (3, 1), ()]
    inputs = [Var(shapes[k], fg.float64) for k in rng.permutation(4)[:3]]
    values = list(inputs)
    builder = GraphBuilder()
    with building(builder):
        for _ in range(rng.integers(4, 14)):
            a = values[rng.integers(len(values))]
            b = values[rng.integers(len(values))]
            choice = rng.integers(18)
            if choice == 0:
                new = a + b
            elif choice == 1:
                new = a * b
            elif choice == 2:
                new = a - b
            elif choice == 3:
                new = P.tanh(a)
            elif choice == 4:
                new = P.exp(P.tanh(a))
            elif choice == 5:
                new = a * 1.0
            elif choice == 6:
                new = a + -0.0
            elif choice == 7:
                new = P.neg(P.neg(a))
            elif choice == 8:
                new = P.where(a > b, a, b)
            elif choice == 9:
                new = P.reduce_sum(a, axes=tuple(range(a.ndim))) if a.ndim else a / 1.0
            elif choice == 10:
                new = P.reshape(P.reshape(a, shape=(int(np.prod(a.shape)),)), shape=a.shape)
            elif choice == 11 and a.ndim == 2:
                new = P.transpose(P.transpose(a, perm=(1, 0)), perm=(1, 0))
            elif choice == 12:
                new = P.broadcast_to(a, shape=np.broadcast_shapes(a.shape, (3, 4)))
            elif choice == 14:
                new = P.neg(a) * b if rng.integers(2) else a / P.neg(b)
            elif choice == 15:
                new = a + P.neg(b) if rng.integers(2) else P.neg(a) - P.neg(b)
            elif choice == 16:
                new = b * a + a * b
            elif choice == 17:
                seed = P.broadcast_to(Const(np.full(1, -0.0)), shape=(3, 4))
                new = (seed * 0.5 + 1.0) * a
            else:
                new = P.maximum(a, b) * P.sin(a)
            values.append(new)
        outputs = values[-2:]
    return Graph(inputs, builder.eqns, outputs)


@pytest.mark.parametrize("seed", range(40))
def test_passes_preserve_values_on_random_graphs(seed):
    rng = np.random.default_rng(seed)
    graph = _random_graph(rng)
    verify(graph)
    values = [rng.standard_normal(v.shape) for v in graph.inputs]
    joint = adjoint(
        Graph(graph.inputs, graph.eqns, graph.outputs[:1]), list(range(len(graph.inputs)))
    )
    joint_values = values + [rng.standard_normal(graph.outputs[0].shape)]
    for g, vals in ((graph, values), (joint, joint_values)):
        verify(g)
        for transform in PASSES:
            _assert_same(g, transform(g), vals)
        assert len(simplify(g).eqns) <= len(g.eqns)


def test_constant_arrays_of_one_value_act_as_that_value():
    """Folded seeds are arrays of ones: x * ones is x, and an array of 2.0
    added to x becomes the number 2.0 (no operand to read), as does an
    array of one NaN's bits; a constant that sets the result's shape, or
    holds different values (or zeros of both signs), stays."""
    x = Var((3,), fg.float64)

    def array(values):
        return Const(np.asarray(values, np.float64), fg.float64)

    builder = GraphBuilder()
    with building(builder):
        same = x * array([1.0, 1.0, 1.0])
        shifted = same + array([2.0, 2.0, 2.0])
        widened = x * array([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
        mixed = x * array([1.0, 2.0, 1.0])
        unknown = x + array([np.nan, np.nan, np.nan])
        signed = x + array([0.0, -0.0, 0.0])
    graph = Graph([x], builder.eqns, [same, shifted, widened, mixed, unknown, signed])
    simplified = algebraic(graph)
    assert simplified.outputs[0] is x
    (add,) = [e for e in simplified.eqns if e.prim is P.add and e.out is simplified.outputs[1]]
    assert add.inputs[0] is x and add.inputs[1].value.shape == ()
    rest = simplified.outputs[2:]
    kept = [e.inputs[1].value.shape for e in simplified.eqns if any(e.out is o for o in rest)]
    assert kept == [(2, 3), (3,), (), (3,)]
    _assert_same(graph, simplified, [np.array([-0.0, 1.5, np.inf])])


def test_a_broadcast_seed_of_ones_or_zeros_acts_as_its_value():
    """The seed of a gradient, ones broadcast to the output's shape, then
    multiplies many values (33 -> 27 multiplies in W5's kernel): x * seed is
    x, x + broadcast(-0.0) is x; a broadcast that sets the shape stays."""
    x, row = Var((2, 3), fg.float32), Var((3,), fg.float32)
    builder = GraphBuilder()
    with building(builder):
        ones = P.broadcast_to(Const(np.ones(1, np.float32)), shape=(2, 3))
        zeros = P.broadcast_to(Const(np.array(-0.0, np.float32)), shape=(2, 3))
        scaled = ones * x
        shifted = x + zeros
        widened = row * ones
    graph = Graph([x, row], builder.eqns, [scaled, shifted, widened])
    simplified = algebraic(graph)
    assert simplified.outputs[0] is x and simplified.outputs[1] is x
    assert any(e.prim is P.mul for e in simplified.eqns)  # widened keeps its shape
    values = [
        np.array([[-0.0, 1.5, np.inf], [np.nan, -2.0, 0.0]], np.float32),
        np.ones(3, np.float32),
    ]
    _assert_same(graph, simplified, values)


def test_a_broadcast_seed_scaled_is_a_number_where_another_operand_sets_the_shape():
    """seed * 0.5 (a sum's gradient scaled) is computed once, as a broadcast
    of 0.5, which then multiplies e as the number: ``e * 0.5`` and that
    are one equation after CSE (W1's kernel: 32 -> 26 operations)."""
    e = Var((4,), fg.float32)
    builder = GraphBuilder()
    with building(builder):
        seed = P.broadcast_to(Const(np.ones(1, np.float32)), shape=(4,))
        scaled = seed * 0.5
        twice = scaled * e
        once = e * 0.5
    graph = Graph([e], builder.eqns, [twice, once])
    simplified = simplify(graph)
    assert [eqn.prim for eqn in simplified.eqns] == [P.mul]
    assert simplified.outputs[0] is simplified.outputs[1]
    _assert_same(graph, simplified, [np.array([-0.0, 1.5, np.inf, np.nan], np.float32)])


def test_negations_leave_products_and_sums_take_them_as_differences():
    """(-a) * b and a * (-b) are one product, negated; a + (-p) is a - p: the
    second derivative of exp(-x * x) computed -v * x three ways, in W5's
    kernel (57 -> 47 operations). (-a) + (-b) stays: +0 + -0 is +0."""
    a, b = Var((5,), fg.float64), Var((5,), fg.float64)
    builder = GraphBuilder()
    with building(builder):
        left = P.neg(a) * b
        right = a * P.neg(b)
        both = P.neg(a) / P.neg(b)
        difference = a + left
        sum_of_negations = P.neg(a) + P.neg(b)
    graph = Graph([a, b], builder.eqns, [left, right, both, difference, sum_of_negations])
    simplified = simplify(graph)
    products = [e for e in simplified.eqns if e.prim is P.mul]
    assert len(products) == 1 and products[0].inputs == (a, b)
    assert [e.prim for e in simplified.eqns if e.out is simplified.outputs[2]] == [P.div]
    assert [e.prim for e in simplified.eqns if e.out is simplified.outputs[3]] == [P.sub]
    assert [e.prim for e in simplified.eqns if e.out is simplified.outputs[4]] == [P.sub]
    zeros = np.array([0.0, -0.0, 0.0, -0.0, np.nan])
    _assert_same(graph, simplified, [zeros, np.array([-0.0, 0.0, 0.0, -0.0, 2.0])])
    _assert_same(graph, simplified, [np.linspace(-2, 2, 5), np.linspace(3, -1, 5)])


def _narrowed(x, axis, start, stop):
    spec = (("slice", None, None, None),) * axis + (("slice", start, stop, None),)
    return P.index(x, spec=spec)


def test_the_gradient_of_a_splits_parts_is_their_concatenation():
    """Parts of a split (q, k, v) send cotangents into adjacent slices of one
    axis: the adjoint concatenates them (once, spliced) instead of filling
    and adding zeros per part; slices with gaps or overlaps still add."""
    x = Var((2, 3, 12), fg.float64)
    rng = np.random.default_rng(6)
    xs = rng.standard_normal((2, 3, 12))
    cases = {
        "split": ([(8, 12), (0, 4), (4, 8)], True),
        "uneven, middle parts": ([(2, 5), (5, 12)], False),
        "gap": ([(0, 4), (5, 12)], False),
        "overlap": ([(0, 6), (4, 12)], False),
    }
    for name, (bounds, covers) in cases.items():
        builder = GraphBuilder()
        with building(builder):
            sums = [
                P.reduce_sum(P.exp(_narrowed(x, 2, a, b)) * float(k + 1), axes=(0, 1, 2))
                for k, (a, b) in enumerate(bounds)
            ]
            total = sums[0]
            for part in sums[1:]:
                total = total + part
        graph = adjoint(Graph([x], builder.eqns, [total]), [0])
        simplified = simplify(graph)
        prims = [e.prim for e in simplified.eqns]
        joined = not any(b[0] != a[1] for a, b in zip(sorted(bounds), sorted(bounds)[1:]))
        assert (P.concatenate in prims) is joined, name
        assert prims.count(P.concatenate) <= 1, name
        assert (P.scatter_add not in prims) is (joined and covers), name
        seed = np.array(0.7)
        want = np.zeros((2, 3, 12))
        for k, (a, b) in enumerate(bounds):
            want[..., a:b] += np.exp(xs[..., a:b]) * (k + 1) * 0.7
        (got,) = evaluate(simplified, [xs, seed])[1:]
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=name)


def test_a_sum_of_scatters_into_adjacent_slices_is_their_concatenation():
    """What eager backward leaves for a split (each part's gradient scattered
    into zeros, then the scatters added, in whatever order the engine ran
    them) becomes one concatenation, plus +0.0 so that -0 turns +0 as the
    sum of zeros turned it: the same bits."""
    parts = [Var((2, 3, n), fg.float32) for n in (4, 4, 4, 2)]

    def scattered(v, start, stop):
        spec = (("ellipsis",), ("slice", start, stop, None))
        return P.scatter_add(v, spec=spec, shape=(2, 3, 12))

    cases = {  # name: (parts' slices in the order they are added, concatenations, scatters)
        "split, engine's order": ([(8, 12), (4, 8), (0, 4)], 1, 0),
        "split, in order": ([(0, 4), (4, 8), (8, 12)], 1, 0),
        "two of three": ([(8, 12), (4, 8)], 1, 1),
        "gap": ([(0, 4), (8, 12)], 0, 2),
        "steps": ([(0, 4)], 0, 2),  # and one into [4:8:2]
    }
    rng = np.random.default_rng(8)
    values = [rng.standard_normal(v.shape).astype(np.float32) for v in parts]
    values[1][0, 0, :2] = -0.0
    for name, (slices, concatenations, scatters) in cases.items():
        builder = GraphBuilder()
        with building(builder):
            sums = [scattered(v, a, b) for v, (a, b) in zip(parts, slices)]
            if name == "steps":
                spec = (("ellipsis",), ("slice", 4, 8, 2))
                sums.append(P.scatter_add(parts[3], spec=spec, shape=(2, 3, 12)))
            total = sums[0]
            for part in sums[1:]:
                total = total + part
        graph = Graph(parts, builder.eqns, [total])
        simplified = dce(algebraic(graph))
        prims = [e.prim for e in simplified.eqns]
        assert prims.count(P.concatenate) == concatenations, name
        assert prims.count(P.scatter_add) == scatters, name
        _assert_same(graph, simplified, values)


def test_a_concatenation_of_concatenations_on_its_axis_is_one():
    a, b, c = (Var((2, n), fg.float32) for n in (1, 2, 3))
    builder = GraphBuilder()
    with building(builder):
        inner = P.concatenate(a, b, axis=1)
        other_axis = P.concatenate(a, a, axis=0)
        outer = P.concatenate(c, inner, axis=1)
        kept = P.concatenate(other_axis, P.concatenate(b, b, axis=0), axis=1)
    graph = Graph([a, b, c], builder.eqns, [outer, kept])
    simplified = dce(algebraic(graph))
    (spliced,) = [e for e in simplified.eqns if e.out is simplified.outputs[0]]
    assert spliced.inputs == (c, a, b)
    assert len([e for e in simplified.eqns if e.prim is P.concatenate]) == 4
    rng = np.random.default_rng(2)
    values = [rng.standard_normal(v.shape).astype(np.float32) for v in (a, b, c)]
    _assert_same(graph, simplified, values)


def test_an_assignment_to_all_of_a_value_is_the_assigned_value():
    """``x.copy_(v)`` records ``x[...] = v``: with v of x's shape that is v, so
    the kernel computing v writes the result (an optimizer's state update
    joins the parameter's update). A broadcast value or a slice stays."""
    x, v, row = Var((3, 4), fg.float32), Var((3, 4), fg.float32), Var((4,), fg.float32)
    builder = GraphBuilder()
    with building(builder):
        whole = P.index_put(x, P.mul(v, 2.0), spec=(("ellipsis",),))
        sliced = P.index_put(x, v, spec=(("slice", None, None, None), ("slice", None, None, None)))
        broadcast = P.index_put(x, row, spec=(("ellipsis",),))
        part = P.index_put(x, row, spec=(("slice", 1, 2, None),))
    graph = Graph([x, v, row], builder.eqns, [whole, sliced, broadcast, part])
    simplified = dce(algebraic(graph))
    producer = {e.out: e for e in simplified.eqns}
    assert producer[simplified.outputs[0]].prim is P.mul
    assert simplified.outputs[1] is v
    assert [producer[o].prim for o in simplified.outputs[2:]] == [P.index_put] * 2
    rng = np.random.default_rng(4)
    values = [rng.standard_normal(a.shape).astype(np.float32) for a in (x, v, row)]
    _assert_same(graph, simplified, values)


def test_a_reshape_of_a_shared_reshape_stays_a_reshape_of_it():
    """Attention's heads transposed back are reshaped (a copy) and used both
    as they are and flattened for a matrix product: the flattening reshapes
    the copy (a view of it) rather than copying the transposed heads again.
    A reshape used once still folds into the reshape of it."""
    x = Var((2, 3, 4), fg.float32)
    builder = GraphBuilder()
    with building(builder):
        heads = P.transpose(x, perm=(1, 0, 2))
        joined = P.reshape(heads, shape=(3, 8))
        flat = P.reshape(joined, shape=(24,))
        once = P.reshape(P.reshape(x, shape=(6, 4)), shape=(24,))
    graph = Graph([x], builder.eqns, [joined, flat, once])
    simplified = dce(algebraic(graph))
    producer = {e.out: e for e in simplified.eqns}
    assert producer[simplified.outputs[1]].inputs == (joined,)
    assert producer[simplified.outputs[2]].inputs == (x,)
    values = [np.random.default_rng(3).standard_normal(x.shape).astype(np.float32)]
    _assert_same(graph, simplified, values)


def test_joined_heads_gradients_are_one_concatenation_of_the_heads():
    """Attention's q, k and v gradients: each part's heads transposed back
    and joined (a reshape that copies), scattered into its slice of the
    projection's output and the scatters added. The sum becomes one
    concatenation of the transposed heads along the heads' axis, reshaped:
    one copy instead of four (rules also rewrite what rules made)."""
    heads = [Var((2, 4, 3, 5), fg.float32) for _ in range(3)]  # (batch, heads, time, size)
    builder = GraphBuilder()
    with building(builder):
        total = None
        for k, v in enumerate(heads):
            joined = P.reshape(P.transpose(v, perm=(0, 2, 1, 3)), shape=(2, 3, 20))
            spec = (("ellipsis",), ("slice", 20 * k, 20 * (k + 1), None))
            part = P.scatter_add(joined, spec=spec, shape=(2, 3, 60))
            total = part if total is None else total + part
    graph = Graph(heads, builder.eqns, [total])
    simplified = dce(algebraic(graph))
    producer = {e.out: e for e in simplified.eqns}
    (join,) = [e for e in simplified.eqns if e.prim is P.concatenate]
    assert join.params["axis"] == 2 and all(producer[v].prim is P.transpose for v in join.inputs)
    assert not [e for e in simplified.eqns if e.prim is P.scatter_add]
    values = [
        np.random.default_rng(k).standard_normal(v.shape).astype(np.float32)
        for k, v in enumerate(heads)
    ]
    _assert_same(graph, simplified, values)


def test_a_concatenation_of_strided_values_is_c_contiguous():
    x = np.arange(24.0).reshape(2, 3, 4).transpose(0, 2, 1)
    joined = P.concatenate.impl(x, x, axis=1)
    assert joined.flags.c_contiguous
    np.testing.assert_array_equal(joined, np.concatenate([x, x], axis=1))


@pytest.mark.parametrize(
    "tile, order, scatters",
    [
        (2, "in order", 0),
        (2, "engine's order", 0),
        (3, "in order", 0),  # three interleaved slices per axis
        (2, "first row of tiles", 1),  # the tiles' first rows only: scattered once
    ],
)
def test_a_sum_of_scatters_into_interleaved_slices_is_their_interleaving(tile, order, scatters):
    """Max pooling's gradient with windows that tile the input: each strided
    view's gradient scattered into zeros, then the scatters added. The sum
    becomes the views interleaved (joined along new axes, merged), one copy
    rather than a pass over the whole input per view."""
    shape = (2, 3, 2 * tile, 2 * tile)
    offsets = [(a, b) for a in range(tile) for b in range(tile)]
    if order == "engine's order":
        offsets.reverse()
    if order == "first row of tiles":
        offsets = [(0, b) for b in range(tile)]
    parts = [Var((2, 3, 2, 2), fg.float32) for _ in offsets]
    builder = GraphBuilder()
    with building(builder):
        total = None
        for v, (a, b) in zip(parts, offsets):
            spec = (("ellipsis",), ("slice", a, None, tile), ("slice", b, None, tile))
            part = P.scatter_add(v, spec=spec, shape=shape)
            total = part if total is None else total + part
    graph = Graph(parts, builder.eqns, [total])
    simplified = dce(algebraic(graph))
    assert [e.prim for e in simplified.eqns].count(P.scatter_add) == scatters
    rng = np.random.default_rng(tile)
    values = [rng.standard_normal(v.shape).astype(np.float32) for v in parts]
    values[0][0, 0, 0, 0] = -0.0
    _assert_same(graph, simplified, values)


@pytest.mark.parametrize("seed", range(30))
def test_sums_of_scatters_into_random_slices_keep_their_values(seed):
    """Pieces of a random tiling (per axis: whole, adjacent blocks or
    interleaved steps), sometimes with a piece missing or repeated, scattered
    and added in a random order: whatever the rules make of the sum, it has
    the same bits."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.choice([2, 4, 6], size=rng.integers(1, 4)))
    per_axis = []
    for n in shape:
        kind = rng.choice(["whole", "blocks", "steps"])
        if kind == "blocks":
            cut = int(rng.integers(1, n))
            per_axis.append([(0, cut, 1), (cut, n, 1)])
        elif kind == "steps":
            per_axis.append([(k, n, 2) for k in range(2)])
        else:
            per_axis.append([(0, n, 1)])
    pieces = [list(p) for p in np.ndindex(*[len(a) for a in per_axis])]
    pieces = [[per_axis[a][k] for a, k in enumerate(p)] for p in pieces]
    if len(pieces) > 1 and rng.random() < 0.3:
        pieces.pop(int(rng.integers(len(pieces))))
    if rng.random() < 0.2:
        pieces.append(pieces[0])
    rng.shuffle(pieces)
    parts, total = [], None
    builder = GraphBuilder()
    with building(builder):
        for piece in pieces:
            size = tuple(len(range(*s)) for s in piece)
            v = Var(size, fg.float64)
            parts.append(v)
            spec = tuple(("slice", start, stop, step) for start, stop, step in piece)
            part = P.scatter_add(v, spec=spec, shape=shape)
            total = part if total is None else total + part
    if len(pieces) < 2:
        return
    graph = Graph(parts, builder.eqns, [total])
    values = [rng.standard_normal(v.shape) for v in parts]
    values[0].flat[0] = -0.0
    _assert_same(graph, dce(algebraic(graph)), values)


def test_a_product_of_bfloat16_values_only_rounded_rounds_itself():
    """``rounded_products`` (for the runtime): a marked product whose float32
    result is only rounded to bfloat16 and made float32 again computes the
    rounded result itself; one whose result, or its rounding, is read
    elsewhere too or is an output, or whose operands are not marked as
    bfloat16 values, stays as it is. Values bit for bit."""
    bf16, f32 = fg.bfloat16, fg.float32
    x, y = Var((5, 7), f32), Var((7, 3), f32)

    def rounded(product):
        return P.convert(P.convert(product, dtype=bf16), dtype=f32)

    builder = GraphBuilder()
    with building(builder):
        only_rounded = rounded(P.matmul(x, y, operands=bf16))
        shared = P.matmul(x, y, operands=bf16)
        shared_rounded, shared_doubled = rounded(shared), P.mul(shared, 2.0)
        unmarked = rounded(P.matmul(x, y))
        output = P.convert(P.matmul(x, y, operands=bf16), dtype=bf16)
        output_widened = P.convert(output, dtype=f32)
    outputs = [only_rounded, shared_rounded, shared_doubled, unmarked, output, output_widened]
    graph = Graph([x, y], builder.eqns, outputs)
    rewritten = rounded_products(graph, lambda product: True)
    verify(rewritten)
    producer = {e.out: e for e in rewritten.eqns}
    assert producer[only_rounded].prim is P.matmul
    assert producer[only_rounded].params == {"operands": bf16, "rounded": True}
    for kept in (shared_rounded, unmarked, output_widened):
        assert producer[kept].prim is P.convert
    assert sum(e.prim is P.matmul for e in rewritten.eqns) == 4
    rng = np.random.default_rng(5)
    values = [bf16.round(rng.standard_normal(v.shape).astype(np.float32)) for v in (x, y)]
    _assert_same(graph, rewritten, values)
