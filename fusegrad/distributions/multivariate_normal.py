"""``MultivariateNormal``."""

from __future__ import annotations

import math
from typing import ClassVar

from .. import linalg
from ..eager import creation, ops
from . import constraints
from .distribution import Distribution


class MultivariateNormal(Distribution):
    """A normal distribution over vectors, given one of its covariance matrix,
    its precision matrix or the lower Cholesky factor of the covariance."""

    has_rsample = True
    arg_constraints: ClassVar[dict] = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector

    def __init__(
        self,
        loc,
        covariance_matrix=None,
        precision_matrix=None,
        scale_tril=None,
        validate_args=None,
    ):
        given = [m is not None for m in (covariance_matrix, precision_matrix, scale_tril)]
        if sum(given) != 1:
            raise ValueError(
                "Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                "specified."
            )
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = linalg.cholesky(linalg.inv(precision_matrix))
        matrix = self._unbroadcasted_scale_tril
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        batch = ops.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1]))
        self.loc = loc.expand(tuple(batch) + (loc.shape[-1],))
        self.scale_tril = matrix.expand(tuple(batch) + tuple(matrix.shape[-2:]))
        super().__init__(batch, (loc.shape[-1],), validate_args=validate_args)

    def _shown_parameters(self):
        return [("loc", self.loc), ("scale_tril", self.scale_tril)]

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)

    @property
    def covariance_matrix(self):
        return self.scale_tril @ self.scale_tril.mT

    @property
    def precision_matrix(self):
        return linalg.inv(self.covariance_matrix)

    @property
    def variance(self):
        return (self.scale_tril**2).sum(-1)

    def rsample(self, sample_shape=()):
        noise = creation.randn(self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + (self.scale_tril @ noise.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return self.scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        difference = value - self.loc
        whitened = linalg.solve(
            self.scale_tril.expand(difference.shape + difference.shape[-1:]), difference
        )
        mahalanobis = (whitened**2).sum(-1)
        size = self._event_shape[0]
        return -0.5 * (size * math.log(2 * math.pi) + mahalanobis) - self._half_log_det()

    def entropy(self):
        size = self._event_shape[0]
        return 0.5 * size * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
