"""Which dtype an op runs in under autocast: PyTorch's CPU policy, a table
from op name to policy (``CPU_POLICY``, copied from the AutocastCPU lists of
PyTorch's aten/src/ATen/autocast_mode.cpp), applied by one wrapper
(``autocasts``). ``public`` (ops/registry.py) wraps every op registered
under a name in the table; the functions of torch.linalg and
torch.nn.functional that have a policy are decorated where they are defined.

With autocast on for the CPU, an op's floating tensor arguments (float64
ones excepted, as in PyTorch) are cast before it runs:

- ``LOWER_PRECISION_FP`` (products, convolutions, linear, attention): to
  autocast's dtype, bfloat16 by default, so the result is that dtype;
- ``FP32`` (losses, linear algebra, prod, reflection and replication
  padding, pooling over 3 dimensions, ...): to float32;
- ``PROMOTE`` (cat, stack, index_copy): to the widest dtype among them.

Every other op runs in its arguments' dtypes. The casts are ordinary
differentiable conversions, so gradients reach float32 weights in float32,
and a trace records them like any op. An op runs with autocast off inside,
as PyTorch's autocast kernels do, so the ops it is made of are not cast
again; its in-place and ``out=`` variants, which PyTorch's policy does not
name, run with autocast off too (registry.py).
"""

from __future__ import annotations

import functools
import weakref

from ..ir import dtypes
from ..ir import primitives as P
from . import autocast_state
from .grad_mode import is_grad_enabled
from .tensor import Tensor, recording

LOWER_PRECISION_FP = "lower_precision_fp"
FP32 = "fp32"
PROMOTE = "promote"

CPU_POLICY = {
    **dict.fromkeys(
        (
            "conv1d",
            "conv2d",
            "conv3d",
            "bmm",
            "mm",
            "linalg_vecdot",
            "baddbmm",
            "addmm",
            "_addmm_activation",
            "addbmm",
            "linear",
            "_convolution",
            "matmul",
            "conv_tbc",
            "mkldnn_rnn_layer",
            "conv_transpose1d",
            "conv_transpose2d",
            "conv_transpose3d",
            "prelu",
            "scaled_dot_product_attention",
            "_native_multi_head_attention",
        ),
        LOWER_PRECISION_FP,
    ),
    **dict.fromkeys(
        (
            "avg_pool3d",
            "binary_cross_entropy",
            "grid_sampler",
            "polar",
            "prod",
            "quantile",
            "nanquantile",
            "stft",
            "cdist",
            "grid_sampler_2d",
            "_grid_sampler_2d_cpu_fallback",
            "grid_sampler_3d",
            "trace",
            "view_as_complex",
            "cholesky",
            "cholesky_inverse",
            "cholesky_solve",
            "inverse",
            "lu_solve",
            "orgqr",
            "ormqr",
            "pinverse",
            "max_pool3d",
            "max_unpool2d",
            "max_unpool3d",
            "adaptive_avg_pool3d",
            "reflection_pad1d",
            "reflection_pad2d",
            "replication_pad1d",
            "replication_pad2d",
            "replication_pad3d",
            "mse_loss",
            "cosine_embedding_loss",
            "nll_loss",
            "nll_loss2d",
            "hinge_embedding_loss",
            "poisson_nll_loss",
            "smooth_l1_loss",
            "cross_entropy_loss",
            "l1_loss",
            "huber_loss",
            "margin_ranking_loss",
            "soft_margin_loss",
            "triplet_margin_loss",
            "multi_margin_loss",
            "ctc_loss",
            "kl_div",
            "multilabel_margin_loss",
            "binary_cross_entropy_with_logits",
            "fft_fft",
            "fft_ifft",
            "fft_fft2",
            "fft_ifft2",
            "fft_fftn",
            "fft_ifftn",
            "fft_rfft",
            "fft_irfft",
            "fft_rfft2",
            "fft_irfft2",
            "fft_rfftn",
            "fft_irfftn",
            "fft_hfft",
            "fft_ihfft",
            "linalg_cond",
            "linalg_matrix_rank",
            "linalg_solve",
            "linalg_cholesky",
            "linalg_svdvals",
            "linalg_eigvals",
            "linalg_eigvalsh",
            "linalg_inv",
            "linalg_householder_product",
            "linalg_tensorinv",
            "linalg_tensorsolve",
            "fake_quantize_per_tensor_affine",
            "geqrf",
            "_lu_with_info",
            "qr",
            "svd",
            "triangular_solve",
            "fractional_max_pool2d",
            "fractional_max_pool3d",
            "adaptive_max_pool3d",
            "multilabel_margin_loss_forward",
            "linalg_qr",
            "linalg_cholesky_ex",
            "linalg_svd",
            "linalg_eig",
            "linalg_eigh",
            "linalg_lstsq",
            "linalg_inv_ex",
        ),
        FP32,
    ),
    **dict.fromkeys(("stack", "cat", "index_copy"), PROMOTE),
}


def autocasts(name: str):
    """Decorator: the op runs under the CPU policy of PyTorch's op ``name``
    (a key of ``CPU_POLICY``) while autocast is on for the CPU."""
    policy = CPU_POLICY[name]

    def decorate(op):
        @functools.wraps(op)
        def op_under_autocast(*args, **kwargs):
            lower = autocast_state.cpu_dtype()
            if lower is None:
                return op(*args, **kwargs)
            if policy is PROMOTE:
                target = _widest(args, kwargs, lower)
            else:
                target = lower if policy is LOWER_PRECISION_FP else dtypes.float32
            args = [_cast_argument(a, target, lower) for a in args]
            kwargs = {k: _cast_argument(v, target, lower) for k, v in kwargs.items()}
            with autocast_state.suspended():
                return op(*args, **kwargs)

        return op_under_autocast

    return decorate


def _eligible(value) -> bool:
    """Whether autocast casts this argument: a floating tensor, not float64."""
    return (
        isinstance(value, Tensor)
        and value._dtype.is_floating_point
        and value._dtype is not dtypes.float64
    )


def _cast_argument(value, target, lower):
    if type(value) in (list, tuple):  # cat's and stack's tensors
        return type(value)(_cast_argument(v, target, lower) for v in value)
    if not _eligible(value) or value._dtype is target:
        return value
    if target is lower and value._dtype is dtypes.float32:
        return cached_cast(value, target)
    return P.convert(value, dtype=target)


def _widest(args, kwargs, lower):
    """The promote policy's dtype (at::autocast::prioritize): float32 if any
    eligible tensor is float32, else autocast's dtype; another reduced dtype
    among them is an error, as in PyTorch."""
    widest = lower
    for value in (*args, *kwargs.values()):
        for t in value if type(value) in (list, tuple) else (value,):
            if not _eligible(t):
                continue
            if widest is dtypes.float32 or t._dtype is dtypes.float32:
                widest = dtypes.float32
            elif t._dtype is not lower:
                raise RuntimeError("Unexpected floating ScalarType in at::autocast::prioritize")
    return widest


def cached_cast(weight: Tensor, dtype) -> Tensor:
    """``weight`` cast to ``dtype``, the cast made once per autocast region
    for a float32 leaf that requires grad (a weight), as PyTorch's cache does:
    its uses share one conversion, so their gradients meet in ``dtype`` before
    reaching the weight. Unlike PyTorch's, a cast made before the weight
    changed in place, or under another grad mode, is made again rather than
    reused stale or without a gradient; and a trace keeps casts of its own,
    so eager tensors and traced ones never mix."""
    if not (
        autocast_state.is_cache_enabled()
        and weight._requires_grad
        and weight.grad_fn is None
        and weight._base is None
    ):
        return P.convert(weight, dtype=dtype)
    cache = autocast_state.weight_casts()
    key = (id(weight), recording.trace)
    made_as = (weight._version_counter[0], is_grad_enabled())
    entry = cache.get(key)
    if entry is not None and entry[0]() is weight and entry[2] == made_as:
        return entry[1]
    cast = P.convert(weight, dtype=dtype)
    cache[key] = (weakref.ref(weight), cast, made_as)
    return cast
