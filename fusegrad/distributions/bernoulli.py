"""``Bernoulli``."""

from __future__ import annotations

from typing import ClassVar

from ..eager import creation, ops, random
from ..eager.grad_mode import no_grad
from ..nn import functional as F
from . import constraints
from .distribution import Distribution, _as_parameter, _logits_and_probs


class Bernoulli(Distribution):
    arg_constraints: ClassVar[dict] = {
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._given_probs = probs is not None
        self.logits, self.probs = _logits_and_probs(probs, logits, binary=True)
        super().__init__(self.probs.shape, validate_args=validate_args)

    def _shown_parameters(self):
        return [
            (
                "probs" if self._given_probs else "logits",
                self.probs if self._given_probs else self.logits,
            )
        ]

    mean = property(lambda self: self.probs)
    mode = property(lambda self: (self.probs >= 0.5).to(self.probs.dtype))
    variance = property(lambda self: self.probs * (1 - self.probs))

    def sample(self, sample_shape=()):
        with no_grad():
            return random.bernoulli(self.probs.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        value = _as_parameter(value, self.logits).to(self.logits.dtype)
        self._validate_sample(value)
        logits, value = ops.broadcast_tensors(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand=True):
        values = creation.arange(2, dtype=self.probs.dtype)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values
