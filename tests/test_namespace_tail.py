"""The long tail of names a census of public PyTorch code uses: what each
returns where fusegrad has it (build probes, attention kernels, settings
modules, futures, explain, object collectives, checkpoint state dicts), and
the error naming what is missing where fusegrad refuses (C++ extensions,
quantization, RPC, FSDP, DTensor, nested tensors); and torch.fx's
symbolic tracing."""

from __future__ import annotations

import importlib
import math
import subprocess
import sys
import threading

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.distributed as dist
import fusegrad.nn.functional as F
from fusegrad.distributed import objects
from fusegrad.distributed.checkpoint import state_dict as dsd
from fusegrad.nn.attention import SDPBackend, sdpa_kernel


def _attribute(path: str):
    """``fusegrad.<path>``, importing submodules on the way as the census does."""
    obj = fg
    for part in path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(f"{obj.__name__}.{part}")
    return obj


# ------------------------------------------------------------------ answers


@pytest.mark.parametrize(
    ("path", "answer"),
    [
        ("version.cuda", None),
        ("version.hip", None),
        ("version.git_version", "Unknown"),
        ("_six.inf", math.inf),
        ("_six.string_classes", (str, bytes)),
        ("_six.int_classes", int),
        ("xpu.is_available", False),
        ("mps.is_available", False),
        ("backends.cuda.flash_sdp_enabled", True),
        ("backends.cuda.math_sdp_enabled", True),
        ("backends.cuda.mem_efficient_sdp_enabled", True),
        ("backends.cuda.cudnn_sdp_enabled", True),
        ("compiler.is_compiling", False),
        ("_dynamo.is_compiling", False),
        ("_dynamo.config.automatic_dynamic_shapes", True),
        ("_dynamo.config.optimize_ddp", True),
        ("_dynamo.config.suppress_errors", False),
        ("_dynamo.config.cache_size_limit", 8),
        ("_inductor.config.coordinate_descent_tuning", False),
        ("_inductor.config.triton.unique_kernel_names", True),
        ("_inductor.config.fx_graph_cache", True),
        ("distributed.rpc.is_available", False),
    ],
)
def test_a_name_gives_pytorchs_answer_on_a_cpu_build(path, answer):
    value = _attribute(path)
    got = value() if callable(value) and not isinstance(value, type) else value
    assert got == answer and type(got) is type(answer)


@pytest.mark.parametrize(
    "path",
    [
        "utils.data._utils.collate.default_collate",
        "utils.data.dataloader.default_collate",
        "fx.wrap",
        "fx.node.map_arg",
        "fx.proxy.GraphAppendingTracer",
        "ops",
        "futures.collect_all",
        "distributed.checkpoint.FileSystemWriter",
        "distributed.fsdp.fully_sharded_data_parallel.StateDictType.FULL_STATE_DICT",
        "distributed.rpc.api.RRef",
        "distributed._tensor.device_mesh.init_device_mesh",
        "distributed.nn.all_reduce",
        "Tensor._make_wrapper_subclass",
        "OutOfMemoryError",
        "jit.TracerWarning",
        "_dynamo.backends.debugging.ExplainOutput",
    ],
)
def test_the_names_exist(path):
    assert _attribute(path) is not None


def test_the_private_collate_paths_are_the_public_function():
    assert _attribute("utils.data._utils.collate.default_collate") is fg.utils.data.default_collate
    batch = fg.utils.data._utils.collate.default_collate([fg.ones(2), fg.zeros(2)])
    assert batch.tolist() == [[1.0, 1.0], [0.0, 0.0]]


def test_take_tensors_buckets_by_type_and_bytes():
    tensors = [fg.ones(4), fg.ones(2, dtype=fg.float64), fg.ones(4), fg.ones(1)]
    tensors.append(fg.ones(3, dtype=fg.float64))
    buckets = fg._utils._take_tensors(tensors, 20)
    assert [[t.numel() for t in bucket] for bucket in buckets] == [[4], [2], [4, 1], [3]]


def test_config_describes_the_build():
    shown = fg.__config__.show()
    assert "numpy" in shown and "llvmlite" in shown and "CPU features" in shown
    assert f"get_num_threads() : {fg.get_num_threads()}" in fg.__config__.parallel_info()


def test_quantized_dtypes_exist_and_make_no_tensor():
    assert repr(fg.qint8) == "fusegrad.qint8" and isinstance(fg.quint8, fg.dtype)
    assert not fg.qint32.is_floating_point
    for make in (
        lambda: fg.zeros(2, dtype=fg.qint8),
        lambda: fg.tensor([1], dtype=fg.quint8),
        lambda: fg.ones(2).to(fg.qint32),
    ):
        with pytest.raises(RuntimeError, match="fusegrad has no quantized tensors"):
            make()


def test_cuda_streams_of_a_cpu_build():
    with fg.cuda.stream(None):  # no device: PyTorch's context does nothing
        pass
    assert issubclass(fg.cuda.OutOfMemoryError, RuntimeError)
    assert fg.OutOfMemoryError is fg.cuda.OutOfMemoryError


# ------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: fg.cuda.Stream(), RuntimeError, "torch.cuda.Stream requires CUDA support"),
        (lambda: fg.cuda.memory_summary(), KeyError, "allocated_bytes.all.current"),
        (lambda: fg.ones(2).record_stream(None), RuntimeError, "unknown parameter type"),
        (lambda: fg.ones(2).int_repr(), NotImplementedError, "aten::int_repr"),
        (lambda: fg.xpu.synchronize(), AssertionError, "Torch not compiled with XPU enabled"),
        (lambda: fg.mps.synchronize(), RuntimeError, r"deviceSynchronize\(\) without MPS"),
        (lambda: fg.mps.empty_cache(), RuntimeError, r"emptyCache\(\) without MPS"),
        (
            lambda: fg.Tensor._make_wrapper_subclass(fg.Tensor, (2,)),
            RuntimeError,
            "no __torch_dispatch__",
        ),
        (lambda: fg.ops.mylib.myop, AttributeError, "fusegrad has no operator registry"),
        (lambda: fg.ops.load_library("x.so"), RuntimeError, "cannot load PyTorch operator"),
        (
            lambda: fg.nested.nested_tensor([fg.ones(2), fg.ones(3)]),
            RuntimeError,
            "fusegrad has no nested tensors",
        ),
    ],
)
def test_what_a_cpu_build_cannot_do_raises(call, error, message):
    with pytest.raises(error, match=message):
        call()


CANNOT = {
    "utils.cpp_extension.load": r"cannot build PyTorch C\+\+/CUDA extensions",
    "utils.cpp_extension.load_inline": r"cannot build PyTorch C\+\+/CUDA extensions",
    "utils.cpp_extension.CppExtension": r"cannot build PyTorch C\+\+/CUDA extensions",
    "utils.cpp_extension.CUDAExtension": r"cannot build PyTorch C\+\+/CUDA extensions",
    "utils.mobile_optimizer.optimize_for_mobile": "cannot optimize for PyTorch Mobile",
    "quantization.quantize_dynamic": "cannot quantize models",
    "ao.quantization.fuse_modules": "cannot quantize models",
    "distributed.rpc.init_rpc": "no remote procedure calls",
    "distributed.rpc.TensorPipeRpcBackendOptions": "no remote procedure calls",
    "distributed.fsdp.FullyShardedDataParallel": "no fully sharded data parallelism",
    "distributed.fsdp.fully_shard": "no fully sharded data parallelism",
    "distributed.tensor.DTensor": "no distributed tensors",
    "distributed.tensor.parallel.ColwiseParallel": "no distributed tensors",
    "distributed._tensor.device_mesh.init_device_mesh": "no distributed tensors",
    "distributed.autograd.context": "no distributed autograd",
    "distributed.optim.DistributedOptimizer": "no DistributedOptimizer",
}


@pytest.mark.parametrize(("path", "message"), CANNOT.items())
def test_what_fusegrad_cannot_do_raises_naming_it(path, message):
    with pytest.raises(RuntimeError, match=message):
        _attribute(path)(fg.nn.Linear(2, 2), [])


def test_setup_scripts_name_build_extension():
    build = fg.utils.cpp_extension.BuildExtension.with_options(use_ninja=False)
    assert fg.utils.cpp_extension.CUDA_HOME is None
    with pytest.raises(RuntimeError, match="cannot build"):
        build()


def test_decorators_model_files_apply_at_import_hand_back_their_argument():
    def f(x):
        return x

    assert fg.fx.wrap(f) is f and fg.fx.wrap("f") == "f"
    assert _attribute("distributed.rpc.functions.async_execution")(f) is f


def test_map_arg_rebuilds_the_structure():
    structure = {"a": [1, (2, 3)], "b": slice(1, 4)}
    assert fg.fx.node.map_arg(structure, lambda n: 0) == structure
    assert fg.fx.node.map_aggregate([1, (2,)], lambda x: x * 10) == [10, (20,)]


def test_quantization_stubs_pass_values_through():
    x = fg.ones(2)
    assert fg.quantization.QuantStub()(x) is x and fg.ao.quantization.DeQuantStub()(x) is x


# ------------------------------------------------------------------ attention kernels


def _attention():
    q = fg.randn(1, 2, 4, 8)
    return F.scaled_dot_product_attention(q, q, q)


@pytest.mark.parametrize(
    "backends",
    [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION, [SDPBackend.MATH, SDPBackend.CUDNN_ATTENTION]],
)
def test_sdpa_kernel_allowing_a_cpu_kernel_runs_attention(backends):
    with sdpa_kernel(backends):
        assert _attention().shape == (1, 2, 4, 8)


def test_sdpa_kernel_allowing_only_cuda_kernels_leaves_none():
    with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
        assert not fg.backends.cuda.math_sdp_enabled()
        with pytest.raises(RuntimeError, match="No viable backend for scaled_dot_product"):
            _attention()
    assert fg.backends.cuda.math_sdp_enabled()  # restored
    with pytest.raises(AssertionError, match="Backend must be an instance of SDPBackend"):
        sdpa_kernel("math")


def test_the_deprecated_sdp_kernel_and_the_switches():
    with pytest.warns(FutureWarning, match="sdp_kernel\\(\\)` is deprecated"):
        context = fg.backends.cuda.sdp_kernel(enable_flash=False, enable_math=False)
    with context:
        assert not fg.backends.cuda.flash_sdp_enabled()
        with pytest.raises(RuntimeError, match="No viable backend"):
            _attention()
    fg.backends.cuda.enable_flash_sdp(False)
    try:
        assert not fg.backends.cuda.flash_sdp_enabled()
        _attention()  # the math kernel stays
    finally:
        fg.backends.cuda.enable_flash_sdp(True)
    assert [b.value for b in SDPBackend] == [-1, 0, 1, 2, 3, 4]


# ------------------------------------------------------------------ compiler


def test_settings_modules_keep_known_settings_and_refuse_others():
    config = fg._dynamo.config
    config.cache_size_limit = 64
    try:
        assert config.cache_size_limit == 64
    finally:
        config.cache_size_limit = 8
    fg._inductor.config.triton.unique_kernel_names = False
    fg._inductor.config.triton.unique_kernel_names = True
    for refused in (
        lambda: setattr(config, "cache_size_limt", 1),
        lambda: config.no_such_setting,
        lambda: setattr(fg._inductor.config.triton, "no_such_setting", 1),
    ):
        with pytest.raises(AttributeError, match="does not exist"):
            refused()


def _branches(x):
    y = x.sin()
    if y.sum() > 0:
        return y.cos()
    return y


def test_explain_reports_the_one_graph_and_its_guards():
    report = fg._dynamo.explain(_branches)(fg.ones(3))
    assert isinstance(report, fg._dynamo.backends.debugging.ExplainOutput)
    assert (report.graph_count, report.graph_break_count, report.break_reasons) == (1, 0, [])
    assert report.ops_per_graph == [["sin", "reduce_sum", "gt", "cos"]]
    assert report.op_count == 4 and len(report.out_guards) == 1
    assert "Graph Count: 1" in str(report)


def test_explain_reports_a_function_that_runs_eagerly():
    report = fg._dynamo.explain(lambda x: fg.tensor(x.numpy()))(fg.ones(3))
    assert (report.graph_count, report.graph_break_count) == (0, 1)
    assert "numpy()" in report.break_reasons[0]


def test_reset_makes_jit_functions_trace_again():
    f = fg.compile(_branches)
    f(fg.ones(3))
    fg.compiler.reset()
    assert f.cache_info().entries == 0
    f(fg.ones(3))
    assert f.cache_info().misses == 2 and fg._dynamo.reset is fg.compiler.reset


def test_is_compiling_inside_a_trace():
    seen = []
    fg.jit(lambda x: seen.append(fg._dynamo.is_compiling()) or x * 2)(fg.ones(2))
    assert seen == [True] and not fg._dynamo.is_compiling()


# ------------------------------------------------------------------ futures


def test_a_future_completes_once_and_runs_its_callbacks():
    future = fg.futures.Future()
    assert not future.done()
    chained = future.then(lambda f: f.wait() + 1)
    seen = []
    future.add_done_callback(lambda f: seen.append(f.value()))
    future.set_result(5)
    assert (chained.wait(), seen, future.done()) == (6, [5], True)
    with pytest.raises(RuntimeError, match="marked completed once"):
        future.set_result(6)


def test_a_futures_error_reaches_wait_and_chained_futures():
    failed = fg.futures.Future()
    failed.set_exception(ValueError("bad"))
    with pytest.raises(ValueError, match="bad"):
        failed.wait()
    with pytest.raises(RuntimeError, match="ValueError: bad"):
        failed.then(lambda f: f.wait()).wait()
    with pytest.raises(AssertionError, match="not an Exception"):
        fg.futures.Future().set_exception("bad")


def test_wait_all_and_collect_all_across_threads():
    futures = [fg.futures.Future() for _ in range(3)]
    collected = fg.futures.collect_all(futures)
    threads = [threading.Thread(target=f.set_result, args=(k,)) for k, f in enumerate(futures)]
    for t in threads:
        t.start()
    assert fg.futures.wait_all(futures) == [0, 1, 2]
    assert [f.value() for f in collected.wait()] == [0, 1, 2]
    with pytest.warns(DeprecationWarning, match="fork"):
        assert fg.jit.fork(lambda: 3).wait() == 3  # torch.jit's futures are these


# ------------------------------------------------------------------ distributed


class Loopback:
    """A process group of one process, with the array collectives objects.py uses."""

    def rank(self):
        return 0

    def size(self):
        return 1

    def all_gather(self, array):
        return np.array(array)[None]

    def broadcast(self, array, src):
        return np.array(array)


@pytest.fixture
def one_process(monkeypatch):
    monkeypatch.setattr(objects, "resolve", lambda group: Loopback())


def test_object_collectives_need_a_process_group():
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.broadcast_object_list([1])


def test_object_collectives_on_one_process(one_process):
    broadcast = [{"lr": 0.1}, None]
    dist.broadcast_object_list(broadcast, src=0)
    gathered, to_dst, scattered, tensors = [None], [None], [None], [fg.zeros(2)]
    dist.all_gather_object(gathered, {"x": fg.ones(2)})
    dist.gather_object("hi", to_dst, dst=0)
    dist.scatter_object_list(scattered, ["mine"], src=0)
    dist.gather(fg.ones(2), tensors)
    assert broadcast == [{"lr": 0.1}, None] and to_dst == ["hi"] and scattered == ["mine"]
    assert gathered[0]["x"].tolist() == [1.0, 1.0] and tensors[0].tolist() == [1.0, 1.0]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: dist.gather_object("x", None), ValueError, "must be specified on destination"),
        (lambda: dist.gather(fg.ones(2), [fg.ones(2)] * 2), ValueError, "one per process"),
        (lambda: dist.broadcast_object_list([1], src=3), RuntimeError, "invalid root rank: 3"),
        (lambda: dist.scatter_object_list([], ["a"]), ValueError, "list of size at least 1"),
    ],
)
def test_object_collectives_check_their_arguments(one_process, call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_the_default_backend_is_mpi_for_the_cpu():
    assert dist.get_default_backend_for_device("cpu") == "mpi"
    assert dist.get_default_backend_for_device(fg.device("cpu")) == "mpi"
    with pytest.raises(RuntimeError, match="no backend for 'cuda' tensors"):
        dist.get_default_backend_for_device("cuda")


def test_fsdp_settings_are_plain_values():
    fsdp = _attribute("distributed.fsdp")
    policy = fsdp.MixedPrecision(param_dtype=fg.bfloat16)
    assert policy.param_dtype is fg.bfloat16 and policy.reduce_dtype is None
    assert fsdp.ShardingStrategy.FULL_SHARD.value == 1
    assert not isinstance(fg.nn.Linear(2, 2), fsdp.FSDPModule)


def _trained():
    fg.manual_seed(0)
    model = fg.nn.Sequential(fg.nn.Linear(2, 3), fg.nn.Tanh(), fg.nn.Linear(3, 1))
    model[0].bias.requires_grad_(False)
    optimizer = fg.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.1)
    model(fg.randn(4, 2)).sum().backward()
    optimizer.step()
    return model, optimizer


def test_checkpoint_state_dicts_name_parameters():
    model, optimizer = _trained()
    assert list(dsd.get_model_state_dict(fg.compile(model))) == list(model.state_dict())
    frozen_out = dsd.StateDictOptions(ignore_frozen_params=True)
    assert list(dsd.get_model_state_dict(model, options=frozen_out)) == [
        "0.weight",
        "2.weight",
        "2.bias",
    ]
    saved = dsd.get_optimizer_state_dict(model, optimizer)
    assert list(saved["state"]) == ["0.weight", "2.weight", "2.bias"]
    assert saved["param_groups"][0]["params"] == ["0.weight", "2.weight", "2.bias"]


def test_checkpoint_state_dicts_load_into_another_model():
    model, optimizer = _trained()
    other, other_optimizer = _trained()
    with fg.no_grad():
        other[0].weight.zero_()
    dsd.set_state_dict(
        other,
        other_optimizer,
        model_state_dict=dsd.get_model_state_dict(model),
        optim_state_dict=dsd.get_optimizer_state_dict(model, optimizer),
    )
    assert fg.equal(other[0].weight, model[0].weight)
    mine, theirs = optimizer.state_dict()["state"], other_optimizer.state_dict()["state"]
    assert fg.equal(mine[0]["exp_avg_sq"], theirs[0]["exp_avg_sq"])
    partial = dsd.get_model_state_dict(model)
    partial.pop("0.weight")
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "0\.weight"'):
        dsd.set_model_state_dict(other, partial)
    lenient = dsd.StateDictOptions(strict=False)
    assert dsd.set_model_state_dict(other, partial, options=lenient).missing_keys == ["0.weight"]


def test_a_distributed_checkpoint_saves_and_loads_in_place(tmp_path):
    dcp = _attribute("distributed.checkpoint")
    model, _ = _trained()
    dcp.save({"model": model.state_dict(), "step": 3}, checkpoint_id=tmp_path / "ckpt")
    other, _ = _trained()
    with fg.no_grad():
        other[2].bias.fill_(7.0)
    state = {"model": other.state_dict(), "step": 0}
    dcp.load(state, storage_reader=dcp.FileSystemReader(tmp_path / "ckpt"))
    assert state["step"] == 3 and fg.equal(other[2].bias, model[2].bias)
    with pytest.raises(RuntimeError, match="Missing key in checkpoint state_dict: extra"):
        dcp.load({"extra": 1}, checkpoint_id=tmp_path / "ckpt")
    with pytest.raises(RuntimeError, match="cannot read the format of PyTorch's"):
        dcp.load({}, checkpoint_id=tmp_path)


def test_composable_checkpoint_keeps_the_gradients():
    model, _ = _trained()
    x = fg.randn(4, 2, requires_grad=True)
    model(x).sum().backward()
    expected = x.grad.clone()
    x.grad = None
    checkpointed = _attribute("distributed._composable.checkpoint")(model)
    checkpointed(x).sum().backward()
    assert checkpointed is model and fg.allclose(x.grad, expected)


def test_the_differentiable_collectives_need_a_process_group():
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        _attribute("distributed.nn.all_reduce")(fg.ones(2))


# ------------------------------------------------------------------ torch.fx


def _scaled(x):
    return x * 3


fg.fx.wrap("_scaled")  # as model files mark a function at module level


class _Block(fg.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = fg.nn.Sequential(fg.nn.Linear(4, 4), fg.nn.ReLU())
        self.scale = fg.nn.Parameter(fg.full((4,), 2.0))
        self.register_buffer("shift", fg.ones(4))

    def forward(self, x, mask=None):
        h = self.layers(x) * self.scale + self.shift
        h = F.gelu(h) + fg.cat([h, h], -1).sum(-1, keepdim=True)
        return _scaled(h.view(h.shape[0], -1).softmax(dim=-1))


def test_symbolic_trace_records_the_forward_as_nodes():
    functions = (fg.cat, F.gelu, _scaled)
    traced = fg.fx.symbolic_trace(_Block())
    nodes = [
        (n.op, n.target if isinstance(n.target, str) else n.target.__name__)
        for n in traced.graph.nodes
    ]
    assert nodes == [
        ("placeholder", "x"),
        ("placeholder", "mask"),
        ("call_module", "layers.0"),
        ("call_module", "layers.1"),
        ("get_attr", "scale"),
        ("call_function", "mul"),
        ("get_attr", "shift"),
        ("call_function", "add"),
        ("call_function", "gelu"),
        ("call_function", "cat"),
        ("call_method", "sum"),
        ("call_function", "add"),
        ("call_function", "getattr"),
        ("call_function", "getitem"),
        ("call_method", "view"),
        ("call_method", "softmax"),
        ("call_function", "_scaled"),
        ("output", "output"),
    ]
    shown = str(traced.graph)
    assert "%layers_0 : [num_users=1] = call_module[target=layers.0](args = (%x,)" in shown
    assert "kwargs = {keepdim: True}" in shown and shown.rstrip().endswith("return _scaled")
    assert (fg.cat, F.gelu, _scaled) == functions  # restored after the trace


def test_a_graph_module_computes_what_the_module_computes_with_its_gradients():
    block = _Block()
    traced = fg.fx.symbolic_trace(block)
    x = fg.randn(3, 4)
    assert fg.allclose(traced(x), block(x))
    assert dict(traced.named_buffers()).keys() == {"shift"}
    assert traced.get_parameter("layers.0.weight") is block.layers[0].weight
    traced(x).sum().backward()
    assert block.scale.grad is not None and block.scale.grad.shape == (4,)


def test_symbolic_trace_of_a_function_and_with_concrete_args():
    traced = fg.fx.symbolic_trace(lambda x, flag: x + 1 if flag else x - 1, {"flag": True})
    assert [n.op for n in traced.graph.nodes] == ["placeholder", "call_function", "output"]
    assert traced(fg.ones(2)).tolist() == [2.0, 2.0]


def test_control_flow_on_a_proxy_is_a_trace_error():
    with pytest.raises(fg.fx.proxy.TraceError, match="cannot be used as inputs to control flow"):
        fg.fx.symbolic_trace(lambda x: x if x.sum() > 0 else -x)
    with pytest.raises(fg.fx.proxy.TraceError, match="cannot be iterated"):
        fg.fx.symbolic_trace(lambda x: [t for t in x])


def test_a_tracer_chooses_its_leaves():
    class Everything(fg.fx.Tracer):
        def is_leaf_module(self, m, module_qualified_name):
            return module_qualified_name == "layers"

    block = _Block()
    graph = Everything().trace(block)
    modules = [n.target for n in graph.nodes if n.op == "call_module"]
    assert modules == ["layers"]
    x = fg.randn(2, 4)
    assert fg.allclose(fg.fx.GraphModule(block, graph)(x), block(x))


def test_proxies_append_to_a_graph_made_by_hand():
    graph = fg.fx.Graph()
    tracer = fg.fx.proxy.GraphAppendingTracer(graph)
    x = fg.fx.Proxy(graph.placeholder("x"), tracer)
    graph.output((fg.fx.Proxy(graph.call_function(fg.relu, (x.node,)), tracer) * 2).node)
    module = fg.fx.GraphModule(fg.nn.Module(), graph)
    assert module(fg.tensor([-1.0, 2.0])).tolist() == [0.0, 4.0]
    assert [n.name for n in graph.nodes] == ["x", "relu", "mul", "output"]


# ------------------------------------------------------------------ as torch


def test_scripts_import_the_tail_as_torch(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(
        "import torch\n"
        "import torch._dynamo.config\n"
        "import torch._inductor.config as inductor_config\n"
        "import torch.distributed.checkpoint.state_dict\n"
        "from torch.distributed.fsdp.fully_sharded_data_parallel import StateDictType\n"
        "from torch.nn.attention import SDPBackend, sdpa_kernel\n"
        "from torch.utils.cpp_extension import load\n"
        "from torch.utils.data._utils.collate import default_collate\n"
        "torch._dynamo.config.suppress_errors = True\n"
        "inductor_config.coordinate_descent_tuning = True\n"
        "traced = torch.fx.symbolic_trace(torch.nn.Linear(2, 3))\n"
        "print(torch.version.cuda, traced(torch.ones(1, 2)).shape)\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "fusegrad", str(script)], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "None fusegrad.Size([1, 3])"


def test_math_on_a_proxys_sizes_is_recorded():
    class Scaled(fg.nn.Module):
        def forward(self, x):
            return x / math.sqrt(x.shape[-1])

    traced = fg.fx.symbolic_trace(Scaled())
    assert "call_function[target=math.sqrt]" in str(traced.graph)
    assert traced(fg.ones(4)).tolist() == [0.5] * 4 and math.sqrt(4) == 2.0
