"""``Gumbel``."""

from __future__ import annotations

import math
from typing import ClassVar

from ..eager import creation, ops
from ..ir import dtypes
from . import constraints
from .distribution import Distribution, _broadcast

_EULER_GAMMA = 0.57721566490153286060


class Gumbel(Distribution):
    arg_constraints: ClassVar[dict] = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = _broadcast(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def _shown_parameters(self):
        return [("loc", self.loc), ("scale", self.scale)]

    mean = property(lambda self: self.loc + self.scale * _EULER_GAMMA)
    mode = property(lambda self: self.loc)
    stddev = property(lambda self: (math.pi / math.sqrt(6)) * self.scale)
    variance = property(lambda self: self.stddev.pow(2))

    def rsample(self, sample_shape=()):
        finfo = dtypes.finfo(self.loc.dtype)
        unit = creation.rand(self._extended_shape(sample_shape), dtype=self.loc.dtype)
        unit = unit.clamp(min=finfo.tiny, max=1 - finfo.eps)
        return self.loc - self.scale * (-unit.log()).log()

    def log_prob(self, value):
        self._validate_sample(value)
        z = (value - self.loc) / self.scale
        return -(self.scale.log() + z + ops.exp(-z))

    def cdf(self, value):
        self._validate_sample(value)
        return ops.exp(-ops.exp(-(value - self.loc) / self.scale))

    def icdf(self, value):
        return self.loc - self.scale * (-value.log()).log()

    def entropy(self):
        return self.scale.log() + (1 + _EULER_GAMMA)
