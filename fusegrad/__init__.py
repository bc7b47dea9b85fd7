"""fusegrad: reverse-mode automatic differentiation in the PyTorch autograd style.

>>> import fusegrad as torch
>>> x = torch.ones(2, 2, requires_grad=True)
>>> out = ((x + 2) * (x + 2) * 3).mean()
>>> out.backward()
>>> x.grad
tensor([[4.5000, 4.5000],
        [4.5000, 4.5000]])
"""

import math as _math
import warnings as _warnings

from . import (
    __config__,
    _dynamo,
    _inductor,
    _six,
    _utils,
    accelerator,
    amp,
    ao,
    autograd,
    backends,
    compiler,
    cpu,
    cuda,
    distributed,
    distributions,
    fft,
    func,
    futures,
    fx,
    hub,
    jit,
    linalg,
    mps,
    multiprocessing,
    nested,
    nn,
    onnx,
    optim,
    profiler,
    quantization,
    random,
    sparse,
    special,
    testing,
    utils,
    xpu,
)
from . import eager as _eager
from ._operator_registry import ops
from ._settings import (
    are_deterministic_algorithms_enabled,
    get_default_dtype,
    get_deterministic_debug_mode,
    get_float32_matmul_precision,
    get_num_interop_threads,
    get_num_threads,
    is_deterministic_algorithms_warn_only_enabled,
    set_default_dtype,
    set_default_tensor_type,
    set_deterministic_debug_mode,
    set_float32_matmul_precision,
    set_num_interop_threads,
    set_num_threads,
    use_deterministic_algorithms,
)
from .amp.autocast_mode import (
    autocast,
    autocast_decrement_nesting,
    autocast_increment_nesting,
    clear_autocast_cache,
    get_autocast_cpu_dtype,
    get_autocast_dtype,
    get_autocast_gpu_dtype,
    is_autocast_cache_enabled,
    is_autocast_cpu_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
)
from .autograd.transforms import grad, value_and_grad
from .compiler import compile
from .cuda import OutOfMemoryError

# torch.cuda.amp, which cuda's __init__ cannot import: amp asks cuda whether CUDA is available
from .cuda import amp as _cuda_amp
from .eager.complex_functions import (
    adjoint,
    conj,
    imag,
    is_conj,
    polar,
    view_as_complex,
    view_as_real,
)
from .eager.complex_functions import complex_of_parts as complex
from .eager.creation import (
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    hamming_window,
    hann_window,
    linspace,
    logspace,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
    zeros_like,
)
from .eager.creation import (
    range_ as range,
)
from .eager.devices import device, get_default_device, set_default_device
from .eager.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from .eager.memory_format import (
    channels_last,
    channels_last_3d,
    contiguous_format,
    memory_format,
    preserve_format,
)
from .eager.printing import get_printoptions, set_printoptions
from .eager.random import (
    Generator,
    bernoulli,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    multinomial,
    normal,
    seed,
    set_rng_state,
)
from .eager.sparse import layout, sparse_coo, strided
from .eager.tensor import Size, Tensor
from .eager.tensor_types import (
    BFloat16Tensor,
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
)
from .fft import istft, stft
from .func import vmap
from .ir.dtypes import (
    bfloat16,
    complex64,
    complex128,
    finfo,
    float16,
    float32,
    float64,
    iinfo,
    int8,
    int16,
    int32,
    int64,
    qint8,
    qint32,
    quint8,
    uint8,
)
from .ir.dtypes import bool_ as bool
from .nested import jagged
from .serialization import load, save
from .sparse import sparse_coo_tensor, spmm
from .tracer.trace import TracingError

# torch.utils.checkpoint, there after `import torch` as in PyTorch; utils' __init__ cannot
# import it: it needs autograd, which needs utils._pytree
from .utils import checkpoint as _utils_checkpoint

globals().update(_eager.ops.FUNCTIONS)  # every public op, as listed where it is defined
# those with a complex implementation, taking complex tensors there
globals().update(_eager.complex_functions.functions_taking_complex(_eager.ops.FUNCTIONS))
conj_physical = conj

float = float32
double = float64
cfloat = complex64
cdouble = complex128
half = float16
long = int64
int = int32
short = int16
dtype = type(float32)

inf, nan, pi, e = _math.inf, _math.nan, _math.pi, _math.e

# numpy's floating-point warnings (log(0), 0/0) would be noise: PyTorch gives
# inf and nan silently, and so do we.
_warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"fusegrad\.")

from .version import __version__
