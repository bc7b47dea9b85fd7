"""``fusegrad.linalg``: PyTorch's ``torch.linalg`` (inverses, solves,
determinants, Cholesky factors, symmetric eigendecompositions,
singular value decompositions, QR factorizations, pseudo-inverses, norms
and products)."""

from .eager.linalg import (
    cholesky,
    det,
    eigh,
    eigvalsh,
    householder_product,
    inv,
    matrix_norm,
    matrix_power,
    matrix_rank,
    multi_dot,
    pinv,
    qr,
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
    "householder_product",
    "inv",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "multi_dot",
    "pinv",
    "norm",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "vecdot",
    "vector_norm",
]
