"""``Categorical``."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from ..eager import creation, ops, random
from ..eager.grad_mode import no_grad
from ..eager.tensor import Size
from ..ir import dtypes
from . import constraints
from .distribution import Distribution, _logits_and_probs


class Categorical(Distribution):
    arg_constraints: ClassVar[dict] = {
        "probs": constraints.simplex,
        "logits": constraints.independent(constraints.real, 1),
    }
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._given_probs = probs is not None
        self.logits, self.probs = _logits_and_probs(probs, logits, binary=False)
        if self.probs.ndim < 1:
            raise ValueError("`probs` parameter must be at least one-dimensional.")
        self._num_events = self.probs.shape[-1]
        super().__init__(self.probs.shape[:-1], validate_args=validate_args)

    def _validate(self):
        if self._given_probs:
            self._require(self.probs >= 0, "probs", self.probs, "Simplex()")

    def _shown_parameters(self):
        return [
            (
                "probs" if self._given_probs else "logits",
                self.probs if self._given_probs else self.logits,
            )
        ]

    @constraints.dependent_property(is_discrete=True)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    param_shape = property(lambda self: self.probs.shape)
    mean = property(lambda self: creation.full_like(self.probs[..., 0], math.nan))
    mode = property(lambda self: self.probs.argmax(-1))
    variance = property(lambda self: creation.full_like(self.probs[..., 0], math.nan))

    def sample(self, sample_shape=()):
        sample_shape = Size(sample_shape)
        count = int(np.prod(sample_shape)) if len(sample_shape) else 1
        with no_grad():
            rows = self.probs.reshape(-1, self._num_events)
            drawn = random.multinomial(rows, count, True).T  # (count, batch)
        return drawn.reshape(self._extended_shape(sample_shape))

    def log_prob(self, value):
        self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, logits = ops.broadcast_tensors(value, self.logits)
        return logits.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        smallest = dtypes.finfo(self.logits.dtype).min
        return -(self.logits.clamp(min=smallest) * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = creation.arange(self._num_events).reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values
