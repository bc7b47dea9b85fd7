"""``Beta``."""

from __future__ import annotations

from typing import ClassVar

from ..eager import ops
from . import constraints
from .distribution import Distribution, _broadcast
from .gamma import _standard_gamma


class Beta(Distribution):
    arg_constraints: ClassVar[dict] = {
        "concentration1": constraints.positive,
        "concentration0": constraints.positive,
    }
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = _broadcast(concentration1, concentration0)
        super().__init__(self.concentration1.shape, validate_args=validate_args)

    def _shown_parameters(self):
        return [("concentration1", self.concentration1), ("concentration0", self.concentration0)]

    _total = property(lambda self: self.concentration1 + self.concentration0)
    mean = property(lambda self: self.concentration1 / self._total)

    @property
    def mode(self):
        heads = (self.concentration1 - 1).clamp(min=0)
        tails = (self.concentration0 - 1).clamp(min=0)
        # With both concentrations below 1 the density peaks at an end.
        end = (self.concentration1 >= self.concentration0).to(heads.dtype)
        both_below = (self.concentration1 < 1) & (self.concentration0 < 1)
        return ops.where(both_below, end, heads / (heads + tails))

    @property
    def variance(self):
        total = self._total
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        heads = _standard_gamma(self.concentration1.expand(shape))
        tails = _standard_gamma(self.concentration0.expand(shape))
        return heads / (heads + tails)

    def _log_normalizer(self):
        return (
            ops.lgamma(self.concentration1)
            + ops.lgamma(self.concentration0)
            - ops.lgamma(self._total)
        )

    def log_prob(self, value):
        self._validate_sample(value)
        return (
            ops.xlogy(self.concentration1 - 1.0, value)
            + ops.xlogy(self.concentration0 - 1.0, 1.0 - value)
            - self._log_normalizer()
        )

    def entropy(self):
        total = self._total
        return (
            self._log_normalizer()
            - (self.concentration1 - 1.0) * ops.digamma(self.concentration1)
            - (self.concentration0 - 1.0) * ops.digamma(self.concentration0)
            + (total - 2.0) * ops.digamma(total)
        )
