"""``Gamma``, and the standard gamma draws with implicit reparameterization
gradients that ``Dirichlet``, ``Beta``, ``Chi2`` and ``StudentT`` also use."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..eager import creation, ops
from ..eager.grad_mode import is_grad_enabled
from . import constraints
from .distribution import Distribution, _broadcast


def _marsaglia_tsang(concentration: np.ndarray, dtype) -> np.ndarray:
    """Gamma(a, 1) draws for a >= 1 from fusegrad's generator: d (1 + c z)^3
    for a normal z accepted with probability given by the squeeze and log
    tests, redrawn where rejected (about 5% of the time)."""
    d = concentration - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    result = np.empty_like(concentration)
    pending = np.ones(concentration.shape, dtype=bool)
    while pending.any():
        z = creation.randn(concentration.shape, dtype=dtype).numpy().astype(np.float64)
        u = creation.rand(concentration.shape, dtype=dtype).numpy().astype(np.float64)
        v = (1.0 + c * z) ** 3
        with np.errstate(invalid="ignore", divide="ignore"):
            accept = (v > 0) & (np.log(u) < 0.5 * z * z + d - d * v + d * np.log(v))
        taken = pending & accept
        result[taken] = (d * v)[taken]
        pending &= ~accept
    return result


def _standard_gamma_draws(concentration: np.ndarray, dtype) -> np.ndarray:
    """Gamma(a, 1) for any a > 0: below 1, Gamma(a + 1) U^(1/a)."""
    boosted = np.where(concentration < 1, concentration + 1, concentration)
    draws = _marsaglia_tsang(boosted, dtype)
    unit = creation.rand(concentration.shape, dtype=dtype).numpy().astype(np.float64)
    with np.errstate(divide="ignore"):
        shrink = np.exp(np.log(unit) / concentration)
    return np.where(concentration < 1, draws * shrink, draws)


def _draw_derivative(x: np.ndarray, a: np.ndarray) -> np.ndarray:
    """dx/da of a Gamma(a, 1) draw x with its quantile held fixed (implicit
    reparameterization): -(dP/da) / p(x) for the CDF P(a, x), the density p.
    With P = x^a e^-x / Gamma(a + 1) * S and S = sum_n prod_{k<=n} x / (a + k),
    this is -(x / a) ((log x - digamma(a + 1)) S + dS/da); the series is
    summed until its terms stop mattering."""
    digamma_next = ops.digamma(creation.tensor(a + 1.0)).numpy()
    term, series, series_da = np.ones_like(x), np.ones_like(x), np.zeros_like(x)
    harmonic = np.zeros_like(x)  # sum_{k<=n} 1 / (a + k): -d log(term) / da
    n = 0
    while True:
        n += 1
        term = term * x / (a + n)
        harmonic = harmonic + 1.0 / (a + n)
        series, series_da = series + term, series_da - term * harmonic
        past_peak = a + n > x
        if (past_peak & (term * (1 + harmonic) <= 1e-17 * series)).all():
            break
    with np.errstate(divide="ignore", invalid="ignore"):
        derivative = -(x / a) * ((np.log(x) - digamma_next) * series + series_da)
    return np.where(x > 0, derivative, 0.0)


def _standard_gamma(concentration):
    """Gamma(concentration, 1) draws of concentration's shape whose gradient
    to concentration is the implicit reparameterization one (a first
    derivative: the draw plus that slope times a zero that carries it)."""
    alpha = concentration.detach()
    values = alpha.numpy().astype(np.float64)
    draws = _standard_gamma_draws(values, concentration.dtype)
    # PyTorch clamps draws to the smallest normal number too.
    draws = np.maximum(draws, np.finfo(alpha.numpy().dtype).tiny)
    sample = creation.tensor(draws, dtype=concentration.dtype)
    if not (concentration.requires_grad and is_grad_enabled()):
        return sample
    slope = creation.tensor(_draw_derivative(draws, values), dtype=concentration.dtype)
    return sample + slope * (concentration - alpha)


class Gamma(Distribution):
    arg_constraints: ClassVar[dict] = {
        "concentration": constraints.positive,
        "rate": constraints.positive,
    }
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = _broadcast(concentration, rate)
        super().__init__(self.concentration.shape, validate_args=validate_args)

    def _shown_parameters(self):
        return [("concentration", self.concentration), ("rate", self.rate)]

    mean = property(lambda self: self.concentration / self.rate)
    mode = property(lambda self: ((self.concentration - 1) / self.rate).clamp(min=0))
    variance = property(lambda self: self.concentration / self.rate.pow(2))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return _standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)

    def log_prob(self, value):
        self._validate_sample(value)
        return (
            ops.xlogy(self.concentration, self.rate)
            + ops.xlogy(self.concentration - 1, value)
            - self.rate * value
            - ops.lgamma(self.concentration)
        )

    def entropy(self):
        return (
            self.concentration
            - self.rate.log()
            + ops.lgamma(self.concentration)
            + (1.0 - self.concentration) * ops.digamma(self.concentration)
        )
