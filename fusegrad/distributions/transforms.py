"""``fusegrad.distributions.transforms``: invertible maps that carry a
distribution onto another (``TransformedDistribution``), each with the log
of its Jacobian's absolute determinant. A transform made with
``cache_size=1`` remembers its last pair (x, y), so the inverse of a value
it produced is exact: SAC's log-probability of ``tanh(u)`` at +-1 reads
``u`` back rather than computing atanh(+-1)."""

from __future__ import annotations

import math

from ..eager import creation, ops
from ..ir import dtypes
from ..nn import functional as F
from . import constraints
from .distribution import _as_parameter

__all__ = [
    "AbsTransform",
    "AffineTransform",
    "ComposeTransform",
    "ExpTransform",
    "IndependentTransform",
    "PowerTransform",
    "SigmoidTransform",
    "SoftmaxTransform",
    "SoftplusTransform",
    "StickBreakingTransform",
    "TanhTransform",
    "Transform",
    "identity_transform",
]


class Transform:
    domain = constraints.real
    codomain = constraints.real
    bijective = True
    sign = 1

    def __init__(self, cache_size=0):
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached = None

    @property
    def event_dim(self):
        return self.domain.event_dim

    @property
    def inv(self):
        return _InverseTransform(self)

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else type(self)(cache_size=cache_size)

    def __call__(self, x):
        if self._cached is not None and self._cached[0] is x:
            return self._cached[1]
        y = self._call(x)
        if self._cache_size:
            self._cached = (x, y)
        return y

    def _inv_call(self, y):
        if self._cached is not None and self._cached[1] is y:
            return self._cached[0]
        x = self._inverse(y)
        if self._cache_size:
            self._cached = (x, y)
        return x

    def __eq__(self, other):
        # A transform without parameters equals any other of its type.
        return type(self) is type(other)

    __hash__ = object.__hash__

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape

    def __repr__(self):
        return f"{type(self).__name__}()"


class _InverseTransform(Transform):
    def __init__(self, transform):
        super().__init__()
        self._inv = transform

    domain = property(lambda self: self._inv.codomain)
    codomain = property(lambda self: self._inv.domain)
    bijective = property(lambda self: self._inv.bijective)
    sign = property(lambda self: self._inv.sign)
    inv = property(lambda self: self._inv)

    def with_cache(self, cache_size=1):
        return self._inv.with_cache(cache_size).inv

    def __call__(self, x):
        return self._inv._inv_call(x)

    def __eq__(self, other):
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    __hash__ = object.__hash__

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def __repr__(self):
        return f"_InverseTransform({self._inv!r})"


class ComposeTransform(Transform):
    """``parts`` applied in order: the first to x, the next to its result."""

    def __init__(self, parts, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.parts = [part.with_cache(cache_size) if cache_size else part for part in parts]

    @property
    def domain(self):
        if not self.parts:
            return constraints.real
        event_dim = max(self._event_dims())
        first = self.parts[0].domain
        extra = event_dim - first.event_dim
        return constraints.independent(first, extra) if extra > 0 else first

    @property
    def codomain(self):
        if not self.parts:
            return constraints.real
        event_dim = max(self._event_dims())
        last = self.parts[-1].codomain
        extra = event_dim - last.event_dim
        return constraints.independent(last, extra) if extra > 0 else last

    def _event_dims(self):
        return [max(part.domain.event_dim, part.codomain.event_dim) for part in self.parts]

    @property
    def sign(self):
        return math.prod(part.sign for part in self.parts)

    @property
    def inv(self):
        return ComposeTransform([part.inv for part in reversed(self.parts)])

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else ComposeTransform(self.parts, cache_size)

    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    def forward_shape(self, shape):
        for part in self.parts:
            shape = part.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return shape

    __hash__ = object.__hash__

    def _call(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def _inverse(self, y):
        for part in reversed(self.parts):
            y = part.inv(y)
        return y

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return creation.zeros_like(x)
        event_dim = self.domain.event_dim
        total = 0.0
        for part in self.parts:
            following = part(x)
            jacobian = part.log_abs_det_jacobian(x, following)
            total = total + _sum_rightmost(jacobian, event_dim - part.domain.event_dim)
            event_dim += part.codomain.event_dim - part.domain.event_dim
            x = following
        return total

    def __repr__(self):
        inner = ",\n    ".join(repr(part) for part in self.parts)
        return f"ComposeTransform(\n    {inner}\n)"


class ExpTransform(Transform):
    codomain = constraints.positive

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class SigmoidTransform(Transform):
    codomain = constraints.unit_interval

    def _call(self, x):
        return _clamp_probs(ops.sigmoid(x))

    def _inverse(self, y):
        y = _clamp_probs(y)
        return y.log() - ops.log1p(-y)

    def log_abs_det_jacobian(self, x, y):
        return -F.softplus(-x) - F.softplus(x)


class TanhTransform(Transform):
    codomain = constraints.interval(-1.0, 1.0)

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return 0.5 * (ops.log1p(y) - ops.log1p(-y))

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2), written so large |x| neither cancels nor overflows.
        return 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))


class AffineTransform(Transform):
    """loc + scale * x, over events of ``event_dim`` dimensions."""

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.loc, self.scale, self._event_dim = loc, scale, event_dim

    @property
    def domain(self):
        if self._event_dim:
            return constraints.independent(constraints.real, self._event_dim)
        return constraints.real

    codomain = domain

    @property
    def sign(self):
        if isinstance(self.scale, (int, float)):
            return 1 if self.scale > 0 else -1 if self.scale < 0 else 0
        return self.scale.sign()

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self._event_dim, cache_size)

    def __eq__(self, other):
        return (
            isinstance(other, AffineTransform)
            and _same(self.loc, other.loc)
            and _same(self.scale, other.scale)
        )

    __hash__ = object.__hash__

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        scale = _as_parameter(self.scale, x).abs().log()
        result = scale.expand(ops.broadcast_shapes(tuple(x.shape), tuple(scale.shape)))
        return _sum_rightmost(result, self._event_dim)

    def __repr__(self):
        return "AffineTransform()"


class AbsTransform(Transform):
    """|x|: not invertible, its inverse the nonnegative root (as PyTorch's)."""

    codomain = constraints.positive
    bijective = False

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class PowerTransform(Transform):
    """x ** exponent on positive numbers."""

    domain = constraints.positive
    codomain = constraints.positive

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.exponent = exponent

    def with_cache(self, cache_size=1):
        return self if self._cache_size == cache_size else PowerTransform(self.exponent, cache_size)

    def __eq__(self, other):
        return isinstance(other, PowerTransform) and _same(self.exponent, other.exponent)

    __hash__ = object.__hash__

    @property
    def sign(self):
        if isinstance(self.exponent, (int, float)):
            return 1 if self.exponent > 0 else -1 if self.exponent < 0 else 0
        return self.exponent.sign()

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()


class SoftplusTransform(Transform):
    """log(1 + e^x)."""

    codomain = constraints.positive

    def _call(self, x):
        return F.softplus(x)

    def _inverse(self, y):
        return y + ops.log(-ops.expm1(-y))  # log(e^y - 1), without overflow

    def log_abs_det_jacobian(self, x, y):
        return -F.softplus(-x)


class SoftmaxTransform(Transform):
    """Onto the simplex by softmax over the last dimension: not invertible
    (shifting x leaves it), its inverse the logarithm."""

    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = False

    def _call(self, x):
        return x.softmax(-1)

    def _inverse(self, y):
        return y.log()


class StickBreakingTransform(Transform):
    """R^(K-1) onto the K-simplex, one sigmoid per piece broken off what is
    left of the stick; shifted by log(pieces left) so that x = 0 is the
    simplex's center."""

    domain = constraints.real_vector
    codomain = constraints.simplex

    @staticmethod
    def _log_pieces_left(size, like):
        # K-1, K-2, ..., 1 for K - 1 = size pieces
        return creation.arange(size, 0, -1, dtype=like.dtype).log()

    def _call(self, x):
        broken = ops.sigmoid(x - self._log_pieces_left(x.shape[-1], x))
        left = (1 - broken).cumprod(-1)
        ones = creation.ones_like(x[..., :1])
        return ops.cat([broken, ones], -1) * ops.cat([ones, left], -1)

    def _inverse(self, y):
        pieces = y[..., :-1]
        left = (1 - pieces.cumsum(-1)).clamp(min=dtypes.finfo(y.dtype).tiny)
        return pieces.log() - left.log() + self._log_pieces_left(pieces.shape[-1], y)

    def log_abs_det_jacobian(self, x, y):
        # Triangular: dy_k/dx_k = y_k (1 - z_k) for the k-th break z_k.
        shifted = x - self._log_pieces_left(x.shape[-1], x)
        return (F.logsigmoid(-shifted) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        return tuple(shape[:-1]) + (shape[-1] - 1,)


class IndependentTransform(Transform):
    """``base_transform`` with its last ``reinterpreted_batch_ndims`` batch
    dimensions read as one event: its Jacobian terms sum over them."""

    def __init__(self, base_transform, reinterpreted_batch_ndims, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(
            self.base_transform, self.reinterpreted_batch_ndims, cache_size=cache_size
        )

    def __eq__(self, other):
        return (
            isinstance(other, IndependentTransform)
            and self.base_transform == other.base_transform
            and self.reinterpreted_batch_ndims == other.reinterpreted_batch_ndims
        )

    __hash__ = object.__hash__

    domain = property(
        lambda self: constraints.independent(
            self.base_transform.domain, self.reinterpreted_batch_ndims
        )
    )
    codomain = property(
        lambda self: constraints.independent(
            self.base_transform.codomain, self.reinterpreted_batch_ndims
        )
    )
    bijective = property(lambda self: self.base_transform.bijective)
    sign = property(lambda self: self.base_transform.sign)

    def _call(self, x):
        return self.base_transform(x)

    def _inverse(self, y):
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        jacobian = self.base_transform.log_abs_det_jacobian(x, y)
        return _sum_rightmost(jacobian, self.reinterpreted_batch_ndims)

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)

    def __repr__(self):
        return f"IndependentTransform({self.base_transform!r}, {self.reinterpreted_batch_ndims})"


identity_transform = ComposeTransform([])


def _same(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return bool(ops.all(_as_parameter(a) == _as_parameter(b)))


def _sum_rightmost(value, dims):
    return value.sum(tuple(range(-dims, 0))) if dims > 0 else value


def _clamp_probs(probs):
    eps = dtypes.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)
