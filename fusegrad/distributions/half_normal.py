"""``HalfNormal``: |X| for X ~ Normal(0, scale)."""

from __future__ import annotations

import math
from typing import ClassVar

from ..eager import creation, ops
from . import constraints
from .distribution import Distribution, _broadcast

_HALF_LOG_TWO_PI = 0.5 * math.log(2 * math.pi)


class HalfNormal(Distribution):
    arg_constraints: ClassVar[dict] = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        (self.scale,) = _broadcast(scale)
        super().__init__(self.scale.shape, validate_args=validate_args)

    def _shown_parameters(self):
        return [("scale", self.scale)]

    mean = property(lambda self: self.scale * math.sqrt(2 / math.pi))
    mode = property(lambda self: creation.zeros_like(self.scale))
    variance = property(lambda self: self.scale.pow(2) * (1 - 2 / math.pi))

    def rsample(self, sample_shape=()):
        noise = creation.randn(self._extended_shape(sample_shape), dtype=self.scale.dtype)
        return (noise * self.scale).abs()

    def log_prob(self, value):
        self._validate_sample(value)
        density = (
            math.log(2)
            - value.pow(2) / (2 * self.scale.pow(2))
            - self.scale.log()
            - _HALF_LOG_TWO_PI
        )
        return ops.where(value >= 0, density, -math.inf)

    def cdf(self, value):
        self._validate_sample(value)
        return ops.erf(value / (self.scale * math.sqrt(2)))

    def icdf(self, prob):
        return self.scale * ops.erfinv(prob) * math.sqrt(2)

    def entropy(self):
        return 0.5 + _HALF_LOG_TWO_PI + self.scale.log() - math.log(2)
