"""``LogNormal``: exp(X) for X ~ Normal(loc, scale)."""

from __future__ import annotations

from typing import ClassVar

from ..eager import ops
from . import constraints
from .distribution import _broadcast
from .normal import Normal
from .transformed_distribution import TransformedDistribution
from .transforms import ExpTransform


class LogNormal(TransformedDistribution):
    arg_constraints: ClassVar[dict] = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = _broadcast(loc, scale)
        base = Normal(self.loc, self.scale, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    def _shown_parameters(self):
        return [("loc", self.loc), ("scale", self.scale)]

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape)
        new.loc, new.scale = new.base_dist.loc, new.base_dist.scale
        return new

    mean = property(lambda self: (self.loc + self.scale.pow(2) / 2).exp())
    mode = property(lambda self: (self.loc - self.scale.pow(2)).exp())

    @property
    def variance(self):
        spread = self.scale.pow(2)
        return ops.expm1(spread) * (2 * self.loc + spread).exp()

    def entropy(self):
        return self.base_dist.entropy() + self.loc
