"""``fusegrad.cuda``: there is no CUDA device, as in a CPU-only PyTorch build.

Scripts that ask (``device = "cuda" if torch.cuda.is_available() else "cpu"``)
choose the CPU; seeding CUDA is silently ignored, as PyTorch ignores it
without CUDA.
"""

from ..eager.tensor_types import cuda_tensor_types
from . import memory
from .devices import (
    Event,
    OutOfMemoryError,
    Stream,
    StreamContext,
    current_device,
    current_stream,
    default_stream,
    device,
    get_arch_list,
    get_device_capability,
    get_device_name,
    get_device_properties,
    is_bf16_supported,
    mem_get_info,
    set_device,
    stream,
    synchronize,
)
from .memory import (
    empty_cache,
    max_memory_allocated,
    max_memory_cached,
    max_memory_reserved,
    memory_allocated,
    memory_cached,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    reset_peak_memory_stats,
)


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def is_initialized() -> bool:
    return False


def manual_seed(seed: int) -> None:
    """Ignored: there is no CUDA generator to seed."""


def manual_seed_all(seed: int) -> None:
    """Ignored: there is no CUDA generator to seed."""


# cuda.FloatTensor and its kin, which a CPU script may name in a branch it
# does not take: no tensor is one, and making one raises PyTorch's error.
_TENSOR_TYPES = cuda_tensor_types()
FloatTensor = _TENSOR_TYPES["FloatTensor"]
DoubleTensor = _TENSOR_TYPES["DoubleTensor"]
HalfTensor = _TENSOR_TYPES["HalfTensor"]
BFloat16Tensor = _TENSOR_TYPES["BFloat16Tensor"]
LongTensor = _TENSOR_TYPES["LongTensor"]
IntTensor = _TENSOR_TYPES["IntTensor"]
ShortTensor = _TENSOR_TYPES["ShortTensor"]
CharTensor = _TENSOR_TYPES["CharTensor"]
ByteTensor = _TENSOR_TYPES["ByteTensor"]
BoolTensor = _TENSOR_TYPES["BoolTensor"]
