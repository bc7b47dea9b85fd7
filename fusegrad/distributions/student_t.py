"""``StudentT``."""

from __future__ import annotations

import math
from typing import ClassVar

from ..eager import creation, ops
from . import constraints
from .distribution import Distribution, _broadcast
from .gamma import _standard_gamma


class StudentT(Distribution):
    arg_constraints: ClassVar[dict] = {
        "df": constraints.positive,
        "loc": constraints.real,
        "scale": constraints.positive,
    }
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = _broadcast(df, loc, scale)
        super().__init__(self.df.shape, validate_args=validate_args)

    def _shown_parameters(self):
        return [("df", self.df), ("loc", self.loc), ("scale", self.scale)]

    mean = property(lambda self: ops.where(self.df > 1, self.loc, math.nan))
    mode = property(lambda self: self.loc)

    @property
    def variance(self):
        finite = self.scale.pow(2) * self.df / (self.df - 2)
        unbounded = ops.where(self.df > 1, math.inf, math.nan)
        return ops.where(self.df > 2, finite, unbounded)

    def rsample(self, sample_shape=()):
        # loc + scale * X / sqrt(Z / df), X normal and Z ~ Chi2(df) = 2 Gamma(df / 2).
        shape = self._extended_shape(sample_shape)
        noise = creation.randn(shape, dtype=self.df.dtype)
        chi2 = 2 * _standard_gamma(0.5 * self.df.expand(shape))
        return self.loc + self.scale * noise * (chi2 / self.df).rsqrt()

    def log_prob(self, value):
        self._validate_sample(value)
        y = (value - self.loc) / self.scale
        normalizer = (
            self.scale.log()
            + 0.5 * self.df.log()
            + 0.5 * math.log(math.pi)
            + ops.lgamma(0.5 * self.df)
            - ops.lgamma(0.5 * (self.df + 1.0))
        )
        return -0.5 * (self.df + 1.0) * ops.log1p(y.pow(2) / self.df) - normalizer

    def entropy(self):
        half_next = 0.5 * (self.df + 1)
        log_beta = ops.lgamma(0.5 * self.df) + math.lgamma(0.5) - ops.lgamma(half_next)
        return (
            self.scale.log()
            + half_next * (ops.digamma(half_next) - ops.digamma(0.5 * self.df))
            + 0.5 * self.df.log()
            + log_beta
        )
