"""``LowRankMultivariateNormal``: a normal distribution over vectors whose
covariance is a diagonal plus a low-rank product, W W^T + D. Densities use
the Woodbury identity and the determinant lemma through the small
"capacitance" matrix I + W^T D^-1 W, so no n x n matrix is factored."""

from __future__ import annotations

import math
from typing import ClassVar

from .. import linalg
from ..eager import creation, ops
from . import constraints
from .distribution import Distribution


def _capacitance_tril(cov_factor, cov_diag):
    """The Cholesky factor of I + W^T D^-1 W."""
    rank = cov_factor.shape[-1]
    scaled = cov_factor / cov_diag.unsqueeze(-1)
    capacitance = cov_factor.mT @ scaled + creation.eye(rank, dtype=cov_factor.dtype)
    return linalg.cholesky(capacitance)


class LowRankMultivariateNormal(Distribution):
    arg_constraints: ClassVar[dict] = {
        "loc": constraints.real_vector,
        "cov_factor": constraints.independent(constraints.real, 2),
        "cov_diag": constraints.independent(constraints.positive, 1),
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        size = loc.shape[-1]
        if cov_factor.ndim < 2:
            raise ValueError(
                "cov_factor must be at least two-dimensional, with optional leading batch "
                "dimensions"
            )
        if cov_factor.shape[-2] != size:
            raise ValueError(f"cov_factor must be a batch of matrices with shape {size} x m")
        if tuple(cov_diag.shape[-1:]) != (size,):
            raise ValueError(f"cov_diag must be a batch of vectors with shape {loc.shape[-1:]}")
        try:
            loc_, self.cov_factor, diag_ = ops.broadcast_tensors(
                loc.unsqueeze(-1), cov_factor, cov_diag.unsqueeze(-1)
            )
        except RuntimeError as error:
            raise ValueError(
                f"Incompatible batch shapes: loc {loc.shape}, cov_factor {cov_factor.shape}, "
                f"cov_diag {cov_diag.shape}"
            ) from error
        self.loc, self.cov_diag = loc_[..., 0], diag_[..., 0]
        super().__init__(self.loc.shape[:-1], (size,), validate_args=validate_args)
        self._capacitance_tril = _capacitance_tril(self.cov_factor, self.cov_diag)

    def _shown_parameters(self):
        return [("loc", self.loc), ("cov_factor", self.cov_factor), ("cov_diag", self.cov_diag)]

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape)
        shape = tuple(batch_shape) + tuple(self._capacitance_tril.shape[-2:])
        new._capacitance_tril = self._capacitance_tril.expand(shape)
        return new

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)
    variance = property(lambda self: self.cov_factor.pow(2).sum(-1) + self.cov_diag)

    @property
    def covariance_matrix(self):
        return self.cov_factor @ self.cov_factor.mT + ops.diag_embed(self.cov_diag)

    @property
    def scale_tril(self):
        return linalg.cholesky(self.covariance_matrix)

    @property
    def precision_matrix(self):
        # Woodbury: D^-1 - D^-1 W C^-1 W^T D^-1.
        scaled = self.cov_factor / self.cov_diag.unsqueeze(-1)
        whitened = linalg.solve(self._capacitance_tril, scaled.mT)
        return ops.diag_embed(self.cov_diag.reciprocal()) - whitened.mT @ whitened

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        rank = self.cov_factor.shape[-1]
        low_rank_noise = creation.randn(shape[:-1] + (rank,), dtype=self.loc.dtype)
        diagonal_noise = creation.randn(shape, dtype=self.loc.dtype)
        along_factor = (self.cov_factor @ low_rank_noise.unsqueeze(-1)).squeeze(-1)
        return self.loc + along_factor + self.cov_diag.sqrt() * diagonal_noise

    def _log_det(self):
        """log det(W W^T + D) by the determinant lemma."""
        tril_diagonal = self._capacitance_tril.diagonal(dim1=-2, dim2=-1)
        return 2 * tril_diagonal.log().sum(-1) + self.cov_diag.log().sum(-1)

    def _whitened_factor(self, matrix):
        """L_C^-1 W^T D^-1 M, whose squared norms the Woodbury identity subtracts."""
        projected = self.cov_factor.mT @ (matrix / self.cov_diag.unsqueeze(-1))
        tril = self._capacitance_tril
        shape = ops.broadcast_shapes(tuple(tril.shape[:-2]), tuple(projected.shape[:-2]))
        return linalg.solve(
            tril.expand(tuple(shape) + tuple(tril.shape[-2:])),
            projected.expand(tuple(shape) + tuple(projected.shape[-2:])),
        )

    def _squared_norm(self, matrix):
        """The sum over columns m of m^T (W W^T + D)^-1 m."""
        plain = (matrix.pow(2) / self.cov_diag.unsqueeze(-1)).sum((-2, -1))
        return plain - self._whitened_factor(matrix).pow(2).sum((-2, -1))

    def log_prob(self, value):
        self._validate_sample(value)
        difference = (value - self.loc).unsqueeze(-1)
        size = self._event_shape[0]
        return -0.5 * (
            size * math.log(2 * math.pi) + self._log_det() + self._squared_norm(difference)
        )

    def entropy(self):
        size = self._event_shape[0]
        return 0.5 * (size * (1.0 + math.log(2 * math.pi)) + self._log_det())
