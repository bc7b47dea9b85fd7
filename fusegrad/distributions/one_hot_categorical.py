"""``OneHotCategorical`` and ``OneHotCategoricalStraightThrough``."""

from __future__ import annotations

from typing import ClassVar

from ..eager import creation
from ..nn import functional as F
from . import constraints
from .categorical import Categorical
from .distribution import Distribution


class OneHotCategorical(Distribution):
    """A Categorical whose values are one-hot vectors."""

    arg_constraints: ClassVar[dict] = {
        "probs": constraints.simplex,
        "logits": constraints.independent(constraints.real, 1),
    }
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
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

    param_shape = property(lambda self: self._categorical.param_shape)
    mean = property(lambda self: self.probs)
    variance = property(lambda self: self.probs * (1 - self.probs))

    @property
    def mode(self):
        return F.one_hot(self.probs.argmax(-1), self._event_shape[-1]).to(self.probs.dtype)

    def sample(self, sample_shape=()):
        indices = self._categorical.sample(sample_shape)
        return F.one_hot(indices, self._event_shape[-1]).to(self.probs.dtype)

    def log_prob(self, value):
        self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        size = self._event_shape[0]
        values = creation.eye(size, dtype=self.probs.dtype)
        values = values.reshape((size,) + (1,) * len(self._batch_shape) + (size,))
        return values.expand((size,) + tuple(self._batch_shape) + (size,)) if expand else values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """Reparameterized by the straight-through estimator: a one-hot sample
    whose gradient is the probabilities' (Bengio et al., 2013)."""

    has_rsample = True

    def rsample(self, sample_shape=()):
        samples = self.sample(sample_shape)
        return samples + (self.probs - self.probs.detach())
