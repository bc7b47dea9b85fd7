"""``InverseGamma``: 1 / X for X ~ Gamma(concentration, rate)."""

from __future__ import annotations

import math
from typing import ClassVar

from ..eager import creation, ops
from . import constraints
from .gamma import Gamma
from .transformed_distribution import TransformedDistribution
from .transforms import PowerTransform


class InverseGamma(TransformedDistribution):
    arg_constraints: ClassVar[dict] = {
        "concentration": constraints.positive,
        "rate": constraints.positive,
    }
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        base = Gamma(concentration, rate, validate_args=validate_args)
        transform = PowerTransform(-creation.ones_like(base.rate))
        super().__init__(base, transform, validate_args=validate_args)

    def _shown_parameters(self):
        return [("concentration", self.concentration), ("rate", self.rate)]

    concentration = property(lambda self: self.base_dist.concentration)
    rate = property(lambda self: self.base_dist.rate)

    @property
    def mean(self):
        return ops.where(self.concentration > 1, self.rate / (self.concentration - 1), math.inf)

    mode = property(lambda self: self.rate / (self.concentration + 1))

    @property
    def variance(self):
        a = self.concentration
        finite = self.rate.pow(2) / ((a - 1).pow(2) * (a - 2))
        return ops.where(a > 2, finite, math.inf)

    def entropy(self):
        a = self.concentration
        return a + self.rate.log() + ops.lgamma(a) - (1 + a) * ops.digamma(a)
