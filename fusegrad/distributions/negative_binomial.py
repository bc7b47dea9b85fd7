"""``NegativeBinomial``: the number of successes before ``total_count``
failures, each trial a success with probability ``probs``."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..eager import creation, ops
from ..eager.grad_mode import no_grad
from ..nn import functional as F
from . import constraints
from .distribution import Distribution, _as_parameter, _logits_and_probs
from .gamma import _standard_gamma
from .poisson import _poisson_draws


class NegativeBinomial(Distribution):
    arg_constraints: ClassVar[dict] = {
        "total_count": constraints.greater_than_eq(0),
        "probs": constraints.half_open_interval(0.0, 1.0),
        "logits": constraints.real,
    }
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        self._given_probs = probs is not None
        logits, probs = _logits_and_probs(probs, logits, binary=True)
        count = _as_parameter(total_count, probs).to(probs.dtype)
        self.total_count, self.probs, self.logits = ops.broadcast_tensors(count, probs, logits)
        super().__init__(self.probs.shape, validate_args=validate_args)

    def _shown_parameters(self):
        given = ("probs", self.probs) if self._given_probs else ("logits", self.logits)
        return [("total_count", self.total_count), given]

    mean = property(lambda self: self.total_count * self.logits.exp())
    mode = property(
        lambda self: ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)
    )
    variance = property(lambda self: self.mean / ops.sigmoid(-self.logits))

    def sample(self, sample_shape=()):
        # A Poisson count whose rate is Gamma(total_count, odds of failure) distributed.
        shape = self._extended_shape(sample_shape)
        with no_grad():
            rates = _standard_gamma(self.total_count.expand(shape)) * self.logits.exp()
            draws = _poisson_draws(rates.numpy().astype(np.float64))
            return creation.tensor(draws, dtype=self.probs.dtype)

    def log_prob(self, value):
        self._validate_sample(value)
        unnormalized = self.total_count * F.logsigmoid(-self.logits) + value * F.logsigmoid(
            self.logits
        )
        normalizer = (
            ops.lgamma(1 + value)
            + ops.lgamma(self.total_count)
            - ops.lgamma(self.total_count + value)
        )
        # No trials and no successes: probability 1, where lgamma(0) would be inf.
        normalizer = ops.where(self.total_count + value == 0, 0.0, normalizer)
        return unnormalized - normalizer
