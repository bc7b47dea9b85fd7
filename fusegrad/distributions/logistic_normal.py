"""``LogisticNormal``: a normal vector carried onto the simplex by stick
breaking."""

from __future__ import annotations

from typing import ClassVar

from . import constraints
from .independent import Independent
from .normal import Normal
from .transformed_distribution import TransformedDistribution
from .transforms import StickBreakingTransform


class LogisticNormal(TransformedDistribution):
    arg_constraints: ClassVar[dict] = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base = Normal(loc, scale, validate_args=validate_args)
        if not base.batch_shape:
            base = base.expand((1,))
        super().__init__(
            Independent(base, 1), StickBreakingTransform(), validate_args=validate_args
        )

    def _shown_parameters(self):
        return [("loc", self.loc), ("scale", self.scale)]

    loc = property(lambda self: self.base_dist.base_dist.loc)
    scale = property(lambda self: self.base_dist.base_dist.scale)
