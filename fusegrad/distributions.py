"""``fusegrad.distributions``: the probability distributions PyTorch programs
use most (``Normal``, ``Bernoulli``, ``Categorical``, ``Uniform``,
``Exponential``, ``MultivariateNormal``, ``Independent``) and
``kl_divergence`` between them. Every density is written with fusegrad's
ops, so it differentiates (to any order) and compiles; ``rsample`` draws
reparameterized samples that carry gradients to the parameters, ``sample``
draws without them. Parameters are checked as PyTorch checks them
(``validate_args``), eagerly."""

from __future__ import annotations

import math

import numpy as np

from . import linalg
from .eager import creation, ops, random
from .eager.grad_mode import no_grad
from .eager.tensor import Size, Tensor, recording
from .ir import dtypes
from .nn import functional as F

__all__ = [
    "Bernoulli",
    "Categorical",
    "Distribution",
    "Exponential",
    "Independent",
    "MultivariateNormal",
    "Normal",
    "Uniform",
    "kl_divergence",
    "register_kl",
]

_HALF_LOG_TWO_PI = 0.5 * math.log(2 * math.pi)


def _as_parameter(value, like=None):
    if isinstance(value, Tensor):
        return value if value.is_floating_point() else value.to(dtypes.float32)
    dtype = like.dtype if isinstance(like, Tensor) else None
    return creation.tensor(float(value), dtype=dtype)


def _broadcast(*values):
    tensors = [v for v in values if isinstance(v, Tensor)]
    parameters = [_as_parameter(v, tensors[0] if tensors else None) for v in values]
    return ops.broadcast_tensors(*parameters)


class Distribution:
    """What every distribution has: its batch and event shapes, samples of a
    requested shape, and the checks of its parameters."""

    has_rsample = False

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape, self._event_shape = Size(batch_shape), Size(event_shape)
        self._validate_args = validate_args is not False
        if self._checks():
            self._validate()

    def _checks(self) -> bool:
        """Whether to check values now: eagerly, unless told not to (a
        compiled program's checks would be values at trace time only)."""
        return self._validate_args and recording.trace is None

    def _require(self, condition, name, value, constraint):
        if not bool(ops.all(condition)):
            raise ValueError(
                f"Expected parameter {name} ({type(value).__name__} of shape "
                f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                f"{constraint}, but found invalid values:\n{value}"
            )

    def _require_support(self, value, inside, support):
        if self._checks() and not bool(ops.all(inside)):
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) "
                f"to be within the support ({support}) of the distribution {self!r}, but found "
                f"invalid values:\n{value}"
            )

    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    def _validate(self):
        pass

    def _extended_shape(self, sample_shape=()):
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def sample(self, sample_shape=()):
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"{type(self).__name__} has no reparameterized samples")

    def sample_n(self, n):
        return self.sample((n,))

    @property
    def stddev(self):
        return self.variance.sqrt()

    def perplexity(self):
        return ops.exp(self.entropy())

    def __repr__(self):
        shown = ", ".join(
            f"{name}: {value.size() if value.numel() > 1 else value}"
            for name, value in self._shown_parameters()
        )
        return f"{type(self).__name__}({shown})"

    def _shown_parameters(self):
        return []


class Normal(Distribution):
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = _broadcast(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def _validate(self):
        self._require(self.scale > 0, "scale", self.scale, "GreaterThan(lower_bound=0.0)")

    def _shown_parameters(self):
        return [("loc", self.loc), ("scale", self.scale)]

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)
    stddev = property(lambda self: self.scale)
    variance = property(lambda self: self.scale**2)

    def rsample(self, sample_shape=()):
        noise = creation.randn(self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + noise * self.scale

    def log_prob(self, value):
        return (
            -((value - self.loc) ** 2) / (2 * self.variance) - self.scale.log() - _HALF_LOG_TWO_PI
        )

    def cdf(self, value):
        return 0.5 * (1 + ops.erf((value - self.loc) / (self.scale * math.sqrt(2))))

    def icdf(self, value):
        return self.loc + self.scale * ops.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + _HALF_LOG_TWO_PI + self.scale.log()


class Uniform(Distribution):
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = _broadcast(low, high)
        super().__init__(self.low.shape, validate_args=validate_args)

    def _validate(self):
        self._require(self.low < self.high, "low", self.low, "LessThan(upper_bound=high)")

    def _shown_parameters(self):
        return [("low", self.low), ("high", self.high)]

    mean = property(lambda self: (self.high + self.low) / 2)
    variance = property(lambda self: (self.high - self.low) ** 2 / 12)

    def rsample(self, sample_shape=()):
        unit = creation.rand(self._extended_shape(sample_shape), dtype=self.low.dtype)
        return self.low + unit * (self.high - self.low)

    def log_prob(self, value):
        inside = (self.low <= value) & (self.high > value)
        self._require_support(value, inside, "Interval(lower_bound=low, upper_bound=high)")
        return ops.where(inside, 0.0, -math.inf) - (self.high - self.low).log()

    def cdf(self, value):
        return ((value - self.low) / (self.high - self.low)).clamp(0, 1)

    def entropy(self):
        return (self.high - self.low).log()


class Exponential(Distribution):
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        (self.rate,) = _broadcast(rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    def _validate(self):
        self._require(self.rate > 0, "rate", self.rate, "GreaterThan(lower_bound=0.0)")

    def _shown_parameters(self):
        return [("rate", self.rate)]

    mean = property(lambda self: self.rate.reciprocal())
    mode = property(lambda self: creation.zeros_like(self.rate))
    variance = property(lambda self: self.rate.pow(-2))

    def rsample(self, sample_shape=()):
        unit = creation.rand(self._extended_shape(sample_shape), dtype=self.rate.dtype)
        return -ops.log1p(-unit) / self.rate  # 1 - unit is never 0

    def log_prob(self, value):
        self._require_support(value, value >= 0, "GreaterThanEq(lower_bound=0.0)")
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        return 1 - ops.exp(-self.rate * value)

    def entropy(self):
        return 1.0 - self.rate.log()


def _logits_and_probs(probs, logits, binary):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    if logits is not None:
        logits = _as_parameter(logits)
        if binary:
            return logits, ops.sigmoid(logits)
        logits = logits - logits.logsumexp(-1, keepdim=True)
        return logits, logits.exp()
    probs = _as_parameter(probs)
    if not binary:
        probs = probs / probs.sum(-1, keepdim=True)
    eps = dtypes.finfo(probs.dtype).eps
    clamped = probs.clamp(eps, 1 - eps)
    if binary:
        return clamped.log() - ops.log1p(-clamped), probs
    return clamped.log(), probs


class Bernoulli(Distribution):
    def __init__(self, probs=None, logits=None, validate_args=None):
        self._given_probs = probs is not None
        self.logits, self.probs = _logits_and_probs(probs, logits, binary=True)
        super().__init__(self.probs.shape, validate_args=validate_args)

    def _validate(self):
        if self._given_probs:
            inside = (self.probs >= 0) & (self.probs <= 1)
            self._require(inside, "probs", self.probs, "Interval(lower_bound=0.0, upper_bound=1.0)")

    def _shown_parameters(self):
        return [
            (
                "probs" if self._given_probs else "logits",
                self.probs if self._given_probs else self.logits,
            )
        ]

    mean = property(lambda self: self.probs)
    mode = property(lambda self: (self.probs >= 0.5).to(self.probs.dtype))
    variance = property(lambda self: self.probs * (1 - self.probs))

    def sample(self, sample_shape=()):
        with no_grad():
            return random.bernoulli(self.probs.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        value = _as_parameter(value, self.logits).to(self.logits.dtype)
        self._require_support(value, (value == 0) | (value == 1), "Boolean()")
        logits, value = ops.broadcast_tensors(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")


class Categorical(Distribution):
    def __init__(self, probs=None, logits=None, validate_args=None):
        self._given_probs = probs is not None
        self.logits, self.probs = _logits_and_probs(probs, logits, binary=False)
        if self.probs.ndim < 1:
            raise ValueError("`probs` parameter must be at least one-dimensional.")
        self._num_events = self.probs.shape[-1]
        super().__init__(self.probs.shape[:-1], validate_args=validate_args)

    def _validate(self):
        if self._given_probs:
            self._require(self.probs >= 0, "probs", self.probs, "Simplex()")

    def _shown_parameters(self):
        return [
            (
                "probs" if self._given_probs else "logits",
                self.probs if self._given_probs else self.logits,
            )
        ]

    param_shape = property(lambda self: self.probs.shape)
    mean = property(lambda self: creation.full_like(self.probs[..., 0], math.nan))
    mode = property(lambda self: self.probs.argmax(-1))
    variance = property(lambda self: creation.full_like(self.probs[..., 0], math.nan))

    def sample(self, sample_shape=()):
        sample_shape = Size(sample_shape)
        count = int(np.prod(sample_shape)) if len(sample_shape) else 1
        with no_grad():
            rows = self.probs.reshape(-1, self._num_events)
            drawn = random.multinomial(rows, count, True).T  # (count, batch)
        return drawn.reshape(self._extended_shape(sample_shape))

    def log_prob(self, value):
        inside = (value >= 0) & (value < self._num_events) & (value == value.round())
        self._require_support(
            value, inside, f"IntegerInterval(lower_bound=0, upper_bound={self._num_events - 1})"
        )
        value = value.long().unsqueeze(-1)
        value, logits = ops.broadcast_tensors(value, self.logits)
        return logits.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        smallest = dtypes.finfo(self.logits.dtype).min
        return -(self.logits.clamp(min=smallest) * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = creation.arange(self._num_events).reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values


class MultivariateNormal(Distribution):
    """A normal distribution over vectors, given one of its covariance matrix,
    its precision matrix or the lower Cholesky factor of the covariance."""

    has_rsample = True

    def __init__(
        self,
        loc,
        covariance_matrix=None,
        precision_matrix=None,
        scale_tril=None,
        validate_args=None,
    ):
        given = [m is not None for m in (covariance_matrix, precision_matrix, scale_tril)]
        if sum(given) != 1:
            raise ValueError(
                "Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                "specified."
            )
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = linalg.cholesky(linalg.inv(precision_matrix))
        matrix = self._unbroadcasted_scale_tril
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        batch = ops.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1]))
        self.loc = loc.expand(tuple(batch) + (loc.shape[-1],))
        self.scale_tril = matrix.expand(tuple(batch) + tuple(matrix.shape[-2:]))
        super().__init__(batch, (loc.shape[-1],), validate_args=validate_args)

    def _shown_parameters(self):
        return [("loc", self.loc), ("scale_tril", self.scale_tril)]

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)

    @property
    def covariance_matrix(self):
        return self.scale_tril @ self.scale_tril.mT

    @property
    def precision_matrix(self):
        return linalg.inv(self.covariance_matrix)

    @property
    def variance(self):
        return (self.scale_tril**2).sum(-1)

    def rsample(self, sample_shape=()):
        noise = creation.randn(self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + (self.scale_tril @ noise.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return self.scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        difference = value - self.loc
        whitened = linalg.solve(
            self.scale_tril.expand(difference.shape + difference.shape[-1:]), difference
        )
        mahalanobis = (whitened**2).sum(-1)
        size = self._event_shape[0]
        return -0.5 * (size * math.log(2 * math.pi) + mahalanobis) - self._half_log_det()

    def entropy(self):
        size = self._event_shape[0]
        return 0.5 * size * (1.0 + math.log(2 * math.pi)) + self._half_log_det()


class Independent(Distribution):
    """A distribution whose last ``reinterpreted_batch_ndims`` batch
    dimensions are read as one event: its densities sum over them."""

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        batch = tuple(base_distribution.batch_shape)
        if reinterpreted_batch_ndims > len(batch):
            raise ValueError(
                "Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), "
                f"actual {reinterpreted_batch_ndims} vs {len(batch)}"
            )
        self.base_dist, self.reinterpreted_batch_ndims = (
            base_distribution,
            reinterpreted_batch_ndims,
        )
        split = len(batch) - reinterpreted_batch_ndims
        event = batch[split:] + tuple(base_distribution.event_shape)
        super().__init__(batch[:split], event, validate_args=False)

    has_rsample = property(lambda self: self.base_dist.has_rsample)
    mean = property(lambda self: self.base_dist.mean)
    mode = property(lambda self: self.base_dist.mode)
    variance = property(lambda self: self.base_dist.variance)

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def _summed(self, value):
        n = self.reinterpreted_batch_ndims
        return value.sum(tuple(range(-n, 0))) if n else value

    def log_prob(self, value):
        return self._summed(self.base_dist.log_prob(value))

    def entropy(self):
        return self._summed(self.base_dist.entropy())

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"


# ----------------------------------------------------------------- divergences

_KL = {}


def register_kl(type_p, type_q):
    """Registers a function computing KL(p || q) for these two types."""

    def decorate(fn):
        _KL[type_p, type_q] = fn
        return fn

    return decorate


def kl_divergence(p, q):
    for kind_p in type(p).__mro__:
        for kind_q in type(q).__mro__:
            if (kind_p, kind_q) in _KL:
                return _KL[kind_p, kind_q](p, q)
    raise NotImplementedError(
        f"No KL(p || q) is implemented for p type {type(p).__name__} and q type {type(q).__name__}"
    )


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    ratio = (p.scale / q.scale) ** 2
    between = ((p.loc - q.loc) / q.scale) ** 2
    return 0.5 * (ratio + between - 1 - ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    positive = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    negative = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    return positive + negative


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    terms = p.probs * (p.logits - q.logits)
    terms = ops.where(q.probs == 0, math.inf, terms)
    return ops.where(p.probs == 0, 0.0, terms).sum(-1)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return ops.where((q.low > p.low) | (q.high < p.high), math.inf, result)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    ratio = q.rate / p.rate
    return ratio - 1 - ratio.log()


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    size = p.event_shape[0]
    q_tril = q.scale_tril.expand(p.scale_tril.shape)
    between = linalg.solve(q_tril, p.scale_tril)  # L_q^-1 L_p
    trace = (between**2).sum((-2, -1))
    difference = linalg.solve(q_tril, (q.loc - p.loc).unsqueeze(-1)).squeeze(-1)
    mahalanobis = (difference**2).sum(-1)
    return q._half_log_det() - p._half_log_det() + 0.5 * (trace + mahalanobis - size)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independents of different event dimensions")
    return p._summed(kl_divergence(p.base_dist, q.base_dist))
