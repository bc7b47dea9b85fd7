"""``fusegrad.linalg``: PyTorch's ``torch.linalg`` (inverses, solves,
determinants, Cholesky factors, symmetric eigendecompositions,
singular value decompositions, pseudo-inverses, norms and products)."""

from .eager.linalg import (
    cholesky,
    det,
    eigh,
    eigvalsh,
    inv,
    matrix_norm,
    matrix_power,
    matrix_rank,
    multi_dot,
    pinv,
    slogdet,
    solve,
    svd,
    svdvals,
    vecdot,
    vector_norm,
)
from .eager.linalg import (
    linalg_cross as cross,
)
from .eager.linalg import (
    linalg_norm as norm,
)
from .eager.ops import diagonal, matmul

__all__ = [
    "cholesky",
    "cross",
    "det",
    "diagonal",
    "eigh",
    "eigvalsh",
    "inv",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "multi_dot",
    "pinv",
    "norm",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "vecdot",
    "vector_norm",
]
