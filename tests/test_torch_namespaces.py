"""Names at PyTorch's module paths that fusegrad gives: torch.jit (which is
also fusegrad's compiler), torch.testing, the thread, precision, determinism
and default-dtype settings, memory formats, torch.random, the distributions'
submodules, _LRScheduler and torch._utils. Expected messages and values are
PyTorch 2.13's (with ``fusegrad.`` where it prints ``torch.``)."""

import io
import math
import pickle
import typing
import warnings
import zipfile

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn
from fusegrad.runtime import threads
from fusegrad.testing import assert_close
from fusegrad.tracer.jit import JitFunction

# TorchScript's API warns of its deprecation as PyTorch 2.13's does (tested below)
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning")

# ------------------------------------------------------------------ torch.jit


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.bn = nn.BatchNorm1d(2)
        self.scale = 2.0

    def forward(self, x):
        return self.bn(self.fc(x)).relu() * self.scale

    def halve(self, x):
        return x / 2


def cube_sum(x):
    return (x**3).sum()


# made at import, before the filter above applies
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)

    class Legacy(fg.jit.ScriptModule):
        """The legacy API: a ScriptModule subclass with script methods."""

        def __init__(self):
            super().__init__()
            self.steps = fg.jit.Attribute(3, int)

        @fg.jit.script_method
        def forward(self, x):
            return x * self.steps

    scripted_double = fg.jit.script(lambda x: x * 2)

    @fg.jit.script
    def triple(x):
        return x * 3


def _example():
    fg.manual_seed(0)
    return fg.randn(4, 3)


def test_fusegrad_jit_is_the_compiler_and_a_module():
    import fusegrad.jit as module

    assert module is fg.jit and fg.jit.__name__ == "fusegrad.jit"

    @fg.jit
    def square(x):
        return x * x

    made = [square, fg.jit(cube_sum), fg.jit(dynamic=True)(cube_sum), fg.jit(cube_sum, eager=True)]
    assert all(isinstance(f, JitFunction) for f in made)
    assert_close(square(fg.tensor([3.0])), fg.tensor([9.0]))
    assert_close(made[2](fg.tensor([1.0, 2.0])), fg.tensor(9.0))


def test_torch_jit_imports_resolve_to_fusegrad_jit():
    with fg.as_torch.enabled():
        import torch.jit
        from torch.jit import ignore, script

        assert torch.jit is fg.jit and script is fg.jit.script and ignore is fg.jit.ignore


def test_a_scripted_function_computes_what_python_does():
    scripted = fg.jit.script(cube_sum)
    assert isinstance(scripted, fg.jit.ScriptFunction) and scripted.name == "cube_sum"
    assert scripted.__wrapped__ is cube_sum and scripted.__doc__ == cube_sum.__doc__
    for x in (fg.tensor([1.0, 2.0]), fg.arange(5.0)):
        assert_close(scripted(x), cube_sum(x))
    assert fg.jit.script(scripted) is scripted


def test_a_scripted_module_shares_the_originals_tensors_and_keys():
    net = Net()
    scripted = fg.jit.script(net)
    assert isinstance(scripted, fg.jit.RecursiveScriptModule)
    assert isinstance(scripted, fg.jit.ScriptModule) and isinstance(scripted, Net)
    assert list(scripted.state_dict()) == list(net.state_dict())
    assert scripted.fc.weight is net.fc.weight and scripted.bn.running_mean is net.bn.running_mean
    assert (scripted.original_name, scripted.fc.original_name) == ("Net", "Linear")
    assert repr(scripted) == (
        "RecursiveScriptModule(\n"
        "  original_name=Net\n"
        "  (fc): RecursiveScriptModule(original_name=Linear)\n"
        "  (bn): RecursiveScriptModule(original_name=BatchNorm1d)\n"
        ")"
    )
    scripted.eval()  # its training flags are its own, as PyTorch's are
    assert net.training and net.bn.training and not scripted.bn.training
    assert_close(scripted.halve(fg.ones(1)), fg.tensor([0.5]))


def test_a_scripted_module_runs_and_trains_as_the_original():
    net = Net()
    scripted = fg.jit.script(net)
    x = _example()
    net.eval()
    scripted.eval()
    assert_close(scripted(x), net(x))
    scripted.train()
    scripted(x).sum().backward()
    assert net.fc.weight.grad is not None and int(net.bn.num_batches_tracked) == 1


def test_script_returns_what_needs_no_compiling_as_it_is():
    legacy = Legacy()
    for obj in (legacy, scripted_double, Net, {"a": 1}, [1]):
        assert fg.jit.script(obj) is obj
    assert legacy.steps == 3  # the Attribute's value
    assert_close(legacy(fg.ones(1)), fg.tensor([3.0]))


def test_trace_compiles_and_runs_the_examples_once():
    net = Net()
    traced = fg.jit.trace(net, _example())
    assert isinstance(traced, fg.jit.RecursiveScriptModule) and int(net.bn.num_batches_tracked) == 1
    assert list(traced.state_dict()) == list(net.state_dict())
    by_forward = fg.jit.trace(net.forward, (_example(),))
    assert isinstance(by_forward, Net) and int(net.bn.num_batches_tracked) == 2
    twice = fg.jit.trace(lambda x, y=1: x * y, example_kwarg_inputs={"x": fg.ones(2), "y": 2})
    assert isinstance(twice, fg.jit.ScriptFunction)
    # the Python's other paths too: not the examples' recorded path
    absolute = fg.jit.trace(lambda x: x if x.sum() > 0 else -x, fg.ones(2))
    assert_close(absolute(-fg.ones(3)), fg.ones(3))
    modules = fg.jit.trace_module(net, {"forward": _example(), "halve": (fg.ones(1),)})
    assert isinstance(modules, fg.jit.RecursiveScriptModule)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: fg.jit.trace(cube_sum), TypeError, "needs example_inputs"),
        (lambda: fg.jit.trace_module(cube_sum, {}), AttributeError, "expected torch.nn.Module"),
        (lambda: fg.jit.trace_module(Net(), fg.ones(1)), AttributeError, "expected a dictionary"),
        (lambda: fg.jit.freeze(Net().eval()), RuntimeError, "Freezing expects a ScriptModule"),
        (
            lambda: fg.jit.freeze(fg.jit.script(Net())),
            RuntimeError,
            "only implemented for modules in eval",
        ),
        (
            lambda: fg.jit.optimize_for_inference(Net()),
            RuntimeError,
            "optimize_for_inference expects",
        ),
        (lambda: fg.jit.save(nn.Linear(1, 1), io.BytesIO()), AttributeError, "no attribute 'save'"),
        (lambda: fg.jit.save(scripted_double, io.BytesIO()), RuntimeError, "cannot save"),
        (lambda: fg.jit.interface(cube_sum), RuntimeError, "interface must be applied to a class"),
        (lambda: fg.jit.ignore(3), RuntimeError, "must be a bool or a function but got 3"),
        (lambda: fg.jit.wait(3), TypeError, "expected a Future"),
    ],
)
def test_jit_misuse_raises(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_tracing_a_script_module_warns_and_returns_it():
    scripted = fg.jit.script(Net())
    with pytest.warns(UserWarning, match="already a ScriptModule"):
        assert fg.jit.trace(scripted, _example()) is scripted


def _saved(obj, **kwargs) -> io.BytesIO:
    buffer = io.BytesIO()
    fg.jit.save(obj, buffer, **kwargs)
    buffer.seek(0)
    return buffer


def test_save_and_load_give_back_a_scripted_module():
    scripted = fg.jit.script(Net()).eval()
    extra = {"config.txt": ""}
    loaded = fg.jit.load(_saved(scripted, _extra_files={"config.txt": "hi"}), _extra_files=extra)
    assert extra == {"config.txt": b"hi"}
    assert isinstance(loaded, fg.jit.RecursiveScriptModule) and isinstance(loaded, Net)
    assert list(loaded.state_dict()) == list(scripted.state_dict()) and not loaded.training
    x = _example()
    assert_close(loaded(x), scripted(x))
    assert_close(fg.jit.load(_saved(scripted), map_location="cpu")(x), scripted(x))


def test_save_and_load_give_back_a_scripted_function():
    assert fg.jit.load(_saved(triple)) is triple  # by the name that holds it
    loaded = fg.jit.load(_saved(fg.jit.script(cube_sum)))
    assert isinstance(loaded, fg.jit.ScriptFunction) and loaded.__wrapped__ is cube_sum


def test_load_refuses_torchscript_archives_and_other_files():
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:  # the records torch.jit.save writes
        for name in ("data.pkl", "constants.pkl", "version", "code/__torch__.py"):
            z.writestr(f"model/{name}", b"")
    archive.seek(0)
    with pytest.raises(RuntimeError, match="fusegrad cannot run TorchScript programs"):
        fg.jit.load(archive)
    checkpoint = io.BytesIO()
    fg.save({"w": fg.ones(1)}, checkpoint)
    checkpoint.seek(0)
    with pytest.raises(RuntimeError, match=r"not a file written by fusegrad\.jit\.save"):
        fg.jit.load(checkpoint)


def test_freeze_makes_parameters_constants():
    net = Net()
    scripted = fg.jit.script(net).eval()
    frozen = fg.jit.freeze(scripted)
    assert list(frozen.parameters()) == [] and list(frozen.state_dict()) == []
    x = _example()
    out = frozen(x)
    assert not out.requires_grad
    assert_close(out, net.eval()(x))
    optimized = fg.jit.optimize_for_inference(scripted.train())
    assert not scripted.training and list(optimized.parameters()) == []


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("script", lambda: fg.jit.script(cube_sum)),
        ("trace", lambda: fg.jit.trace(cube_sum, fg.ones(1))),
        ("trace_method", lambda: fg.jit.trace_module(Net(), {"forward": _example()})),
        ("save", lambda: _saved(triple)),
        ("load", lambda: fg.jit.load(_saved(triple))),
        ("fork", lambda: fg.jit.fork(cube_sum, fg.ones(1))),
        ("script_method", lambda: fg.jit.script_method(cube_sum)),
    ],
)
def test_the_api_warns_of_its_deprecation_as_pytorch_does(name, call):
    with pytest.warns(DeprecationWarning, match=f"`torch.jit.{name}` is deprecated"):
        call()


def test_markers_leave_the_python_as_it_is():
    @fg.jit.interface
    class Interface:
        pass

    for marked in (
        fg.jit.ignore(cube_sum),
        fg.jit.ignore(drop=True)(cube_sum),
        fg.jit.unused(cube_sum),
        fg.jit.export(cube_sum),
        fg.jit.script_if_tracing(cube_sum),
        fg.jit._overload_method(cube_sum),
    ):
        assert marked is cube_sum
    assert Interface.__name__ == "Interface"
    assert not fg.jit.is_scripting() and not fg.jit.is_tracing()
    assert fg.jit.annotate(list[int], [1]) == [1]
    assert fg.jit.Final is typing.Final
    assert fg.jit.Attribute(0, int) == (0, int)


def test_fork_runs_the_call_and_wait_gives_its_result():
    future = fg.jit.fork(lambda a, b=1: a + b, 1, b=2)
    assert future.done() and fg.jit.wait(future) == 3 and future.value() == 3


# -------------------------------------------------------------- torch.testing

T = fg.tensor
CLOSE_FAILURES = [
    (
        T([1.0, 2.0, 3.0]),
        T([1.0, 2.0, 4.0]),
        {},
        "Tensor-likes are not close!\n\nMismatched elements: 1 / 3 (33.3%)\n"
        "Greatest absolute difference: 1.0 at index (2,) (up to 1e-05 allowed)\n"
        "Greatest relative difference: 0.25 at index (2,) (up to 1.3e-06 allowed)",
    ),
    (
        T([1, 2, 3]),
        T([1, 2, 4]),
        {},
        "Tensor-likes are not equal!\n\nMismatched elements: 1 / 3 (33.3%)\n"
        "Greatest absolute difference: 1 at index (2,)\n"
        "Greatest relative difference: 0.25 at index (2,)",
    ),
    (  # only mismatched elements count toward the greatest differences
        T([1.0, 0.0, 5.0]),
        T([1.0, 1e-9, 6.0]),
        {},
        "Tensor-likes are not close!\n\nMismatched elements: 1 / 3 (33.3%)\n"
        "Greatest absolute difference: 1.0 at index (2,) (up to 1e-05 allowed)\n"
        "Greatest relative difference: 0.1666666716337204 at index (2,) (up to 1.3e-06 allowed)",
    ),
    (
        T([[1.0, 2.0], [3.0, 5.0]]),
        T([[1.0, 2.0], [3.0, 4.0]]),
        {"rtol": 0.1, "atol": 0.5},
        "Tensor-likes are not close!\n\nMismatched elements: 1 / 4 (25.0%)\n"
        "Greatest absolute difference: 1.0 at index (1, 1) (up to 0.5 allowed)\n"
        "Greatest relative difference: 0.25 at index (1, 1) (up to 0.1 allowed)",
    ),
    (
        T([math.nan, 1.0]),
        T([math.nan, 2.0]),
        {},
        "Tensor-likes are not close!\n\nMismatched elements: 2 / 2 (100.0%)\n"
        "Greatest absolute difference: nan at index (0,) (up to 1e-05 allowed)\n"
        "Greatest relative difference: nan at index (0,) (up to 1.3e-06 allowed)",
    ),
    (
        T([1, 1, 1], dtype=fg.int32),
        T([3, 3, 3], dtype=fg.int32),
        {},
        "Tensor-likes are not equal!\n\nMismatched elements: 3 / 3 (100.0%)\n"
        "Greatest absolute difference: 2 at index (0,)\n"
        "Greatest relative difference: 0.6666666865348816 at index (0,)",
    ),
    (
        T([1.0, 2.0]).bfloat16(),
        T([1.0, 2.2]).bfloat16(),
        {},
        "Tensor-likes are not close!\n\nMismatched elements: 1 / 2 (50.0%)\n"
        "Greatest absolute difference: 0.203125 at index (1,) (up to 1e-05 allowed)\n"
        "Greatest relative difference: 0.09228515625 at index (1,) (up to 0.016 allowed)",
    ),
    (
        T([True, False]),
        T([False, False]),
        {},
        "Tensor-likes are not equal!\n\nMismatched elements: 1 / 2 (50.0%)\n"
        "Greatest absolute difference: 1 at index (0,)\n"
        "Greatest relative difference: inf at index (0,)",
    ),
    (
        T(3.0),
        T(0.0),
        {},
        "Scalars are not close!\n\nExpected 0.0 but got 3.0.\n"
        "Absolute difference: 3.0 (up to 1e-05 allowed)\n"
        "Relative difference: inf (up to 1.3e-06 allowed)",
    ),
    (
        1.0,
        1.1,
        {},
        "Scalars are not close!\n\nExpected 1.1 but got 1.0.\n"
        "Absolute difference: 0.10000000000000009 (up to 1e-07 allowed)\n"
        "Relative difference: 0.09090909090909098 (up to 1e-07 allowed)",
    ),
    (
        1,
        2,
        {},
        "Scalars are not equal!\n\nExpected 2 but got 1.\nAbsolute difference: 1\n"
        "Relative difference: 0.5",
    ),
    (1, 1.0, {}, "The (d)types do not match: <class 'int'> != <class 'float'>."),
    (
        T([1.0]),
        T([1.0], dtype=fg.float64),
        {},
        "The values for attribute 'dtype' do not match: fusegrad.float32 != fusegrad.float64.",
    ),
    (
        T([1.0, 2.0]),
        T([1.0]),
        {},
        "The values for attribute 'shape' do not match: fusegrad.Size([2]) != fusegrad.Size([1]).",
    ),
    (
        fg.zeros(2, 3),
        fg.zeros(3, 2).t(),
        {"check_stride": True},
        "The values for attribute 'stride()' do not match: (3, 1) != (1, 2).",
    ),
    (
        [[T(1.0)], {"a": [1.0, T(3.0)]}],
        [[T(1.0)], {"a": [1.0, T(4.0)]}],
        {},
        "Scalars are not close!\n\nExpected 4.0 but got 3.0.\n"
        "Absolute difference: 1.0 (up to 1e-05 allowed)\n"
        "Relative difference: 0.25 (up to 1.3e-06 allowed)\n\n"
        "The failure occurred for item [1]['a'][1]",
    ),
    (
        {"a": 1, "b": 2},
        {"b": 2, "c": 3, "a": 1},
        {},
        "The keys of the mappings do not match:\nMissing keys in the actual mapping: ['c']\n"
        "Additional keys in the actual mapping: []",
    ),
    ([1, 2], [1], {}, "The length of the sequences mismatch: 2 != 1"),
    (None, 1, {}, "None mismatch: None is not 1"),
    (True, False, {}, "Booleans mismatch: True is not False"),
    (T([1.0]), T([1.1]), {"msg": "custom"}, "custom"),
    (
        [T(1.0)],
        [T(2.0)],
        {"msg": lambda m: "<" + m.splitlines()[0] + ">"},
        "<Scalars are not close!>",
    ),
]


@pytest.mark.parametrize(("actual", "expected", "options", "message"), CLOSE_FAILURES)
def test_assert_close_reports_as_pytorch_does(actual, expected, options, message):
    with pytest.raises(AssertionError) as failure:
        assert_close(actual, expected, **options)
    assert str(failure.value) == message


@pytest.mark.parametrize(
    ("actual", "expected", "options"),
    [
        (T([1.0, 2.0]), T([1.0, 2.0 + 1e-6]), {}),
        (T([math.inf, math.nan]), T([math.inf, math.nan]), {"equal_nan": True}),
        (T([1.0, 2.0]).double(), T([1.0, 2.0]), {"check_dtype": False}),
        (T([1.0]).half(), T([1.0007]), {"check_dtype": False}),  # float16's tolerances
        (T([1, 5]), T([2, 5]), {"rtol": 0.5, "atol": 0}),
        (nn.Parameter(T([1.0])), T([1.0]), {}),
        (np.array([1.0]), np.array([1.0 + 1e-9]), {}),
        (np.float32(1.0), 1.0, {}),
        ((1, 2), [1, 2], {}),
        (fg.Size([2]), (2,), {}),
        ({}, {}, {}),
        (None, None, {}),
        (T([]), T([]), {}),
    ],
)
def test_assert_close_accepts_close_inputs(actual, expected, options):
    assert_close(actual, expected, **options)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: assert_close(T([1.0]), T([1.0]), rtol=1e-3), ValueError, "but got no atol."),
        (lambda: assert_close(T([1.0]), 1.0), TypeError, "No comparison pair was able"),
        (lambda: assert_close(T([1.0]), np.ones(1)), TypeError, "No comparison pair was able"),
        (lambda: assert_close("a", "a"), TypeError, "No comparison pair was able"),
        (
            lambda: assert_close(nn.Parameter(T([1.0])), T([1.0]), allow_subclasses=False),
            TypeError,
            "No comparison pair was able",
        ),
    ],
)
def test_assert_close_refuses_what_it_cannot_compare(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_assert_allclose_is_deprecated_with_its_old_defaults():
    with pytest.warns(FutureWarning, match="assert_allclose\\(\\)` is deprecated"):
        fg.testing.assert_allclose(T([1.0, 2.0]), [1.0, 2.00001])  # rtol 1e-4
    with pytest.warns(FutureWarning), pytest.raises(AssertionError, match=r"up to 0\.0001"):
        fg.testing.assert_allclose(T([1.0]), T([1.5]))


def test_make_tensor_draws_within_its_range():
    fg.manual_seed(0)
    make = fg.testing.make_tensor
    floats = make(50, dtype=fg.float32, device="cpu", low=-1, high=1)
    assert floats.shape == (50,) and bool(((floats >= -1) & (floats < 1)).all())
    ints = make((4, 5), dtype=fg.int64, device=None)
    assert ints.dtype is fg.int64 and bool(((ints >= -9) & (ints < 10)).all())
    assert set(make(100, dtype=fg.uint8, device="cpu").tolist()) <= set(range(10))
    assert make(3, dtype=fg.bool, device="cpu").dtype is fg.bool
    assert make(200, dtype=fg.int64, device="cpu", low=0, high=2, exclude_zero=True).min() == 1
    assert make(2, 3, dtype=fg.float32, device="cpu", noncontiguous=True).stride() == (6, 2)
    cl = make(2, 3, 4, 5, dtype=fg.float32, device="cpu", memory_format=fg.channels_last)
    assert cl.is_contiguous(memory_format=fg.channels_last)
    assert make((), dtype=fg.float64, device="cpu", requires_grad=True).requires_grad


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"dtype": fg.int64, "requires_grad": True}, "`requires_grad=True` is not supported"),
        ({"dtype": fg.float32, "low": 2, "high": 1}, "`low` must be less than `high`"),
        ({"dtype": fg.float32, "low": math.nan}, "cannot be NaN, but got low=nan and high=9"),
        (
            {"dtype": fg.float32, "noncontiguous": True, "memory_format": fg.channels_last},
            "mutually exclusive",
        ),
    ],
)
def test_make_tensor_refuses_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        fg.testing.make_tensor(2, device="cpu", **options)


# ------------------------------------------------------------------- settings


@pytest.fixture
def thread_settings():
    """Gives the thread count, OpenBLAS's and the interop setting back afterwards."""
    chosen, interop = threads._chosen_count, fg._settings._settings.interop_threads
    blas = threads._openblas()
    blas_threads = blas[1]() if blas else None
    yield
    threads._chosen_count = chosen
    fg._settings._settings.interop_threads = interop
    if blas_threads is not None:
        threads.limit_blas(blas_threads)


def test_set_num_threads_sets_the_kernels_split_and_blas(thread_settings):
    fg.set_num_threads(1)
    assert fg.get_num_threads() == 1 and threads.count() == 1
    if threads._openblas() is not None:
        assert threads._openblas()[1]() == 1
    fg.set_num_threads(3)
    assert fg.get_num_threads() == 3
    x = fg.randn(64, 64)
    assert_close(fg.jit(lambda t: (t.exp() * 2).sum(0))(x), (x.exp() * 2).sum(0))


def test_interop_threads_are_set_once(thread_settings):
    fg._settings._settings.interop_threads = None
    fg.set_num_interop_threads(2)
    assert fg.get_num_interop_threads() == 2
    with pytest.raises(RuntimeError, match="cannot set number of interop threads"):
        fg.set_num_interop_threads(3)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: fg.set_num_threads(0), "set_num_threads expects a positive integer"),
        (lambda: fg.set_num_threads(1.5), "set_num_threads expects an int, but got float"),
        (lambda: fg.set_num_interop_threads(0), "set_num_interop_threads expects a positive"),
        (lambda: fg.set_float32_matmul_precision(3), "expects a str, but got int"),
        (lambda: fg.set_deterministic_debug_mode("bad"), "expected one of `default`, `warn`"),
    ],
)
def test_settings_refuse_bad_values(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


def test_float32_matmul_precision_and_allow_tf32_are_one_setting():
    matmul = fg.backends.cuda.matmul
    try:
        assert fg.get_float32_matmul_precision() == "highest" and not matmul.allow_tf32
        fg.set_float32_matmul_precision("medium")
        assert fg.get_float32_matmul_precision() == "medium" and matmul.allow_tf32
        matmul.allow_tf32 = False
        assert fg.get_float32_matmul_precision() == "highest"
        with pytest.warns(UserWarning, match="low is not one of 'highest'"):
            fg.set_float32_matmul_precision("low")
        assert fg.get_float32_matmul_precision() == "highest"
        with pytest.raises(AttributeError, match="Unknown attribute foo"):
            matmul.foo = 1
    finally:
        fg.set_float32_matmul_precision("highest")


def test_deterministic_algorithms_flags():
    try:
        assert not fg.are_deterministic_algorithms_enabled()
        fg.use_deterministic_algorithms(True, warn_only=True)
        assert fg.are_deterministic_algorithms_enabled()
        assert fg.is_deterministic_algorithms_warn_only_enabled()
        assert fg.get_deterministic_debug_mode() == 1 and threads._steady_blas
        fg.set_deterministic_debug_mode("error")
        assert fg.get_deterministic_debug_mode() == 2
        with pytest.raises(TypeError, match="must be bool, not str"):
            fg.use_deterministic_algorithms("yes")
    finally:
        fg.use_deterministic_algorithms(False)
    assert fg.get_deterministic_debug_mode() == 0 and not threads._steady_blas


@pytest.mark.parametrize(
    ("tensor_type", "error", "message"),
    [
        (fg.FloatTensor, None, None),
        ("torch.FloatTensor", None, None),
        ("torch.cuda.FloatTensor", TypeError, "Torch not compiled with CUDA enabled"),
        (fg.cuda.FloatTensor, TypeError, "Torch not compiled with CUDA enabled"),
        ("torch.LongTensor", TypeError, "only floating-point types are supported"),
        (fg.float64, TypeError, "invalid type object"),
        ("DoubleTensor", ModuleNotFoundError, "No module named 'DoubleTensor'"),
        ("torch.Foo", AttributeError, "has no attribute 'Foo'"),
        (fg.DoubleTensor, None, None),
    ],
)
def test_set_default_tensor_type(tensor_type, error, message):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the deprecation, once
            if error is None:
                fg.set_default_tensor_type(tensor_type)
                assert fg.get_default_dtype() is tensor_type_dtype(tensor_type)
            else:
                with pytest.raises(error, match=message):
                    fg.set_default_tensor_type(tensor_type)
                assert fg.get_default_dtype() is fg.float32
    finally:
        fg.set_default_dtype(fg.float32)


def tensor_type_dtype(tensor_type):
    return fg.float32 if isinstance(tensor_type, str) else tensor_type.dtype


def test_set_default_dtype_takes_floating_dtypes_only():
    with pytest.raises(TypeError, match=r"^only floating-point types"):
        fg.set_default_dtype(fg.int64)
    with pytest.raises(TypeError, match=r"^invalid dtype object: only floating-point"):
        fg.set_default_dtype(float)
    assert fg.get_default_dtype() is fg.float32


# ------------------------------------------------------------- memory formats

X = fg.arange(120.0).reshape(2, 3, 4, 5)
CL = X.contiguous(memory_format=fg.channels_last)


def test_memory_formats_print_and_pickle_as_themselves():
    formats = [fg.contiguous_format, fg.channels_last, fg.channels_last_3d, fg.preserve_format]
    assert [repr(f) for f in formats] == [
        "fusegrad.contiguous_format",
        "fusegrad.channels_last",
        "fusegrad.channels_last_3d",
        "fusegrad.preserve_format",
    ]
    assert all(isinstance(f, fg.memory_format) for f in formats)
    assert all(pickle.loads(pickle.dumps(f)) is f for f in formats)


C_ORDER, NHWC = (60, 20, 5, 1), (60, 1, 15, 3)


def _channels_last_conv():
    return nn.Conv2d(2, 4, 3).to(memory_format=fg.channels_last)


@pytest.mark.parametrize(
    ("made", "strides", "c_order", "channels_last"),
    [
        (lambda: CL, NHWC, False, True),
        (lambda: X.to(memory_format=fg.channels_last), NHWC, False, True),
        (lambda: CL.contiguous(), C_ORDER, True, False),
        (lambda: CL.to(fg.float64, memory_format=fg.contiguous_format), C_ORDER, True, False),
        (lambda: X[:, :, ::2].to(memory_format=fg.channels_last), (30, 1, 15, 3), False, True),
        (lambda: fg.zeros_like(CL), NHWC, False, True),  # preserve_format
        (lambda: fg.ones_like(CL), NHWC, False, True),
        (lambda: fg.rand_like(CL), NHWC, False, True),
        (lambda: fg.randint_like(CL, 3), NHWC, False, True),
        (lambda: fg.full_like(X, 2, memory_format=fg.channels_last), NHWC, False, True),
        (lambda: fg.empty_like(CL, memory_format=fg.contiguous_format), C_ORDER, True, False),
        (lambda: fg.empty_like(X.transpose(0, 1)), (20, 60, 5, 1), False, False),
        (lambda: fg.randn(1, 3, 1, 1), (3, 1, 1, 1), True, True),  # sizes of 1 fit both
        (lambda: _channels_last_conv().weight, (18, 1, 6, 2), False, True),
    ],
)  # fmt: skip
def test_layouts_follow_the_memory_format(made, strides, c_order, channels_last):
    t = made()
    assert t.stride() == strides
    assert t.is_contiguous() is c_order
    assert t.is_contiguous(memory_format=fg.channels_last) is channels_last


def test_a_layout_changes_no_value():
    assert_close(CL, X, check_stride=False)
    assert CL.contiguous(memory_format=fg.channels_last) is CL and X.contiguous() is X
    assert X.to(memory_format=fg.preserve_format) is X
    assert X.contiguous(memory_format=fg.preserve_format) is X
    fg.manual_seed(1)
    drawn = fg.rand_like(CL)
    fg.manual_seed(1)
    assert_close(drawn, fg.rand_like(X))
    x = fg.randn(2, 3, 4, 5, 6, requires_grad=True)
    y = x.contiguous(memory_format=fg.channels_last_3d)
    assert y.stride() == (360, 1, 90, 18, 3) and type(y.grad_fn).__name__ == "CloneBackward0"
    (y * y).sum().backward()
    assert_close(x.grad, 2 * x.detach())


def test_a_channels_last_network_computes_the_same_bits():
    fg.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 2, 3)).eval()
    x = fg.randn(2, 3, 6, 6)
    expected = net(x)
    net.to(memory_format=fg.channels_last)
    assert_close(net(x.contiguous(memory_format=fg.channels_last)), expected, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: fg.randn(3, 4, 5).contiguous(memory_format=fg.channels_last), RuntimeError,
         "required rank 4 tensor to use channels_last format"),
        (lambda: X.to(memory_format=fg.channels_last_3d), RuntimeError,
         "required rank 5 tensor to use channels_last_3d format"),
        (lambda: fg.zeros_like(fg.ones(3), memory_format=fg.channels_last), RuntimeError,
         "required rank 4 tensor"),
        (lambda: nn.Conv3d(2, 2, 1).to(memory_format=fg.channels_last), RuntimeError,
         "required rank 4 tensor"),
        (lambda: X.transpose(0, 1).contiguous(memory_format=fg.preserve_format), RuntimeError,
         "preserve memory format is unsupported by the contiguous operator"),
        (lambda: X.contiguous(memory_format="channels_last"), TypeError,
         "argument 'memory_format' must be fusegrad.memory_format, not str"),
        (lambda: X.is_contiguous(memory_format=None), TypeError,
         "is_contiguous\\(\\): argument 'memory_format'"),
    ],
)  # fmt: skip
def test_memory_format_misuse_raises(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ------------------------------------------------------- PyTorch's other paths


def test_torch_random_is_the_default_generators_module():
    import fusegrad.random as random

    for name in ("manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state"):
        assert getattr(random, name) is getattr(fg, name)
    random.manual_seed(3)
    with random.fork_rng():
        inside = fg.rand(2)
    assert_close(fg.rand(2), inside)
    with random.fork_rng(enabled=False):
        fg.rand(2)
    assert not bool((fg.rand(2) == inside).all())


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("normal", "Normal"),
        ("uniform", "Uniform"),
        ("exponential", "Exponential"),
        ("bernoulli", "Bernoulli"),
        ("categorical", "Categorical"),
        ("multivariate_normal", "MultivariateNormal"),
        ("independent", "Independent"),
        ("distribution", "Distribution"),
        ("kl", "kl_divergence"),
        ("kl", "register_kl"),
    ],
)
def test_distributions_live_at_pytorchs_paths(path, name):
    import importlib

    module = importlib.import_module(f"fusegrad.distributions.{path}")
    assert getattr(module, name) is getattr(fg.distributions, name)
    with fg.as_torch.enabled():
        assert importlib.import_module(f"torch.distributions.{path}") is module


def test_the_old_scheduler_base_name():
    from fusegrad.optim.lr_scheduler import LRScheduler, _LRScheduler

    class Halving(_LRScheduler):
        def get_lr(self):
            return [lr / 2 for lr in self.base_lrs]

    optimizer = fg.optim.SGD([nn.Parameter(fg.ones(1))], lr=1.0)
    assert issubclass(_LRScheduler, LRScheduler)
    assert Halving(optimizer).get_last_lr() == [0.5]


def test_dense_tensors_flatten_and_unflatten_into_views():
    from fusegrad._utils import _flatten_dense_tensors, _unflatten_dense_tensors

    a, b = fg.ones(2, 2), fg.arange(3.0)
    flat = _flatten_dense_tensors([a, b.t()])
    assert_close(flat, T([1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 2.0]))
    parts = _unflatten_dense_tensors(flat, [a, b])
    assert isinstance(parts, tuple) and parts[0]._base is flat
    assert_close(parts[1], b)
    assert _flatten_dense_tensors([a]).shape == (4,) and _unflatten_dense_tensors(flat, []) == ()
