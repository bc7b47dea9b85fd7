"""``fusegrad.autograd``: the autograd API (backward, grad, custom Functions,
gradient checks and higher-order helpers)."""

from ..eager.autograd import backward, grad
from ..eager.creation import Variable
from ..eager.grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled
from . import forward_ad, functional, profiler
from .function import Function, FunctionCtx
from .gradcheck import GradcheckError, gradcheck, gradgradcheck

__all__ = [
    "Function",
    "FunctionCtx",
    "GradcheckError",
    "Variable",
    "backward",
    "enable_grad",
    "forward_ad",
    "functional",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "inference_mode",
    "no_grad",
    "profiler",
    "set_grad_enabled",
]
