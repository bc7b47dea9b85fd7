"""``Geometric``: the number of failures before the first success."""

from __future__ import annotations

from typing import ClassVar

from ..eager import creation, ops
from ..eager.grad_mode import no_grad
from ..ir import dtypes
from ..nn import functional as F
from . import constraints
from .distribution import Distribution, _logits_and_probs


class Geometric(Distribution):
    arg_constraints: ClassVar[dict] = {
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._given_probs = probs is not None
        self.logits, self.probs = _logits_and_probs(probs, logits, binary=True)
        super().__init__(self.probs.shape, validate_args=validate_args)

    def _validate(self):
        super()._validate()
        if self._given_probs:
            # A success probability of 0 never stops: PyTorch's extra check.
            invalid = ~(self.probs > 0)
            if bool(invalid.any()):
                raise ValueError(
                    f"Expected parameter probs ({type(self.probs).__name__} of shape "
                    f"{tuple(self.probs.shape)}) of distribution {self!r} to be positive but "
                    f"found invalid values:\n{self.probs.reshape(-1)[invalid.reshape(-1)]}"
                )

    def _shown_parameters(self):
        if self._given_probs:
            return [("probs", self.probs)]
        return [("logits", self.logits)]

    mean = property(lambda self: 1.0 / self.probs - 1.0)
    mode = property(lambda self: creation.zeros_like(self.probs))
    variance = property(lambda self: (1.0 / self.probs - 1.0) / self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        tiny = dtypes.finfo(self.probs.dtype).tiny
        with no_grad():
            unit = creation.rand(shape, dtype=self.probs.dtype).clamp(min=tiny)
            return (unit.log() / ops.log1p(-self.probs)).floor()

    def log_prob(self, value):
        self._validate_sample(value)
        value, probs = ops.broadcast_tensors(value, self.probs)
        # A certain success has probability 1 at 0 failures: 0 * log(0) is 0 there.
        certain = (probs == 1) & (value == 0)
        failures = ops.where(certain, 0.0, value * ops.log1p(-probs))
        return failures + probs.clamp(min=dtypes.finfo(probs.dtype).tiny).log()

    def entropy(self):
        return (
            F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")
            / self.probs
        )
