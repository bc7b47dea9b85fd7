"""``Distribution``, the base of every distribution, and how parameters
become tensors."""

from __future__ import annotations

from typing import ClassVar

from ..eager import creation, ops
from ..eager.grad_mode import no_grad
from ..eager.tensor import Size, Tensor, recording
from ..ir import dtypes
from . import constraints


def _as_parameter(value, like=None):
    if isinstance(value, Tensor):
        return value if value.is_floating_point() else value.to(dtypes.float32)
    dtype = like.dtype if isinstance(like, Tensor) else None
    return creation.tensor(float(value), dtype=dtype)


def _broadcast(*values):
    tensors = [v for v in values if isinstance(v, Tensor)]
    parameters = [_as_parameter(v, tensors[0] if tensors else None) for v in values]
    return ops.broadcast_tensors(*parameters)


class Distribution:
    """What every distribution has: its batch and event shapes, samples of a
    requested shape, and the checks of its parameters."""

    has_rsample = False
    has_enumerate_support = False
    arg_constraints: ClassVar[dict] = {}
    support = None
    _validate_args_default = True

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape, self._event_shape = Size(batch_shape), Size(event_shape)
        self._validate_args = (
            Distribution._validate_args_default if validate_args is None else validate_args
        )
        if self._checks():
            self._validate()

    @staticmethod
    def set_default_validate_args(value):
        """Whether distributions made without ``validate_args`` check (on by default)."""
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args_default = value

    def _checks(self) -> bool:
        """Whether to check values now: eagerly, unless told not to (a
        compiled program's checks would be values at trace time only)."""
        return self._validate_args and recording.trace is None

    def _require(self, condition, name, value, constraint):
        if not bool(ops.all(condition)):
            raise ValueError(
                f"Expected parameter {name} ({type(value).__name__} of shape "
                f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                f"{constraint}, but found invalid values:\n{value}"
            )

    def _require_support(self, value, inside, support):
        if self._checks() and not bool(ops.all(inside)):
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) "
                f"to be within the support ({support}) of the distribution {self!r}, but found "
                f"invalid values:\n{value}"
            )

    @property
    def batch_shape(self) -> Size:
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        return self._event_shape

    def _validate(self):
        """Checks the parameters as given (those ``_shown_parameters`` names)
        against ``arg_constraints``."""
        for name, value in self._shown_parameters():
            constraint = self.arg_constraints.get(name)
            if constraint is not None and not constraints.is_dependent(constraint):
                self._require(constraint.check(value), name, value, repr(constraint))

    def _validate_sample(self, value):
        if self._checks():
            self._require_support(value, self.support.check(value), repr(self.support))

    def expand(self, batch_shape, _instance=None):
        """This distribution over a larger batch: its parameters (the public
        tensor attributes, each batch-shaped then its own dimensions)
        expanded as views, checks not redone."""
        batch_shape = Size(batch_shape)
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        kept = len(self._batch_shape)
        for name, value in self.__dict__.items():
            if isinstance(value, Tensor) and not name.startswith("_"):
                setattr(new, name, value.expand(tuple(batch_shape) + tuple(value.shape[kept:])))
        new._batch_shape = batch_shape
        return new

    def _extended_shape(self, sample_shape=()):
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def sample(self, sample_shape=()):
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"{type(self).__name__} has no reparameterized samples")

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        raise NotImplementedError

    def sample_n(self, n):
        return self.sample((n,))

    @property
    def mean(self):
        raise NotImplementedError(f"{type(self)} does not implement mean")

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self)} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError(f"{type(self)} does not implement variance")

    def log_prob(self, value):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return self.variance.sqrt()

    def perplexity(self):
        return ops.exp(self.entropy())

    def __repr__(self):
        shown = ", ".join(
            f"{name}: {value.size() if value.numel() > 1 else value}"
            for name, value in self._shown_parameters()
        )
        return f"{type(self).__name__}({shown})"

    def _shown_parameters(self):
        return []


def _logits_and_probs(probs, logits, binary):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    if logits is not None:
        logits = _as_parameter(logits)
        if binary:
            return logits, ops.sigmoid(logits)
        logits = logits - logits.logsumexp(-1, keepdim=True)
        return logits, logits.exp()
    probs = _as_parameter(probs)
    if not binary:
        probs = probs / probs.sum(-1, keepdim=True)
    eps = dtypes.finfo(probs.dtype).eps
    clamped = probs.clamp(eps, 1 - eps)
    if binary:
        return clamped.log() - ops.log1p(-clamped), probs
    return clamped.log(), probs
