"""torch.cuda's probes answer as a PyTorch build without CUDA answers them."""

import pytest

import fusegrad as fg

NOT_COMPILED = "Torch not compiled with CUDA enabled"

RAISES = [
    (lambda: fg.cuda.current_device(), AssertionError, NOT_COMPILED),
    (lambda: fg.cuda.get_device_name(), AssertionError, NOT_COMPILED),
    (lambda: fg.cuda.get_device_name(0), AssertionError, NOT_COMPILED),
    (lambda: fg.cuda.get_device_properties(0), AssertionError, NOT_COMPILED),
    (lambda: fg.cuda.get_device_capability(), AssertionError, NOT_COMPILED),
    (lambda: fg.cuda.current_stream(), AssertionError, NOT_COMPILED),
    (lambda: fg.cuda.mem_get_info(), AssertionError, NOT_COMPILED),
    (lambda: fg.cuda.set_device(0), AttributeError, "no attribute '_cuda_setDevice'"),
    (lambda: fg.cuda.set_device("cuda:1"), AttributeError, "'_cuda_setDevice'"),
    (lambda: fg.cuda.set_device("cpu"), ValueError, "Expected a cuda device, but got: cpu"),
    (lambda: fg.cuda.set_device("cuda"), ValueError, "with a specified index or an integer"),
    (lambda: fg.cuda.set_device(None), ValueError, "but got:None"),
    (lambda: fg.cuda.reset_peak_memory_stats(), AttributeError, "_cuda_resetPeakMemoryStats"),
    (lambda: fg.cuda.reset_peak_memory_stats("cpu"), ValueError, "Expected a cuda device"),
    (lambda: fg.cuda.Stream(), RuntimeError, "torch.cuda.Stream requires CUDA support"),
    (lambda: fg.cuda.Event(enable_timing=True), RuntimeError, "dummy base class Event"),
]


@pytest.mark.parametrize("call, error, message", RAISES)
def test_probes_that_need_cuda_raise_pytorchs_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize(
    "counter",
    ["memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved"],
)
def test_memory_counters_are_zero(counter):
    assert getattr(fg.cuda, counter)() == 0
    assert getattr(fg.cuda, counter)(0) == 0
    assert getattr(fg.cuda.memory, counter)("cuda:0") == 0


def test_no_ops_and_answers():
    assert fg.cuda.empty_cache() is None
    assert fg.cuda.memory_stats() == {}
    fg.cuda.set_device(-1)  # PyTorch's "no device"
    assert not fg.cuda.is_bf16_supported() and fg.cuda.get_arch_list() == []


def test_deprecated_names_warn_then_answer():
    with pytest.warns(FutureWarning, match="renamed to torch.cuda.memory_reserved"):
        assert fg.cuda.memory_cached() == 0
    with pytest.warns(FutureWarning, match="resets /all/ peak memory stats"):
        with pytest.raises(AttributeError, match="_cuda_resetPeakMemoryStats"):
            fg.cuda.reset_max_memory_allocated()


def test_device_context():
    with fg.cuda.device(-1):  # a negative index, as code without a GPU passes
        pass
    with fg.cuda.device("cuda"):  # no index and no current device: nothing to change
        pass
    context = fg.cuda.device("cuda:0")
    assert context.idx == 0
    with pytest.raises(RuntimeError, match="PyTorch was compiled without CUDA support"):
        with context:
            pass
    with pytest.raises(ValueError, match="Expected a cuda device, but got: cpu"):
        fg.cuda.device("cpu")
    assert fg.cuda.devices.device_index(fg.cuda.device(3)) == 3
