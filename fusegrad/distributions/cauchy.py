"""``Cauchy``."""

from __future__ import annotations

import math
from typing import ClassVar

from ..eager import creation, ops
from . import constraints
from .distribution import Distribution, _broadcast


class Cauchy(Distribution):
    arg_constraints: ClassVar[dict] = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = _broadcast(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def _shown_parameters(self):
        return [("loc", self.loc), ("scale", self.scale)]

    mean = property(lambda self: creation.full_like(self.loc, math.nan))
    mode = property(lambda self: self.loc)
    variance = property(lambda self: creation.full_like(self.loc, math.inf))

    def rsample(self, sample_shape=()):
        unit = creation.rand(self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + self.scale * ops.tan(math.pi * (unit - 0.5))

    def log_prob(self, value):
        self._validate_sample(value)
        return (
            -math.log(math.pi)
            - self.scale.log()
            - ops.log1p(((value - self.loc) / self.scale).pow(2))
        )

    def cdf(self, value):
        self._validate_sample(value)
        return ops.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return ops.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()
