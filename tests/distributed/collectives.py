"""fusegrad.distributed's collectives in every process of an MPI job: values
against numpy (every reduction, every dtype, in place), gradients through
them against one process computing every process's part (eagerly, compiled,
and to second order), compiled programs running them as steps, errors."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.distributed as dist
from fusegrad.distributed import ReduceOp


def rank() -> int:
    return dist.get_rank()


def world() -> int:
    return dist.get_world_size()


def values(r: int, dtype=np.float64, shape=(2, 3)) -> np.ndarray:
    """Process r's operand: distinct per process, with a tie between the
    processes at [0, 0] and a zero at [0, 1] on process 0."""
    rng = np.random.default_rng(r)
    if np.dtype(dtype) == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind == "i":
        return rng.integers(1, 6, shape).astype(dtype)
    x = rng.uniform(0.5, 2.0, shape)
    x[0, 0] = 1.5
    if r == 0:
        x[0, 1] = 0.0
    return x.astype(dtype)


NUMPY = {
    ReduceOp.SUM: lambda xs: np.sum(xs, axis=0),
    ReduceOp.AVG: lambda xs: np.mean(xs, axis=0),
    ReduceOp.PRODUCT: lambda xs: np.prod(xs, axis=0),
    ReduceOp.MIN: lambda xs: np.min(xs, axis=0),
    ReduceOp.MAX: lambda xs: np.max(xs, axis=0),
    ReduceOp.BAND: lambda xs: np.bitwise_and.reduce(xs, axis=0),
    ReduceOp.BOR: lambda xs: np.bitwise_or.reduce(xs, axis=0),
    ReduceOp.BXOR: lambda xs: np.bitwise_xor.reduce(xs, axis=0),
}
BOOL = {ReduceOp.SUM: np.any, ReduceOp.MAX: np.any, ReduceOp.MIN: np.all, ReduceOp.PRODUCT: np.all}
FLOAT_OPS = [ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX]
INT_OPS = [ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX] + [
    ReduceOp.BAND,
    ReduceOp.BOR,
    ReduceOp.BXOR,
]
CASES = (
    [(op, dtype) for op in FLOAT_OPS for dtype in (np.float32, np.float64)]
    + [(op, dtype) for op in INT_OPS for dtype in (np.int64, np.int32)]
    + [(op, np.bool_) for op in BOOL]
)


def everyone(dtype=np.float64, shape=(2, 3)) -> np.ndarray:
    return np.stack([values(r, dtype, shape) for r in range(world())])


def expected_reduction(op, dtype) -> np.ndarray:
    xs = everyone(dtype)
    if np.dtype(dtype) == np.bool_:
        return BOOL[op](xs, axis=0)
    return NUMPY[op](xs).astype(dtype)


# ------------------------------------------------------------------ values


@pytest.mark.parametrize(
    "op,dtype", CASES, ids=lambda c: c.name if isinstance(c, ReduceOp) else np.dtype(c).name
)
def test_all_reduce_computes_numpys_reduction_in_the_tensors_memory(op, dtype):
    t = fg.from_numpy(values(rank(), dtype))
    memory, version = t._data, t._version
    assert dist.all_reduce(t, op=op) is None
    assert t._data is memory and t._version == version + 1
    np.testing.assert_allclose(t.numpy(), expected_reduction(op, dtype), rtol=1e-6)


@pytest.mark.parametrize("op", FLOAT_OPS, ids=lambda op: op.name)
def test_async_all_reduce_of_a_strided_tensor_is_in_place_once_waited_for(op):
    base = fg.from_numpy(np.ascontiguousarray(values(rank()).T))
    t = base.t()  # not contiguous: reduced through a copy, written back at wait()
    work = dist.all_reduce(t, op=op, async_op=True)
    assert work.wait() is True and work.is_completed()
    np.testing.assert_allclose(base.numpy().T, expected_reduction(op, np.float64), rtol=1e-12)


def test_broadcast_reduce_and_all_gather_against_numpy():
    for src in range(world()):
        t = fg.from_numpy(values(rank()))
        dist.broadcast(t, src)
        np.testing.assert_array_equal(t.numpy(), values(src))
    for dst in range(world()):
        t = fg.from_numpy(values(rank()))
        dist.reduce(t, dst, op=ReduceOp.MAX)
        mine = expected_reduction(ReduceOp.MAX, np.float64) if rank() == dst else values(rank())
        np.testing.assert_array_equal(t.numpy(), mine)
    parts = [fg.zeros(2, 3, dtype=fg.float64) for _ in range(world())]
    dist.all_gather(parts, fg.from_numpy(values(rank())), async_op=True).wait()
    np.testing.assert_array_equal(np.stack([p.numpy() for p in parts]), everyone())
    for shape in [(world() * 2, 3), (world(), 2, 3)]:  # concatenated or stacked
        out = fg.zeros(*shape, dtype=fg.float64)
        dist.all_gather_into_tensor(out, fg.from_numpy(values(rank())))
        np.testing.assert_array_equal(out.numpy().reshape(everyone().shape), everyone())


def test_group_queries_and_barrier():
    assert dist.is_available() and dist.is_initialized() and dist.get_backend() == "mpi"
    assert dist.get_world_size() == 2 and dist.get_rank() in (0, 1)
    assert dist.get_rank(dist.group.WORLD) == dist.get_rank()
    assert dist.barrier() is None
    assert dist.barrier(async_op=True).wait()


# ------------------------------------------------------------------ gradients
#
# In every process, loss_r = sum(w_r * y_r) with y_r the collective's result;
# backward gives each process the gradient of the sum of every process's loss
# (a collective's backward combines their cotangents), which one process
# computes below from everyone's values.


def weights(r: int) -> fg.Tensor:
    return fg.from_numpy(np.random.default_rng(10 + r).uniform(-1, 1, (2, 3)))


REFERENCE = {
    ReduceOp.SUM: lambda xs: fg.stack(xs).sum(0),
    ReduceOp.AVG: lambda xs: fg.stack(xs).mean(0),
    ReduceOp.PRODUCT: lambda xs: fg.stack(xs).prod(0),
    ReduceOp.MIN: lambda xs: fg.stack(xs).amin(0),
    ReduceOp.MAX: lambda xs: fg.stack(xs).amax(0),
}


def reference_gradients(op, second_order=False):
    """This process's gradient (and second derivative: of the sum of the
    squared gradients), computed in one process from every process's part."""
    xs = [fg.from_numpy(values(r)).requires_grad_() for r in range(world())]
    y = REFERENCE[op](xs)
    total = sum((weights(r) * y).sum() for r in range(world()))
    grads = fg.autograd.grad(total, xs, create_graph=True)
    if not second_order:
        return grads[rank()]
    (second,) = fg.autograd.grad(sum((g * g).sum() for g in grads), [xs[rank()]])
    return grads[rank()], second


def reduced_loss(x, op):
    y = x * 1.0
    dist.all_reduce(y, op=op)
    return (weights(rank()) * y).sum()


@pytest.mark.parametrize("op", FLOAT_OPS, ids=lambda op: op.name)
def test_gradients_through_all_reduce_eager_and_compiled(op):
    expected = reference_gradients(op)

    x = fg.from_numpy(values(rank())).requires_grad_()
    reduced_loss(x, op).backward()
    np.testing.assert_allclose(x.grad.numpy(), expected.detach().numpy(), rtol=1e-12)

    @fg.jit
    def gradient(x):  # backward inside: the VJP's collectives are equations
        return fg.autograd.grad(reduced_loss(x, op), x)[0]

    @fg.jit
    def loss(x):  # backward outside: the compiled backward communicates
        return reduced_loss(x, op)

    for _ in range(2):  # the trace, then the program
        x = fg.from_numpy(values(rank())).requires_grad_()
        np.testing.assert_allclose(gradient(x).numpy(), expected.detach().numpy(), rtol=1e-12)
        loss(x).backward()
        np.testing.assert_allclose(x.grad.numpy(), expected.detach().numpy(), rtol=1e-12)


def test_second_derivatives_through_a_product_all_reduce():
    """The only reduction whose gradient depends on the operand differentiably."""
    _, expected = reference_gradients(ReduceOp.PRODUCT, second_order=True)
    x = fg.from_numpy(values(rank())).requires_grad_()
    (g,) = fg.autograd.grad(reduced_loss(x, ReduceOp.PRODUCT), x, create_graph=True)
    (g * g).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), expected.numpy(), rtol=1e-12, atol=1e-14)


def test_gradients_through_broadcast_all_gather_and_reduce():
    for src in range(world()):
        x = fg.from_numpy(values(rank())).requires_grad_()
        y = x * 1.0
        dist.broadcast(y, src)
        (weights(rank()) * y).sum().backward()
        if rank() == src:
            expected = sum(weights(r) for r in range(world()))
            np.testing.assert_allclose(x.grad.numpy(), expected.numpy(), rtol=1e-12)
        else:  # its value reached nothing
            assert x.grad is None

    x = fg.from_numpy(values(rank())).requires_grad_()
    parts = [fg.zeros(2, 3, dtype=fg.float64) for _ in range(world())]
    dist.all_gather(parts, x)
    sum((weights(rank()) * (k + 1) * part).sum() for k, part in enumerate(parts)).backward()
    expected = sum(weights(r) for r in range(world())) * (rank() + 1)
    np.testing.assert_allclose(x.grad.numpy(), expected.numpy(), rtol=1e-12)

    x = fg.from_numpy(values(rank())).requires_grad_()
    y = x * 1.0
    dist.reduce(y, 0)  # process 0 gets the sum, the others keep their own
    (weights(rank()) * y).sum().backward()
    expected = weights(0) + (weights(rank()) if rank() != 0 else 0)
    np.testing.assert_allclose(x.grad.numpy(), expected.numpy(), rtol=1e-12)


# ------------------------------------------------------------------ compiled


def test_a_compiled_function_runs_its_collectives_as_steps_of_its_plan():
    @fg.jit
    def f(x):
        y = x * 2.0
        dist.all_reduce(y)
        parts = [fg.zeros_like(x) for _ in range(world())]
        dist.all_gather(parts, y)
        dist.broadcast(y, 1)
        return (y.sin() + parts[0]).sum()

    eager = f.fn(fg.from_numpy(values(rank())))
    for _ in range(3):
        np.testing.assert_allclose(f(fg.from_numpy(values(rank()))).item(), eager.item())
    lowered = str(f.lower(fg.from_numpy(values(rank()))))
    steps = [line.strip() for line in lowered.splitlines() if line.startswith("  numpy: ")]
    collectives = [
        s for s in steps if s.split(": ")[1] in ("all_reduce", "all_gather", "broadcast")
    ]
    assert collectives == ["numpy: all_reduce", "numpy: all_gather", "numpy: broadcast"]
    assert "all_reduce[op='sum', group=WORLD]" in lowered
    assert f.cache_info().misses == 1  # lower() traces aside


def test_a_compiled_program_outlives_its_process_group():
    @fg.jit
    def f(x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    before = f(fg.ones(3))
    dist.destroy_process_group()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        f(fg.ones(3))
    dist.init_process_group("mpi")
    np.testing.assert_array_equal(f(fg.ones(3)).numpy(), before.numpy())
    assert f.cache_info().misses == 1


def test_another_path_after_the_collectives_ran_is_an_error_not_a_lone_retrace():
    @fg.jit
    def f(x):
        x = x.clone()
        dist.all_reduce(x)
        return x * 2 if x.sum() > 0 else x

    f(fg.ones(3))
    f(fg.ones(3))
    with pytest.raises(RuntimeError, match="after its collectives ran"):
        f(-fg.ones(3))


# ------------------------------------------------------------------ errors


def test_errors_with_pytorchs_wording():
    with pytest.raises(ValueError, match="trying to initialize the default process group twice!"):
        dist.init_process_group("mpi")
    with pytest.raises(ValueError, match="must be equal to world_size times input tensor size"):
        dist.all_gather_into_tensor(fg.zeros(3), fg.zeros(2))
    with pytest.raises(ValueError, match=r"tensor_list\[1\] is fusegrad.FloatTensor\[3\]"):
        dist.all_gather([fg.zeros(2), fg.zeros(3)], fg.zeros(2))
    with pytest.raises(ValueError, match="one tensor per process"):
        dist.all_gather([fg.zeros(2)], fg.zeros(2))
    with pytest.raises(TypeError, match=r"ReduceOp\.AVG needs a floating-point tensor"):
        dist.all_reduce(fg.ones(2, dtype=fg.int64), op=ReduceOp.AVG)
    with pytest.raises(TypeError, match="op must be a ReduceOp"):
        dist.all_reduce(fg.ones(2), op="sum")
    with pytest.raises(TypeError, match=r"Expected parameter `tensor` of type fusegrad\.Tensor"):
        dist.all_reduce(np.ones(2))
    with pytest.raises(ValueError, match="src 2 is no rank of a group of 2"):
        dist.broadcast(fg.ones(2), 2)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        dist.all_reduce(fg.ones(2, requires_grad=True))


@pytest.mark.parametrize(
    "call",
    [
        lambda r: dist.all_reduce(fg.ones(3 + r)),  # shapes
        lambda r: dist.all_reduce(fg.ones(3), op=ReduceOp.MAX if r else ReduceOp.SUM),
        lambda r: dist.broadcast(fg.ones(2), src=r),  # roots
        lambda r: dist.barrier() if r else dist.all_reduce(fg.ones(2)),  # collectives
        lambda r: fg.jit(lambda x: dist.all_reduce(x * 2, op=ReduceOp.AVG))(fg.ones(2, 2 + r)),
    ],
    ids=["shape", "op", "root", "collective", "compiled"],
)
def test_processes_making_different_collectives_all_raise_naming_each_call(call):
    """MPI would pair them and compute (a sum of 3 numbers with one of 4):
    every process raises instead, and the group stays usable."""
    with pytest.raises(RuntimeError, match="the processes' collectives do not match") as caught:
        call(rank())
    assert "rank 0:" in str(caught.value) and "rank 1:" in str(caught.value)
    t = fg.ones(2)
    dist.all_reduce(t)
    assert t.tolist() == [2.0, 2.0]


def test_rank_and_world_size_must_agree_with_mpi(monkeypatch):
    me = rank()
    dist.destroy_process_group()
    with pytest.raises(ValueError, match="world_size is 3, but MPI started this process with"):
        dist.init_process_group("mpi", world_size=3)
    monkeypatch.setenv("RANK", str(1 - me))
    with pytest.raises(ValueError, match=r"\$RANK is"):
        dist.init_process_group("mpi")
    monkeypatch.setenv("RANK", str(me))
    dist.init_process_group("mpi", rank=me, world_size=2)
    assert dist.is_initialized()


def test_object_collectives_between_the_processes():
    gathered = [None] * world()
    dist.all_gather_object(gathered, {"rank": rank(), "tag": "x" * rank()})
    assert gathered == [{"rank": r, "tag": "x" * r} for r in range(world())]
    objects = [f"from {rank()}", rank()] if rank() == 0 else [None, None]
    dist.broadcast_object_list(objects, src=0)
    assert objects == ["from 0", 0]
    received = [None]
    dist.scatter_object_list(
        received, [("item", r) for r in range(world())] if rank() == 0 else None, src=0
    )
    assert received == [("item", rank())]


def test_sync_batch_norm_normalizes_with_every_processs_batch():
    """Statistics and gradients are those of BatchNorm over all the
    processes' batches together."""
    batches = [np.random.default_rng(r).normal(size=(3, 4, 2)) for r in range(world())]
    norm = fg.nn.SyncBatchNorm(4).double()
    x = fg.tensor(batches[rank()], requires_grad=True)
    norm(x).pow(2).mul(fg.arange(24.0).reshape(3, 4, 2)).sum().backward()
    whole = fg.nn.BatchNorm1d(4).double()
    everything = fg.tensor(np.concatenate(batches), requires_grad=True)
    weights = fg.arange(24.0).reshape(3, 4, 2).repeat(world(), 1, 1)
    whole(everything).pow(2).mul(weights).sum().backward()
    mine = slice(3 * rank(), 3 * rank() + 3)
    np.testing.assert_allclose(x.grad.numpy(), everything.grad.numpy()[mine], rtol=1e-10)
    np.testing.assert_allclose(norm.running_var.numpy(), whole.running_var.numpy(), rtol=1e-10)
    np.testing.assert_allclose(norm.running_mean.numpy(), whole.running_mean.numpy(), rtol=1e-10)
