"""``MixtureSameFamily``: a Categorical choice among the components that
the last batch dimension of one distribution holds."""

from __future__ import annotations

from typing import ClassVar

from ..eager.grad_mode import no_grad
from .categorical import Categorical
from .distribution import Distribution


class MixtureSameFamily(Distribution):
    arg_constraints: ClassVar[dict] = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(
                " The Mixture distribution needs to be an  instance of "
                "fusegrad.distributions.Categorical"
            )
        if not isinstance(component_distribution, Distribution):
            raise ValueError(
                "The Component distribution need to be an instance of "
                "fusegrad.distributions.Distribution"
            )
        mixture_batch = tuple(mixture_distribution.batch_shape)
        component_batch = tuple(component_distribution.batch_shape)
        for size1, size2 in zip(reversed(mixture_batch), reversed(component_batch[:-1])):
            if size1 != 1 and size2 != 1 and size1 != size2:
                raise ValueError(
                    f"`mixture_distribution.batch_shape` ({mixture_batch}) is not compatible "
                    f"with `component_distribution.batch_shape`({component_batch})"
                )
        components = mixture_distribution.logits.shape[-1]
        if components != component_batch[-1]:
            raise ValueError(
                f"`mixture_distribution component` ({components}) does not equal "
                f"`component_distribution.batch_shape[-1]` ({component_batch[-1]})"
            )
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(
            component_batch[:-1], component_distribution.event_shape, validate_args=validate_args
        )

    mixture_distribution = property(lambda self: self._mixture_distribution)
    component_distribution = property(lambda self: self._component_distribution)
    support = property(lambda self: self._component_distribution.support)

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape)
        components = self._component_distribution.batch_shape[-1]
        new._component_distribution = self._component_distribution.expand(
            tuple(batch_shape) + (components,)
        )
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        return new

    def _pad_weights(self, weights):
        """Mixture weights shaped to meet the components' (batch..., k, event...)."""
        return weights.reshape(tuple(weights.shape) + (1,) * self._event_ndims)

    @property
    def mean(self):
        weights = self._pad_weights(self._mixture_distribution.probs)
        return (weights * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        # Total variance: the mean of the variances plus the variance of the means.
        weights = self._pad_weights(self._mixture_distribution.probs)
        axis = -1 - self._event_ndims
        means = self._component_distribution.mean
        within = (weights * self._component_distribution.variance).sum(axis)
        between = (weights * (means - self._pad(self.mean)).pow(2)).sum(axis)
        return within + between

    def _pad(self, value):
        return value.unsqueeze(-1 - self._event_ndims)

    def cdf(self, value):
        value = self._pad(value)
        return (self._component_distribution.cdf(value) * self._mixture_distribution.probs).sum(-1)

    def log_prob(self, value):
        self._validate_sample(value)
        component_log_probs = self._component_distribution.log_prob(self._pad(value))
        log_weights = self._mixture_distribution.logits.log_softmax(-1)
        return (component_log_probs + log_weights).logsumexp(-1)

    def sample(self, sample_shape=()):
        with no_grad():
            picks = self._mixture_distribution.sample(sample_shape)  # (sample..., batch...)
            draws = self._component_distribution.sample(sample_shape)  # (..., k, event...)
            event = tuple(self._event_shape)
            index = picks.reshape(tuple(picks.shape) + (1,) * (len(event) + 1))
            index = index.expand(tuple(picks.shape) + (1,) + event)
            return draws.gather(len(picks.shape), index).squeeze(len(picks.shape))
