"""``fusegrad.linalg``: PyTorch's ``torch.linalg`` (inverses, solves,
determinants, Cholesky factors, symmetric eigendecompositions, norms and
products). Singular value decompositions are not here yet."""

from .tracer.linalg import (
    cholesky,
    det,
    eigh,
    eigvalsh,
    inv,
    matrix_norm,
    matrix_power,
    multi_dot,
    slogdet,
    solve,
    vecdot,
    vector_norm,
)
from .tracer.linalg import (
    linalg_cross as cross,
)
from .tracer.linalg import (
    linalg_norm as norm,
)
from .tracer.ops import diagonal, matmul

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
    "multi_dot",
    "norm",
    "slogdet",
    "solve",
    "vecdot",
    "vector_norm",
]
