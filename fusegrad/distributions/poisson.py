"""``Poisson``."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..eager import creation, ops
from ..eager.grad_mode import no_grad
from ..ir import dtypes
from . import constraints
from .distribution import Distribution, _broadcast


def _unit(shape):
    return creation.rand(shape, dtype=dtypes.float64).numpy()


def _draw_small(rate: np.ndarray) -> np.ndarray:
    """Inversion: the first k whose cumulative probability passes a uniform
    (rates below 10: a few dozen steps at most)."""
    u = _unit(rate.shape)
    k = np.zeros_like(rate)
    term = np.exp(-rate)
    cumulative = term.copy()
    pending = u > cumulative
    while pending.any():
        k = np.where(pending, k + 1, k)
        term = term * rate / np.maximum(k, 1)
        cumulative = cumulative + term
        pending &= (u > cumulative) & (term > 0)
    return k


def _draw_large(rate: np.ndarray) -> np.ndarray:
    """Hormann's transformed rejection with squeeze (PTRS), for rates of 10
    and more; numpy's generator uses it too."""
    slam, loglam = np.sqrt(rate), np.log(rate)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2)
    result = np.zeros_like(rate)
    pending = np.ones(rate.shape, dtype=bool)
    while pending.any():
        u, v = _unit(rate.shape) - 0.5, _unit(rate.shape)
        us = 0.5 - np.abs(u)
        k = np.floor((2 * a / us + b) * u + rate + 0.43)
        quick = (us >= 0.07) & (v <= vr)
        log_factorial = ops.lgamma(creation.tensor(np.maximum(k, 0) + 1.0)).numpy()
        with np.errstate(divide="ignore"):
            slow = (k >= 0) & ~((us < 0.013) & (v > us))
            slow &= np.log(v) + np.log(inv_alpha) - np.log(a / (us * us) + b) <= (
                -rate + k * loglam - log_factorial
            )
        taken = pending & (quick | slow)
        result[taken] = k[taken]
        pending &= ~taken
    return result


def _poisson_draws(rate: np.ndarray) -> np.ndarray:
    small = rate < 10
    draws = np.zeros_like(rate)
    if small.any():
        draws[small] = _draw_small(rate[small])
    if (~small).any():
        draws[~small] = _draw_large(rate[~small])
    return draws


class Poisson(Distribution):
    arg_constraints: ClassVar[dict] = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = _broadcast(rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    def _shown_parameters(self):
        return [("rate", self.rate)]

    mean = property(lambda self: self.rate)
    mode = property(lambda self: self.rate.floor())
    variance = property(lambda self: self.rate)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            rate = self.rate.expand(shape).numpy().astype(np.float64)
            return creation.tensor(_poisson_draws(rate), dtype=self.rate.dtype)

    def log_prob(self, value):
        self._validate_sample(value)
        rate, value = ops.broadcast_tensors(self.rate, value)
        return ops.xlogy(value, rate) - rate - ops.lgamma(value + 1)
