"""CPU-only device plumbing: devices parse and print as PyTorch's, the CPU works
everywhere a device is named, and any other device is a clear error."""

import pytest

import fusegrad as fg


@pytest.mark.parametrize(
    ("args", "type_", "index", "text", "representation"),
    [
        (("cpu",), "cpu", None, "cpu", "device(type='cpu')"),
        (("cpu", 0), "cpu", 0, "cpu:0", "device(type='cpu', index=0)"),
        (("cuda:1",), "cuda", 1, "cuda:1", "device(type='cuda', index=1)"),
        (("cuda", 2), "cuda", 2, "cuda:2", "device(type='cuda', index=2)"),
        ((0,), "cuda", 0, "cuda:0", "device(type='cuda', index=0)"),
        (("mps",), "mps", None, "mps", "device(type='mps')"),
    ],
)
def test_devices_parse_and_print_as_pytorchs(args, type_, index, text, representation):
    d = fg.device(*args)
    assert (d.type, d.index, str(d), repr(d)) == (type_, index, text, representation)
    assert d == fg.device(*args) and hash(d) == hash(fg.device(*args))


def test_device_errors_and_equality():
    assert fg.device("cuda") != fg.device("cuda:0")
    assert fg.device("cpu") != "cpu"
    with pytest.raises(RuntimeError, match="device type at start of device string: gpu"):
        fg.device("gpu")
    with pytest.raises(RuntimeError, match="must not be negative"):
        fg.device("cuda", -1)
    with pytest.raises(AttributeError):
        fg.device("cpu").type = "cuda"


def test_tensors_are_on_the_cpu_and_move_only_there():
    t = fg.ones(2)
    assert t.device == fg.device("cpu") and not t.is_cuda and t.is_cpu
    assert t.to("cpu") is t and t.to(fg.device("cpu")) is t and t.cpu() is t
    moved = t.to(fg.device("cpu"), fg.float64)
    assert moved.dtype == fg.float64
    assert t.to(device="cpu", dtype=fg.int64).dtype == fg.int64
    for call in (lambda: t.to("cuda"), lambda: t.cuda(), lambda: t.to(0), lambda: t.to("cuda:0")):
        with pytest.raises(RuntimeError, match="not compiled with CUDA enabled"):
            call()
    with pytest.raises(RuntimeError, match="CPU only"):
        t.to("mps")


@pytest.mark.parametrize(
    "make",
    [
        lambda device: fg.zeros(2, device=device),
        lambda device: fg.ones(2, device=device),
        lambda device: fg.full((2,), 1.0, device=device),
        lambda device: fg.tensor([1.0], device=device),
        lambda device: fg.arange(3, device=device),
        lambda device: fg.eye(2, device=device),
        lambda device: fg.zeros_like(fg.ones(2), device=device),
        lambda device: fg.randn(2, device=device),
    ],
)
def test_creation_takes_device(make):
    assert make("cpu").device.type == "cpu"
    assert make(fg.device("cpu")).device.type == "cpu"
    with pytest.raises(RuntimeError, match="CUDA"):
        make("cuda")


def test_cuda_and_backends_report_nothing_available():
    assert not fg.cuda.is_available() and fg.cuda.device_count() == 0
    fg.cuda.manual_seed(0)
    fg.cuda.manual_seed_all(0)
    assert not fg.backends.mps.is_available() and not fg.backends.cudnn.is_available()
    try:  # scripts set these whatever the machine; they are global settings
        fg.backends.cudnn.benchmark = True
        fg.backends.cuda.matmul.allow_tf32 = True
    finally:
        fg.backends.cudnn.benchmark = False
        fg.backends.cuda.matmul.allow_tf32 = False
    device = fg.device("cuda" if fg.cuda.is_available() else "cpu")
    assert fg.ones(1).to(device).device == device


def test_default_device():
    fg.set_default_device("cpu")
    fg.set_default_device(None)
    assert fg.get_default_device() == fg.device("cpu")
    with pytest.raises(RuntimeError, match="CUDA"):
        fg.set_default_device("cuda")
