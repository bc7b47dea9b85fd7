"""``kl_divergence`` between distributions, and ``register_kl``, which adds
a pair of types to what it knows."""

from __future__ import annotations

import math

from .. import linalg
from ..eager import creation, ops
from ..nn import functional as F
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .cauchy import Cauchy
from .dirichlet import Dirichlet
from .exponential import Exponential
from .gamma import Gamma
from .geometric import Geometric
from .gumbel import _EULER_GAMMA, Gumbel
from .half_normal import HalfNormal
from .independent import Independent
from .laplace import Laplace
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .pareto import Pareto
from .poisson import Poisson
from .transformed_distribution import TransformedDistribution
from .transforms import _sum_rightmost
from .uniform import Uniform

_HALF_LOG_TWO_PI = 0.5 * math.log(2 * math.pi)

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


def _covariance_factor(d):
    """A matrix S with S S^T the covariance of d."""
    if isinstance(d, LowRankMultivariateNormal):
        return ops.cat([d.cov_factor, ops.diag_embed(d.cov_diag.sqrt())], -1)
    return d.scale_tril


def _log_det(d):
    return d._log_det() if isinstance(d, LowRankMultivariateNormal) else 2 * d._half_log_det()


def _squared_norm(q, matrix):
    """The sum over the columns m of matrix of m^T Sigma_q^-1 m."""
    if isinstance(q, LowRankMultivariateNormal):
        return q._squared_norm(matrix)
    tril = q.scale_tril
    batch = tuple(ops.broadcast_shapes(tuple(tril.shape[:-2]), tuple(matrix.shape[:-2])))
    solved = linalg.solve(
        tril.expand(batch + tuple(tril.shape[-2:])), matrix.expand(batch + tuple(matrix.shape[-2:]))
    )
    return solved.pow(2).sum((-2, -1))


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
@register_kl(MultivariateNormal, LowRankMultivariateNormal)
@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_gaussian_low_rank(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError(
            "KL-divergence between two (Low Rank) Multivariate Normals with different event "
            "shapes cannot be computed"
        )
    trace = _squared_norm(q, _covariance_factor(p))
    mahalanobis = _squared_norm(q, (q.loc - p.loc).unsqueeze(-1))
    return 0.5 * (trace + mahalanobis - p.event_shape[0] + _log_det(q) - _log_det(p))


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independents of different event dimensions")
    return p._summed(kl_divergence(p.base_dist, q.base_dist))


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


def _log_beta(a, b):
    return ops.lgamma(a) + ops.lgamma(b) - ops.lgamma(a + b)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    a1, a0, b1, b0 = p.concentration1, p.concentration0, q.concentration1, q.concentration0
    return (
        _log_beta(b1, b0)
        - _log_beta(a1, a0)
        + (a1 - b1) * ops.digamma(a1)
        + (a0 - b0) * ops.digamma(a0)
        + (b1 - a1 + b0 - a0) * ops.digamma(a1 + a0)
    )


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    a, b = p.concentration, q.concentration
    a_total = a.sum(-1)
    return (
        ops.lgamma(a_total)
        - ops.lgamma(a).sum(-1)
        - ops.lgamma(b.sum(-1))
        + ops.lgamma(b).sum(-1)
        + ((a - b) * (ops.digamma(a) - ops.digamma(a_total).unsqueeze(-1))).sum(-1)
    )


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    return (
        (p.concentration - q.concentration) * ops.digamma(p.concentration)
        - ops.lgamma(p.concentration)
        + ops.lgamma(q.concentration)
        + q.concentration * (p.rate.log() - q.rate.log())
        + p.concentration * (q.rate - p.rate) / p.rate
    )


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError(
            "KL between Binomials where q.total_count > p.total_count is not implemented"
        )
    per_trial = p.probs * (p.logits - q.logits) - F.softplus(p.logits) + F.softplus(q.logits)
    return ops.where(p.total_count > q.total_count, math.inf, p.total_count * per_trial)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - ops.log1p(-q.probs) / p.probs - q.logits


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ratio = p.scale / q.scale
    shift = (p.loc - q.loc) / q.scale
    return (
        -ratio.log()
        + shift
        + ratio * _EULER_GAMMA
        + ops.exp(ops.lgamma(1 + ratio) - shift)
        - (1 + _EULER_GAMMA)
    )


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    ratio = (p.scale / q.scale).pow(2)
    return 0.5 * (ratio - 1 - ratio.log())


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    ratio = p.scale / q.scale
    distance = (p.loc - q.loc).abs()
    return -ratio.log() + distance / q.scale + ratio * ops.exp(-distance / p.scale) - 1


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    spread = (p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)
    return (spread / (4 * p.scale * q.scale)).log()


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms or p.event_shape != q.event_shape:
        raise NotImplementedError
    extra = len(p.event_shape) - len(p.base_dist.event_shape)
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), extra)


# Between families: KL(p || q) = -H(p) - E_p[log q], the expectation in closed form.


def _normal_cross_entropy(q, mean, second_moment):
    """-E[log q(x)] for a normal q, from x's mean and E[x^2]."""
    squared = second_moment - 2 * mean * q.loc + q.loc.pow(2)
    return q.scale.log() + _HALF_LOG_TWO_PI + squared / (2 * q.scale.pow(2))


def _gamma_cross_entropy(q, mean, mean_log):
    """-E[log q(x)] for a gamma q, from x's mean and E[log x]."""
    return -(
        q.concentration * q.rate.log()
        - ops.lgamma(q.concentration)
        + (q.concentration - 1) * mean_log
        - q.rate * mean
    )


def _gumbel_cross_entropy(q, mean, mean_exp):
    """-E[log q(x)] for a Gumbel q, from x's mean and E[exp(-x / scale_q)]."""
    return q.scale.log() + (mean - q.loc) / q.scale + ops.exp(q.loc / q.scale) * mean_exp


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    mean = p.rate.reciprocal()
    return -p.entropy() + _normal_cross_entropy(q, mean, 2 * mean.pow(2))


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    mean = p.concentration / p.rate
    second = p.concentration * (p.concentration + 1) / p.rate.pow(2)
    return -p.entropy() + _normal_cross_entropy(q, mean, second)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    return -p.entropy() + _normal_cross_entropy(q, p.loc, 2 * p.scale.pow(2) + p.loc.pow(2))


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    return -p.entropy() + _normal_cross_entropy(q, p.mean, p.variance + p.mean.pow(2))


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    return -p.entropy() + _normal_cross_entropy(q, p.mean, p.variance + p.mean.pow(2))


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    return -p.entropy() + _normal_cross_entropy(q, p.mean, p.variance + p.mean.pow(2))


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    shift = p.loc - q.loc
    mean_abs = p.scale * math.sqrt(2 / math.pi) * ops.exp(
        -shift.pow(2) / (2 * p.scale.pow(2))
    ) + shift * ops.erf(shift / (p.scale * math.sqrt(2)))
    return -p.entropy() + (2 * q.scale).log() + mean_abs / q.scale


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    mean_log = -_EULER_GAMMA - p.rate.log()
    return -p.entropy() + _gamma_cross_entropy(q, p.rate.reciprocal(), mean_log)


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    mean_log = ops.digamma(p.concentration1) - ops.digamma(p.concentration1 + p.concentration0)
    return -p.entropy() + _gamma_cross_entropy(q, p.mean, mean_log)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    mean_exp = ops.exp(-p.loc / q.scale + p.scale.pow(2) / (2 * q.scale.pow(2)))
    return -p.entropy() + _gumbel_cross_entropy(q, p.loc, mean_exp)


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    mean_exp = p.rate / (p.rate + q.scale.reciprocal())
    return -p.entropy() + _gumbel_cross_entropy(q, p.rate.reciprocal(), mean_exp)


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    mean_exp = (p.rate / (p.rate + q.scale.reciprocal())).pow(p.concentration)
    return -p.entropy() + _gumbel_cross_entropy(q, p.mean, mean_exp)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    mean_exp = q.scale * (ops.exp(-p.low / q.scale) - ops.exp(-p.high / q.scale)) / (p.high - p.low)
    return -p.entropy() + _gumbel_cross_entropy(q, p.mean, mean_exp)


def _uniform_mean_log(low, high):
    """E[log x] for x uniform on [low, high], low >= 0."""
    return (ops.xlogy(high, high) - ops.xlogy(low, low)) / (high - low) - 1


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    result = -p.entropy() + _gamma_cross_entropy(q, p.mean, _uniform_mean_log(p.low, p.high))
    return ops.where(p.low < 0, math.inf, result)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = -p.entropy() - q.rate.log() + q.rate * p.mean
    return ops.where(p.low < 0, math.inf, result)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    outside = (p.low < 0) | (p.high > 1)
    low, high = p.low.clamp(0, 1), p.high.clamp(0, 1)
    cross = (
        _log_beta(q.concentration1, q.concentration0)
        - (q.concentration1 - 1) * _uniform_mean_log(low, high)
        - (q.concentration0 - 1) * _uniform_mean_log(1 - high, 1 - low)
    )
    return ops.where(outside, math.inf, -p.entropy() + cross)


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return ops.where((q.low > 0) | (q.high < 1), math.inf, result)


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


def _infinite(parameter):
    return creation.full_like(parameter, math.inf)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    alpha_ratio = q.alpha / p.alpha
    result = q.alpha * (p.scale / q.scale).log() - alpha_ratio.log() + alpha_ratio - 1
    return ops.where(p.scale < q.scale, math.inf, result)


def _pareto_mean_log(p):
    return p.scale.log() + p.alpha.reciprocal()


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    result = -p.entropy() - q.rate.log() + q.rate * p.mean
    return ops.where(p.alpha <= 1, math.inf, result)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    result = -p.entropy() + _gamma_cross_entropy(q, p.mean, _pareto_mean_log(p))
    return ops.where(p.alpha <= 1, math.inf, result)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    result = -p.entropy() + _normal_cross_entropy(q, p.mean, p.variance + p.mean.pow(2))
    return ops.where(p.alpha <= 2, math.inf, result)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    log_density_mean = (
        q.alpha.log() + q.alpha * q.scale.log() - (q.alpha + 1) * _uniform_mean_log(p.low, p.high)
    )
    result = -p.entropy() - log_density_mean
    return ops.where(p.low < q.scale, math.inf, result)


# Pairs whose q gives no density to part of p's support.


@register_kl(Normal, Beta)
@register_kl(Normal, Exponential)
@register_kl(Normal, Gamma)
@register_kl(Normal, Pareto)
@register_kl(Normal, Uniform)
@register_kl(Laplace, Beta)
@register_kl(Laplace, Exponential)
@register_kl(Laplace, Gamma)
@register_kl(Laplace, Pareto)
@register_kl(Laplace, Uniform)
@register_kl(Gumbel, Beta)
@register_kl(Gumbel, Exponential)
@register_kl(Gumbel, Gamma)
@register_kl(Gumbel, Pareto)
@register_kl(Gumbel, Uniform)
def _kl_real_line_infinity(p, q):
    return _infinite(p.loc)


@register_kl(Exponential, Beta)
@register_kl(Exponential, Pareto)
@register_kl(Exponential, Uniform)
def _kl_exponential_infinity(p, q):
    return _infinite(p.rate)


@register_kl(Gamma, Beta)
@register_kl(Gamma, Pareto)
@register_kl(Gamma, Uniform)
def _kl_gamma_infinity(p, q):
    return _infinite(p.concentration)


@register_kl(Beta, Pareto)
def _kl_beta_infinity(p, q):
    return _infinite(p.concentration1)


@register_kl(Pareto, Beta)
@register_kl(Pareto, Uniform)
def _kl_pareto_infinity(p, q):
    return _infinite(p.scale)


@register_kl(Poisson, Bernoulli)
@register_kl(Poisson, Binomial)
def _kl_poisson_infinity(p, q):
    return _infinite(p.rate)
