"""``Weibull``: scale * X^(1 / concentration) for X ~ Exponential(1)."""

from __future__ import annotations

from typing import ClassVar

from ..eager import creation, ops
from . import constraints
from .distribution import _broadcast
from .exponential import Exponential
from .gumbel import _EULER_GAMMA
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform


class Weibull(TransformedDistribution):
    arg_constraints: ClassVar[dict] = {
        "scale": constraints.positive,
        "concentration": constraints.positive,
    }
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = _broadcast(scale, concentration)
        base = Exponential(creation.ones_like(self.scale), validate_args=validate_args)
        transforms = [
            PowerTransform(self.concentration.reciprocal()),
            AffineTransform(0, self.scale),
        ]
        super().__init__(base, transforms, validate_args=validate_args)

    def _shown_parameters(self):
        return [("scale", self.scale), ("concentration", self.concentration)]

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape)
        new.scale = self.scale.expand(tuple(batch_shape))
        new.concentration = self.concentration.expand(tuple(batch_shape))
        return new

    @property
    def mean(self):
        return self.scale * ops.lgamma(1 + self.concentration.reciprocal()).exp()

    @property
    def mode(self):
        k = self.concentration
        return self.scale * ((k - 1) / k).pow(k.reciprocal()).clamp(min=0)

    @property
    def variance(self):
        k = self.concentration
        return self.scale.pow(2) * (
            ops.lgamma(1 + 2 / k).exp() - ops.lgamma(1 + k.reciprocal()).exp().pow(2)
        )

    def entropy(self):
        k = self.concentration
        return _EULER_GAMMA * (1 - k.reciprocal()) + (self.scale / k).log() + 1
