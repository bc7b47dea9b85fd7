"""``LogitRelaxedBernoulli`` and ``RelaxedBernoulli`` (the binary Concrete
distribution, Maddison et al. 2017): reparameterized stand-ins for a
Bernoulli, sharper as the temperature falls."""

from __future__ import annotations

from typing import ClassVar

from ..eager import creation, ops
from ..nn import functional as F
from . import constraints
from .distribution import Distribution, _as_parameter, _logits_and_probs
from .transformed_distribution import TransformedDistribution
from .transforms import SigmoidTransform, _clamp_probs


class LogitRelaxedBernoulli(Distribution):
    """The logit of a RelaxedBernoulli draw."""

    arg_constraints: ClassVar[dict] = {
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    support = constraints.real
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._given_probs = probs is not None
        logits, probs = _logits_and_probs(probs, logits, binary=True)
        self.temperature = _as_parameter(temperature, probs)
        self.logits, self.probs = ops.broadcast_tensors(logits, probs)
        super().__init__(self.probs.shape, validate_args=validate_args)

    def _shown_parameters(self):
        if self._given_probs:
            return [("probs", self.probs)]
        return [("logits", self.logits)]

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape)
        new.temperature = self.temperature  # broadcasts as given: not batch-shaped
        return new

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        unit = _clamp_probs(creation.rand(shape, dtype=self.probs.dtype))
        return (unit.log() - ops.log1p(-unit) + self.logits) / self.temperature

    def log_prob(self, value):
        self._validate_sample(value)
        difference = self.logits - value * self.temperature
        return self.temperature.log() + difference - 2 * F.softplus(difference)


class RelaxedBernoulli(TransformedDistribution):
    arg_constraints: ClassVar[dict] = {
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = LogitRelaxedBernoulli(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, SigmoidTransform(), validate_args=validate_args)

    def _shown_parameters(self):
        return self.base_dist._shown_parameters()

    temperature = property(lambda self: self.base_dist.temperature)
    logits = property(lambda self: self.base_dist.logits)
    probs = property(lambda self: self.base_dist.probs)
