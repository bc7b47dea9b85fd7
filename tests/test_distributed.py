"""fusegrad.distributed without MPI (import, errors, DistributedSampler, the
engine's callbacks and post-accumulate-grad hooks, and what the compiler
does with collectives, on a group of one process), then with it: the tests
of tests/distributed/ in two processes under mpiexec, and the example."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.distributed as dist
from fusegrad.eager import autograd
from fusegrad.ir import dtypes
from fusegrad.ir import primitives as P
from fusegrad.ir.fusion import Single, group_into_kernels
from fusegrad.ir.graph import Const, Graph, GraphBuilder, Var, building
from fusegrad.ir.simplify import simplify
from fusegrad.nn.parallel import DistributedDataParallel
from fusegrad.utils.data import DistributedSampler

ROOT = Path(__file__).parent.parent
NOT_INITIALIZED = "Default process group has not been initialized"


# ------------------------------------------------------------------ without MPI


def test_importing_fusegrad_starts_no_mpi():
    code = (
        "import sys, fusegrad, fusegrad.distributed, fusegrad.nn.parallel; "
        "assert 'mpi4py' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=_env())


def test_collectives_before_init_process_group_raise_pytorchs_error():
    assert not dist.is_initialized() and not dist.is_nccl_available()
    for call in (
        dist.get_rank,
        dist.get_world_size,
        dist.barrier,
        lambda: dist.all_reduce(fg.ones(2)),
        lambda: DistributedDataParallel(fg.nn.Linear(2, 2)),
    ):
        with pytest.raises(ValueError, match=NOT_INITIALIZED):
            call()


def test_other_backends_and_bad_arguments_are_refused():
    with pytest.raises(ValueError, match=r"has the 'mpi' backend only .* not 'nccl'"):
        dist.init_process_group("nccl")
    with pytest.raises(TypeError, match="Expected timeout argument to be of type"):
        dist.init_process_group("mpi", timeout=30)
    assert not dist.is_initialized()


def test_distributed_sampler_shares_shuffles_pads_and_drops_as_pytorch():
    data = list(range(10))
    shares = [list(DistributedSampler(data, 3, r, shuffle=False)) for r in range(3)]
    assert shares == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]  # padded from the start
    shares = [list(DistributedSampler(data, 3, r, shuffle=False, drop_last=True)) for r in range(3)]
    assert shares == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    assert [list(DistributedSampler([0, 1], 5, r, shuffle=False)) for r in range(5)] == [
        [0],
        [1],
        [0],
        [1],
        [0],
    ]
    samplers = [DistributedSampler(data, 2, r, seed=7) for r in range(2)]
    first = [list(s) for s in samplers]
    assert sorted(first[0] + first[1]) == data  # one permutation, split
    assert [list(s) for s in samplers] == first  # the same until set_epoch
    for s in samplers:
        s.set_epoch(1)
    second = [list(s) for s in samplers]
    assert second != first and sorted(second[0] + second[1]) == data
    assert len(samplers[0]) == 5
    with pytest.raises(
        ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"
    ):
        DistributedSampler(data, 2, 2)


def test_callbacks_queued_during_a_backward_run_at_its_end_in_order():
    with pytest.raises(RuntimeError, match="Final callbacks can only be installed during backward"):
        autograd.queue_callback(lambda: None)
    w = fg.ones(3, requires_grad=True)
    b = fg.ones(3, requires_grad=True)
    events = []

    def hook(grad):
        events.append("hook")
        autograd.queue_callback(lambda: events.append(("first", b.grad is not None)))
        autograd.queue_callback(lambda: autograd.queue_callback(lambda: events.append("third")))

    w.register_hook(hook)
    (w * 2 + b).sum().backward()
    assert events == ["hook", ("first", True), "third"]
    (w * 2).sum().backward()  # a callback runs in the pass that queued it only
    assert events[3:] == ["hook", ("first", True), "third"]


def test_post_accumulate_grad_hooks_see_the_accumulated_gradient():
    w = fg.ones(2, requires_grad=True)
    seen = []
    handle = w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.tolist()))
    (w * 3).sum().backward()
    (w * 3).sum().backward()
    fg.autograd.grad((w * 3).sum(), w)  # nothing accumulates: no hook
    handle.remove()
    (w * 3).sum().backward()
    assert seen == [[3.0, 3.0], [6.0, 6.0]]
    with pytest.raises(RuntimeError, match="cannot be registered on non-leaf tensors"):
        (w * 2).register_post_accumulate_grad_hook(print)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        fg.ones(2).register_post_accumulate_grad_hook(print)
    with pytest.raises(fg.TracingError, match="register_post_accumulate_grad_hook"):
        fg.jit(lambda t: t.register_post_accumulate_grad_hook(print))(w)


class Loopback:
    """A process group of one process, as the IR sees a group; it counts its
    collectives, and hands back column-major arrays when asked (numpy steps
    may give a plan values of another layout than it was planned for)."""

    def __init__(self):
        self.calls = 0
        self.column_major = False

    def __repr__(self) -> str:
        return "loopback"

    def rank(self) -> int:
        return 0

    def size(self) -> int:
        return 1

    def all_reduce(self, array, op):
        self.calls += 1
        return np.asfortranarray(array) if self.column_major else np.array(array, order="C")

    def broadcast(self, array, src):
        self.calls += 1
        return np.array(array)

    def all_gather(self, array):
        self.calls += 1
        return np.array(array)[None]


def test_passes_never_fold_merge_or_drop_a_collective():
    group = Loopback()
    x = Var((3,), dtypes.float32)
    with building(GraphBuilder()) as builder:
        kept = P.all_reduce(x, op="sum", group=group)
        P.all_reduce(x, op="sum", group=group)  # the same again, and unused
        P.broadcast(Const(np.ones(3, np.float32)), src=0, group=group)  # of a constant
    graph = simplify(Graph([x], builder.eqns, [kept]))
    assert [e.prim.name for e in graph.eqns] == ["all_reduce", "all_reduce", "broadcast"]
    assert group.calls == 0


def test_programs_run_collectives_in_the_order_traced():
    """The second collective's result joins a kernel made before the first
    collective: without an order between collectives, that kernel's inputs
    would come first."""
    group = Loopback()
    a, b = Var((4, 4), dtypes.float32), Var((4, 4), dtypes.float32)
    with building(GraphBuilder()) as builder:
        doubled = a * 2.0
        first = P.all_reduce(a, op="sum", group=group)
        second = P.all_reduce(b, op="max", group=group)
        out = doubled + second
    steps = group_into_kernels(Graph([a, b], builder.eqns, [out, first]))
    collectives = [s.eqn.out for s in steps if isinstance(s, Single) and s.eqn.prim.collective]
    assert collectives == [first, second]


def test_a_plan_that_stops_midway_does_not_communicate_again():
    group = Loopback()

    @fg.jit
    def f(x):
        y = P.all_reduce(x * 2.0, op="sum", group=group)
        return (y.tanh() * 3.0 + y).sum(1)

    x = fg.rand(64, 64)
    expected = f.fn(x)
    f(x)  # the trace and its first run: the plan knows row-major values
    group.calls = 0
    group.column_major = True  # the plan's kernels refuse the layout: the steps run one by one
    np.testing.assert_allclose(f(x).numpy(), expected.numpy(), rtol=1e-6)
    assert group.calls == 1
    assert "one native call" in str(f.lower(x))


# ------------------------------------------------------------------ with MPI

needs_mpi = pytest.mark.skipif(
    shutil.which("mpiexec") is None or importlib.util.find_spec("mpi4py") is None,
    reason='needs mpi4py and mpiexec: pip install -e ".[distributed]"',
)


def _env() -> dict:
    """This checkout first on the path; one thread per process, as two
    processes share the cores."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    threads = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    return {**os.environ, "PYTHONPATH": path, "FUSEGRAD_NUM_THREADS": "1", **threads}


def _mpiexec(*arguments: str, timeout: float = 600) -> str:
    """What two processes running ``python *arguments`` print; a hang (a
    collective one process never reaches) fails after ``timeout`` seconds."""
    command = ["mpiexec", "-n", "2", sys.executable, *arguments]
    with subprocess.Popen(
        command,
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a hang is ended with every process mpiexec started
    ) as job:
        try:
            output, _ = job.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            output, _ = job.communicate()
            pytest.fail(f"{' '.join(arguments)} hung for {timeout} s:\n{output}")
    assert job.returncode == 0, output
    return output


@needs_mpi
@pytest.mark.parametrize("tests", ["collectives.py", "ddp.py"])
def test_in_two_processes(tests):
    output = _mpiexec("-m", "pytest", "-q", "-p", "no:cacheprovider", f"tests/distributed/{tests}")
    assert len(re.findall(r"\d+ passed", output)) == 2  # each process's summary


LONE_COLLECTIVE = """
import datetime, time
import fusegrad as fg, fusegrad.distributed as dist
dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=1))
if dist.get_rank() == 0:
    try:
        dist.all_reduce(fg.ones(3))
    except RuntimeError as error:
        print("raised:", error)
else:
    time.sleep(3)
"""


@needs_mpi
def test_a_collective_one_process_never_makes_times_out_with_an_error():
    output = _mpiexec("-c", LONE_COLLECTIVE, timeout=60)
    assert "raised: fusegrad.distributed: all_reduce(float32[3], sum) waited 0:00:01" in output


@needs_mpi
def test_the_example_trains_as_one_process_on_the_global_batches():
    output = _mpiexec("examples/train_ddp.py", "--steps", "40")
    assert len([line for line in output.splitlines() if line.startswith("step")]) == 11
    loss, parameters = re.search(r"loss (\S+), parameters (\S+)$", output.strip()).groups()
    assert float(loss) < 1e-5 and float(parameters) < 1e-4
