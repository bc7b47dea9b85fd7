"""``Dirichlet``."""

from __future__ import annotations

from typing import ClassVar

from ..eager import creation, ops
from . import constraints
from .distribution import Distribution, _as_parameter
from .gamma import _standard_gamma


class Dirichlet(Distribution):
    arg_constraints: ClassVar[dict] = {
        "concentration": constraints.independent(constraints.positive, 1)
    }
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        self.concentration = _as_parameter(concentration)
        if self.concentration.ndim < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        shape = self.concentration.shape
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def _shown_parameters(self):
        return [("concentration", self.concentration)]

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        above_one = (self.concentration - 1).clamp(min=0)
        mode = above_one / above_one.sum(-1, keepdim=True)
        # With every concentration below 1 the density peaks at a corner.
        largest = self.concentration.argmax(-1, keepdim=True)
        corner = creation.zeros_like(self.concentration).scatter(-1, largest, 1.0)
        return ops.where((self.concentration < 1).all(-1, keepdim=True), corner, mode)

    @property
    def variance(self):
        total = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (total - self.concentration) / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        draws = _standard_gamma(self.concentration.expand(self._extended_shape(sample_shape)))
        return draws / draws.sum(-1, keepdim=True)

    def log_prob(self, value):
        self._validate_sample(value)
        return (
            ops.xlogy(self.concentration - 1.0, value).sum(-1)
            + ops.lgamma(self.concentration.sum(-1))
            - ops.lgamma(self.concentration).sum(-1)
        )

    def entropy(self):
        size = self.concentration.shape[-1]
        total = self.concentration.sum(-1)
        return (
            ops.lgamma(self.concentration).sum(-1)
            - ops.lgamma(total)
            - (size - total) * ops.digamma(total)
            - ((self.concentration - 1.0) * ops.digamma(self.concentration)).sum(-1)
        )
