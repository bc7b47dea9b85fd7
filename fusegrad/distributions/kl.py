"""``kl_divergence`` between distributions, and ``register_kl``, which adds
a pair of types to what it knows."""

from __future__ import annotations

import math

from .. import linalg
from ..eager import ops
from ..nn import functional as F
from .bernoulli import Bernoulli
from .categorical import Categorical
from .exponential import Exponential
from .independent import Independent
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .uniform import Uniform

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
