"""The graph IR: printing (golden text), verification, adjoint, simplification."""

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.ir import primitives as P
from fusegrad.ir.autodiff import adjoint, split_at_min_cut
from fusegrad.ir.graph import (
    Graph,
    GraphBuilder,
    Var,
    VerificationError,
    building,
    evaluate,
    verify,
)
from fusegrad.ir.simplify import simplify


def _small_graph():
    x, y = Var((3, 4), fg.float32), Var((4,), fg.float32)
    builder = GraphBuilder()
    with building(builder):
        out = P.reduce_sum(P.tanh(x * y) * 1.0, axes=(0, 1))
    return Graph([x, y], builder.eqns, [out])


def test_graph_prints_one_typed_line_per_equation():
    assert (
        str(_small_graph())
        == """\
graph(%0: f32[3,4], %1: f32[4]):
  %2: f32[3,4] = mul %0 %1
  %3: f32[3,4] = tanh %2
  %4: f32[3,4] = mul %3 1.0:f32
  %5: f32[] = reduce_sum[axes=(0, 1)] %4
  return %5"""
    )


def test_adjoint_then_simplify_golden():
    joint = simplify(adjoint(_small_graph(), [0, 1]))
    verify(joint)
    assert (
        str(joint)
        == """\
graph(%0: f32[3,4], %1: f32[4], %2: f32[]):
  %3: f32[3,4] = mul %0 %1
  %4: f32[3,4] = tanh %3
  %5: f32[] = reduce_sum[axes=(0, 1)] %4
  %6: f32[3,4] = broadcast_to[shape=(3, 4)] %2
  %7: f32[3,4] = mul %4 %4
  %8: f32[3,4] = sub 1.0:f32 %7
  %9: f32[3,4] = mul %6 %8
  %10: f32[3,4] = mul %9 %1
  %11: f32[3,4] = mul %9 %0
  %12: f32[4] = reduce_sum[axes=(0,)] %11
  return %5, %10, %12"""
    )


def test_adjoint_matches_eager_gradients_and_partition_splits_it():
    graph = _small_graph()
    rng = np.random.default_rng(0)
    xs, ys = (
        rng.standard_normal((3, 4)).astype(np.float32),
        rng.standard_normal(4).astype(np.float32),
    )
    joint = adjoint(graph, [0, 1])
    _, gx, gy = evaluate(joint, [xs, ys, np.float32(1.0)])
    x, y = fg.tensor(xs, requires_grad=True), fg.tensor(ys, requires_grad=True)
    fg.tanh(x * y).sum().backward()
    np.testing.assert_allclose(gx, x.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(gy, y.grad.numpy(), rtol=1e-6)
    parts = split_at_min_cut(joint, 2, 1, len(graph.eqns))
    verify(parts.forward)
    verify(parts.backward)
    forward_values = evaluate(parts.forward, [xs, ys])
    residuals = forward_values[1:]
    assert len(residuals) == parts.num_residuals
    np.testing.assert_allclose(
        evaluate(parts.backward, residuals + [np.float32(1.0)])[1], gy, rtol=1e-6
    )


def test_second_order_by_applying_the_pass_to_its_own_output():
    x = Var((), fg.float64)
    builder = GraphBuilder()
    with building(builder):
        out = x * x * x
    first = adjoint(Graph([x], builder.eqns, [out]), [0])  # (x, ct) -> (x^3, 3x^2 ct)
    second = adjoint(Graph(first.inputs, first.eqns, [first.outputs[1]]), [0])
    assert evaluate(second, [np.float64(2.0), np.float64(1.0), np.float64(1.0)])[1] == 12.0


def test_verifier_rejects_a_wrong_declared_type_and_an_undefined_value():
    graph = _small_graph()
    graph.eqns[0].out.shape = (4, 3)
    with pytest.raises(VerificationError, match="declares"):
        verify(graph)
    graph = _small_graph()
    del graph.eqns[0]
    with pytest.raises(VerificationError, match="undefined"):
        verify(graph)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize(
    "spec,index_shapes,shape",
    [  # index_shapes: (shape, the size of the dimension it indexes)
        ((("array",),), [((40,), 7)], (7, 5)),  # an embedding's gradient: rows repeat
        ((("slice", None, None, None), ("array",)), [((3, 4), 5)], (6, 5)),
        ((("array",), ("array",)), [((30,), 4), ((30,), 3)], (4, 3)),  # points repeat
        ((("slice", 1, None, 2), ("int", -1)), [], (7, 3)),  # a basic index
        ((("array",),), [((0,), 3)], (3, 2)),
    ],
    ids=["rows", "columns", "points", "basic", "empty"],
)
def test_scatter_add_sums_repeated_positions_as_np_add_at(dtype, spec, index_shapes, shape):
    """Its implementation counts positions (np.add.at is slow); the sums are
    np.add.at's, float sums to rounding."""
    rng = np.random.default_rng(3)
    indices = [rng.integers(-n, n, s) for s, n in index_shapes]
    expected_shape = np.zeros(shape)[P.spec_to_numpy(spec, indices)].shape
    v = (rng.standard_normal(expected_shape) * 10).astype(dtype)
    want = np.zeros(shape, dtype)
    np.add.at(want, P.spec_to_numpy(spec, indices), v)
    got = P.scatter_add.impl(v, *indices, spec=spec, shape=shape)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype is np.float32 else 1e-13)


def test_matmul_of_stacked_matrices_by_one_matrix_and_its_gradient():
    """One product over the stacked rows (forward and the matrix's gradient)."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((3, 4, 5)), rng.standard_normal((5, 2))
    np.testing.assert_allclose(P.matmul.impl(x, w), np.matmul(x, w), rtol=1e-13)
    np.testing.assert_allclose(P.matmul.impl(x[:, ::2], w), np.matmul(x[:, ::2], w), rtol=1e-13)
    xt, wt = fg.tensor(x, requires_grad=True), fg.tensor(w, requires_grad=True)
    (xt @ wt).sum().backward()
    np.testing.assert_allclose(wt.grad.numpy(), x.sum(axis=(0, 1))[:, None] * np.ones((1, 2)))
    np.testing.assert_allclose(xt.grad.numpy(), np.broadcast_to(w.sum(1), x.shape))
