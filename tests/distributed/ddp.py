"""DistributedDataParallel in every process of an MPI job: training as one
process does on the global batch (eager and compiled, with every
optimizer), buckets starting during the backward, no_sync, unused
parameters, synchronized parameters and buffers, errors; DistributedSampler
from the process group."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.distributed as dist
import fusegrad.nn.functional as F
from fusegrad import nn, optim
from fusegrad.distributed.process_group import ProcessGroup, Work
from fusegrad.nn.parallel import DistributedDataParallel as DDP
from fusegrad.utils.data import DistributedSampler

GLOBAL_BATCH = 8


def rank() -> int:
    return dist.get_rank()


def batch(step: int) -> tuple:
    """The global batch of a step: (inputs, targets)."""
    rng = np.random.default_rng(step)
    return fg.from_numpy(rng.normal(size=(GLOBAL_BATCH, 4))), fg.from_numpy(
        rng.normal(size=(GLOBAL_BATCH, 3))
    )


def share(t: fg.Tensor) -> fg.Tensor:
    """This process's part of a global batch."""
    size = GLOBAL_BATCH // dist.get_world_size()
    return t[rank() * size : (rank() + 1) * size]


def mlp(seed: int) -> nn.Module:
    fg.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).double()


def gathered(t: fg.Tensor) -> list:
    """Every process's value of ``t``."""
    parts = [fg.zeros_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t.detach().clone())
    return parts


OPTIMIZERS = {
    "sgd": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    "adam": lambda ps: optim.Adam(ps, lr=0.05),
    "adamw": lambda ps: optim.AdamW(ps, lr=0.05),
    "rmsprop": lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.5),
    "adagrad": lambda ps: optim.Adagrad(ps, lr=0.1),
    "adadelta": lambda ps: optim.Adadelta(ps),
    "lbfgs": lambda ps: optim.LBFGS(ps, lr=0.5, max_iter=3),
}


def training_step(model, optimizer):
    def step(x, y):
        def closure():
            optimizer.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            return loss

        return optimizer.step(closure)

    return step


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_training_as_one_process_on_the_global_batch(name, compiled):
    if compiled and name == "lbfgs":
        pytest.skip("fusegrad.jit refuses LBFGS.step: its iterations branch on loss values")
    model = DDP(mlp(seed=rank()))  # process 0's parameters win
    step = training_step(model, OPTIMIZERS[name](model.parameters()))
    step = fg.jit(step) if compiled else step
    reference = mlp(seed=0)
    reference_step = training_step(reference, OPTIMIZERS[name](reference.parameters()))
    for n in range(4):
        x, y = batch(n)
        loss = step(share(x), share(y))
        expected = reference_step(x, y)
        average = fg.tensor(float(loss), dtype=fg.float64)
        dist.all_reduce(average, op=dist.ReduceOp.AVG)
        np.testing.assert_allclose(float(average), float(expected), rtol=1e-12)
        for p, q in zip(model.parameters(), reference.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-10)
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-14)


def test_a_compiled_forward_and_an_eager_backward_average_as_well():
    model = DDP(mlp(seed=rank()))
    reference = mlp(seed=0)
    loss = fg.jit(lambda x, y: F.mse_loss(model(x), y))
    for n in range(3):  # the compiled backward's gradients reach the hooks eagerly
        x, y = batch(n)
        model.zero_grad()
        reference.zero_grad()
        loss(share(x), share(y)).backward()
        F.mse_loss(reference(x), y).backward()
        for p, q in zip(model.parameters(), reference.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-14)


def test_a_compiled_step_averages_gradients_as_steps_of_its_plan():
    model = DDP(mlp(seed=0), bucket_cap_mb=(8 * 3 + 3) * 8 / 2**20)  # a bucket per layer
    step = fg.jit(training_step(model, optim.Adam(model.parameters())))
    x, y = batch(0)
    lowered = str(step.lower(share(x), share(y)))
    assert len(model.reducer.buckets) == 2
    assert lowered.count("numpy: all_reduce") == 2
    assert lowered.count("all_reduce[op='avg', group=WORLD]") == 2


def test_buckets_start_during_the_backward_and_are_waited_for_before_it_returns(monkeypatch):
    events = []
    start, wait = ProcessGroup.all_reduce_, Work.wait

    def started(group, array, op):
        events.append(f"start {array.size}")
        return start(group, array, op)

    def waited(work):
        events.append("wait")
        return wait(work)

    monkeypatch.setattr(ProcessGroup, "all_reduce_", started)
    monkeypatch.setattr(Work, "wait", waited)
    fg.manual_seed(0)
    layers = [nn.Linear(32, 32).double() for _ in range(4)]
    layer_bytes = (32 * 32 + 32) * 8
    model = DDP(nn.Sequential(*layers), bucket_cap_mb=layer_bytes / 2**20)
    events.clear()
    x = fg.randn(4, 32, dtype=fg.float64, requires_grad=True)
    x.register_hook(lambda g: events.append("input grad"))
    model(x).sum().backward()
    assert len(model.reducer.buckets) == 4
    assert events.count("start 1056") == 4 and events.count("wait") == 4
    first_layer = events.index("input grad")
    # the last three layers' buckets started while the first layer's gradients were computed
    assert events[:3] == ["start 1056"] * 3 and first_layer < events.index("wait")
    assert all(e == "wait" for e in events[events.index("wait") :])


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "jit"])
def test_no_sync_accumulates_locally_then_averages_what_accumulated(compiled, monkeypatch):
    starts = []
    start = ProcessGroup.all_reduce_

    def started(group, array, op):
        starts.append(array.size)
        return start(group, array, op)

    monkeypatch.setattr(ProcessGroup, "all_reduce_", started)
    model = DDP(mlp(seed=0))
    reference = mlp(seed=0)

    def micro(x, y):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        return loss

    micro = fg.jit(micro) if compiled else micro
    for _ in range(2):  # compiled: the programs of both, then the programs again
        model.zero_grad()
        reference.zero_grad()
        with model.no_sync():
            x, y = batch(1)
            micro(share(x), share(y))
        starts.clear()
        local = [p.grad.clone() for p in model.parameters()]
        x, y = batch(2)
        micro(share(x), share(y))
        assert starts  # the synchronized pass reduced the buckets
        for n in (1, 2):
            x, y = batch(n)
            F.mse_loss(reference(x), y).backward()
        for p, q, before in zip(model.parameters(), reference.parameters(), local):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-14)
            others = gathered(before)
            assert not np.allclose(others[0].numpy(), others[1].numpy())  # local until then
    if compiled:
        assert micro.cache_info().misses == 2  # one program each way


class Heads(nn.Module):
    """A trunk and three heads: ``always``, ``sometimes`` (when asked) and ``never`` used."""

    def __init__(self):
        super().__init__()
        fg.manual_seed(0)
        self.trunk = nn.Linear(4, 4).double()
        self.always = nn.Linear(4, 3).double()
        self.sometimes = nn.Linear(4, 3).double()
        self.never = nn.Linear(4, 3).double()

    def forward(self, x, sometimes: bool):
        h = self.trunk(x).tanh()
        return self.always(h) + self.sometimes(h) if sometimes else self.always(h)


def test_unused_parameters_are_reduced_at_the_end_when_asked_for():
    model = DDP(Heads(), find_unused_parameters=True)
    x, y = batch(0)
    F.mse_loss(model(share(x), rank() == 0), share(y)).backward()
    reference = Heads()
    losses = [
        F.mse_loss(reference(share_of(x, r), r == 0), share_of(y, r))
        for r in range(dist.get_world_size())
    ]
    (sum(losses) / len(losses)).backward()
    for (name, p), q in zip(model.module.named_parameters(), reference.parameters()):
        if name.startswith("never"):  # used nowhere: no gradient, as in one process
            assert p.grad is None and q.grad is None
        else:
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-10, atol=1e-14)


def share_of(t: fg.Tensor, r: int) -> fg.Tensor:
    size = GLOBAL_BATCH // dist.get_world_size()
    return t[r * size : (r + 1) * size]


def test_a_parameter_without_gradient_is_an_error_unless_asked_for():
    model = DDP(Heads())
    x, y = batch(0)
    with pytest.raises(RuntimeError, match="find_unused_parameters=True") as error:
        F.mse_loss(model(share(x), True), share(y)).backward()
    assert str(error.value).endswith(f"did not receive grad for rank {rank()}: 6 7")


def test_construction_and_forward_synchronize_parameters_and_buffers():
    fg.manual_seed(rank())
    net = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3)).double()
    net[1].running_mean.fill_(float(rank()))
    model = DDP(net)
    for t in list(net.parameters()) + list(net.buffers()):
        parts = gathered(t)
        np.testing.assert_array_equal(parts[0].numpy(), parts[1].numpy())
    model(share(batch(0)[0]))  # training: each process's statistics of its share
    first, second = gathered(net[1].running_mean)
    assert not np.allclose(first.numpy(), second.numpy())
    model.eval()
    model(share(batch(0)[0]))  # process 0's buffers again, and no update
    first, second = gathered(net[1].running_mean)
    np.testing.assert_array_equal(first.numpy(), second.numpy())
    assert next(iter(model.state_dict())) == "module.0.weight"


def test_models_that_differ_between_processes_are_an_error():
    layers = [nn.Linear(4, 3)] + ([nn.Linear(3, 3)] if rank() == 1 else [])
    with pytest.raises(RuntimeError, match="DDP expects same model across all ranks, but Rank"):
        DDP(nn.Sequential(*layers))
    with pytest.raises(RuntimeError) as error:
        DDP(nn.Linear(4, 3 + rank()))
    if rank() == 1:
        assert str(error.value) == (
            "[1]: params[0] in this process with sizes [4, 4] appears not to match sizes of "
            "the same param in process 0."
        )
    else:
        assert "the params of rank 1 do not match the sizes of rank 0's" in str(error.value)
    with pytest.raises(ValueError, match="device_ids and output_device arguments only work"):
        DDP(nn.Linear(2, 2), device_ids=[0])


def test_distributed_sampler_takes_its_share_from_the_process_group():
    sampler = DistributedSampler(range(11), shuffle=False)
    assert (sampler.num_replicas, sampler.rank, len(sampler)) == (2, rank(), 6)
    assert list(sampler) == ([0, 2, 4, 6, 8, 10] if rank() == 0 else [1, 3, 5, 7, 9, 0])
