"""The LLVM backend: kernels agree with the reference interpreter on every
layout they can meet, never touch memory outside their operands, fuse, and
vectorize."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.codegen import vectors
from fusegrad.codegen.kernels import KernelCode
from fusegrad.codegen.lowering import FUSED_REDUCTIONS, IN_NUMPY, LOWERINGS, can_lower
from fusegrad.ir import primitives as P
from fusegrad.ir.fusion import Kernel, group_into_kernels
from fusegrad.ir.graph import Const, Graph, GraphBuilder, Var, building, evaluate
from fusegrad.runtime import launch
from fusegrad.runtime.executor import Executor
from fusegrad.runtime.launch import Launcher, merge_dimensions

import test_jit
from test_ops import JIT_CASES

SIZES = [1, 3, 17, 100003, 0]


@pytest.fixture(autouse=True)
def native_even_when_tiny(monkeypatch):
    """Small launches normally run in numpy; these tests are about the native code."""
    monkeypatch.setattr(launch, "SMALL_WORK", 0)


def _chain(shape_x, shape_y, dtype=fg.float32):
    """A fused chain of every exactly-lowered kind of operation."""
    x, y = Var(shape_x, dtype), Var(shape_y, dtype)
    builder = GraphBuilder()
    with building(builder):
        a = P.where(x > y, x * y + 1.0, P.sqrt(P.abs_(x)) - y)
        b = P.maximum(a, x) * 2.0 - P.minimum(y, a) / 3.0
        c = P.convert(P.convert(b, dtype=fg.float64), dtype=dtype) + P.relu(-b)
        d = P.where((c != c) | P.logical_not(x >= 0.5), P.sign(c), P.neg(c))
        mask = x > y
    return Graph([x, y], builder.eqns, [d, mask])


def _kernel_of(graph):
    steps = group_into_kernels(graph, can_lower)
    assert len(steps) == 1 and isinstance(steps[0], Kernel)
    return Launcher(KernelCode(steps[0]))


def _check(code, graph, xs, ys):
    got = code([xs, ys])
    want = evaluate(graph, [xs, ys])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [fg.float32, fg.float64], ids=["f32", "f64"])
def test_odd_and_empty_sizes(n, dtype):
    graph = _chain((n,), (n,), dtype)
    code = _kernel_of(graph)
    rng = np.random.default_rng(n)
    xs, ys = rng.standard_normal(n).astype(dtype.np), rng.standard_normal(n).astype(dtype.np)
    if n > 2:
        xs[1], ys[2] = np.nan, -0.0
    _check(code, graph, xs, ys)


def test_broadcasts_transposes_slices_and_negative_strides_read_in_place():
    graph = _chain((17, 33), (33,))
    code = _kernel_of(graph)
    rng = np.random.default_rng(0)
    base = rng.standard_normal((40, 70)).astype(np.float32)
    views = [
        base[:17, :33],  # a slice: rows are not contiguous
        base[:33, :17].T,  # transposed
        base[::2, ::2][:17, :33],  # stepped
        base[17:0:-1, 33:0:-1],  # negative strides
        np.broadcast_to(base[:1, :33], (17, 33)),  # size-1 broadcast
    ]
    for xs in views:
        for ys in (base[0, :33], base[:33, 0], base[0, 33:0:-1]):
            _check(code, graph, xs, np.ascontiguousarray(ys) if ys.shape != (33,) else ys)
    assert len(code.code.variants) >= 3  # contiguous, strided and broadcast inner loops
    executor = Executor(graph)  # the same layouts through plans: the driver finds the data
    for xs in views:
        ys = base[0, 33:0:-1]
        want = evaluate(graph, [xs, ys])
        for _ in range(2):
            for got, expected in zip(executor.run([xs, ys]), want):
                np.testing.assert_array_equal(got, expected)
    assert len(executor.plans) == len(views)


def test_operands_that_do_not_fit_are_refused_before_the_kernel_runs():
    graph = _chain((4, 5), (5,))
    code = _kernel_of(graph)
    with pytest.raises(ValueError, match="shape"):
        code([np.ones((4, 6), np.float32), np.ones(5, np.float32)])
    with pytest.raises(TypeError, match="dtype"):
        code([np.ones((4, 5), np.float64), np.ones(5, np.float32)])


def test_layout_merges_dimensions_contiguous_for_every_operand():
    def view(a):
        return a.shape, tuple(s // a.itemsize for s in a.strides)

    a = np.ones((4, 5, 6), np.float32)
    shape, strides, classes, _ = merge_dimensions((4, 5, 6), [view(a), ((6,), (1,))], 3)
    assert shape == (20, 6) and classes == (1, 1)
    assert strides == [[6, 1], [0, 1]]
    shape, _, classes, _ = merge_dimensions((4, 5, 6), [view(a), view(a)], 3)
    assert shape == (120,) and classes == (1, 1)
    fortran = a.transpose(2, 1, 0).copy().transpose(2, 1, 0)
    shape, _, classes, _ = merge_dimensions((4, 5, 6), [view(fortran), view(a)], 3)
    assert classes == ("s", 1)
    shape, _, _, kept = merge_dimensions((4, 5, 6), [view(a), view(a)], 1)  # rows of 30 reduced
    assert shape == (4, 30) and kept == 1
    wide = np.ones((4, 5, 12), np.float32)
    _, _, classes, _ = merge_dimensions((4, 5, 6), [view(wide[..., ::2]), view(a)], 3)
    assert classes == (2, 1)  # a small step is compiled in
    _, _, classes, _ = merge_dimensions((4, 5, 6), [view(a[..., ::-1]), view(a)], 3)
    assert classes == ("s", 1)


@pytest.mark.parametrize("step", [2, 3, 4, 5])
@pytest.mark.parametrize("length", [7, 33, 64])
def test_views_with_a_small_inner_step_compute_as_numpy(step, length):
    """Every other (or third, fourth) element, as a pooling's tiles read them:
    the step compiled in as a constant (5 is read at run time), odd lengths
    leaving a vector loop's tail, on calls 1, 2 and 3."""
    rng = np.random.default_rng(step)
    x = rng.standard_normal((3, length * step + 1)).astype(np.float32)
    x[0, :step] = np.nan

    def f(t):
        parts = [t[:, o : o + length * step : step] for o in range(step)]
        best = parts[0]
        for part in parts[1:]:
            best = fg.where((part > best) | (part != part), part, best)
        return best * 2.0 + parts[-1]

    want = f(fg.tensor(x)).numpy()
    compiled = fg.jit(f)
    for _ in range(3):
        np.testing.assert_array_equal(compiled(fg.tensor(x)).numpy(), want)


def test_a_long_chain_and_its_gradient_fuse_into_few_vectorized_kernels():
    @fg.jit
    def f(x, y):
        a = x * y + 1.0
        b = fg.where(a > 0, a, -a) * 0.5
        c = fg.maximum(b, y) - fg.minimum(a, x)
        d = fg.sqrt(fg.abs(c) + 1.0) * x
        return (d * d - a).sum()

    x = fg.randn(1000, requires_grad=True)
    y = fg.randn(1000)
    lowered = f.lower(x, y)
    program = lowered.program
    ops = len(program.forward.eqns) + len(program.backward.eqns)
    assert len(lowered.kernels) < ops / 3
    assert all(k.eqns for k in lowered.kernels)
    if not launch.CHECKED:  # bounds checks keep loops scalar
        assert "x float>" in lowered.llvm_ir or "x double>" in lowered.llvm_ir
    assert "ymm" in lowered.asm or "zmm" in lowered.asm or "xmm" in lowered.asm
    assert "fused_" in str(lowered)


@pytest.mark.parametrize("seed", range(25))
def test_the_executor_agrees_with_the_reference_interpreter_on_random_graphs(seed):
    from test_passes import _random_graph

    rng = np.random.default_rng(1000 + seed)
    graph = _random_graph(rng)
    values = [rng.standard_normal(v.shape) for v in graph.inputs]
    for got, want in zip(_step_by_step_then_planned(graph, values), evaluate(graph, values)):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300)  # exp/tanh: a few ulps


def _step_by_step_then_planned(graph, values) -> list:
    """The first run's outputs (step by step: it plans); checks that the
    second run, which follows the plan, gives exactly the same."""
    executor = Executor(graph)
    first = executor.run(values)
    for got, want in zip(executor.run(values), first):
        np.testing.assert_array_equal(got, want)
    return first


def test_every_primitive_is_lowered_fused_as_a_reduction_or_declared_to_run_in_numpy():
    """Adding a primitive without saying how kernels treat it fails here."""
    ways = [set(LOWERINGS), set(FUSED_REDUCTIONS), set(IN_NUMPY)]
    assert set(P.PRIMITIVES.values()) == set.union(*ways)
    assert sum(len(w) for w in ways) == len(P.PRIMITIVES)  # each in one way only
    assert all(isinstance(prim, P.Primitive) for prim in LOWERINGS)


def test_every_elementwise_primitive_is_lowered():
    assert {p for p in P.PRIMITIVES.values() if p.elementwise} <= set(LOWERINGS)


def _reducing_kernel(shape, dtype):
    x = Var(shape, dtype)
    builder = GraphBuilder()
    with building(builder):
        y = x * x - x
        total = P.reduce_sum(y, axes=tuple(range(len(shape))))
        count = P.reduce_sum(P.convert(x > 0.0, dtype=fg.int64), axes=tuple(range(len(shape))))
    graph = Graph([x], builder.eqns, [total, y, count])
    executor = Executor(graph)
    assert len(executor.kernels) == 1 and len(executor.kernels[0].kernel.reductions) == 2
    return graph, executor


def test_a_fused_float32_sum_of_4m_elements_stays_within_1e_5_of_the_float64_sum():
    _, executor = _reducing_kernel((4_000_000,), fg.float32)
    xs = np.random.default_rng(0).uniform(0.5, 1.5, 4_000_000).astype(np.float32)
    total, squares, count = executor.run([xs])
    exact = (squares.astype(np.float64)).sum()
    assert abs(float(total) - exact) <= 1e-5 * abs(exact)
    assert int(count) == 4_000_000 and count.dtype == np.int64


@pytest.mark.parametrize("shape", [(1,), (3,), (17, 33), (1000, 3), (0,), (5, 0)])
def test_fused_reductions_on_odd_empty_and_strided_operands(shape):
    graph, executor = _reducing_kernel(shape, fg.float64)
    rng = np.random.default_rng(1)
    base = rng.standard_normal(tuple(2 * s + 1 for s in shape))
    for xs in (
        base[tuple(slice(0, s) for s in shape)],
        base[tuple(slice(None, 2 * s, 2) for s in shape)],
    ):
        want = evaluate(graph, [xs])
        for _ in range(2):  # step by step, then by the plan
            got = executor.run([xs])
            np.testing.assert_allclose(got[0], want[0], rtol=1e-13, atol=1e-13)
            np.testing.assert_array_equal(got[1], want[1])
            assert int(got[2]) == int(want[2])


def _one_kernel(graph):
    (kernel,) = [s for s in group_into_kernels(graph, can_lower) if isinstance(s, Kernel)]
    return kernel


@pytest.mark.parametrize("size", SIZES)
def test_a_consumer_of_a_kernels_own_total_is_its_second_pass(size):
    x = Var((size,), fg.float64)
    builder = GraphBuilder()
    with building(builder):
        y = P.exp(x)
        centered = y - P.reduce_sum(y, axes=(0,))  # needs the sum before the subtraction
    graph = Graph([x], builder.eqns, [centered])
    assert _one_kernel(graph).last_phase == 1
    xs = np.linspace(-1, 1, size)
    np.testing.assert_allclose(Executor(graph).run([xs])[0], evaluate(graph, [xs])[0], rtol=1e-13)


def test_column_totals_are_never_read_inside_their_kernel():
    x = Var((50, 40), fg.float32)
    builder = GraphBuilder()
    with building(builder):
        y = P.exp(x)
        scaled = y / P.reduce_sum(y, axes=(0,))  # every column's total: known after the kernel
    graph = Graph([x], builder.eqns, [scaled])
    kernels_ = [s for s in group_into_kernels(graph, can_lower) if isinstance(s, Kernel)]
    assert len(kernels_) == 2 and all(k.last_phase == 0 for k in kernels_)
    xs = np.random.default_rng(3).standard_normal((50, 40)).astype(np.float32)
    np.testing.assert_allclose(Executor(graph).run([xs])[0], evaluate(graph, [xs])[0], rtol=1e-6)


def test_a_kernel_read_only_by_a_later_kernel_of_its_shape_joins_it():
    """An optimizer step: the first moment m (an output) and the momentum
    term b * momentum (not one) each start a kernel of their own, as neither
    reads the other's operands; the parameter's update reads both, and both
    kernels join it: one pass that still writes m. A kernel that a matrix
    product also reads stays apart."""
    g, m, p, b, w = (Var((16, 8), fg.float32) for _ in range(5))
    lr = Var((), fg.float32)
    builder = GraphBuilder()
    with building(builder):
        new_m = m + (g - m) * lr
        momentum = b * 0.9
        new_p = p - (new_m + momentum) * lr
        shared = w * 2.0  # read by a matrix product and the kernel after it
        product = P.matmul(P.matmul(shared, P.transpose(w, perm=(1, 0))), w)
        other = product * shared
    graph = Graph([g, m, p, b, w, lr], builder.eqns, [new_m, new_p, other])
    kernels_ = [s for s in group_into_kernels(graph, can_lower) if isinstance(s, Kernel)]
    update = next(k for k in kernels_ if new_p in {e.out for e in k.eqns})
    assert {new_m, momentum} <= {e.out for e in update.eqns}
    assert all(any(v is u for u in among) for v, among in [
        (new_m, update.outputs), (m, update.inputs), (b, update.inputs)
    ])  # fmt: skip
    assert [[e.out for e in k.eqns] for k in kernels_[1:]] == [[shared], [other]]
    rng = np.random.default_rng(6)
    values = [rng.standard_normal(v.shape).astype(np.float32) for v in graph.inputs]
    executor = Executor(graph)
    for _ in range(3):
        for got, want in zip(executor.run(values), evaluate(graph, values)):
            np.testing.assert_array_equal(got, want)


def test_a_derivative_of_values_in_memory_is_computed_by_the_kernel_that_reads_it():
    """tanh's derivative 1 - h*h would join h's kernel and be written for the
    backward's kernel alone; h is written anyway (a matrix product reads it),
    so the backward's kernel computes the derivative from h instead. A value
    whose inputs would have to be written in its place stays where it is."""
    x, w = Var((32, 24), fg.float32), Var((24, 8), fg.float32)
    builder = GraphBuilder()
    with building(builder):
        e = P.exp(x)
        h = P.tanh(x + e)
        product = P.matmul(h, w)  # reads h: it is written anyway
        back = P.matmul(product, P.transpose(w, perm=(1, 0)))
        derivative = 1.0 - h * h
        kept = e * 2.0  # e lives only in the first kernel
        h_grad = back * derivative * kept
        column_sums = P.reduce_sum(h_grad, axes=(0,))
    graph = Graph([x, w], builder.eqns, [product, column_sums])
    kernels_ = [s for s in group_into_kernels(graph, can_lower) if isinstance(s, Kernel)]
    first, second = kernels_
    assert [eqn.prim for eqn in first.eqns] == [P.exp, P.add, P.tanh, P.mul]  # e * 2.0 stays
    assert derivative in {eqn.out for eqn in second.eqns} and h in second.inputs
    assert first.outputs == [h, kept]
    rng = np.random.default_rng(5)
    values = [rng.standard_normal(v.shape).astype(np.float32) for v in (x, w)]
    executor = Executor(graph)
    for _ in range(3):  # step by step, then by the plan
        for got, want in zip(executor.run(values), evaluate(graph, values)):
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-4)


def _layer_norm_graph(shape, dtype):
    """layer_norm with its mean and rstd saved (row outputs), a softmax of
    the result (the row max read through stop_gradient, as autograd traces
    it), a per-row input divided by a row total (row coordinates), and a
    column sum and a sum of everything of the last pass."""
    x, scale = Var(shape, dtype), Var(shape[:-1], dtype)
    kept, n = shape[:-1] + (1,), shape[-1]
    builder = GraphBuilder()
    with building(builder):
        mean = P.reshape(P.reduce_sum(x, axes=(len(shape) - 1,)), shape=kept) / float(n)
        centered = x - mean
        variance = P.reduce_sum(centered * centered, axes=(len(shape) - 1,)) / float(n)
        rstd = P.reshape(1.0 / P.sqrt(variance + 1e-5), shape=kept)
        normed = P.tanh(centered * rstd) * 3.0
        top = P.stop_gradient(P.reshape(P.reduce_max(normed, axes=(len(shape) - 1,)), shape=kept))
        exps = P.exp(normed - top)
        totals = P.reduce_sum(exps, axes=(len(shape) - 1,))
        weights = scale / totals
        softmax = exps * P.reshape(weights, shape=kept)
        columns = P.reduce_sum(softmax, axes=tuple(range(len(shape) - 1)))
        everything = P.reduce_sum(softmax * normed, axes=tuple(range(len(shape))))
    return Graph([x, scale], builder.eqns, [softmax, mean, rstd, weights, columns, everything])


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("shape", [(64, 1000), (3, 5, 17), (7, 1), (1, 3), (4, 2100)])
def test_row_passes_compute_layer_norm_then_softmax_in_one_kernel(shape, dtype):
    graph = _layer_norm_graph(shape, dtype)
    kernel = _one_kernel(graph)
    assert kernel.last_phase == 4 and kernel.row_outputs
    assert kernel.row_inputs or np.prod(shape[:-1]) == 1  # else one scale for all rows
    launcher = Executor(graph).steps[0]
    rng = np.random.default_rng(len(shape))
    tolerance = 2e-5 if dtype is fg.float32 else 1e-12
    big = rng.standard_normal(tuple(2 * s for s in shape)).astype(dtype.np) * 4 + 1
    scale = rng.standard_normal(shape[:-1]).astype(dtype.np)
    for xs in (
        big[tuple(slice(0, s) for s in shape)],
        big[tuple(slice(None, None, 2) for _ in shape)],
    ):
        for got, want in zip(Executor(graph).run([xs, scale]), evaluate(graph, [xs, scale])):
            np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
    launcher([np.ascontiguousarray(xs), scale])
    if not launch.CHECKED:  # bounds checks keep loops scalar
        element = "float" if dtype is fg.float32 else "double"
        assert f"<{vectors.lanes(dtype.name)} x {element}>" in launcher.code.llvm_ir


def test_an_expensive_value_read_by_a_later_pass_is_spilled_not_computed_again():
    x = Var((256, 300), fg.float32)
    builder = GraphBuilder()
    with building(builder):
        expensive = P.erf(P.tanh(x) * 2.0)
        total = P.reshape(P.reduce_sum(expensive, axes=(1,)), shape=(256, 1))
        shifted = expensive - total + x  # x is read again, the erf of tanh is not
    graph = Graph([x], builder.eqns, [shifted])
    code = Executor(graph).kernels[0]
    assert code.spills == [expensive] and P.erf not in [e.prim for e in code.plans[1][2]]
    xs = np.random.default_rng(5).standard_normal((256, 300)).astype(np.float32)
    np.testing.assert_allclose(
        Executor(graph).run([xs])[0], evaluate(graph, [xs])[0], rtol=1e-5, atol=1e-4
    )


def test_a_failing_llvm_compile_is_a_clear_error_carrying_the_kernel_ir():
    from fusegrad.codegen.target import CompiledModule, CompileError

    broken = "define void @kernel() {\nentry:\n  %x = fadd i32 1, 2\n  ret void\n}\n"
    with pytest.raises(CompileError, match="LLVM rejected a kernel") as info:
        CompiledModule(broken)
    assert "define void @kernel" in str(info.value)


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op,sample", JIT_CASES)
def test_the_op_table_through_native_kernels(op, sample, dtype):
    """Every op compiled (forced native at these small sizes): values and
    gradients agree with eager, second derivatives too."""
    test_jit.test_compiled_values_and_gradients_agree_with_eager(op, sample, dtype)
    if op.differentiable and dtype is fg.float64:
        test_jit.test_second_derivatives_through_a_compiled_node_equal_eager(op, sample)


@pytest.mark.parametrize(
    "shape,axes",
    [
        ((7, 3000), (1,)),
        ((5, 4, 33), (1, 2)),
        ((9, 1), (1,)),
        ((4, 0), (1,)),
        ((0, 6), (1,)),
        ((6, 17), (0, 1)),
    ],
)
def test_row_sums_fuse_into_the_producing_kernel(shape, axes):
    x = Var(shape, fg.float64)
    builder = GraphBuilder()
    with building(builder):
        y = P.exp(P.tanh(x)) * x
        rows = P.reduce_sum(y, axes=axes)
        positives = P.reduce_sum(P.convert(x > 0.0, dtype=fg.int64), axes=axes)
    graph = Graph([x], builder.eqns, [rows, positives, y])
    executor = Executor(graph)
    assert len(executor.kernels) == 1 and len(executor.kernels[0].kernel.reductions) == 2
    rng = np.random.default_rng(sum(shape))
    big = rng.standard_normal(tuple(2 * s + 1 for s in shape[::-1]))
    for xs in (
        big[tuple(slice(0, s) for s in shape[::-1])].T,  # transposed, strided
        np.ascontiguousarray(big[tuple(slice(0, s) for s in shape[::-1])].T),
    ):
        got, want = executor.run([xs]), evaluate(graph, [xs])
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_allclose(got[2], want[2], rtol=1e-13)


def test_layer_norm_and_softmax_compile_with_row_sums_and_agree_with_eager():
    def f(x, w, b):
        h = fg.nn.functional.layer_norm(x, (x.shape[-1],), w, b)
        return (fg.softmax(h, dim=-1) * h).sum()

    compiled = fg.jit(f)
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((64, 300)), rng.standard_normal(300), rng.standard_normal(300)]
    results = []
    for fn in (compiled, compiled, f):
        tensors = [fg.tensor(a, requires_grad=True) for a in args]
        out = fn(*tensors)
        out.backward()
        results.append([out.item()] + [t.grad.numpy() for t in tensors])
    for got in results[:2]:
        np.testing.assert_allclose(got[0], results[2][0], rtol=1e-12)
        for g, w in zip(got[1:], results[2][1:]):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    program = compiled.lower(*[fg.tensor(a, requires_grad=True) for a in args]).program
    assert any(k.kernel.reductions for k in program.kernels)


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64, fg.int64], ids=["f32", "f64", "i64"])
def test_max_and_min_reductions_fuse_and_propagate_nan(dtype):
    x = Var((37, 2050), dtype)
    builder = GraphBuilder()
    with building(builder):
        y = x * x if dtype is fg.int64 else P.exp(P.tanh(x)) * x
        top = P.reduce_max(y, axes=(1,))
        bottom = P.reduce_min(y, axes=(1,))
        every = P.reduce_min(y > x, axes=(1,))  # all(), on booleans
        total = P.reduce_sum(y, axes=(1,))
    graph = Graph([x], builder.eqns, [top, bottom, every, total])
    executor = Executor(graph)
    assert len(executor.kernels) == 1 and len(executor.kernels[0].kernel.reductions) == 4
    rng = np.random.default_rng(5)
    xs = (rng.standard_normal((37, 2050)) * 5).astype(dtype.np)
    if dtype is not fg.int64:
        xs[3, 700] = np.nan
        xs[5, 0] = np.nan  # first: the accumulator holds a NaN from the start
        xs[7] = -np.inf  # a row masked out (attention), equal to the accumulator's start
        xs[9, 3], xs[9, 9] = np.inf, -np.inf
        xs[11, 2049] = np.nan  # last, in a later block: the block's NaN flag, not its max
        xs[13, 1500], xs[13, 1501] = np.nan, np.inf
        xs[15] = np.nan
    got, want = executor.run([xs]), evaluate(graph, [xs])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5 if dtype is fg.float32 else 1e-12)


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64], ids=["f32", "f64"])
def test_float_max_and_min_order_negatives_subnormals_and_zeros(dtype):
    """Float extrema run on integer keys ordered as the floats are: negative
    numbers (whose bits order backwards), subnormals and infinities come out
    as numpy's, and -0 counts below +0 whatever the elements' order."""
    tiny = np.finfo(dtype.np).smallest_subnormal
    rows = [
        [-3.0, -tiny, -2.0, -1e30],
        [tiny, -tiny, 0.0, -5.0],
        [-np.inf, -np.inf, -np.inf, -7.5],
        [np.inf, -np.inf, 1.0, -1.0],
        [0.0, -0.0, -0.0, -0.0],
        [-0.0, -0.0, -0.0, 0.0],
        [-0.0, -1.0, -0.0, -2.0],
        [2.5, 2.5, -tiny, 2.5],
    ]
    xs = np.array([row * 17 for row in rows], dtype.np)  # rows of 68: a vector loop and its tail
    x = Var(xs.shape, dtype)
    builder = GraphBuilder()
    with building(builder):
        top, bottom = P.reduce_max(x * 1.0, axes=(1,)), P.reduce_min(x * 1.0, axes=(1,))
    executor = Executor(Graph([x], builder.eqns, [top, bottom]))
    assert executor.kernels and executor.kernels[0].kernel.reductions
    got_top, got_bottom = executor.run([xs])
    np.testing.assert_array_equal(got_top, xs.max(axis=1))
    np.testing.assert_array_equal(got_bottom, xs.min(axis=1))
    assert list(np.signbit(got_top[4:7])) == [False, False, True]
    assert list(np.signbit(got_bottom[4:6])) == [True, True]


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64], ids=["f32", "f64"])
def test_elementwise_max_min_relu_and_sign_give_numpys_signed_zeros(dtype):
    """A tie gives the second operand, as numpy's and PyTorch's maximum and
    minimum do: relu(-0.) is 0., so 1 / relu(x) is +inf eagerly and compiled
    (the fuzzer's find: compiled gave -0., and -inf); sign(-0.) is 0. too,
    and sign(NaN) 0. as PyTorch's (numpy's is NaN)."""
    pairs = [(-0.0, 0.0), (0.0, -0.0), (-0.0, -0.0), (np.nan, 0.0), (0.0, np.nan), (-1.0, 2.0)]
    xs, ys = (np.array([p[k] for p in pairs] * 11, dtype.np) for k in (0, 1))
    x, y = Var(xs.shape, dtype), Var(ys.shape, dtype)
    builder = GraphBuilder()
    with building(builder):
        outs = [P.maximum(x, y), P.minimum(x, y), P.relu(x), 1.0 / P.relu(x), 1.0 / P.sign(x)]
    got = Executor(Graph([x, y], builder.eqns, outs)).run([xs, ys])
    with np.errstate(divide="ignore"):
        want = [np.maximum(xs, ys), np.minimum(xs, ys), np.maximum(xs, 0), 1 / np.maximum(xs, 0)]
        want.append(1 / np.where(np.isnan(xs), 0.0, np.sign(xs)))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(np.signbit(g), np.signbit(w))


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64], ids=["f32", "f64"])
def test_fmod_remainder_and_the_integral_quotients_give_numpys_bits(dtype):
    """The kernels' divisions with an integral quotient against numpy's, sign
    bits included: every pair of signed zeros, infinities, NaN, subnormals,
    huge and tiny values, and quotients that are integers up to rounding
    (the truncated quotient is numpy's x / y truncated, as PyTorch's)."""
    specials = [0.0, -0.0, 1.0, -1.0, 0.5, -2.0, 3.0, -7.5, 0.1, 1 / 3, 1e-30, -1e30]
    specials += [np.inf, -np.inf, np.nan, 5e-324, 1e308, np.finfo(dtype.np).tiny]
    with np.errstate(all="ignore"):
        pairs = [v.ravel().astype(dtype.np) for v in np.meshgrid(specials, specials)]
        rng = np.random.default_rng(7)
        divisors = rng.standard_normal(3000).astype(dtype.np)
        multiples = (rng.integers(-1000, 1000, 3000) * divisors).astype(dtype.np)
        scattered = rng.standard_normal((2, 3000)) * 10.0 ** rng.integers(-4, 5, (2, 3000))
        xs = np.concatenate([pairs[0], multiples, scattered[0].astype(dtype.np)])
        ys = np.concatenate([pairs[1], divisors, scattered[1].astype(dtype.np)])
        wants = [np.fmod(xs, ys), np.remainder(xs, ys), np.floor_divide(xs, ys)]
        wants.append(np.trunc(xs / ys))
    x, y = Var(xs.shape, dtype), Var(ys.shape, dtype)
    builder = GraphBuilder()
    with building(builder):
        outs = [P.fmod(x, y), P.remainder(x, y), P.floor_divide(x, y), P.trunc_divide(x, y)]
    executor = Executor(Graph([x, y], builder.eqns, outs))
    assert not [s for s in executor.steps if not isinstance(s, Launcher)]  # all in kernels
    for got, want in zip(executor.run([xs, ys]), wants):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_integers_divided_by_zero_raise_eagerly_and_compiled():
    """PyTorch's error, where numpy gives 0 (and the machine's division traps)."""
    x, zero = fg.tensor([7, -7]), fg.tensor([3, 0])
    compiled = fg.jit(lambda a, b: (a // b, a % b, fg.fmod(a, b)))
    for _ in range(3):  # traced, then run compiled
        got = compiled(x, fg.tensor([3, -2]))
        assert [g.tolist() for g in got] == [[2, 3], [1, -1], [1, -1]]
    for divide in (lambda a, b: a // b, lambda a, b: a % b, fg.fmod, compiled):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            divide(x, zero)
    with pytest.raises(TypeError, match="bool"):
        fg.tensor([True]) % fg.tensor([True])


@pytest.mark.parametrize("axes", [(0, 2, 3), (0, 3), (0, 1, 3)], ids=str)
def test_reductions_of_leading_and_trailing_axes_run_in_two_kernels(axes):
    """A bias's gradient over (N, H, W) of (N, C, H, W): the trailing axes,
    then the leading ones, each reduced by a kernel, where numpy did it."""
    x = Var((6, 5, 7, 9), fg.float32)
    builder = GraphBuilder()
    with building(builder):
        y = x * 2.0
        outputs = [P.reduce_sum(y, axes=axes), P.reduce_max(y, axes=axes)]
        outputs.append(P.reduce_min(y, axes=axes))
    graph = Graph([x], builder.eqns, outputs)
    executor = Executor(graph)
    assert not [s for s in executor.steps if not isinstance(s, Launcher)]  # no numpy steps
    xs = np.random.default_rng(4).standard_normal(x.shape).astype(np.float32)
    xs[1, 2, 3, 4] = np.nan
    for _ in range(3):
        got, want = executor.run([xs]), evaluate(graph, [xs])
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
        for g, w in zip(got[1:], want[1:]):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize(
    "shape,axes",
    [((3000, 7), (0,)), ((4, 5, 33), (0, 1)), ((1, 9), (0,)), ((0, 6), (0,)), ((6, 0), (0,))],
)
def test_column_reductions_fuse_with_numpys_accuracy(shape, axes):
    """Columns accumulate in the element type, row by row, as numpy's own
    reductions along leading axes do: no less accurate than numpy."""
    x = Var(shape, fg.float32)
    builder = GraphBuilder()
    with_max = all(shape[a] for a in axes)  # a max over nothing is an error, as in numpy
    with building(builder):
        y = P.exp(P.tanh(x)) * x
        columns = P.reduce_sum(y, axes=axes)
        tops = P.reduce_max(y, axes=axes) if with_max else columns
    graph = Graph([x], builder.eqns, [columns, tops, y])
    executor = Executor(graph)
    reductions = executor.kernels[0].kernel.reductions
    assert len(executor.kernels) == 1 and len(reductions) == 1 + with_max
    rng = np.random.default_rng(sum(shape))
    big = rng.standard_normal(tuple(2 * s + 1 for s in shape)).astype(np.float32)
    for xs in (
        big[tuple(slice(0, s) for s in shape)],
        big[tuple(slice(None, 2 * s, 2) for s in shape)],
    ):
        got, want = executor.run([xs]), evaluate(graph, [xs])
        exact = want[2].astype(np.float64).sum(axis=axes)
        numpy_error = np.abs(want[2].sum(axis=axes) - exact)
        assert np.all(np.abs(got[0] - exact) <= 2 * numpy_error + 1e-6 * np.abs(exact) + 1e-6)
        if xs.size:
            np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
        np.testing.assert_allclose(got[2], want[2], rtol=1e-6)


def _broadcastable(a, b) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


def _random_reducing_graph(rng, dtype):
    """Random elementwise chains over (2, 3, 4)-shaped and broadcast values,
    with sums, maxima and minima over random axes: rows, columns, the middle,
    everything."""
    shapes = [(2, 3, 4), (3, 4), (4,), (2, 1, 4), ()]
    inputs = [Var(shapes[k], dtype) for k in rng.permutation(len(shapes))[:3]]
    values = list(inputs)
    unary = [P.exp, P.tanh, P.sigmoid, P.log1p, P.erf, P.softplus, P.expm1, P.abs_, P.neg]
    builder = GraphBuilder()
    with building(builder):
        for _ in range(rng.integers(5, 20)):
            a = values[rng.integers(len(values))]
            partners = [v for v in values if _broadcastable(a.shape, v.shape)]
            b = partners[rng.integers(len(partners))]
            choice = rng.integers(6)
            if choice == 0:
                new = a * b + a
            elif choice == 1:
                fn = unary[rng.integers(len(unary))]
                new = fn(P.abs_(a) if fn is P.log1p else P.tanh(a) if fn in (P.exp, P.expm1) else a)
            elif choice == 2:
                new = P.where(a > b, a, b - 1.0)
            elif choice == 3:
                new = P.maximum(a, b) * P.minimum(a, b)
            elif a.ndim:
                kind = [P.reduce_sum, P.reduce_max, P.reduce_min][rng.integers(3)]
                axes = [(0,), (a.ndim - 1,), tuple(range(a.ndim)), (0, a.ndim - 1)]
                axes += [(1,)] if a.ndim == 3 else []
                reduced = tuple(sorted(set(axes[rng.integers(len(axes))])))
                new = kind(a, axes=reduced)
                if rng.integers(2):  # keepdims: later values read it per row (or column)
                    new = P.reshape(
                        new, shape=tuple(1 if d in reduced else s for d, s in enumerate(a.shape))
                    )
            else:
                new = a / 3.0
            values.append(new)
        outputs = values[-3:]
    return Graph(inputs, builder.eqns, outputs)


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("seed", range(60))
def test_random_reducing_graphs_agree_with_the_interpreter(seed, dtype):
    rng = np.random.default_rng(7000 + seed)
    graph = _random_reducing_graph(rng, dtype)
    values = [rng.standard_normal(v.shape).astype(dtype.np) for v in graph.inputs]
    tolerance = 2e-5 if dtype is fg.float32 else 1e-12
    for got, want in zip(_step_by_step_then_planned(graph, values), evaluate(graph, values)):
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("shape,split", [((300, 2100), 1), ((3, 4, 1500), 2), ((5, 7), 1)])
def test_rows_and_columns_of_one_matrix_reduce_in_one_kernel(shape, split):
    x = Var(shape, fg.float32)
    rows_axes, column_axes = tuple(range(split, len(shape))), tuple(range(split))
    builder = GraphBuilder()
    with building(builder):
        y = P.tanh(x) * x
        row_sums = P.reduce_sum(y, axes=rows_axes)
        row_max = P.reduce_max(y, axes=rows_axes)
        column_sums = P.reduce_sum(y, axes=column_axes)
        column_min = P.reduce_min(y, axes=column_axes)
    graph = Graph([x], builder.eqns, [row_sums, row_max, column_sums, column_min])
    executor = Executor(graph)
    assert len(executor.kernels) == 1 and len(executor.kernels[0].kernel.reductions) == 4
    rng = np.random.default_rng(2)
    base = rng.standard_normal(tuple(2 * s for s in shape)).astype(np.float32)
    for xs in (
        base[tuple(slice(0, s) for s in shape)],
        base[tuple(slice(None, None, 2) for _ in shape)],
    ):
        for got, want in zip(executor.run([xs]), evaluate(graph, [xs])):
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-4)


def test_a_sum_of_everything_fits_in_a_kernel_of_rows_and_columns():
    x = Var((257, 1500), fg.float32)
    builder = GraphBuilder()
    with building(builder):
        y = P.tanh(x) * x
        total = P.reduce_sum(y, axes=(0, 1))
        rows = P.reduce_sum(y, axes=(1,))
        columns = P.reduce_sum(y, axes=(0,))
        top = P.reduce_max(y, axes=(0, 1))
    graph = Graph([x], builder.eqns, [total, rows, columns, top])
    executor = Executor(graph)
    assert len(executor.kernels) == 1 and len(executor.kernels[0].kernel.reductions) == 4
    xs = np.random.default_rng(4).standard_normal((514, 1500)).astype(np.float32)[::2]
    got, want = executor.run([xs]), evaluate(graph, [xs])
    np.testing.assert_allclose(got[0], want[2].astype(np.float64).sum(), rtol=1e-6)
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64, fg.int64], ids=["f32", "f64", "i64"])
def test_a_reduction_of_an_input_or_a_matrix_product_runs_as_a_kernel(dtype):
    """Nothing produces these operands in a kernel, so the reduction starts one
    (softmax's row max, a bias gradient summing a matrix product's columns)."""
    x, w = Var((37, 50), dtype), Var((50, 3), dtype)
    builder = GraphBuilder()
    with building(builder):
        row_max = P.reduce_max(x, axes=(1,))
        product = P.matmul(x, w)
        column_sum = P.reduce_sum(product, axes=(0,))
        shifted = x - P.reshape(row_max, shape=(37, 1))
    graph = Graph([x, w], builder.eqns, [row_max, column_sum, shifted])
    executor = Executor(graph)
    reductions = [e.prim.name for k in executor.kernels for e in k.kernel.reductions]
    assert sorted(reductions) == ["reduce_max", "reduce_sum"]
    rng = np.random.default_rng(6)
    xs = (rng.standard_normal((37, 50)) * 10).astype(dtype.np)
    ws = (rng.standard_normal((50, 3)) * 10).astype(dtype.np)
    for got, want in zip(executor.run([xs, ws]), evaluate(graph, [xs, ws])):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def _threads_graph():
    """Elementwise outputs, rows with a second pass, columns and a sum of
    everything."""
    x, y = Var((300, 1000), fg.float32), Var((1000,), fg.float32)
    builder = GraphBuilder()
    with building(builder):
        z = P.tanh(x) * y + P.exp(-x * x)
        rows = P.reshape(P.reduce_max(z, axes=(1,)), shape=(300, 1))
        shifted = z - rows
        columns = P.reduce_sum(shifted, axes=(0,))
        everything = P.reduce_min(shifted, axes=(0, 1))
    return Graph([x, y], builder.eqns, [shifted, columns, everything])


@pytest.mark.parametrize("threads", ["1", "2", "3", "7"])
def test_chunks_on_several_cores_give_the_one_core_result(threads, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_NUM_THREADS", threads)
    monkeypatch.setattr(launch, "PARALLEL_WORK", 1)
    graph = _threads_graph()
    rng = np.random.default_rng(8)
    xs = rng.standard_normal((300, 1000)).astype(np.float32)
    ys = rng.standard_normal(1000).astype(np.float32)
    executor = Executor(graph)
    for got, want in zip(executor.run([xs, ys]), evaluate(graph, [xs, ys])):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-4)
    chunks = [run.chunks for k in executor.steps[:1] for run in k.launches.values()]
    assert max(len(c) for c in chunks) == min(int(threads), 300)


def test_kernels_beside_matrix_products_split_only_much_more_work(monkeypatch):
    """OpenBLAS's threads spin on the cores after a product: in a program with
    BLAS products (here one too small to run packed) a kernel splits from
    PARALLEL_WORK_BESIDE_BLAS, elsewhere from PARALLEL_WORK."""
    monkeypatch.setenv("FUSEGRAD_NUM_THREADS", "2")
    monkeypatch.setattr(launch, "PARALLEL_WORK", 1)
    x, w = Var((300, 8), fg.float32), Var((8, 64), fg.float32)
    xs, ws = np.ones((300, 8), np.float32), np.ones((8, 64), np.float32)

    def most_chunks(with_product):
        builder = GraphBuilder()
        with building(builder):
            y = P.exp(P.matmul(x, w) if with_product else x) * 2.0
        executor = Executor(Graph([x, w], builder.eqns, [y]))
        executor.run([xs, ws])
        (launcher,) = [s for s in executor.steps if isinstance(s, Launcher)]
        assert launcher.beside_blas is with_product
        return max(len(run.chunks) for run in launcher.launches.values())

    assert (most_chunks(False), most_chunks(True)) == (2, 1)
    monkeypatch.setattr(launch, "PARALLEL_WORK_BESIDE_BLAS", 1)
    assert most_chunks(True) == 2


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_a_pass_that_needs_the_whole_total_is_not_split(threads, monkeypatch):
    """x - mean(x) needs every element's sum before its second pass; mean(x)
    alone splits, and its division runs on the combined total."""
    monkeypatch.setenv("FUSEGRAD_NUM_THREADS", threads)
    monkeypatch.setattr(launch, "PARALLEL_WORK", 1)
    x = Var((100003,), fg.float64)
    for passes, function in (
        (1, lambda: P.reduce_sum(P.exp(x), axes=(0,)) / 100003.0),
        (2, lambda: P.exp(x) - P.reduce_sum(x * 2.0, axes=(0,))),
    ):
        builder = GraphBuilder()
        with building(builder):
            out = function()
        graph = Graph([x], builder.eqns, [out])
        executor = Executor(graph)
        xs = np.random.default_rng(9).standard_normal(100003)
        np.testing.assert_allclose(executor.run([xs])[0], evaluate(graph, [xs])[0], rtol=1e-12)
        (prepared,) = executor.steps[0].launches.values()
        assert len(prepared.chunks) == (min(int(threads), 98) if passes == 1 else 1)


def test_a_bad_thread_count_is_a_clear_error(monkeypatch):
    from fusegrad.runtime import threads

    monkeypatch.setenv("FUSEGRAD_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="FUSEGRAD_NUM_THREADS"):
        threads.count()


class _Interrupted(Exception):
    """What a signal handler raises (KeyboardInterrupt, for Ctrl-C)."""


def test_an_interrupted_split_returns_only_once_every_chunk_is_done():
    """Ctrl-C while a kernel's chunks ran on other threads raised at once in
    this one, and as it unwound it freed the arrays those chunks went on
    writing into (their addresses are all a native call holds)."""
    import ctypes
    import signal
    import time

    from fusegrad.runtime import threads

    sleep = ctypes.CDLL(None).usleep  # a native call of pointer-sized arguments, as kernels are

    def interrupt(signum, frame):
        raise _Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        start = time.monotonic()
        with pytest.raises(_Interrupted):
            threads.run(sleep, [(50_000,), (400_000,)])  # the worker's chunk outlasts this one's
        assert time.monotonic() - start >= 0.4
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# Calls split across three threads, their workers asleep or spinning when
# each call comes (every interval a few times, lingering and not): a call a
# worker missed never finishes, so the parent gives this a minute.
_SPLITS_ASLEEP_AND_AWAKE = """
import ctypes, itertools, time
import numpy as np
from fusegrad.runtime import threads
fill = ctypes.CDLL(None).memset
fill.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
buffers = [np.zeros(4096, np.uint8) for _ in range(3)]
for value, pause in enumerate(itertools.islice(itertools.cycle([0, 0, 1e-4, 2e-3, 5e-3]), 400)):
    calls = [(b.ctypes.data, value % 256, b.size) for b in buffers]
    threads.run(fill, calls, beside_blas=value % 3 == 0)
    assert all((b == value % 256).all() for b in buffers), value
    time.sleep(pause)
print("done")
"""


def _printed_by(script: str, threads: int, timeout: float) -> str:
    """What ``script`` prints in a new process with FUSEGRAD_NUM_THREADS=``threads``;
    it must exit cleanly within ``timeout`` seconds (a hang fails the test)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "FUSEGRAD_NUM_THREADS": str(threads)}
    child = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout, env=env
    )
    assert child.returncode == 0, child.stderr
    return child.stdout


def test_split_calls_finish_whether_the_workers_slept_or_spun():
    assert _printed_by(_SPLITS_ASLEEP_AND_AWAKE, threads=3, timeout=60).strip() == "done"


def test_threads_splitting_at_once_each_get_all_their_calls_run():
    """The workers serve one caller at a time; another thread's split runs
    its calls itself meanwhile."""
    import ctypes
    import threading

    from fusegrad.runtime import threads

    fill = ctypes.CDLL(None).memset
    fill.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    failures = []

    def caller(k):
        buffers = [np.zeros(1 << 16, np.uint8) for _ in range(2)]
        for round_ in range(200):
            value = (7 * k + round_) % 256
            threads.run(fill, [(b.ctypes.data, value, b.size) for b in buffers])
            if not all((b == value).all() for b in buffers):
                failures.append((k, round_))

    callers = [threading.Thread(target=caller, args=(k,)) for k in range(3)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert failures == []


_SPLIT_KERNEL_IN_A_FORK = """
import os
import numpy as np
import fusegrad as fg
from fusegrad.runtime import launch
launch.PARALLEL_WORK = 1
f = fg.jit(lambda x: (fg.exp(x) * 2.0).sum())
x = fg.ones(100000, dtype=fg.float64)
f(x)
child = os.fork()
if child == 0:
    print(float(f(x)), flush=True)
    os._exit(0)
os.waitpid(child, 0)
"""


def test_a_kernel_split_across_threads_runs_in_a_forked_child():
    """A fork copies the workers' records but none of their threads: the
    child's kernel waited forever for its other chunks."""
    printed = _printed_by(_SPLIT_KERNEL_IN_A_FORK, threads=2, timeout=120)
    assert float(printed) == pytest.approx(2 * np.e * 100000)


# What a forked child computes, while a thread the child does not have holds
# what it needs; the parent gives the child a minute, then kills it.
_FORK_WHILE_HELD = """
import os
import sys
import threading
import time
import numpy as np
import fusegrad as fg
from fusegrad.runtime import native_eager
{setup}
child = os.fork()
if child == 0:
    print({child_computes}, flush=True)
    os._exit(0)
{after_fork}
for _ in range(600):
    if os.waitpid(child, os.WNOHANG)[0]:
        break
    time.sleep(0.1)
else:
    os.kill(child, 9)
    sys.exit("the forked child hung")
"""

_HOLD_RUNTIME_LOCKS = """
scaled = fg.jit(lambda x: (x * 2.0).sum(), dynamic=True)
scaled(fg.ones(5)), scaled(fg.ones(7))
shifted = fg.jit(lambda x: (x + 1.0).sum())
(dynamic,) = [p for variants in scaled._cache.values() for p in variants]
locks = [native_eager._lock, scaled._lock, shifted._lock, dynamic._lock]
held, release = threading.Event(), threading.Event()

def hold():
    for lock in locks:
        lock.acquire()
    held.set()
    release.wait()
    for lock in locks:
        lock.release()

threading.Thread(target=hold).start()
held.wait()
"""

_COMPILE_IN_ANOTHER_THREAD = """
from fusegrad.codegen import target
compiling = threading.Event()
optimize = target.optimize

def slow_optimize(module):
    compiling.set()
    time.sleep(0.5)  # the fork comes meanwhile
    optimize(module)

target.optimize = slow_optimize
x = fg.ones(1000)
compiler = threading.Thread(target=lambda: fg.jit(lambda x: fg.tanh(x).sum())(x))
compiler.start()
compiling.wait()
"""


@pytest.mark.parametrize(
    "setup, child_computes, after_fork",
    [
        (
            _HOLD_RUNTIME_LOCKS,
            "float(scaled(fg.ones(9))), float(shifted(fg.ones(3))), "
            "float(fg.erf(fg.ones(10000, dtype=fg.float64)).sum())",
            "release.set()",
        ),
        (
            _COMPILE_IN_ANOTHER_THREAD,
            "float(fg.jit(lambda x: fg.exp(x).sum())(x))",
            "compiler.join()",
        ),
    ],
    ids=["runtime locks held", "compiling"],
)
def test_a_forked_child_compiles_and_runs_whatever_other_threads_were_doing(
    setup, child_computes, after_fork
):
    """A child has no thread but the forking one: a lock another thread held
    at the fork (a compile's, LLVM's, a jit function's or eager mode's) stayed
    held in the child, whose first use of it hung forever."""
    import os
    import subprocess
    import sys

    script = _FORK_WHILE_HELD.format(
        setup=setup, child_computes=child_computes, after_fork=after_fork
    )
    env = {**os.environ, "FUSEGRAD_CACHE_DIR": ""}  # the child compiles
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip()


_OPENBLAS_THREADS = """
import ctypes
import sys
import numpy
if sys.argv[1] == "with fusegrad":
    import fusegrad
paths = {line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line.lower()}
for path in sorted(paths):
    library = ctypes.CDLL(path)
    for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                 "scipy_openblas_get_num_threads", "openblas_get_num_threads"):
        if hasattr(library, name):
            print(getattr(library, name)())
            raise SystemExit
print("no openblas")
"""


@pytest.mark.parametrize("setting", ["1", None, "auto"], ids=["budget-of-1", "unset", "auto"])
def test_fusegrad_num_threads_is_numpys_openblas_budget_too(setting):
    """One budget for kernels and matrix products: set, it is OpenBLAS's
    thread count; unset or auto, OpenBLAS keeps its own."""
    import os
    import subprocess
    import sys

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("FUSEGRAD_NUM_THREADS", "OPENBLAS_NUM_THREADS")
    }
    if setting:
        env["FUSEGRAD_NUM_THREADS"] = setting
    found = [
        subprocess.run(
            [sys.executable, "-c", _OPENBLAS_THREADS, importing],
            env=env,
            capture_output=True,
            text=True,
        ).stdout.strip()
        for importing in ("with fusegrad", "numpy alone")
    ]
    if found[0] == "no openblas":
        pytest.skip("numpy uses another BLAS here")
    assert found[0] == (found[1] if setting in (None, "auto") else setting)


class _FakeOpenBLAS:
    def __init__(self, threads):
        self.threads, self.settings = threads, []

    def set(self, n):
        self.threads = n
        self.settings.append(n)

    def get(self):
        return self.threads


# (seconds since the first reading, cores other processes used since the last
# one, OpenBLAS's thread count after the reading)
_LOAD_STEPS = [
    (0.0, None, 2),  # the first reading only notes the counters
    (0.5, 0.1, 2),
    (1.0, 1.0, 1),  # a core busy elsewhere: one thread
    (1.5, 0.4, 1),  # between the two bounds: as it was
    (2.0, 0.1, 2),  # idle again: its own count back
    (2.5, 0.45, 2),
]


@pytest.mark.parametrize("setting", ["auto", None, "2"])
def test_with_budget_auto_openblas_runs_on_one_thread_while_a_core_is_busy_elsewhere(
    monkeypatch, setting
):
    """OpenBLAS's threads spin waiting for each other, and one on a core
    another process keeps busy runs only in turns: beside one busy process
    an MLP step took 136 ms with OpenBLAS's two threads, 25 with one. Only
    with FUSEGRAD_NUM_THREADS=auto: OpenBLAS's last bits depend on its
    thread count."""
    from fusegrad.runtime import threads

    blas = _FakeOpenBLAS(2)
    monkeypatch.setattr(threads, "_openblas", lambda: (blas.set, blas.get))
    monkeypatch.setattr(threads, "_load", threads._Load())
    monkeypatch.delenv("FUSEGRAD_NUM_THREADS", raising=False)
    if setting:
        monkeypatch.setenv("FUSEGRAD_NUM_THREADS", setting)
    adapts = setting == "auto"
    worked = own = 0.0
    for seconds, others, threads_after in _LOAD_STEPS:
        if others is not None:
            worked += 0.5 * (others + 0.9)  # this process used 0.9 of a core too
            own += 0.5 * 0.9
        monkeypatch.setattr(threads, "_cpu_seconds", lambda w=worked, o=own: (w, o))
        monkeypatch.setattr(threads.time, "monotonic", lambda t=seconds: 100.0 + t)
        threads.adapt_blas_to_load()
        threads.adapt_blas_to_load()  # within SAMPLE_SECONDS: nothing read
        assert blas.threads == (threads_after if adapts else 2), seconds
    assert blas.settings == ([1, 2] if adapts else [])


def test_the_load_is_read_from_the_system_and_this_process():
    """A busy process beside this one reads as about a core used elsewhere."""
    import os
    import subprocess
    import sys
    import time

    from fusegrad.runtime import threads

    try:
        before = (time.monotonic(), *threads._cpu_seconds())
    except OSError:
        pytest.skip("no /proc/stat here")
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1.0)
        after = (time.monotonic(), *threads._cpu_seconds())
    finally:
        busy.kill()
        busy.wait()
    assert 0.5 < threads.other_processes_cores(before, after) < len(os.sched_getaffinity(0)) + 0.5


def test_array_constants_are_operands_each_pass_loads():
    """A constant array is read like an input, in every pass that needs it
    (a regression: passes once loaded only what came from outside as Vars)."""
    x = Var((40, 3), fg.float32)
    scale, shift = Const(np.array([1.5, -2.0, 0.5], np.float32)), Const(np.ones((1, 1), np.float32))
    builder = GraphBuilder()
    with building(builder):
        y = x * scale + shift
        centered = y - P.reshape(P.reduce_max(y, axes=(1,)), shape=(40, 1)) * shift
    graph = Graph([x], builder.eqns, [centered])
    assert _one_kernel(graph).last_phase == 1
    xs = np.random.default_rng(10).standard_normal((40, 3)).astype(np.float32)
    np.testing.assert_array_equal(Executor(graph).run([xs])[0], evaluate(graph, [xs])[0])


def test_intermediates_are_freed_once_no_later_step_reads_them():
    import tracemalloc

    x = Var((400, 400), fg.float64)
    builder = GraphBuilder()
    with building(builder):
        value = x
        for _ in range(6):  # matrix products: a step each, no fusion
            value = P.matmul(value, x)
    graph = Graph([x], builder.eqns, [value])
    executor = Executor(graph)
    xs = np.eye(400) * 0.5
    executor.run([xs])
    one = xs.nbytes
    tracemalloc.start()
    try:
        (result,) = executor.run([xs])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(result, xs * 0.5**6)
    assert peak < 3.5 * one  # six intermediates, at most two alive at once


# ---------------------------------------------------------------- plans


def _two_kernels():
    """A kernel summing columns, and one reading those totals (a kernel never
    reads its own): two launches in a row, no numpy step between."""
    x = Var((50, 30), fg.float32)
    builder = GraphBuilder()
    with building(builder):
        e = P.exp(x * 0.1)
        columns = P.reduce_sum(e, axes=(0,))
        rows = P.reduce_max(P.sin(x * 1e5) + e / columns, axes=(1,))
    return Graph([x], builder.eqns, [rows, columns])


def test_consecutive_kernels_run_as_one_driver_call_with_a_reused_workspace():
    graph = _two_kernels()
    executor = Executor(graph)
    assert len(executor.kernels) == 2
    xs = np.random.default_rng(3).standard_normal((50, 30)).astype(np.float32)
    first = executor.run([xs])
    (plan,) = executor.plans.values()
    ((segment, *_),) = plan.items
    assert len(segment.calls) == 2
    # the plan runs as straight-line Python: one driver call, fresh outputs
    assert plan.source.count("driver0(table0, (v0, workspace, v1, v2, ))") == 1
    executor.run([xs])  # the first run that follows the plan
    (workspace,) = segment.free_workspaces
    for _ in range(3):
        for got, want in zip(executor.run([xs]), first):
            np.testing.assert_array_equal(got, want)
        assert len(segment.free_workspaces) == 1 and segment.free_workspaces[0] is workspace
    assert workspace.nbytes >= xs.nbytes  # the intermediate e lives there
    for got, want in zip(first, evaluate(graph, [xs])):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_raised_range_flag_reruns_step_by_step():
    graph = _two_kernels()
    executor = Executor(graph)
    normal = np.random.default_rng(4).standard_normal((50, 30)).astype(np.float32)
    small = normal * 0.01
    executor.run([small])
    executor.run([small])
    huge = normal * 100  # sin's arguments far beyond its fast range
    for got, want in zip(executor.run([huge]), evaluate(graph, [huge])):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_numpy_step_result_in_another_layout_than_planned_leaves_the_plan(monkeypatch):
    from fusegrad.runtime import executor as executor_module
    from fusegrad.runtime import plan as plan_module

    x = Var((20, 20), fg.float64)
    builder = GraphBuilder()
    with building(builder):
        product = P.matmul(x, x)
        out = P.tanh(product) * 2.0 + P.exp(-product)
    graph = Graph([x], builder.eqns, [out])
    executor = Executor(graph)
    xs = np.random.default_rng(5).standard_normal((20, 20)) * 0.3
    executor.run([xs])
    original = executor_module.run_equation

    def fortran(eqn, args):
        return np.asfortranarray(original(eqn, args))

    monkeypatch.setattr(executor_module, "run_equation", fortran)
    monkeypatch.setattr(plan_module, "run_equation", fortran)
    np.testing.assert_allclose(executor.run([xs])[0], evaluate(graph, [xs])[0], rtol=1e-13)


def test_threads_running_one_plan_at_once_each_get_a_workspace():
    from concurrent.futures import ThreadPoolExecutor

    graph = _two_kernels()
    executor = Executor(graph)
    rng = np.random.default_rng(6)
    inputs = [rng.standard_normal((50, 30)).astype(np.float32) for _ in range(8)]
    wanted = [executor.run([xs]) for xs in inputs]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(20):
            results = list(pool.map(lambda xs: executor.run([xs]), inputs))
            for got, want in zip(results, wanted):
                for g, w in zip(got, want):
                    np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("seed", range(20))
def test_packed_workspace_values_alive_at_once_never_share_bytes(seed):
    from fusegrad.runtime.plan import _pack

    rng = np.random.default_rng(seed)
    wanted = []
    for k in range(12):
        first = int(rng.integers(8))
        wanted.append((k, int(rng.integers(1, 500)), (first, first + int(rng.integers(4)))))
    offsets, total = _pack(wanted)
    for a, size_a, (first_a, last_a) in wanted:
        assert offsets[a] % 64 == 0 and offsets[a] + size_a <= total
        for b, size_b, (first_b, last_b) in wanted:
            if a < b and first_a <= last_b and first_b <= last_a:
                apart = offsets[a] + size_a <= offsets[b] or offsets[b] + size_b <= offsets[a]
                assert apart, (a, b)
    assert total <= sum(-(-size // 64) * 64 for _, size, _ in wanted)


def test_a_planned_executor_refuses_operands_of_another_dtype_or_shape():
    graph = _two_kernels()
    executor = Executor(graph)
    xs = np.ones((50, 30), np.float32)
    executor.run([xs])
    executor.run([xs])  # planned
    with pytest.raises(TypeError, match="dtype"):
        executor.run([np.ones((50, 30), np.float64)])
    with pytest.raises(ValueError, match="shape"):
        executor.run([np.ones((50, 31), np.float32)])
    strided = np.ones((50, 60), np.float32)[:, ::2]  # another layout: planned anew, same values
    for got, want in zip(executor.run([strided]), executor.run([xs])):
        np.testing.assert_array_equal(got, want)


def test_the_driver_finds_array_data_and_tuple_items_where_python_keeps_them():
    import ctypes

    from fusegrad.runtime.plan import DATA_OFFSET, ITEMS_OFFSET

    for a in [np.ones(3), np.zeros((4, 5), np.float32)[1:, ::2], np.full((), 2.0)]:
        assert ctypes.c_size_t.from_address(id(a) + DATA_OFFSET).value == a.ctypes.data
        pair = (a, a.T)
        assert ctypes.c_size_t.from_address(id(pair) + ITEMS_OFFSET + 8).value == id(pair[1])


@pytest.mark.skipif(launch.CHECKED, reason="bounds checks keep loops scalar")
@pytest.mark.parametrize(
    "function",
    [lambda x: fg.tanh(x) * fg.sigmoid(x), lambda x: fg.nn.functional.gelu(x)],
    ids=["tanh_and_sigmoid", "gelu_and_its_gradient"],
)
def test_a_kernel_evaluates_an_exponential_its_functions_share_once(function):
    """tanh's and sigmoid's exp(-|x|), erf's and its derivative's
    exp(-x*x) are written as the same expression, so LLVM computes each once."""
    import re

    f = fg.jit(fg.value_and_grad(lambda x: function(x).sum()))
    x = fg.randn(1000)
    (kernel,) = f.lower(x).kernels
    f(x)
    widths = [int(w) for w in re.findall(r"call <(\d+) x float> @llvm\.floor\.v", kernel.llvm_ir)]
    assert widths.count(max(widths)) == 1  # exp's range reduction, once in the main loop


def test_the_printed_program_shows_how_a_run_calls_its_kernels():
    @fg.jit
    def f(x, w):
        return fg.tanh(x @ w).sum()

    text = str(f.lower(fg.randn(64, 32), fg.randn(32, 64, requires_grad=True)))
    forward = text[text.index("forward run for float32[64, 32] strides (128, 4)") :]
    assert forward.split("\n")[1:3] == [
        "  numpy: matmul",
        "  one native call: fused_tanh_reduce_sum (workspace 0 B)",
    ]
    assert "backward run for" in text


def test_a_backward_seeded_by_one_number_is_one_kernel():
    """The seed (a 0-d cotangent) broadcast over the gradient's shape reads
    one number: it joins the kernel recomputing the forward's values rather
    than starting a kernel of its own (which made the first write every
    value the second read)."""
    f = fg.jit(lambda x, y: (fg.tanh(x * y) * fg.sin(y) + fg.exp(-x)).sum())
    x, y = fg.randn(16, requires_grad=True), fg.randn(16)
    lowered = f.lower(x, y)
    assert "reshape" not in lowered.backward_ir
    assert len(lowered.program.backward_executor.kernels) == 1
    f(x, y).backward()
    f(x, y).backward()
    z = fg.tensor(x.detach().numpy(), requires_grad=True)
    (fg.tanh(z * y) * fg.sin(y) + fg.exp(-z)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * z.grad.numpy(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- memory safety


def _one_short(monkeypatch):
    """Bounds-checked launches whose operands' extents end one element early:
    the kernel's last access is then outside."""
    real = launch.extent
    monkeypatch.setattr(launch, "CHECKED", True)
    monkeypatch.setattr(launch, "extent", lambda s, e: (0, max(real(s, e)[1] - 1, 0)))


def test_a_bounds_checked_kernel_raises_instead_of_touching_memory(monkeypatch):
    _one_short(monkeypatch)
    graph = _chain((40,), (40,))
    code = _kernel_of(graph)
    xs, ys = np.ones(40, np.float32), np.ones(40, np.float32)
    message = r"kernel fused_\w+ reached element 39 of operand 0 \(input float32\[40\]\)"
    with pytest.raises(launch.KernelBoundsError, match=message + r", outside its extent \[0, 39\)"):
        code([xs, ys])


def test_a_bounds_checked_driver_stops_at_the_kernel_that_reached_outside(monkeypatch):
    graph = _two_kernels()
    xs = np.random.default_rng(3).standard_normal((50, 30)).astype(np.float32)
    monkeypatch.setattr(launch, "CHECKED", True)
    executor = Executor(graph)
    first = executor.run([xs])
    for got, want in zip(executor.run([xs]), first):  # planned, checked, in bounds
        np.testing.assert_array_equal(got, want)
    (plan,) = executor.plans.values()
    ((segment, *_),) = plan.items
    extents = segment.launches[1].tables[2]  # the second kernel's (low, high) per operand
    extents[1] -= 1  # its first operand ends an element early
    with pytest.raises(launch.KernelBoundsError, match=r"kernel fused_\w+ reached element 1499 "):
        executor.run([xs])


def test_a_plan_that_would_overlap_live_values_is_refused(monkeypatch):
    from fusegrad.runtime import plan as plan_module

    monkeypatch.setattr(plan_module, "_pack", lambda wanted: ({k: 0 for k, *_ in wanted}, 1 << 20))
    executor = Executor(_two_kernels())
    with pytest.raises(plan_module.PlanError, match="share workspace bytes"):
        executor.run([np.ones((50, 30), np.float32)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_one_valued_exponent_of_one_half_is_numpys_square_root(dtype):
    """numpy computes x ** 0.5 with a 0-d exponent as sqrt(x), where C's pow
    differs at -inf (nan, not inf) and -0.0 (-0.0, not 0.0); eagerly that
    is what runs, so kernels do the same, for a constant and a number input."""
    xs = np.array([-np.inf, -0.0, 0.0, -4.0, 2.0, np.inf, np.nan], dtype)
    want = np.power(xs, dtype(0.5))
    for exponent in (
        Const(np.asarray(0.5, dtype)),
        Var((), fg.float32 if dtype is np.float32 else fg.float64),
    ):
        x = Var(xs.shape, fg.float32 if dtype is np.float32 else fg.float64)
        builder = GraphBuilder()
        with building(builder):
            out = P.pow_(x, exponent)
        inputs = [x] + ([exponent] if isinstance(exponent, Var) else [])
        values = [xs] + ([np.asarray(0.5, dtype)] if isinstance(exponent, Var) else [])
        (got,) = Executor(Graph(inputs, builder.eqns, [out])).run(values)
        np.testing.assert_array_equal(got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want))


def test_kernels_differing_in_a_one_element_constant_do_not_share_machine_code():
    """A row equation reading a constant of shape [1] (a size computed into a
    gradient: -n for log_softmax's) had its value inlined while the kernel's
    description named it as an operand, so the kernel for n=4 ran the machine
    code made for n=3 (the fuzzer's find, under dynamic sizes)."""
    x = Var((1, 4), fg.float64)
    xs = np.random.default_rng(4).standard_normal((1, 4))
    descriptions = set()
    for n in (-3.0, -4.0):
        builder = GraphBuilder()
        with building(builder):
            e = P.exp(x - P.reshape(P.reduce_max(x, axes=(1,)), shape=(1, 1)))
            scale = P.div(Const(np.array([n]), fg.float64), P.reduce_sum(e, axes=(1,)))
            y = P.broadcast_to(scale, shape=(1, 4)) * e + 1.0
        graph = Graph([x], builder.eqns, [y])
        executor = Executor(graph)
        np.testing.assert_allclose(executor.run([xs])[0], evaluate(graph, [xs])[0], rtol=1e-12)
        descriptions.add(executor.kernels[0].description())
    assert len(descriptions) == 2


def test_a_sum_of_a_cancelling_difference_keeps_inf_and_nan():
    """LLVM, allowed to reorder a kernel's sum and to ignore the sign of zero,
    cancelled x - x inside it: the row sums of x - x over inf or NaN came out
    0 (the fuzzer's find, through layer_norm of a NaN's std)."""

    def centred(x):
        d = x - x
        total = d.sum(1, keepdim=True)
        return total, d - total / 4

    x = fg.tensor(np.array([[1.0, np.nan, 2.0, 3.0], [np.inf, 0.0, 1.0, 2.0], [1, 2, 3, 4.0]]))
    want = [t.numpy() for t in centred(x)]
    compiled = fg.jit(centred)
    for _ in range(3):
        for got, expected in zip(compiled(x), want):
            np.testing.assert_array_equal(got.numpy(), expected)


_NAMED_FOR_PERF = """
import os
import numpy as np
import fusegrad as fg
fg.jit(lambda x: (x * 3.0).exp().sum())(fg.tensor(np.ones(5)))
print(os.getpid())
"""


def test_perf_map_names_each_compiled_function(tmp_path):
    """FUSEGRAD_PERF_MAP=1 appends "address size name" lines to perf's map
    of the process, one per function compiled (here from LLVM, not the disk cache)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "FUSEGRAD_PERF_MAP": "1", "FUSEGRAD_CACHE_DIR": str(tmp_path)}
    child = subprocess.run(
        [sys.executable, "-c", _NAMED_FOR_PERF], capture_output=True, text=True, env=env
    )
    assert child.returncode == 0, child.stderr
    path = f"/tmp/perf-{child.stdout.split()[-1]}.map"
    try:
        with open(path) as perf_map:
            lines = [line.split(" ", 2) for line in perf_map.read().splitlines()]
    finally:
        os.unlink(path)
    names = [name for _, _, name in lines]
    assert any(name.startswith("kernel_") and "exp" in name for name in names), names
    assert all(int(address, 16) > 0 and int(size, 16) > 0 for address, size, _ in lines)
