"""``Pareto``: scale * exp(X) for X ~ Exponential(alpha)."""

from __future__ import annotations

import math
from typing import ClassVar

from ..eager import ops
from . import constraints
from .distribution import _broadcast
from .exponential import Exponential
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, ExpTransform


class Pareto(TransformedDistribution):
    arg_constraints: ClassVar[dict] = {
        "alpha": constraints.positive,
        "scale": constraints.positive,
    }

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = _broadcast(scale, alpha)
        base = Exponential(self.alpha, validate_args=validate_args)
        transforms = [ExpTransform(), AffineTransform(0, self.scale)]
        super().__init__(base, transforms, validate_args=validate_args)

    def _shown_parameters(self):
        return [("alpha", self.alpha), ("scale", self.scale)]

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape)
        new.alpha = new.base_dist.rate
        new.scale = self.scale.expand(tuple(batch_shape))
        return new

    @constraints.dependent_property
    def support(self):
        return constraints.greater_than_eq(self.scale)

    @property
    def mean(self):
        above_one = self.alpha.clamp(min=1)
        return ops.where(self.alpha > 1, above_one * self.scale / (above_one - 1), math.inf)

    mode = property(lambda self: self.scale)

    @property
    def variance(self):
        above_two = self.alpha.clamp(min=2)
        finite = self.scale.pow(2) * above_two / ((above_two - 1).pow(2) * (above_two - 2))
        return ops.where(self.alpha > 2, finite, math.inf)

    def entropy(self):
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())
