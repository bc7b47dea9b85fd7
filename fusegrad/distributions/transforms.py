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
    "AffineTransform",
    "ComposeTransform",
    "ExpTransform",
    "SigmoidTransform",
    "TanhTransform",
    "Transform",
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
    sign = property(lambda self: self._inv.sign)
    inv = property(lambda self: self._inv)

    def __call__(self, x):
        return self._inv._inv_call(x)

    def __eq__(self, other):
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    __hash__ = object.__hash__

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


def _same(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return bool(ops.all(_as_parameter(a) == _as_parameter(b)))


def _sum_rightmost(value, dims):
    return value.sum(tuple(range(-dims, 0))) if dims > 0 else value


def _clamp_probs(probs):
    eps = dtypes.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)
