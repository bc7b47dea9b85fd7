"""vmap: every op of the table against a Python loop over the batch (eager
and compiled), and torch.func's vmap interface: in_dims and out_dims over
pytrees, nesting, chunks, randomness, in-place changes, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.func import functional_call, grad, jacrev, vmap

from op_table import OPS

BATCH = 3
CASES = [
    pytest.param(op, sample, id=f"{op.name}-{sample!r}")
    for op in OPS
    for sample in op.samples
    # the others' result shapes depend on values (or they read .item()): vmap
    # refuses them, as torch.func
    if op.jit and op.vmap and any(isinstance(a, np.ndarray) for a in sample.args)
]
SHAPE_ARGUMENTS = {"repeat_interleave_counts"}  # integer tensors that are sizes, not indices


def _batched_arguments(op, sample, dtype):
    """Each array argument as a batch of BATCH elements (floats scaled a
    little apart, so elements differ; integers repeated), the others as
    they are; with which arguments are tensors."""
    batched, tensor_positions = [], []
    for k, a in enumerate(sample.args):
        if not isinstance(a, np.ndarray):
            batched.append(a)
            continue
        if a.dtype.kind != "f" and op.name in SHAPE_ARGUMENTS:
            batched.append(fg.tensor(a))
            continue
        tensor_positions.append(k)
        if a.dtype.kind == "f":
            stacked = np.stack([a * (1.0 + 0.05 * e) for e in range(BATCH)])
            batched.append(fg.tensor(stacked, dtype=dtype))
        else:
            batched.append(fg.tensor(np.stack([a] * BATCH)))
    return batched, tensor_positions


def _looped(fn, args, dims):
    """The reference: fn on each element, stacked."""
    results = []
    for e in range(BATCH):
        element = [a if d is None else a.select(d, e) for a, d in zip(args, dims)]
        results.append(fn(*element))
    return fg.stack(results)


def _compare(got, want, dtype):
    tolerance = 1e-5 if dtype is fg.float32 else 1e-12
    np.testing.assert_allclose(
        got.detach().double().numpy(),
        want.detach().double().numpy(),
        rtol=tolerance,
        atol=tolerance,
        equal_nan=True,
    )


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op,sample", CASES)
def test_vmap_of_every_op_equals_a_loop(op, sample, dtype):
    args, tensors = _batched_arguments(op, sample, dtype)

    def fn(*xs):
        return op.op(*xs, **sample.kwargs)

    every = tuple(0 if k in tensors else None for k in range(len(args)))
    _compare(vmap(fn, in_dims=every)(*args), _looped(fn, args, every), dtype)
    # the first tensor batched along its last axis, the others shared
    first = tensors[0]
    moved = [a.movedim(0, -1).contiguous() if k == first else a for k, a in enumerate(args)]
    moved = [a.select(0, 0) if k in tensors and k != first else a for k, a in enumerate(moved)]
    dims = tuple(-1 if k == first else None for k in range(len(args)))
    _compare(vmap(fn, in_dims=dims)(*moved), _looped(fn, moved, dims), dtype)


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op,sample", CASES[::4])
def test_a_compiled_vmap_of_every_fourth_op_equals_a_loop(op, sample, dtype):
    args, tensors = _batched_arguments(op, sample, dtype)

    def fn(*xs):
        return op.op(*xs, **sample.kwargs)

    every = tuple(0 if k in tensors else None for k in range(len(args)))
    compiled = fg.jit(vmap(fn, in_dims=every))
    for _ in range(3):  # the trace's result, then the program's
        _compare(compiled(*args), _looped(fn, args, every), dtype)


# ----------------------------------------------------------- the interface


def test_in_dims_and_out_dims_follow_pytrees():
    x, y = fg.randn(2, 3), fg.randn(3, 2)

    def fn(pair, scale):
        a, b = pair
        return {"sum": a + b * scale, "a": a}

    out = vmap(fn, in_dims=((1, 1), None), out_dims={"sum": 1, "a": 0})((x.t(), y), 2.0)
    np.testing.assert_allclose(out["sum"].numpy(), (x.t() + y * 2.0).numpy(), rtol=1e-6)
    np.testing.assert_allclose(out["a"].numpy(), x.numpy())


def test_an_unbatched_output_is_repeated_or_returned_as_is():
    x = fg.randn(4, 2)
    assert vmap(lambda v: fg.ones(3))(x).shape == (4, 3)
    assert vmap(lambda v: fg.ones(3), out_dims=None)(x).shape == (3,)
    with pytest.raises(ValueError, match="can not return a BatchedTensor when out_dim is None"):
        vmap(lambda v: v * 2, out_dims=None)(x)


def test_nested_vmaps_map_two_axes():
    a, b = fg.randn(2, 3), fg.randn(5, 3)
    pairwise = vmap(vmap(fg.dot, in_dims=(None, 0)), in_dims=(0, None))(a, b)
    np.testing.assert_allclose(pairwise.numpy(), (a @ b.t()).numpy(), rtol=1e-5)


def test_chunks_give_the_whole_batch():
    x = fg.randn(7, 3)
    for chunk_size in (1, 2, 3, 7, 10):
        out = vmap(lambda v: v.softmax(0), chunk_size=chunk_size)(x)
        np.testing.assert_allclose(out.numpy(), x.softmax(1).numpy(), rtol=1e-6)


def test_randomness_same_draws_once_and_different_per_element():
    x = fg.zeros(4, 3)
    fg.manual_seed(0)
    same = vmap(lambda v: v + fg.rand(3), randomness="same")(x)
    after_same = fg.rand(2)
    fg.manual_seed(0)
    np.testing.assert_array_equal(same.numpy(), np.stack([fg.rand(3).numpy()] * 4))
    np.testing.assert_array_equal(after_same.numpy(), fg.rand(2).numpy())  # one draw taken
    different = vmap(lambda v: v + fg.rand(3), randomness="different")(x)
    assert len({tuple(row) for row in different.numpy().tolist()}) == 4
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda v: v + fg.rand(3))(x)


def test_what_vmap_refuses_it_refuses_as_torch_func_does():
    x = fg.randn(3, 2)
    with pytest.raises(RuntimeError, match=r"calling \.item\(\) on a Tensor"):
        vmap(lambda v: v.sum().item())(x)
    with pytest.raises(RuntimeError, match="data-dependent control flow"):
        vmap(lambda v: v if v[0] > 0 else -v)(fg.tensor([[1.0, 2.0], [-1.0, 2.0]]))
    # a decision every element makes alike stands (a loop would make it too)
    np.testing.assert_allclose(
        vmap(lambda v: v if v.sum() > -100 else -v)(x).numpy(), x.numpy(), rtol=0
    )
    with pytest.raises(ValueError, match="Expected all tensors to have the same size"):
        vmap(fg.add)(fg.ones(2, 3), fg.ones(3, 3))
    with pytest.raises(ValueError, match="We cannot vmap over non-Tensor arguments"):
        vmap(lambda v, n: v * n, in_dims=(0, 0))(x, 2)
    with pytest.raises(ValueError, match="so expected in_dim to satisfy"):
        vmap(fg.sin, in_dims=2)(x)
    with pytest.raises(ValueError, match="at least one Tensor to vmap over"):
        vmap(fg.sin, in_dims=(None,))(x)
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        vmap(fg.sin, randomness="sometimes")


def test_in_place_changes_reach_batched_inputs_and_refuse_unbatched_ones():
    x = fg.randn(3, 2)
    before = x.clone()

    def shift(v):
        v.add_(1.0)
        return v * 2

    out = vmap(shift)(x)
    np.testing.assert_allclose(x.numpy(), before.numpy() + 1.0, rtol=1e-6)
    np.testing.assert_allclose(out.numpy(), 2 * x.numpy(), rtol=1e-6)
    total = fg.zeros(2)

    def accumulate(v):
        total.add_(v)
        return v

    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        vmap(accumulate)(x)
    np.testing.assert_array_equal(total.numpy(), np.zeros(2))  # the trace's change undone


def test_per_sample_gradients_of_a_model_through_functional_call():
    fg.manual_seed(0)
    model = fg.nn.Sequential(fg.nn.Linear(4, 8), fg.nn.Tanh(), fg.nn.Linear(8, 3))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = fg.randn(6, 4), fg.tensor([0, 2, 1, 1, 0, 2])

    def loss(p, xi, yi):
        out = functional_call(model, p, (xi.unsqueeze(0),))
        return fg.nn.functional.cross_entropy(out, yi.unsqueeze(0))

    batched = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    compiled = fg.jit(vmap(grad(loss), in_dims=(None, 0, 0)))
    for k in range(6):
        one = grad(loss)(params, x[k], y[k])
        for name in params:
            np.testing.assert_allclose(batched[name][k].numpy(), one[name].numpy(), atol=1e-6)
    for _ in range(3):
        again = compiled(params, x, y)
        for name in params:
            np.testing.assert_allclose(again[name].numpy(), batched[name].numpy(), atol=1e-6)


def test_gradients_flow_through_vmap_and_jacobians_use_it():
    w = fg.randn(3, requires_grad=True)
    xs = fg.randn(5, 3)
    vmap(lambda v: (v * w).sin().sum())(xs).sum().backward()
    np.testing.assert_allclose(
        w.grad.numpy(), (xs * (xs * w).cos()).sum(0).detach().numpy(), rtol=1e-5
    )
    jacobians = vmap(jacrev(lambda v: v.sin() * v.sum()))(xs)
    assert jacobians.shape == (5, 3, 3)
