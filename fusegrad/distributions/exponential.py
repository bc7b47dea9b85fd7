"""``Exponential``."""

from __future__ import annotations

from typing import ClassVar

from ..eager import creation, ops
from . import constraints
from .distribution import Distribution, _broadcast


class Exponential(Distribution):
    has_rsample = True
    arg_constraints: ClassVar[dict] = {"rate": constraints.positive}
    support = constraints.nonnegative

    def __init__(self, rate, validate_args=None):
        (self.rate,) = _broadcast(rate)
        super().__init__(self.rate.shape, validate_args=validate_args)

    def _shown_parameters(self):
        return [("rate", self.rate)]

    mean = property(lambda self: self.rate.reciprocal())
    mode = property(lambda self: creation.zeros_like(self.rate))
    variance = property(lambda self: self.rate.pow(-2))

    def rsample(self, sample_shape=()):
        unit = creation.rand(self._extended_shape(sample_shape), dtype=self.rate.dtype)
        return -ops.log1p(-unit) / self.rate  # 1 - unit is never 0

    def log_prob(self, value):
        self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        return 1 - ops.exp(-self.rate * value)

    def icdf(self, value):
        return -ops.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()
