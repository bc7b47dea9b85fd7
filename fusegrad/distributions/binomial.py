"""``Binomial``."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..eager import creation, ops
from ..eager.grad_mode import no_grad
from ..ir import dtypes
from . import constraints
from .distribution import Distribution, _as_parameter, _logits_and_probs


def _clamp_by_zero(x):
    # max(x, 0) with gradient 1/2 at 0, as PyTorch's.
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


def _log_factorial(n):
    return ops.lgamma(creation.tensor(n + 1.0)).numpy()


def _binomial_draws(count: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Inversion: the first k whose cumulative probability passes a uniform,
    each k's probability from log-factorials (no underflowing products)."""
    unit = creation.rand(count.shape, dtype=dtypes.float64).numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        log_p, log_q = np.log(probs), np.log1p(-probs)
    draws = np.zeros_like(count)
    cumulative = np.zeros_like(count)
    pending = np.ones(count.shape, dtype=bool)
    for k in range(int(count.max()) + 1):
        with np.errstate(invalid="ignore"):
            log_pmf = (
                _log_factorial(count)
                - _log_factorial(k)
                - _log_factorial(np.maximum(count - k, 0))
                + np.where(k > 0, k * log_p, 0.0)
                + np.where(count - k > 0, (count - k) * log_q, 0.0)
            )
        cumulative = cumulative + np.exp(log_pmf)
        draws = np.where(pending, k, draws)
        pending &= (unit >= cumulative) & (k < count)
        if not pending.any():
            break
    return draws


class Binomial(Distribution):
    arg_constraints: ClassVar[dict] = {
        "total_count": constraints.nonnegative_integer,
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        self._given_probs = probs is not None
        self.logits, self.probs = _logits_and_probs(probs, logits, binary=True)
        # A count given as a number is read from it, so entropy compiles without
        # reading a tensor's value.
        self._number_count = total_count if isinstance(total_count, (int, float)) else None
        count = _as_parameter(total_count, self.probs).to(self.probs.dtype)
        self.total_count, self.probs, self.logits = ops.broadcast_tensors(
            count, self.probs, self.logits
        )
        super().__init__(self.probs.shape, validate_args=validate_args)

    def _shown_parameters(self):
        given = ("probs", self.probs) if self._given_probs else ("logits", self.logits)
        return [("total_count", self.total_count), given]

    @constraints.dependent_property(is_discrete=True)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    mean = property(lambda self: self.total_count * self.probs)
    mode = property(
        lambda self: ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)
    )
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            count = self.total_count.expand(shape).numpy().astype(np.float64)
            probs = self.probs.expand(shape).numpy().astype(np.float64)
            return creation.tensor(_binomial_draws(count, probs), dtype=self.probs.dtype)

    def log_prob(self, value):
        self._validate_sample(value)
        n, logits = self.total_count, self.logits
        log_factorial_n = ops.lgamma(n + 1)
        log_factorial_k = ops.lgamma(value + 1)
        log_factorial_rest = ops.lgamma(n - value + 1)
        # n log(1 + e^logits), stable for logits of either sign.
        normalizer = (
            n * _clamp_by_zero(logits) + n * ops.log1p((-logits.abs()).exp()) - log_factorial_n
        )
        return value * logits - normalizer - log_factorial_k - log_factorial_rest

    def _homogeneous_count(self, method):
        if self._number_count is not None:
            return int(self._number_count)
        largest = int(self.total_count.max().item())
        if not bool((self.total_count == largest).all()):
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{method}`.")
        return largest

    def entropy(self):
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        largest = self._homogeneous_count("enumerate_support")
        values = creation.arange(1 + largest, dtype=self.probs.dtype)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values
