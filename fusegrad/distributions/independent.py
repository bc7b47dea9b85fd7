"""``Independent``."""

from __future__ import annotations

from typing import ClassVar

from ..eager.tensor import Size
from . import constraints
from .distribution import Distribution


class Independent(Distribution):
    """A distribution whose last ``reinterpreted_batch_ndims`` batch
    dimensions are read as one event: its densities sum over them."""

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        batch = tuple(base_distribution.batch_shape)
        if reinterpreted_batch_ndims > len(batch):
            raise ValueError(
                "Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), "
                f"actual {reinterpreted_batch_ndims} vs {len(batch)}"
            )
        self.base_dist, self.reinterpreted_batch_ndims = (
            base_distribution,
            reinterpreted_batch_ndims,
        )
        split = len(batch) - reinterpreted_batch_ndims
        event = batch[split:] + tuple(base_distribution.event_shape)
        super().__init__(batch[:split], event, validate_args=False)

    arg_constraints: ClassVar[dict] = {}

    has_rsample = property(lambda self: self.base_dist.has_rsample)

    @constraints.dependent_property
    def support(self):
        n = self.reinterpreted_batch_ndims
        return constraints.independent(self.base_dist.support, n) if n else self.base_dist.support

    def expand(self, batch_shape, _instance=None):
        reinterpreted = tuple(self.event_shape)[: self.reinterpreted_batch_ndims]
        base = self.base_dist.expand(tuple(Size(batch_shape)) + reinterpreted)
        return Independent(base, self.reinterpreted_batch_ndims)

    mean = property(lambda self: self.base_dist.mean)
    mode = property(lambda self: self.base_dist.mode)
    variance = property(lambda self: self.base_dist.variance)

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def _summed(self, value):
        n = self.reinterpreted_batch_ndims
        return value.sum(tuple(range(-n, 0))) if n else value

    def log_prob(self, value):
        return self._summed(self.base_dist.log_prob(value))

    def entropy(self):
        return self._summed(self.base_dist.entropy())

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"
