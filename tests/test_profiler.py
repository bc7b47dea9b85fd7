"""``fusegrad.profiler`` (``torch.profiler``): a profiled training step of a
small MLP, eager and compiled, shows its operations, autograd nodes,
optimizer step and compiled kernels; PyTorch's table and Chrome trace;
schedules, trace handlers, ``record_function``; and nothing recorded or
wrapped while no profiler is active."""

from __future__ import annotations

import json
import re
import warnings

import pytest

import fusegrad as fg
import fusegrad.nn as nn
from fusegrad import timing
from fusegrad.codegen import target
from fusegrad.eager.plain import PlainValue, plain_bind
from fusegrad.eager.tensor import Tensor, eager_bind
from fusegrad.ir import primitives as P
from fusegrad.optim.optimizer import Optimizer
from fusegrad.profiler import (
    ProfilerAction,
    ProfilerActivity,
    profile,
    record_function,
    schedule,
    tensorboard_trace_handler,
)
from fusegrad.profiler import spans as profiler_spans
from fusegrad.runtime import executor
from fusegrad.runtime.launch import Launcher
from fusegrad.tracer.jit import JitFunction


def mlp_and_data():
    fg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    return model, fg.optim.SGD(model.parameters(), lr=0.1), fg.randn(16, 4), fg.randn(16, 2)


def train_step(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
    return loss


def keys(prof) -> set:
    return {average.key for average in prof.key_averages()}


def ancestors(event) -> list:
    found = []
    while event.cpu_parent is not None:
        event = event.cpu_parent
        found.append(event.name)
    return found


def test_an_eager_training_step_shows_its_ops_backward_nodes_and_optimizer_step():
    model, optimizer, x, y = mlp_and_data()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        train_step(model, optimizer, x, y)
    names = keys(prof)
    assert {"aten::mm", "aten::add", "aten::relu", "aten::sum"} <= names
    evaluate = "autograd::engine::evaluate_function: "
    assert {evaluate + "ReluBackward0", evaluate + "torch::autograd::AccumulateGrad"} <= names
    assert {"Optimizer.step#SGD.step", "Optimizer.zero_grad#SGD.zero_grad"} <= names
    # the backward's own operations run inside its nodes, the update's inside the step
    inside = {e.name: ancestors(e) for e in prof.events()}
    assert evaluate + "ReluBackward0" in inside["aten::where"]
    updates = [e for e in prof.events() if "Optimizer.step#SGD.step" in ancestors(e)]
    assert {e.name for e in updates} >= {"aten::add"}
    relu = prof.key_averages().table().splitlines()
    assert any(line.strip().startswith("aten::relu") for line in relu)


def test_a_compiled_training_step_shows_its_call_kernels_and_compilation(monkeypatch):
    model, optimizer, x, y = mlp_and_data()
    step = fg.jit(train_step)
    # machine code made in this process is kept per description: make it again here
    monkeypatch.setattr(target, "_functions", {})
    with profile() as prof:
        for _ in range(3):
            step(model, optimizer, x, y)
    names = keys(prof)
    assert {"fusegrad::compiled train_step", "fusegrad::trace", "fusegrad::llvm_compile"} <= names
    kernels = [e for e in prof.events() if e.name.startswith("fusegrad::kernel ")]
    assert kernels
    calls = prof.key_averages()
    (compiled,) = [a for a in calls if a.key == "fusegrad::compiled train_step"]
    assert compiled.count == 3
    # the last call runs the program: each of its kernels a span inside the call
    last = [e for e in prof.events() if e.name == "fusegrad::compiled train_step"][-1]
    run = [e for e in kernels if e.time_range.start >= last.time_range.start]
    assert run and all("fusegrad::compiled train_step" in ancestors(e) for e in run)
    products = [
        e for e in prof.events() if e.name.split()[0] in ("fusegrad::blas", "fusegrad::routine")
    ]
    assert any(e.name.endswith(" matmul") for e in products)


def test_backward_of_a_compiled_forward_runs_its_kernels_inside_the_node():
    model, _, x, y = mlp_and_data()
    forward = fg.jit(lambda x: ((model(x) - y) ** 2).mean())
    forward(x).backward()
    forward(x).backward()
    with profile() as prof:
        forward(x).backward()
    node = "autograd::engine::evaluate_function: CompiledFunctionBackward"
    inside = [e for e in prof.events() if node in ancestors(e)]
    assert any(e.name.startswith("fusegrad::kernel ") for e in inside)


def cells(line: str, rule: str) -> list:
    """A table line cut at the columns its rule of dashes marks."""
    found, start = [], 0
    for dashes in rule.split("  ")[:-1]:
        found.append(line[start : start + len(dashes)].strip())
        start += len(dashes) + 2
    return found


def test_the_table_has_pytorchs_columns_and_footer():
    model, optimizer, x, y = mlp_and_data()
    with profile(record_shapes=True, profile_memory=True) as prof:
        train_step(model, optimizer, x, y)
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=5)
    lines = table.splitlines()
    rule = lines[0]
    assert set(rule) == {"-", " "} and rule == lines[2] == lines[-2]
    assert cells(lines[1], rule) == [
        "Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
        "CPU Mem", "Self CPU Mem", "# of Calls",
    ]  # fmt: skip
    assert len(lines) == 3 + 5 + 2
    assert re.fullmatch(r"Self CPU time total: \d+\.\d{3}(us|ms|s)", lines[-1])
    assert table.endswith("\n")
    shares = [float(cells(line, rule)[3].rstrip("%")) for line in lines[3:8]]
    assert shares == sorted(shares, reverse=True)  # CPU total %, largest first
    shaped = prof.key_averages(group_by_input_shape=True).table(row_limit=100).splitlines()
    assert cells(shaped[1], shaped[0])[-1] == "Input Shapes"
    rows = [cells(line, shaped[0]) for line in shaped[3:-2]]
    assert ["aten::mm", "[[16, 4], [4, 8]]"] in [[row[0], row[-1]] for row in rows]


def test_memory_counts_what_an_operation_allocates():
    x = fg.ones(100, 10)
    with profile(profile_memory=True) as prof:
        x.relu()
    (relu,) = [e for e in prof.events() if e.name == "aten::relu"]
    assert relu.self_cpu_memory_usage == 100 * 10 * 4
    double = fg.jit(lambda t: t * 2 + 1)
    double(x)
    with profile(profile_memory=True) as prof:
        double(x)
    (call,) = [e for e in prof.events() if e.name.startswith("fusegrad::compiled")]
    assert call.cpu_memory_usage == 100 * 10 * 4 and call.self_cpu_memory_usage == 0


def test_flops_and_source_locations_as_pytorch_shows_them():
    a, b = fg.ones(64, 32), fg.ones(32, 16)
    with profile(with_flops=True, with_stack=True) as prof:
        a @ b
    (mm,) = [e for e in prof.events() if e.name == "aten::mm"]
    assert mm.flops == 2 * 64 * 32 * 16
    assert mm.stack[0].startswith(f"{__file__}(")
    assert "Total FLOPs" in prof.key_averages().table().splitlines()[1]
    assert "Source Location" in prof.events().table().splitlines()[1]


def test_the_chrome_trace_loads_and_its_events_nest(tmp_path):
    model, optimizer, x, y = mlp_and_data()
    step = fg.jit(train_step)
    with profile(record_shapes=True) as prof:
        with record_function("eager step"):
            train_step(model, optimizer, x, y)
        step(model, optimizer, x, y)
        step(model, optimizer, x, y)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == len(prof.events())
    for event in complete:
        assert {"name", "ts", "dur", "pid", "tid", "args"} <= set(event)
    assert any(e["args"].get("Input Dims") == [[16, 4], [4, 8]] for e in complete)
    # per thread, each event lies inside the one open around it or after it
    for thread in {e["tid"] for e in complete}:
        ordered = sorted(
            (e for e in complete if e["tid"] == thread), key=lambda e: (e["ts"], -e["dur"])
        )
        open_ends: list = []
        for event in ordered:
            while open_ends and event["ts"] >= open_ends[-1] - 1e-3:
                open_ends.pop()
            end = event["ts"] + event["dur"]
            assert not open_ends or end <= open_ends[-1] + 1e-3, event["name"]
            open_ends.append(end)
    by_id = {e.id: e for e in prof.events()}
    for event in by_id.values():
        parent = event.cpu_parent
        if parent is not None:
            assert parent.time_range.start <= event.time_range.start
            assert event.time_range.end <= parent.time_range.end


def test_schedule_actions_follow_pytorchs():
    actions = schedule(wait=1, warmup=1, active=2, repeat=1, skip_first=1)
    A = ProfilerAction
    assert [actions(i) for i in range(8)] == [
        A.NONE, A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE, A.NONE, A.NONE, A.NONE,
    ]  # fmt: skip
    with pytest.raises(AssertionError):
        schedule(wait=0, warmup=0, active=0)


def test_a_scheduled_profile_hands_each_cycle_to_on_trace_ready():
    cycles = []

    def ready(prof):
        cycles.append(
            [e.name for e in prof.events() if e.name in ("aten::relu",) or "Step" in e.name]
        )

    x = fg.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = schedule(wait=1, warmup=1, active=2, repeat=2)
    with profile(schedule=plan, on_trace_ready=ready) as prof:
        for _ in range(10):
            x.relu()
            prof.step()
    expected = ["ProfilerStep#2", "aten::relu", "ProfilerStep#3", "aten::relu"]
    assert cycles[0] == expected
    assert cycles[1] == [name.replace("#2", "#6").replace("#3", "#7") for name in expected]
    assert len(cycles) == 2


def test_without_a_schedule_the_recording_is_handed_over_when_it_stops():
    cycles = []
    with profile(on_trace_ready=lambda prof: cycles.append(len(prof.events()))) as prof:
        for _ in range(3):
            fg.ones(2).relu()
            prof.step()
    assert len(cycles) == 1 and cycles[0] >= 3
    assert not any("ProfilerStep" in e.name for e in prof.events())


def test_tensorboard_trace_handler_writes_a_trace_file(tmp_path):
    with profile(on_trace_ready=tensorboard_trace_handler(str(tmp_path / "logs"), "worker0")):
        fg.ones(2).relu()
    (written,) = (tmp_path / "logs").iterdir()
    assert re.fullmatch(r"worker0\.\d+\.pt\.trace\.json", written.name)
    assert any(e["name"] == "aten::relu" for e in json.loads(written.read_text())["traceEvents"])


def test_record_function_as_a_block_and_as_a_decorator():
    @record_function("decorated")
    def double(t):
        return t * 2

    with profile() as prof:
        with record_function("block"):
            double(fg.ones(2))
    (mul,) = [e for e in prof.events() if e.name == "aten::mul"]
    assert ancestors(mul) == ["decorated", "block"]
    with record_function("not recorded"):  # no profiler: nothing happens
        double(fg.ones(2))


def test_start_and_stop_and_the_legacy_spelling():
    prof = fg.profiler.profile()
    prof.start()
    fg.ones(2).exp()
    prof.stop()
    fg.ones(2).exp()
    assert [e.name for e in prof.events()].count("aten::exp") == 1
    with fg.autograd.profiler.profile(record_shapes=True) as legacy:
        with fg.autograd.profiler.record_function("legacy block"):
            fg.ones(2).exp()
    assert {"legacy block", "aten::exp"} <= {e.key for e in legacy.key_averages()}
    assert "Self CPU time total" in legacy.table()
    with fg.autograd.profiler.profile(enabled=False) as disabled:
        assert disabled is None


def test_cuda_activity_warns_and_is_ignored_and_emit_nvtx_needs_cuda():
    with pytest.warns(UserWarning, match="CUDA is not available, disabling CUDA profiling"):
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    with prof:
        fg.ones(2).relu()
    assert "aten::relu" in keys(prof)
    with pytest.warns(UserWarning), pytest.raises(AssertionError, match="No activities"):
        profile(activities=[ProfilerActivity.CUDA])
    with pytest.raises(AssertionError, match="not compiled with CUDA"):
        with fg.autograd.profiler.emit_nvtx():
            pass


def originals() -> dict:
    return {
        "Tensor": P._handlers[Tensor],
        "PlainValue": P._handlers[PlainValue],
        "jit call": vars(JitFunction)["__call__"],
        "executor": vars(executor.Executor)["_run"],
        "kernel": vars(Launcher)["__call__"],
        "equation": executor.run_equation,
        "phase": timing.phase,
        "step": vars(fg.optim.SGD).get("step", vars(Optimizer)["step"]),
    }


def test_nothing_is_recorded_or_wrapped_while_no_profiler_is_active():
    before = originals()
    assert before["Tensor"] is eager_bind and before["PlainValue"] is plain_bind
    model, optimizer, x, y = mlp_and_data()
    with profile() as prof:
        assert originals()["Tensor"] is not eager_bind
        train_step(model, optimizer, x, y)
    recorded = len(prof.events())
    assert originals() == before
    train_step(model, optimizer, x, y)
    fg.jit(train_step)(model, optimizer, x, y)
    assert len(prof.events()) == recorded and len(prof._spans) == recorded
    assert profiler_spans.collections == []


def test_a_compiled_call_takes_its_direct_path_again_after_profiling():
    double = fg.jit(lambda t: t * 2 + 1)
    x = fg.ones(3)
    for _ in range(3):
        double(x)
    assert double._direct is not None
    with profile() as prof:
        double(x)
    kernels = [e for e in prof.events() if e.name.startswith("fusegrad::kernel ")]
    assert kernels  # each a span: the call ran its steps one by one
    double(x)
    double(x)
    assert double._direct is not None


def test_acc_events_keeps_every_cycles_events():
    x = fg.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = schedule(wait=0, warmup=0, active=1, repeat=3)
    with profile(schedule=plan, acc_events=True) as prof:
        for _ in range(3):
            x.exp()
            prof.step()
    assert [e.name for e in prof.events()].count("aten::exp") == 3
