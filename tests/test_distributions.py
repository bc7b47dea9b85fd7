"""fusegrad.distributions: densities, entropies and divergences against
numpy's closed forms, their gradients (and second derivatives) against finite
differences, the same numbers compiled (calls 1 to 3), samples of the right
shapes and moments, reparameterized gradients against the moments they move,
transforms against their numerical Jacobians, and PyTorch's parameter and
support checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.distributions as D

_rng = np.random.default_rng(7)
LOC, LOG_SCALE = _rng.standard_normal(3), 0.3 * _rng.standard_normal(3)
VALUES = _rng.standard_normal((4, 3))
_FACTOR = _rng.standard_normal((3, 3))
COVARIANCE = _FACTOR @ _FACTOR.T + np.eye(3)
LOW_RANK = _rng.standard_normal((3, 2))


def _normal_log_prob(x, loc, scale):
    return -((x - loc) ** 2) / (2 * scale**2) - np.log(scale) - 0.5 * np.log(2 * np.pi)


def _mvn_log_prob(x, loc, covariance):
    difference = x - loc
    mahalanobis = np.einsum("...i,ij,...j->...", difference, np.linalg.inv(covariance), difference)
    return -0.5 * (len(loc) * np.log(2 * np.pi) + np.linalg.slogdet(covariance)[1] + mahalanobis)


def _log_softmax(z):
    return (
        z
        - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True))
        - z.max(-1, keepdims=True)
    )


_lgamma = np.vectorize(math.lgamma)
UNIT_VALUES = _rng.uniform(0.05, 0.95, (4, 3))
POSITIVE_VALUES = np.exp(_rng.standard_normal((4, 3)))
COUNTS = np.array([[0.0, 1.0, 3.0], [2.0, 0.0, 5.0], [4.0, 2.0, 1.0], [1.0, 1.0, 0.0]])
SIMPLEX_VALUES = np.stack([UNIT_VALUES, 1 - UNIT_VALUES], -1)  # (4, 3, 2)
ONE_HOTS = np.eye(3)[[0, 2, 1, 1]]
EULER_GAMMA = 0.5772156649015329


def _digamma(x):
    """Digamma by its recurrence up to 10, then its asymptotic series."""
    x = np.asarray(x, dtype=np.float64)
    shift = np.zeros_like(x)
    while (x < 10).any():
        shift = shift - np.where(x < 10, 1 / x, 0.0)
        x = np.where(x < 10, x + 1, x)
    w = 1 / x**2
    series = w * (1 / 12 - w * (1 / 120 - w * (1 / 252 - w * (1 / 240 - w / 132))))
    return shift + np.log(x) - 0.5 / x - series


def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def _log_beta(a, b):
    return _lgamma(a) + _lgamma(b) - _lgamma(a + b)


def _gamma_log_prob(x, a, rate):
    return a * np.log(rate) + (a - 1) * np.log(x) - rate * x - _lgamma(a)


def _gamma_entropy(a, rate):
    return a - np.log(rate) + _lgamma(a) + (1 - a) * _digamma(a)


def _beta_entropy(a, b):
    return (
        _log_beta(a, b)
        - (a - 1) * _digamma(a)
        - (b - 1) * _digamma(b)
        + (a + b - 2) * _digamma(a + b)
    )


def _binomial_log_prob(k, n, p):
    return (
        _lgamma(n + 1)
        - _lgamma(k + 1)
        - _lgamma(n - k + 1)
        + k * np.log(p)
        + (n - k) * np.log1p(-p)
    )


def _pair(m, s):
    """A (3, 2) stack of the two parameter vectors, for distributions over pairs."""
    return fg.stack([m, s], -1) if isinstance(m, fg.Tensor) else np.stack([m, s], -1)


SIMPLEX4 = np.concatenate([ONE_HOTS * 0.5 + 0.1, np.full((4, 1), 0.2)], -1)


def _logistic_normal_log_prob(y, loc, scale):
    """By stick breaking: the k-th of K - 1 breaks takes z_k of what is left,
    x_k = logit(z_k) + log(K - k), and dy_k/dx_k = y_k (1 - z_k)."""
    left = 1 - np.concatenate([np.zeros((len(y), 1)), np.cumsum(y, -1)[:, :-2]], -1)
    z = y[:, :-1] / left
    x = np.log(z / (1 - z)) + np.log([3.0, 2.0, 1.0])
    log_det = (np.log(y[:, :-1]) + np.log1p(-z)).sum(-1)
    return _normal_log_prob(x, loc, scale).sum(-1) - log_det


def _dirichlet_log_prob(x, a):
    return ((a - 1) * np.log(x)).sum(-1) + _lgamma(a.sum(-1)) - _lgamma(a).sum(-1)


def _dirichlet_entropy(a):
    total = a.sum(-1)
    return (
        _lgamma(a).sum(-1)
        - _lgamma(total)
        - (a.shape[-1] - total) * _digamma(total)
        - ((a - 1) * _digamma(a)).sum(-1)
    )


# name: (fusegrad function of (loc, log_scale), numpy reference of the same)
CASES = {
    "normal log_prob": (
        lambda m, s: D.Normal(m, s.exp()).log_prob(fg.tensor(VALUES)),
        lambda m, s: _normal_log_prob(VALUES, m, np.exp(s)),
    ),
    "normal entropy": (
        lambda m, s: D.Normal(m, s.exp()).entropy(),
        lambda m, s: 0.5 + 0.5 * np.log(2 * np.pi) + s,
    ),
    "normal kl": (
        lambda m, s: D.kl_divergence(D.Normal(m, s.exp()), D.Normal(s, m.exp())),
        lambda m, s: (
            np.log(np.exp(m) / np.exp(s))
            + (np.exp(2 * s) + (m - s) ** 2) / (2 * np.exp(2 * m))
            - 0.5
        ),
    ),
    "independent normal log_prob": (
        lambda m, s: D.Independent(D.Normal(m, s.exp()), 1).log_prob(fg.tensor(VALUES)),
        lambda m, s: _normal_log_prob(VALUES, m, np.exp(s)).sum(-1),
    ),
    "bernoulli log_prob": (
        lambda m, s: D.Bernoulli(logits=m).log_prob(fg.tensor([1.0, 0.0, 1.0])),
        lambda m, s: (
            np.array([1.0, 0.0, 1.0]) * np.log(1 / (1 + np.exp(-m)))
            + np.array([0.0, 1.0, 0.0]) * np.log(1 - 1 / (1 + np.exp(-m)))
        ),
    ),
    "bernoulli entropy": (
        lambda m, s: D.Bernoulli(probs=m.sigmoid()).entropy(),
        lambda m, s: -(p := 1 / (1 + np.exp(-m))) * np.log(p) - (1 - p) * np.log(1 - p),
    ),
    "categorical log_prob": (
        lambda m, s: D.Categorical(logits=fg.stack([m, s])).log_prob(fg.tensor([2, 0])),
        lambda m, s: _log_softmax(np.stack([m, s]))[[0, 1], [2, 0]],
    ),
    "categorical entropy": (
        lambda m, s: D.Categorical(logits=fg.stack([m, s])).entropy(),
        lambda m, s: (
            -(np.exp(_log_softmax(np.stack([m, s]))) * _log_softmax(np.stack([m, s]))).sum(-1)
        ),
    ),
    "categorical kl": (
        lambda m, s: D.kl_divergence(D.Categorical(logits=m), D.Categorical(logits=s)),
        lambda m, s: (np.exp(_log_softmax(m)) * (_log_softmax(m) - _log_softmax(s))).sum(),
    ),
    "exponential log_prob": (
        lambda m, s: D.Exponential(s.exp()).log_prob(m.abs()),
        lambda m, s: s - np.exp(s) * np.abs(m),
    ),
    "uniform entropy": (
        lambda m, s: D.Uniform(m, m + s.exp()).entropy(),
        lambda m, s: s,
    ),
    "multivariate normal log_prob": (
        lambda m, s: D.MultivariateNormal(m, covariance_matrix=fg.tensor(COVARIANCE)).log_prob(
            fg.tensor(VALUES)
        ),
        lambda m, s: _mvn_log_prob(VALUES, m, COVARIANCE),
    ),
    "multivariate normal kl": (
        lambda m, s: D.kl_divergence(
            D.MultivariateNormal(m, covariance_matrix=fg.tensor(COVARIANCE)),
            D.MultivariateNormal(s, covariance_matrix=fg.tensor(2 * np.eye(3))),
        ),
        lambda m, s: (
            0.5
            * (
                np.trace(COVARIANCE / 2)
                + (s - m) @ (s - m) / 2
                - 3
                + np.linalg.slogdet(2 * np.eye(3))[1]
                - np.linalg.slogdet(COVARIANCE)[1]
            )
        ),
    ),
    "beta log_prob": (
        lambda m, s: D.Beta(m.exp(), s.exp()).log_prob(fg.tensor(UNIT_VALUES)),
        lambda m, s: (
            (np.exp(m) - 1) * np.log(UNIT_VALUES)
            + (np.exp(s) - 1) * np.log1p(-UNIT_VALUES)
            - _log_beta(np.exp(m), np.exp(s))
        ),
    ),
    "beta entropy": (
        lambda m, s: D.Beta(m.exp(), s.exp()).entropy(),
        lambda m, s: _beta_entropy(np.exp(m), np.exp(s)),
    ),
    "beta kl": (
        lambda m, s: D.kl_divergence(D.Beta(m.exp(), s.exp()), D.Beta(s.exp(), 1.5)),
        lambda m, s: (
            _log_beta(np.exp(s), 1.5)
            - _log_beta(np.exp(m), np.exp(s))
            + (np.exp(m) - np.exp(s)) * _digamma(np.exp(m))
            + (np.exp(s) - 1.5) * _digamma(np.exp(s))
            + (1.5 - np.exp(m)) * _digamma(np.exp(m) + np.exp(s))
        ),
    ),
    "gamma log_prob": (
        lambda m, s: D.Gamma(m.exp(), s.exp()).log_prob(fg.tensor(POSITIVE_VALUES)),
        lambda m, s: _gamma_log_prob(POSITIVE_VALUES, np.exp(m), np.exp(s)),
    ),
    "gamma entropy": (
        lambda m, s: D.Gamma(m.exp(), s.exp()).entropy(),
        lambda m, s: _gamma_entropy(np.exp(m), np.exp(s)),
    ),
    "gamma kl": (
        lambda m, s: D.kl_divergence(D.Gamma(m.exp(), s.exp()), D.Gamma(s.exp(), m.exp())),
        lambda m, s: (
            (np.exp(m) - np.exp(s)) * _digamma(np.exp(m))
            - _lgamma(np.exp(m))
            + _lgamma(np.exp(s))
            + np.exp(s) * (s - m)
            + np.exp(m) * (np.exp(m) - np.exp(s)) / np.exp(s)
        ),
    ),
    "chi2 log_prob": (
        lambda m, s: D.Chi2(m.exp()).log_prob(fg.tensor(POSITIVE_VALUES)),
        lambda m, s: _gamma_log_prob(POSITIVE_VALUES, np.exp(m) / 2, 0.5),
    ),
    "dirichlet log_prob": (
        lambda m, s: D.Dirichlet(_pair(m, s).exp()).log_prob(fg.tensor(SIMPLEX_VALUES)),
        lambda m, s: _dirichlet_log_prob(SIMPLEX_VALUES, np.exp(_pair(m, s))),
    ),
    "dirichlet entropy": (
        lambda m, s: D.Dirichlet(_pair(m, s).exp()).entropy(),
        lambda m, s: _dirichlet_entropy(np.exp(_pair(m, s))),
    ),
    "dirichlet kl": (
        lambda m, s: D.kl_divergence(
            D.Dirichlet(_pair(m, s).exp()), D.Dirichlet(_pair(s, m).exp())
        ),
        lambda m, s: (
            (a := np.exp(_pair(m, s))) is not None
            and (
                _lgamma(a.sum(-1))
                - _lgamma(a).sum(-1)
                - _lgamma(a[..., ::-1].sum(-1))
                + _lgamma(a[..., ::-1]).sum(-1)
                + ((a - a[..., ::-1]) * (_digamma(a) - _digamma(a.sum(-1))[..., None])).sum(-1)
            )
        ),
    ),
    "laplace log_prob": (
        lambda m, s: D.Laplace(m, s.exp()).log_prob(fg.tensor(VALUES)),
        lambda m, s: -np.log(2 * np.exp(s)) - np.abs(VALUES - m) / np.exp(s),
    ),
    "laplace cdf": (
        lambda m, s: D.Laplace(m, s.exp()).cdf(fg.tensor(VALUES)),
        lambda m, s: np.where(
            VALUES < m,
            0.5 * np.exp((VALUES - m) / np.exp(s)),
            1 - 0.5 * np.exp((m - VALUES) / np.exp(s)),
        ),
    ),
    "laplace kl": (
        lambda m, s: D.kl_divergence(D.Laplace(m, s.exp()), D.Laplace(s, m.exp())),
        lambda m, s: (
            m
            - s
            + np.abs(m - s) / np.exp(m)
            + np.exp(s - m) * np.exp(-np.abs(m - s) / np.exp(s))
            - 1
        ),
    ),
    "log normal log_prob": (
        lambda m, s: D.LogNormal(m, s.exp()).log_prob(fg.tensor(POSITIVE_VALUES)),
        lambda m, s: (
            _normal_log_prob(np.log(POSITIVE_VALUES), m, np.exp(s)) - np.log(POSITIVE_VALUES)
        ),
    ),
    "log normal entropy": (
        lambda m, s: D.LogNormal(m, s.exp()).entropy(),
        lambda m, s: 0.5 + 0.5 * np.log(2 * np.pi) + s + m,
    ),
    "poisson log_prob": (
        lambda m, s: D.Poisson(m.exp()).log_prob(fg.tensor(COUNTS)),
        lambda m, s: COUNTS * m - np.exp(m) - _lgamma(COUNTS + 1),
    ),
    "poisson kl": (
        lambda m, s: D.kl_divergence(D.Poisson(m.exp()), D.Poisson(s.exp())),
        lambda m, s: np.exp(m) * (m - s) - np.exp(m) + np.exp(s),
    ),
    "binomial log_prob": (
        lambda m, s: D.Binomial(5, logits=m).log_prob(fg.tensor(COUNTS)),
        lambda m, s: _binomial_log_prob(COUNTS, 5, _sigmoid(m)),
    ),
    "binomial entropy": (
        lambda m, s: D.Binomial(5, probs=m.sigmoid()).entropy(),
        lambda m, s: (
            -sum(np.exp(lp := _binomial_log_prob(k, 5, _sigmoid(m))) * lp for k in range(6))
        ),
    ),
    "geometric log_prob": (
        lambda m, s: D.Geometric(logits=m).log_prob(fg.tensor(COUNTS)),
        lambda m, s: COUNTS * np.log1p(-_sigmoid(m)) + np.log(_sigmoid(m)),
    ),
    "geometric entropy": (
        lambda m, s: D.Geometric(probs=m.sigmoid()).entropy(),
        lambda m, s: -((p := _sigmoid(m)) * np.log(p) + (1 - p) * np.log1p(-p)) / p,
    ),
    "student t log_prob": (
        lambda m, s: D.StudentT(s.exp() + 1, m, s.exp()).log_prob(fg.tensor(VALUES)),
        lambda m, s: (
            _lgamma((np.exp(s) + 2) / 2)
            - _lgamma((np.exp(s) + 1) / 2)
            - 0.5 * np.log((np.exp(s) + 1) * np.pi)
            - s
            - (np.exp(s) + 2) / 2 * np.log1p(((VALUES - m) / np.exp(s)) ** 2 / (np.exp(s) + 1))
        ),
    ),
    "student t entropy": (
        lambda m, s: D.StudentT(s.exp() + 1, m, s.exp()).entropy(),
        lambda m, s: (
            s
            + (np.exp(s) + 2) / 2 * (_digamma((np.exp(s) + 2) / 2) - _digamma((np.exp(s) + 1) / 2))
            + 0.5 * np.log(np.exp(s) + 1)
            + _log_beta((np.exp(s) + 1) / 2, 0.5)
        ),
    ),
    "cauchy log_prob": (
        lambda m, s: D.Cauchy(m, s.exp()).log_prob(fg.tensor(VALUES)),
        lambda m, s: -np.log(np.pi * np.exp(s) * (1 + ((VALUES - m) / np.exp(s)) ** 2)),
    ),
    "cauchy icdf": (
        lambda m, s: D.Cauchy(m, s.exp()).icdf(fg.tensor(UNIT_VALUES)),
        lambda m, s: m + np.exp(s) * np.tan(np.pi * (UNIT_VALUES - 0.5)),
    ),
    "cauchy kl": (
        lambda m, s: D.kl_divergence(D.Cauchy(m, s.exp()), D.Cauchy(s, m.exp())),
        lambda m, s: np.log(((np.exp(s) + np.exp(m)) ** 2 + (m - s) ** 2) / (4 * np.exp(s + m))),
    ),
    "gumbel log_prob": (
        lambda m, s: D.Gumbel(m, s.exp()).log_prob(fg.tensor(VALUES)),
        lambda m, s: -(s + (z := (VALUES - m) / np.exp(s)) + np.exp(-z)),
    ),
    "gumbel entropy": (
        lambda m, s: D.Gumbel(m, s.exp()).entropy(),
        lambda m, s: s + 1 + EULER_GAMMA,
    ),
    "half normal log_prob": (
        lambda m, s: D.HalfNormal(s.exp()).log_prob(fg.tensor(POSITIVE_VALUES)),
        lambda m, s: np.log(2) + _normal_log_prob(POSITIVE_VALUES, 0, np.exp(s)),
    ),
    "half normal kl": (
        lambda m, s: D.kl_divergence(D.HalfNormal(s.exp()), D.HalfNormal(m.exp())),
        lambda m, s: 0.5 * (np.exp(2 * (s - m)) - 1 - 2 * (s - m)),
    ),
    "one hot categorical log_prob": (
        lambda m, s: D.OneHotCategorical(logits=m).log_prob(fg.tensor(ONE_HOTS)),
        lambda m, s: _log_softmax(m)[[0, 2, 1, 1]],
    ),
    "one hot categorical kl": (
        lambda m, s: D.kl_divergence(D.OneHotCategorical(logits=m), D.OneHotCategorical(logits=s)),
        lambda m, s: (np.exp(_log_softmax(m)) * (_log_softmax(m) - _log_softmax(s))).sum(),
    ),
    "multinomial log_prob": (
        lambda m, s: D.Multinomial(7, logits=m).log_prob(fg.tensor(COUNTS[1])),
        lambda m, s: (
            _lgamma(8.0) - _lgamma(COUNTS[1] + 1).sum() + (COUNTS[1] * _log_softmax(m)).sum()
        ),
    ),
    "mixture log_prob": (
        lambda m, s: D.MixtureSameFamily(D.Categorical(logits=m), D.Normal(m, s.exp())).log_prob(
            fg.tensor(VALUES[:, 0])
        ),
        lambda m, s: np.log(
            (np.exp(_log_softmax(m)) * np.exp(_normal_log_prob(VALUES[:, :1], m, np.exp(s)))).sum(
                -1
            )
        ),
    ),
    "relaxed bernoulli log_prob": (
        lambda m, s: D.RelaxedBernoulli(s.exp(), logits=m).log_prob(fg.tensor(UNIT_VALUES)),
        lambda m, s: (
            (t := np.exp(s)) is not None
            and (
                np.log(t)
                + (d := m - t * np.log(UNIT_VALUES / (1 - UNIT_VALUES)))
                - 2 * np.logaddexp(0, d)
                - np.log(UNIT_VALUES * (1 - UNIT_VALUES))
            )
        ),
    ),
    "relaxed one hot categorical log_prob": (
        lambda m, s: D.RelaxedOneHotCategorical(s.exp()[0], logits=m).log_prob(
            fg.tensor(UNIT_VALUES / UNIT_VALUES.sum(-1, keepdims=True))
        ),
        lambda m, s: (
            (t := np.exp(s[0]), y := UNIT_VALUES / UNIT_VALUES.sum(-1, keepdims=True))
            and (
                _lgamma(3)
                + 2 * np.log(t)
                + _log_softmax(m - t * np.log(y)).sum(-1)
                - np.log(y).sum(-1)
            )
        ),
    ),
    "tanh normal log_prob": (
        lambda m, s: D.TransformedDistribution(
            D.Normal(m, s.exp()), [D.transforms.TanhTransform()]
        ).log_prob(fg.tensor(2 * UNIT_VALUES - 1)),
        lambda m, s: (
            _normal_log_prob(np.arctanh(2 * UNIT_VALUES - 1), m, np.exp(s))
            - np.log1p(-((2 * UNIT_VALUES - 1) ** 2))
        ),
    ),
    "affine exp log_prob": (
        lambda m, s: D.TransformedDistribution(
            D.Normal(m, 1.0),
            D.transforms.ComposeTransform(
                [D.transforms.AffineTransform(0.5, s.exp()), D.transforms.ExpTransform()]
            ),
        ).log_prob(fg.tensor(POSITIVE_VALUES)),
        lambda m, s: (
            _normal_log_prob((np.log(POSITIVE_VALUES) - 0.5) / np.exp(s), m, 1.0)
            - s
            - np.log(POSITIVE_VALUES)
        ),
    ),
    "low rank normal log_prob": (
        lambda m, s: D.LowRankMultivariateNormal(m, fg.tensor(LOW_RANK), s.exp()).log_prob(
            fg.tensor(VALUES)
        ),
        lambda m, s: _mvn_log_prob(VALUES, m, LOW_RANK @ LOW_RANK.T + np.diag(np.exp(s))),
    ),
    "low rank normal kl": (
        lambda m, s: D.kl_divergence(
            D.LowRankMultivariateNormal(m, fg.tensor(LOW_RANK), s.exp()),
            D.MultivariateNormal(s, covariance_matrix=fg.tensor(COVARIANCE)),
        ),
        lambda m, s: (
            (low_rank := LOW_RANK @ LOW_RANK.T + np.diag(np.exp(s))) is not None
            and 0.5
            * (
                np.trace(np.linalg.solve(COVARIANCE, low_rank))
                + (s - m) @ np.linalg.solve(COVARIANCE, s - m)
                - 3
                + np.linalg.slogdet(COVARIANCE)[1]
                - np.linalg.slogdet(low_rank)[1]
            )
        ),
    ),
    "negative binomial log_prob": (
        lambda m, s: D.NegativeBinomial(s.exp(), logits=m).log_prob(fg.tensor(COUNTS)),
        lambda m, s: (
            _lgamma(COUNTS + np.exp(s))
            - _lgamma(COUNTS + 1)
            - _lgamma(np.exp(s))
            + np.exp(s) * np.log(1 - _sigmoid(m))
            + COUNTS * np.log(_sigmoid(m))
        ),
    ),
    "pareto log_prob": (
        lambda m, s: D.Pareto(s.exp(), m.exp()).log_prob(
            fg.tensor(np.exp(LOG_SCALE) + POSITIVE_VALUES)
        ),
        lambda m, s: (
            m + np.exp(m) * s - (np.exp(m) + 1) * np.log(np.exp(LOG_SCALE) + POSITIVE_VALUES)
        ),
    ),
    "pareto kl": (
        lambda m, s: D.kl_divergence(D.Pareto(s.exp() + 1, m.exp()), D.Pareto(s.exp(), 2.0)),
        lambda m, s: (
            2.0 * np.log((np.exp(s) + 1) / np.exp(s))
            - np.log(2.0 / np.exp(m))
            + 2.0 / np.exp(m)
            - 1
        ),
    ),
    "weibull log_prob": (
        lambda m, s: D.Weibull(s.exp(), m.exp()).log_prob(fg.tensor(POSITIVE_VALUES)),
        lambda m, s: (
            m
            - s
            + (np.exp(m) - 1) * (np.log(POSITIVE_VALUES) - s)
            - (POSITIVE_VALUES / np.exp(s)) ** np.exp(m)
        ),
    ),
    "inverse gamma log_prob": (
        lambda m, s: D.InverseGamma(m.exp(), s.exp()).log_prob(fg.tensor(POSITIVE_VALUES)),
        lambda m, s: (
            _gamma_log_prob(1 / POSITIVE_VALUES, np.exp(m), np.exp(s)) - 2 * np.log(POSITIVE_VALUES)
        ),
    ),
    "logistic normal log_prob": (
        lambda m, s: D.LogisticNormal(m, s.exp()).log_prob(fg.tensor(SIMPLEX4)),
        lambda m, s: _logistic_normal_log_prob(SIMPLEX4, m, np.exp(s)),
    ),
    "gamma normal kl": (
        lambda m, s: D.kl_divergence(D.Gamma(m.exp(), s.exp()), D.Normal(m, s.exp())),
        lambda m, s: (
            -_gamma_entropy(np.exp(m), np.exp(s))
            + s
            + 0.5 * np.log(2 * np.pi)
            + (np.exp(m) * (np.exp(m) + 1) / np.exp(2 * s) - 2 * m * np.exp(m - s) + m**2)
            / (2 * np.exp(2 * s))
        ),
    ),
    "normal laplace kl": (
        lambda m, s: D.kl_divergence(D.Normal(m, s.exp()), D.Laplace(s, m.exp())),
        lambda m, s: (
            -(0.5 + 0.5 * np.log(2 * np.pi) + s)
            + np.log(2 * np.exp(m))
            + (
                np.exp(s) * np.sqrt(2 / np.pi) * np.exp(-((m - s) ** 2) / (2 * np.exp(2 * s)))
                + (m - s) * np.vectorize(math.erf)((m - s) / (np.exp(s) * np.sqrt(2)))
            )
            / np.exp(m)
        ),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_densities_match_their_closed_forms_eagerly_and_compiled(name):
    fn, reference = CASES[name]
    want = reference(LOC, LOG_SCALE)
    compiled = fg.jit(fn)
    for call in range(3):
        loc, log_scale = (fg.tensor(a + 0.01 * call) for a in (LOC, LOG_SCALE))
        want = reference(LOC + 0.01 * call, LOG_SCALE + 0.01 * call)
        np.testing.assert_allclose(fn(loc, log_scale).numpy(), want, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(compiled(loc, log_scale).numpy(), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", list(CASES))
def test_density_gradients_match_finite_differences(name):
    fn, _ = CASES[name]
    inputs = tuple(fg.tensor(a, requires_grad=True) for a in (LOC, LOG_SCALE))
    assert fg.autograd.gradcheck(fn, inputs)
    assert fg.autograd.gradgradcheck(fn, inputs)


def test_samples_have_the_requested_shapes_and_moments():
    fg.manual_seed(0)
    normal = D.Normal(fg.tensor([1.0, -2.0]), fg.tensor([0.5, 2.0]))
    draws = normal.sample((20000,))
    assert draws.shape == (20000, 2) and not draws.requires_grad
    np.testing.assert_allclose(draws.mean(0).numpy(), [1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(draws.std(0).numpy(), [0.5, 2.0], rtol=0.03)
    categorical = D.Categorical(probs=fg.tensor([[0.2, 0.8, 0.0], [1.0, 1.0, 2.0]]))
    picks = categorical.sample((6000,))
    assert picks.shape == (6000, 2) and picks.dtype is fg.int64
    np.testing.assert_allclose(
        [(picks[:, 0] == 1).double().mean().item(), (picks[:, 1] == 2).double().mean().item()],
        [0.8, 0.5],
        atol=0.03,
    )
    assert (picks[:, 0] != 2).all()
    mvn = D.MultivariateNormal(
        fg.zeros(3, dtype=fg.float64), covariance_matrix=fg.tensor(COVARIANCE)
    )
    assert mvn.rsample((5, 2)).shape == (5, 2, 3)
    assert D.Bernoulli(probs=fg.full((4,), 0.5)).sample((3,)).shape == (3, 4)
    assert D.Uniform(0.0, 2.0).rsample((7,)).max().item() < 2.0


def test_rsample_carries_gradients_to_the_parameters():
    loc, scale = fg.tensor([0.5], requires_grad=True), fg.tensor([2.0], requires_grad=True)
    fg.manual_seed(1)
    draw = D.Normal(loc, scale).rsample((3,))
    draw.sum().backward()
    assert loc.grad.item() == 3.0
    fg.manual_seed(1)
    noise = fg.randn(3, 1)
    assert scale.grad.item() == pytest.approx(noise.sum().item())


def test_parameters_and_values_are_checked_as_pytorch_checks_them():
    with pytest.raises(ValueError, match="Expected parameter scale"):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError, match="Expected parameter probs"):
        D.Bernoulli(probs=fg.tensor([1.5]))
    with pytest.raises(ValueError, match="within the support"):
        D.Categorical(logits=fg.zeros(3)).log_prob(fg.tensor(3))
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Categorical()
    assert D.Uniform(0.0, 1.0, validate_args=False).log_prob(fg.tensor(2.0)).item() == -math.inf
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Categorical(logits=fg.zeros(3)))
    independent = D.Independent(D.Normal(fg.zeros(2, 3), 1.0), 1)
    assert (independent.batch_shape, independent.event_shape) == ((2,), (3,))


def _f64(*values):
    return [fg.tensor(np.asarray(v, dtype=np.float64)) for v in values]


# name: a distribution over a batch of 2 (events as its event_shape says)
SAMPLED = {
    "beta": lambda: D.Beta(*_f64([0.5, 2.0], [1.5, 3.0])),
    "gamma": lambda: D.Gamma(*_f64([0.4, 3.0], [2.0, 0.5])),
    "chi2": lambda: D.Chi2(*_f64([1.0, 5.0])),
    "dirichlet": lambda: D.Dirichlet(*_f64([[0.5, 1.0, 2.0], [3.0, 3.0, 0.3]])),
    "laplace": lambda: D.Laplace(*_f64([0.0, 1.0], [1.0, 0.5])),
    "log normal": lambda: D.LogNormal(*_f64([0.0, 0.5], [0.3, 0.5])),
    "poisson": lambda: D.Poisson(*_f64([0.7, 25.0])),
    "binomial": lambda: D.Binomial(*_f64([5.0, 30.0]), probs=fg.tensor([0.3, 0.8])),
    "geometric": lambda: D.Geometric(*_f64([0.3, 0.8])),
    "student t": lambda: D.StudentT(*_f64([5.0, 9.0], [0.0, 1.0], [1.0, 2.0])),
    "gumbel": lambda: D.Gumbel(*_f64([0.0, 1.0], [1.0, 2.0])),
    "half normal": lambda: D.HalfNormal(*_f64([1.0, 2.0])),
    "one hot categorical": lambda: D.OneHotCategorical(*_f64([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]])),
    "multinomial": lambda: D.Multinomial(4, *_f64([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]])),
    "mixture": lambda: D.MixtureSameFamily(
        D.Categorical(*_f64([[0.3, 0.7], [0.5, 0.5]])),
        D.Normal(*_f64([[-1.0, 2.0], [0.0, 3.0]], [[1.0, 0.5], [2.0, 1.0]])),
    ),
    "low rank normal": lambda: D.LowRankMultivariateNormal(
        *_f64([[0.0, 1.0, 2.0], [1.0, 0.0, -1.0]], [[[1.0], [0.5], [0.0]]] * 2, [0.5, 1.0, 2.0])
    ),
    "negative binomial": lambda: D.NegativeBinomial(
        *_f64([2.0, 7.5]), logits=fg.tensor([0.3, -1.0])
    ),
    "pareto": lambda: D.Pareto(*_f64([1.0, 2.0], [5.0, 9.0])),
    "weibull": lambda: D.Weibull(*_f64([1.0, 2.0], [0.8, 3.0])),
    "inverse gamma": lambda: D.InverseGamma(*_f64([6.0, 9.0], [2.0, 3.0])),
    "logistic normal": lambda: D.LogisticNormal(*_f64([[0.0, 1.0], [1.0, -1.0]], [0.5, 1.0])),
    "exponential": lambda: D.Exponential(*_f64([0.5, 3.0])),
    "uniform": lambda: D.Uniform(*_f64([0.0, -2.0], [1.0, 3.0])),
    "bernoulli": lambda: D.Bernoulli(*_f64([0.2, 0.7])),
    "independent normal": lambda: D.Independent(
        D.Normal(*_f64([[0.0, 1.0, 2.0], [1.0, 0.0, -1.0]], [0.5, 1.0, 2.0])), 1
    ),
    "tanh normal": lambda: D.TransformedDistribution(
        D.Normal(*_f64([0.0, 1.0], [1.0, 0.5])), D.transforms.TanhTransform()
    ),
    "relaxed bernoulli": lambda: D.RelaxedBernoulli(fg.tensor(0.5), *_f64([0.3, 0.6])),
}

# As in PyTorch: no closed form, or (binomial) counts that differ across the batch.
WITHOUT_ENTROPY = {
    "poisson",
    "mixture",
    "tanh normal",
    "relaxed bernoulli",
    "binomial",
    "negative binomial",
    "logistic normal",
}


@pytest.mark.parametrize("name", list(SAMPLED))
def test_samples_have_the_shapes_and_moments_the_distribution_states(name):
    fg.manual_seed(3)
    distribution = SAMPLED[name]()
    assert distribution.batch_shape == (2,)
    event = tuple(distribution.event_shape)
    assert distribution.sample((3, 4)).shape == (3, 4, 2) + event
    expanded = distribution.expand((5, 2))
    assert expanded.batch_shape == (5, 2) and expanded.sample((3,)).shape == (3, 5, 2) + event
    assert expanded.log_prob(expanded.sample()).shape == (5, 2)
    draws = distribution.sample((40000,))
    assert not draws.requires_grad
    assert bool(distribution.support.check(draws).all())
    count = draws.shape[0]
    log_probs = distribution.log_prob(draws)
    if name not in ("tanh normal", "relaxed bernoulli", "logistic normal"):  # no moments
        mean, variance = distribution.mean.numpy(), distribution.variance.numpy()
        spread = np.sqrt(variance / count)
        np.testing.assert_allclose(draws.mean(0).numpy(), mean, atol=6 * spread.max())
        np.testing.assert_allclose(draws.var(0).numpy(), variance, rtol=0.08, atol=1e-3)
    if name not in WITHOUT_ENTROPY:
        spread = log_probs.std(0).numpy() / np.sqrt(count)
        entropy = distribution.entropy().numpy()
        np.testing.assert_allclose(-log_probs.mean(0).numpy(), entropy, atol=6 * spread.max())


def _mean_gradients(make, parameters, count=40000, power=1):
    """The gradient of the mean of rsample(count) ** power to each parameter."""
    fg.manual_seed(5)
    leaves = [fg.tensor(p, dtype=fg.float64, requires_grad=True) for p in parameters]
    (make(*leaves).rsample((count,)) ** power).mean(0).sum().backward()
    return [leaf.grad.numpy() for leaf in leaves]


def test_gamma_rsample_gradients_are_the_implicit_reparameterization_ones():
    alpha, rate = np.array([0.4, 1.0, 3.0, 20.0]), np.array([2.0, 1.0, 0.5, 1.5])
    d_alpha, d_rate = _mean_gradients(D.Gamma, (alpha, rate))
    # E[x] = alpha / rate, E[x^2] = alpha (alpha + 1) / rate^2
    np.testing.assert_allclose(d_alpha, 1 / rate, rtol=0.03)
    np.testing.assert_allclose(d_rate, -alpha / rate**2, rtol=0.03)
    d_alpha, _ = _mean_gradients(D.Gamma, (alpha, rate), power=2)
    np.testing.assert_allclose(d_alpha, (2 * alpha + 1) / rate**2, rtol=0.05)


def test_beta_and_dirichlet_rsample_gradients_match_their_means():
    c1, c0 = np.array([0.5, 2.0, 6.0]), np.array([1.5, 0.7, 3.0])
    d1, d0 = _mean_gradients(D.Beta, (c1, c0))
    np.testing.assert_allclose(d1, c0 / (c1 + c0) ** 2, rtol=0.05)
    np.testing.assert_allclose(d0, -c1 / (c1 + c0) ** 2, rtol=0.05)
    concentration = np.array([0.5, 2.0, 4.0])
    fg.manual_seed(5)
    leaf = fg.tensor(concentration, requires_grad=True)
    D.Dirichlet(leaf).rsample((40000,))[:, 0].mean().backward()
    total = concentration.sum()
    want = -concentration[0] / total**2 + np.eye(3)[0] / total
    np.testing.assert_allclose(leaf.grad.numpy(), want, rtol=0.05, atol=2e-3)


@pytest.mark.parametrize("family", [D.Laplace, D.Gumbel, D.Cauchy, D.LogNormal, D.StudentT])
def test_location_families_rsample_moves_with_their_location(family):
    loc = fg.tensor([0.5, -1.0], requires_grad=True)
    parameters = (fg.tensor([4.0, 6.0]), loc, 1.0) if family is D.StudentT else (loc, 1.0)
    distribution = family(*parameters)
    draws = distribution.rsample((7,))
    assert draws.shape == (7, 2) and distribution.has_rsample
    if family is D.LogNormal:
        draws = draws.log()
    draws.sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), [7.0, 7.0], rtol=1e-5)


def test_straight_through_and_relaxed_samples_carry_the_probabilities_gradients():
    logits = fg.tensor([0.2, -0.4, 1.0], requires_grad=True)
    weights = fg.tensor([1.0, 2.0, 3.0])
    fg.manual_seed(2)
    draw = D.OneHotCategoricalStraightThrough(logits=logits).rsample()
    assert sorted(draw.detach().numpy().tolist()) == [0.0, 0.0, 1.0]
    (draw * weights).sum().backward()
    straight_through = logits.grad.numpy().copy()
    logits.grad = None
    (logits.softmax(-1) * weights).sum().backward()
    np.testing.assert_allclose(straight_through, logits.grad.numpy(), rtol=1e-6)
    relaxed = D.RelaxedOneHotCategorical(fg.tensor(0.3), logits=logits).rsample((5,))
    np.testing.assert_allclose(relaxed.sum(-1).detach().numpy(), 1.0, rtol=1e-5)
    relaxed.max(-1).values.sum().backward()


def test_tanh_normal_reads_its_cached_pre_image_back_as_sac_does():
    loc = fg.tensor([30.0, 0.0], requires_grad=True)
    policy = D.TransformedDistribution(
        D.Normal(loc, 1.0), [D.transforms.TanhTransform(cache_size=1)]
    )
    action = policy.rsample()
    log_prob = policy.log_prob(action)  # tanh(30) is 1.0 in float32: atanh would be inf
    assert np.isfinite(log_prob.detach().numpy()).all()
    log_prob.sum().backward()
    assert np.isfinite(loc.grad.numpy()).all()
    assert isinstance(D.transforms.TanhTransform().inv, D.Transform)
    assert D.transforms.ExpTransform() == D.transforms.ExpTransform()


def test_constraints_read_as_pytorch_prints_them():
    C = D.constraints
    assert repr(C.positive) == "GreaterThan(lower_bound=0.0)"
    assert repr(C.independent(C.real, 1)) == "IndependentConstraint(Real(), 1)"
    assert repr(D.Binomial(3, probs=fg.tensor(0.5)).support).startswith("IntegerInterval")
    assert repr(D.Dirichlet(fg.ones(3)).support) == "Simplex()"
    assert C.simplex.check(fg.tensor([[0.5, 0.5], [0.5, 0.6]])).tolist() == [True, False]
    assert C.is_dependent(D.Uniform.arg_constraints["low"])


# (what raises, exception, PyTorch's message)
INVALID = [
    (lambda: D.Beta(fg.tensor([-1.0]), 1.0), ValueError, "parameter concentration1"),
    (lambda: D.Gamma(1.0, 1.0).log_prob(fg.tensor(-1.0)), ValueError, r"\(GreaterThanEq"),
    (lambda: D.Dirichlet(fg.tensor(1.0)), ValueError, "at least one-dimensional"),
    (lambda: D.Dirichlet(fg.ones(2)).log_prob(fg.tensor([0.5, 0.6])), ValueError, "Simplex"),
    (lambda: D.Poisson(-1.0), ValueError, "GreaterThanEq"),
    (lambda: D.Poisson(1.0).log_prob(fg.tensor(0.5)), ValueError, "IntegerGreaterThan"),
    (lambda: D.Binomial(3, probs=fg.tensor(0.5)).log_prob(fg.tensor(4.0)), ValueError, "support"),
    (lambda: D.Binomial(2.5, probs=fg.tensor(0.5)), ValueError, "parameter total_count"),
    (lambda: D.Geometric(fg.tensor(0.0)), ValueError, "to be positive"),
    (lambda: D.StudentT(-1.0), ValueError, "parameter df"),
    (lambda: D.Laplace(0.0, 0.0), ValueError, "parameter scale"),
    (lambda: D.HalfNormal(1.0).log_prob(fg.tensor(-1.0)), ValueError, "support"),
    (lambda: D.LogNormal(0.0, 1.0).log_prob(fg.tensor(-1.0)), ValueError, "GreaterThan"),
    (lambda: D.Chi2(-1.0), ValueError, "parameter df"),
    (lambda: D.OneHotCategorical(fg.ones(2)).log_prob(fg.ones(2)), ValueError, r"OneHot\(\)"),
    (lambda: D.Multinomial(3, fg.ones(2)).log_prob(fg.tensor([2.0, 2.0])), ValueError, "Multi"),
    (lambda: D.Multinomial(fg.tensor(3), fg.ones(2)), NotImplementedError, "inhomogeneous"),
    (lambda: D.RelaxedBernoulli(0.5, probs=fg.tensor(1.5)), ValueError, "parameter probs"),
    (lambda: D.NegativeBinomial(3.0, probs=fg.tensor(1.0)), ValueError, "HalfOpenInterval"),
    (lambda: D.Pareto(1.0, 2.0).log_prob(fg.tensor(0.5)), ValueError, "GreaterThanEq"),
    (lambda: D.Weibull(1.0, -2.0), ValueError, "parameter concentration"),
    (lambda: D.InverseGamma(-1.0, 2.0), ValueError, "parameter concentration"),
    (lambda: D.LogisticNormal(0.0, 1.0).log_prob(fg.tensor([0.2, 0.2])), ValueError, "Simplex"),
    (
        lambda: D.TransformedDistribution(D.Normal(0.0, 1.0), 3),
        ValueError,
        "must be a Transform or list",
    ),
    (
        lambda: D.MixtureSameFamily(D.Normal(0.0, 1.0), D.Normal(fg.zeros(2), 1.0)),
        ValueError,
        "needs to be an  instance",
    ),
    (
        lambda: D.MixtureSameFamily(D.Categorical(fg.ones(3)), D.Normal(fg.zeros(2), 1.0)),
        ValueError,
        r"does not equal `component_distribution.batch_shape\[-1\]`",
    ),
    (
        lambda: D.Binomial(fg.tensor([2.0, 3.0]), probs=fg.tensor(0.5)).entropy(),
        NotImplementedError,
        "Inhomogeneous total count",
    ),
    (
        lambda: D.kl_divergence(
            D.Binomial(fg.tensor([2.0]), probs=fg.tensor(0.5)),
            D.Binomial(fg.tensor([3.0]), probs=fg.tensor(0.5)),
        ),
        NotImplementedError,
        "q.total_count > p.total_count",
    ),
]


@pytest.mark.parametrize("index", range(len(INVALID)))
def test_new_distributions_check_as_pytorch_does(index):
    make, error, message = INVALID[index]
    with pytest.raises(error, match=message):
        make()


def test_support_mismatches_give_infinite_divergences():
    inf = D.kl_divergence(D.Normal(fg.zeros(2), 1.0), D.Gamma(1.0, 1.0))
    assert inf.shape == (2,) and bool((inf == math.inf).all())
    assert D.kl_divergence(D.Uniform(-1.0, 1.0), D.Exponential(1.0)).item() == math.inf
    assert D.kl_divergence(D.Uniform(0.2, 0.5), D.Beta(1.0, 1.0)).item() == pytest.approx(
        -math.log(0.3)
    )


def _finite_difference_log_det(transform, x, step=1e-6):
    """log |det dy/dx| of one event by central differences: the diagonal of
    an elementwise transform, the (K-1) x (K-1) leading block of one onto
    the simplex."""

    def forward(values):
        return transform(fg.tensor(values)).numpy()

    if transform.domain.event_dim == 0:
        slope = (forward(x + step) - forward(x - step)) / (2 * step)
        return np.log(np.abs(slope))
    columns = []
    for i in range(x.shape[-1]):
        shift = np.eye(x.shape[-1])[i] * step
        columns.append((forward(x + shift) - forward(x - shift))[: x.shape[-1]] / (2 * step))
    return np.linalg.slogdet(np.stack(columns, -1))[1]


T = D.transforms
# name: (transform, a point of its domain)
TRANSFORMS = {
    "exp": (T.ExpTransform(), VALUES[0]),
    "affine": (T.AffineTransform(0.5, -2.0), VALUES[0]),
    "sigmoid": (T.SigmoidTransform(), VALUES[0]),
    "tanh": (T.TanhTransform(), VALUES[0]),
    "power": (T.PowerTransform(2.5), POSITIVE_VALUES[0]),
    "softplus": (T.SoftplusTransform(), VALUES[0]),
    "stick breaking": (T.StickBreakingTransform(), VALUES[0]),
    "compose": (T.ComposeTransform([T.AffineTransform(1.0, 3.0), T.SigmoidTransform()]), VALUES[0]),
    "inverse": (T.ExpTransform().inv, POSITIVE_VALUES[0]),
}


@pytest.mark.parametrize("name", list(TRANSFORMS))
def test_transforms_invert_and_state_their_jacobians(name):
    transform, x = TRANSFORMS[name]
    y = transform(fg.tensor(x))
    assert bool(transform.codomain.check(y).all())
    np.testing.assert_allclose(transform.inv(y).numpy(), x, rtol=1e-9, atol=1e-12)
    log_det = transform.log_abs_det_jacobian(fg.tensor(x), y).numpy()
    if transform.domain.event_dim == 1:
        log_det = log_det.sum()
    np.testing.assert_allclose(log_det, _finite_difference_log_det(transform, x), rtol=1e-6)


def test_transformed_distributions_match_their_closed_forms():
    logistic_normal = D.TransformedDistribution(
        D.Normal(fg.tensor(LOC), 1.0), T.StickBreakingTransform()
    )
    assert (logistic_normal.batch_shape, logistic_normal.event_shape) == ((), (4,))
    assert logistic_normal.sample((5,)).shape == (5, 4)
    log_normal = D.LogNormal(fg.tensor(LOC), 2.0)
    as_transformed = D.TransformedDistribution(D.Normal(fg.tensor(LOC), 2.0), T.ExpTransform())
    np.testing.assert_allclose(
        log_normal.cdf(fg.tensor(POSITIVE_VALUES)).numpy(),
        as_transformed.cdf(fg.tensor(POSITIVE_VALUES)).numpy(),
    )
    assert D.kl_divergence(log_normal, D.LogNormal(fg.tensor(LOC), 2.0)).abs().max().item() < 1e-12
    decreasing = D.TransformedDistribution(D.Exponential(1.0), T.AffineTransform(0.0, -1.0))
    assert decreasing.cdf(fg.tensor(-0.5)).item() == pytest.approx(math.exp(-0.5))
    assert decreasing.icdf(fg.tensor(math.exp(-0.5))).item() == pytest.approx(-0.5)


@pytest.mark.parametrize(
    "constraint",
    [
        D.constraints.real,
        D.constraints.positive,
        D.constraints.unit_interval,
        D.constraints.simplex,
        D.constraints.greater_than(1.5),
        D.constraints.less_than(-1.0),
        D.constraints.interval(-1.0, 2.0),
        D.constraints.independent(D.constraints.positive, 1),
    ],
)
def test_biject_to_maps_real_numbers_onto_the_constraint_and_back(constraint):
    x = fg.tensor(VALUES)
    transform = D.biject_to(constraint)
    y = transform(x)
    assert bool(constraint.check(y).all())
    unconstrained = VALUES[:, :-1] if constraint is D.constraints.simplex else VALUES
    np.testing.assert_allclose(
        transform.inv(transform(fg.tensor(unconstrained))).numpy(), unconstrained, rtol=1e-9
    )
    assert bool(constraint.check(D.transform_to(constraint)(x)).all())
    with pytest.raises(NotImplementedError, match="Cannot transform _Boolean constraints"):
        D.biject_to(D.constraints.boolean)


def _sac_actor_loss(mu, log_std):
    policy = D.TransformedDistribution(
        D.Normal(mu, log_std.exp()), [D.transforms.TanhTransform(cache_size=1)]
    )
    action = policy.rsample()
    return (policy.log_prob(action).sum(-1) - action.sum(-1)).mean()


def test_a_sac_actor_loss_compiles_to_the_eager_values_and_gradients():
    compiled = fg.jit(_sac_actor_loss)
    for call in range(3):
        results = []
        for fn in (_sac_actor_loss, compiled):
            mu = fg.tensor(np.full((4, 2), 0.1 * call), requires_grad=True)
            log_std = fg.tensor(np.zeros((4, 2)), requires_grad=True)
            fg.manual_seed(call)
            loss = fn(mu, log_std)
            loss.backward()
            results.append((loss.item(), mu.grad.numpy(), log_std.grad.numpy()))
        (eager_loss, *eager_grads), (compiled_loss, *compiled_grads) = results
        assert compiled_loss == pytest.approx(eager_loss, rel=1e-10)
        for eager, jitted in zip(eager_grads, compiled_grads):
            np.testing.assert_allclose(jitted, eager, rtol=1e-8, atol=1e-12)
