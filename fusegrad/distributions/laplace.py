"""``Laplace``."""

from __future__ import annotations

import math
from typing import ClassVar

from ..eager import creation, ops
from ..ir import dtypes
from . import constraints
from .distribution import Distribution, _broadcast


class Laplace(Distribution):
    arg_constraints: ClassVar[dict] = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = _broadcast(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def _shown_parameters(self):
        return [("loc", self.loc), ("scale", self.scale)]

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)
    variance = property(lambda self: 2 * self.scale.pow(2))
    stddev = property(lambda self: math.sqrt(2) * self.scale)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = dtypes.finfo(self.loc.dtype).eps
        # u in (-1, 1): -1 excluded so log1p(-|u|) stays finite.
        u = creation.rand(shape, dtype=self.loc.dtype) * (2 - eps) - (1 - eps)
        return self.loc - self.scale * u.sign() * ops.log1p(-u.abs())

    def log_prob(self, value):
        self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        self._validate_sample(value)
        shifted = value - self.loc
        return 0.5 - 0.5 * shifted.sign() * ops.expm1(-shifted.abs() / self.scale)

    def icdf(self, value):
        centered = value - 0.5
        return self.loc - self.scale * centered.sign() * ops.log1p(-2 * centered.abs())

    def entropy(self):
        return 1 + (2 * self.scale).log()
