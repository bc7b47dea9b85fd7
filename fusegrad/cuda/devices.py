"""``torch.cuda``'s device questions, answered as a PyTorch build without CUDA
answers them: what needs CUDA initialised raises ``_lazy_init``'s
AssertionError, what calls into the missing CUDA bindings raises the
AttributeError a CPU-only PyTorch raises, and a negative index (PyTorch's
"no device") is a no-op."""

from __future__ import annotations

from ..eager.devices import device as _device


def not_compiled() -> AssertionError:
    """The error of PyTorch's ``torch.cuda._lazy_init`` on a build without CUDA."""
    return AssertionError("Torch not compiled with CUDA enabled")


def missing_binding(name: str) -> AttributeError:
    """The error of a CPU-only PyTorch calling a CUDA binding it was built without."""
    return AttributeError(f"module 'torch._C' has no attribute '{name}'")


def device_index(where, optional: bool = False) -> int | None:
    """PyTorch's ``torch.cuda._utils._get_device_index``: an int as it is, a
    CUDA device's index; without CUDA there is no current device, so an
    optional index left unsaid stays None."""
    if isinstance(where, int) and not isinstance(where, bool):
        return where
    if isinstance(where, device):
        return where.idx
    if isinstance(where, str):
        where = _device(where)
    index = None
    if isinstance(where, _device):
        if where.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {where}")
        index = where.index
    if index is None and not optional:
        raise ValueError(
            f"Expected a torch.device with a specified index or an integer, but got:{where}"
        )
    return index


def exchange_device(index: int | None) -> int:
    """PyTorch's ``torch.cuda._exchange_device`` without CUDA: leaving "no
    device" as it is, and refusing any device. An index left unsaid (PyTorch's
    current device, of which there is none here) is "no device" too, where
    PyTorch's fallback fails comparing None with 0."""
    if index is None or index < 0:
        return -1
    raise RuntimeError("PyTorch was compiled without CUDA support")


class device:
    """``with torch.cuda.device(0):``, the context that makes a CUDA device
    current; entering one that names a device fails, as on a CPU-only PyTorch."""

    def __init__(self, device):
        self.idx = device_index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = exchange_device(self.idx)

    def __exit__(self, exc_type, exc_value, traceback):
        self.idx = exchange_device(self.prev_idx)
        return False


def set_device(device) -> None:
    index = device_index(device)
    if index >= 0:
        raise missing_binding("_cuda_setDevice")


def synchronize(device=None) -> None:
    """A no-op: there are no CUDA kernels to wait for."""


def current_device() -> int:
    raise not_compiled()


def get_device_properties(device=None):
    raise not_compiled()


def get_device_name(device=None) -> str:
    return get_device_properties(device).name


def get_device_capability(device=None) -> tuple:
    properties = get_device_properties(device)
    return properties.major, properties.minor


def current_stream(device=None):
    raise not_compiled()


def default_stream(device=None):
    raise not_compiled()


def mem_get_info(device=None) -> tuple:
    if device is not None:
        device_index(device)
    raise not_compiled()


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False


def get_arch_list() -> list:
    return []


def _unbuilt_class(name: str) -> type:
    """A CUDA class of a build without CUDA, whose base PyTorch replaces by a
    dummy: the name exists (for ``isinstance`` and annotations), making one fails."""

    def refuse(cls, *args, **kwargs):
        raise RuntimeError(f"Tried to instantiate dummy base class {cls.__name__}")

    return type(name, (), {"__new__": refuse, "__module__": __name__.rpartition(".")[0]})


class Stream:
    """A CUDA stream: the class exists (for ``isinstance`` and annotations),
    making one fails as on a CPU-only PyTorch."""

    def __new__(cls, *args, **kwargs):
        raise RuntimeError("torch.cuda.Stream requires CUDA support")


Event = _unbuilt_class("Event")


class StreamContext:
    """``with torch.cuda.stream(s):``: makes ``s`` current, which without a
    CUDA device (PyTorch's index -1) it leaves undone, as PyTorch does."""

    def __init__(self, stream):
        self.stream = stream
        self.idx = -1

    def __enter__(self):
        return None

    def __exit__(self, exc_type, exc_value, traceback):
        return False


def stream(stream) -> StreamContext:
    return StreamContext(stream)


class OutOfMemoryError(RuntimeError):
    """PyTorch's error when a device runs out of memory; fusegrad never
    raises it, but scripts catch it by name."""
