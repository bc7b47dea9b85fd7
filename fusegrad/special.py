"""``fusegrad.special``: PyTorch's ``torch.special`` names for the special
functions, each one of fusegrad's ops."""

import math

from .eager import ops as _ops
from .eager.ops import (
    digamma,
    erf,
    erfc,
    erfinv,
    exp2,
    expm1,
    log1p,
    log_softmax,
    logit,
    logsumexp,
    polygamma,
    round,
    sinc,
    softmax,
    xlogy,
)
from .eager.ops import (
    lgamma as gammaln,
)
from .eager.ops import (
    mvlgamma as multigammaln,
)
from .eager.ops import (
    sigmoid as expit,
)

psi = digamma

__all__ = [
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfinv",
    "exp2",
    "expit",
    "expm1",
    "gammaln",
    "log1p",
    "log_softmax",
    "logit",
    "logsumexp",
    "multigammaln",
    "ndtr",
    "polygamma",
    "psi",
    "round",
    "sinc",
    "softmax",
    "xlog1py",
    "xlogy",
]


def entr(input):
    """-x log x elementwise: 0 at 0, -inf below it."""
    x = _ops._to_float(_ops.as_tensor_arg(input))
    return _ops.where(x < 0, -math.inf, 0.0 - xlogy(x, x))  # 0 - 0 is +0, as PyTorch gives


def xlog1py(input, other):
    """x * log1p(y), 0 where x is 0 (unless y is NaN)."""
    x, y = _ops._floating_pair(input, other)
    defined_as_zero = (x == 0.0) & ((y <= -1.0) | (y == math.inf))
    return x * log1p(_ops.where(defined_as_zero, 0.0, y))


def ndtr(input):
    """The standard normal distribution's cumulative probability."""
    x = _ops._to_float(_ops.as_tensor_arg(input))
    return erfc(x * -math.sqrt(0.5)) * 0.5
