"""``Uniform``."""

from __future__ import annotations

import math
from typing import ClassVar

from ..eager import creation, ops
from . import constraints
from .distribution import Distribution, _broadcast


class Uniform(Distribution):
    has_rsample = True
    arg_constraints: ClassVar[dict] = {"low": constraints.dependent, "high": constraints.dependent}

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = _broadcast(low, high)
        super().__init__(self.low.shape, validate_args=validate_args)

    def _validate(self):
        self._require(self.low < self.high, "low", self.low, "LessThan(upper_bound=high)")

    def _shown_parameters(self):
        return [("low", self.low), ("high", self.high)]

    @constraints.dependent_property
    def support(self):
        return constraints.interval(self.low, self.high)

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
