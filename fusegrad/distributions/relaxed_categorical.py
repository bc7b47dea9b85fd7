"""``ExpRelaxedCategorical`` and ``RelaxedOneHotCategorical`` (the Concrete
or Gumbel-softmax distribution, Maddison et al. 2017, Jang et al. 2017):
reparameterized stand-ins for a OneHotCategorical."""

from __future__ import annotations

import math
from typing import ClassVar

from ..eager import creation
from . import constraints
from .categorical import Categorical
from .distribution import Distribution, _as_parameter
from .transformed_distribution import TransformedDistribution
from .transforms import ExpTransform, _clamp_probs


class ExpRelaxedCategorical(Distribution):
    """The log of a RelaxedOneHotCategorical draw."""

    arg_constraints: ClassVar[dict] = {
        "probs": constraints.simplex,
        "logits": constraints.independent(constraints.real, 1),
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits, validate_args=False)
        self.probs, self.logits = self._categorical.probs, self._categorical.logits
        self.temperature = _as_parameter(temperature, self.probs)
        shape = self._categorical.param_shape
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def _shown_parameters(self):
        return self._categorical._shown_parameters()

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape)
        new.temperature = self.temperature  # broadcasts as given: not batch-shaped
        new._categorical = self._categorical.expand(batch_shape)
        return new

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        unit = _clamp_probs(creation.rand(shape, dtype=self.logits.dtype))
        gumbels = -((-unit.log()).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(-1, keepdim=True)

    def log_prob(self, value):
        self._validate_sample(value)
        size = self._event_shape[0]
        log_scale = math.lgamma(size) + (size - 1) * self.temperature.log()
        score = self.logits - value * self.temperature
        score = (score - score.logsumexp(-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    arg_constraints: ClassVar[dict] = {
        "probs": constraints.simplex,
        "logits": constraints.independent(constraints.real, 1),
    }
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    def _shown_parameters(self):
        return self.base_dist._shown_parameters()

    temperature = property(lambda self: self.base_dist.temperature)
    logits = property(lambda self: self.base_dist.logits)
    probs = property(lambda self: self.base_dist.probs)
