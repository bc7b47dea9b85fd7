"""``Normal``."""

from __future__ import annotations

import math
from typing import ClassVar

from ..eager import creation, ops
from . import constraints
from .distribution import Distribution, _broadcast

_HALF_LOG_TWO_PI = 0.5 * math.log(2 * math.pi)


class Normal(Distribution):
    has_rsample = True
    arg_constraints: ClassVar[dict] = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = _broadcast(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def _shown_parameters(self):
        return [("loc", self.loc), ("scale", self.scale)]

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)
    stddev = property(lambda self: self.scale)
    variance = property(lambda self: self.scale**2)

    def rsample(self, sample_shape=()):
        noise = creation.randn(self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + noise * self.scale

    def log_prob(self, value):
        return (
            -((value - self.loc) ** 2) / (2 * self.variance) - self.scale.log() - _HALF_LOG_TWO_PI
        )

    def cdf(self, value):
        return 0.5 * (1 + ops.erf((value - self.loc) / (self.scale * math.sqrt(2))))

    def icdf(self, value):
        return self.loc + self.scale * ops.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + _HALF_LOG_TWO_PI + self.scale.log()
