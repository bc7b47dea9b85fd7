"""``Multinomial``: the counts of ``total_count`` Categorical draws."""

from __future__ import annotations

import math
from typing import ClassVar

from ..eager import ops
from ..nn import functional as F
from . import constraints
from .binomial import Binomial
from .categorical import Categorical
from .distribution import Distribution


class Multinomial(Distribution):
    arg_constraints: ClassVar[dict] = {
        "probs": constraints.simplex,
        "logits": constraints.independent(constraints.real, 1),
    }

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs, logits, validate_args=False)
        self.probs, self.logits = self._categorical.probs, self._categorical.logits
        shape = self._categorical.param_shape
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def _shown_parameters(self):
        return self._categorical._shown_parameters()

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape)
        new._categorical = self._categorical.expand(batch_shape)
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    param_shape = property(lambda self: self._categorical.param_shape)
    mean = property(lambda self: self.probs * self.total_count)
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    def sample(self, sample_shape=()):
        picks = self._categorical.sample((self.total_count,) + tuple(sample_shape))
        return F.one_hot(picks, self._event_shape[0]).sum(0).to(self.probs.dtype)

    def log_prob(self, value):
        self._validate_sample(value)
        logits, value = ops.broadcast_tensors(self.logits, value)
        # An impossible category drawn no times contributes nothing, not 0 * -inf.
        logits = ops.where((value == 0) & (logits == -math.inf), 0.0, logits)
        log_factorial_n = ops.lgamma(value.sum(-1) + 1)
        log_factorial_xs = ops.lgamma(value + 1).sum(-1)
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)

    def entropy(self):
        count = self.total_count
        term1 = count * self._categorical.entropy() - math.lgamma(count + 1)
        marginals = Binomial(count, self.probs)
        counts = marginals.enumerate_support(False)[1:]  # 0! contributes 0
        weights = ops.lgamma(counts + 1)
        return term1 + (marginals.log_prob(counts).exp() * weights).sum((0, -1))
