"""Linear algebra: PyTorch's ``torch.linalg`` functions and their older
top-level spellings (``torch.inverse``, ``torch.det``, ``Tensor.slogdet``).
The factorizations are primitives (LAPACK through numpy, see primitives.py);
norms, powers and products are compositions of ops."""

from __future__ import annotations

import functools
import math
import warnings
from collections import namedtuple

import numpy as np

from ..ir import dtypes
from ..ir import primitives as P
from ..ir.shapes import normalize_axes, normalize_dim
from .autocast_policy import autocasts
from .creation import arange, eye
from .ops import (
    _named,
    _promote_all,
    _to_float,
    abs,
    amax,
    amin,
    as_tensor_arg,
    expand,
    matmul,
    maximum,
    movedim,
    norm,
    public,
    reshape,
    stack,
    sum,
    unsqueeze,
    where,
)
from .tensor import Tensor


def _result_type(name, fields):
    """A named tuple printed as PyTorch prints its return types."""
    base = namedtuple(name, fields)

    def __repr__(self):
        items = ",\n".join(f"{field}={value!r}" for field, value in zip(fields, self))
        return f"fusegrad.return_types.{name}(\n{items})"

    return type(name, (base,), {"__slots__": (), "__repr__": __repr__})


SlogdetResult = _result_type("slogdet", ["sign", "logabsdet"])


def _matrices(A):
    return _to_float(as_tensor_arg(A, "A"))


@public
def inverse(input):
    return P.inverse(_matrices(input))


@public
def det(input):
    return P.det(_matrices(input))


@public
def slogdet(input):
    A = _matrices(input)
    return SlogdetResult(P.det_sign(A), P.logabsdet(A))


@public
@_named("LogdetBackward0")
def logdet(input):
    """log(det(A)): NaN for a negative determinant, -inf for a zero one."""
    A = _matrices(input)
    sign, logabsdet = P.det_sign(A), P.logabsdet(A)
    return where(sign < 0.0, math.nan, logabsdet)


@public
def cholesky(input, upper=False):
    lower = P.cholesky(_matrices(input))
    return P.swap_last(lower) if upper else lower


EighResult = _result_type("eigh", ["eigenvalues", "eigenvectors"])


@autocasts("linalg_eigh")
def eigh(A, UPLO="L"):
    """The eigenvalues (ascending) and eigenvectors (columns) of symmetric
    matrices, from their lower triangle (upper for ``UPLO="U"``)."""
    A = _matrices(A)
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    if UPLO == "U":
        A = P.swap_last(A)
    stacked = P.eigh(A)
    rows = (slice(None),) * (A.ndim - 2)
    return EighResult(stacked[rows + (0,)], stacked[rows + (slice(1, None),)])


@autocasts("linalg_eigvalsh")
def eigvalsh(A, UPLO="L"):
    return eigh(A, UPLO).eigenvalues


SvdResult = _result_type("svd", ["U", "S", "Vh"])
TorchSvdResult = _result_type("svd", ["U", "S", "V"])


def _svd_of(A):
    A = _matrices(A)
    if A.ndim < 2:
        raise RuntimeError("linalg.svd: The input tensor A must have at least 2 dimensions.")
    return P.svd_parts(P.svd(A), A.shape[-2])


@autocasts("linalg_svd")
def svd(A, full_matrices=True):
    """A = U diag(S) Vh, the singular values descending. The full U and Vh
    of a non-square matrix hold columns no gradient is defined for: only the
    reduced ones (``full_matrices=False``) are computed then."""
    A = _matrices(A)
    if full_matrices and A.ndim >= 2 and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(
            "linalg.svd: full_matrices=True of a non-square matrix is not supported; "
            "use full_matrices=False (the reduced factors)"
        )
    u, values, v = _svd_of(A)
    return SvdResult(u, values, P.swap_last(v))


@autocasts("linalg_svdvals")
def svdvals(A):
    return _svd_of(A)[1]


@public(name="svd")
def _torch_svd(input, some=True, compute_uv=True):
    """``torch.svd``: U, S and V (not V^T), reduced unless ``some=False``."""
    u, values, vh = svd(input, full_matrices=not some)
    return TorchSvdResult(u, values, P.swap_last(vh))


# deprecated functions whose warning was given: PyTorch gives it once
_deprecations_warned: set = set()

QrResult = _result_type("linalg_qr", ["Q", "R"])
TorchQrResult = _result_type("qr", ["Q", "R"])
_QR_MODES = ("reduced", "complete", "r")


@autocasts("linalg_qr")
def qr(A, mode="reduced"):
    """A = QR, Q's columns orthonormal, R upper triangular: Q (m, k) and R
    (k, n), k the smaller size ("reduced"); Q square and R (m, n)
    ("complete"); R alone, Q empty ("r", which has no gradient)."""
    A = as_tensor_arg(A, "A")
    if A.ndim < 2:
        raise RuntimeError("linalg.qr: The input tensor A must have at least 2 dimensions.")
    if mode not in _QR_MODES:
        raise RuntimeError(
            f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), "
            "'r', or 'complete'"
        )
    if not A._dtype.is_floating_point:
        raise RuntimeError(
            "linalg.qr: Expected a floating point or complex tensor as input. Got "
            f"{A._dtype.scalar_name}"
        )
    q, r = P.qr_parts(P.qr(A, mode=mode), A.shape[-2])
    if mode == "r":
        q = Tensor._new(np.zeros(0, A._dtype.np), A._dtype)
    return QrResult(q, r)


@public(name="qr")
def _torch_qr(input, some=True):
    """The deprecated ``torch.qr``: reduced unless ``some=False``."""
    if "qr" not in _deprecations_warned:
        _deprecations_warned.add("qr")
        warnings.warn(
            "torch.qr is deprecated in favor of torch.linalg.qr and will be removed in a future "
            "PyTorch release.\nThe boolean parameter 'some' has been replaced with a string "
            "parameter 'mode'.\nQ, R = torch.qr(A, some)\nshould be replaced with\nQ, R = "
            "torch.linalg.qr(A, 'reduced' if some else 'complete')",
            UserWarning,
            stacklevel=3,  # the caller's line, past autocast's wrapper
        )
    return TorchQrResult(*qr(input, "reduced" if some else "complete"))


@autocasts("linalg_householder_product")
def householder_product(A, tau):
    """The first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T, v_i
    A's column i below its diagonal with a 1 on it: Q from the reflectors
    LAPACK's geqrf leaves (its orgqr)."""
    A, tau = as_tensor_arg(A, "A"), as_tensor_arg(tau, "tau")
    name = "torch.linalg.householder_product"
    if A.ndim < 2:
        raise RuntimeError(f"{name}: input must have at least 2 dimensions.")
    m, n = A.shape[-2:]
    if m < n:
        raise RuntimeError(
            f"{name}: input.shape[-2] must be greater than or equal to input.shape[-1]"
        )
    if n < tau.shape[-1]:
        raise RuntimeError(
            f"{name}: input.shape[-1] must be greater than or equal to tau.shape[-1]"
        )
    if tau.shape[:-1] != A.shape[:-2]:
        raise RuntimeError(
            f"{name}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
            f"{list(tau.shape[:-1])}"
        )
    if tau._dtype is not A._dtype:
        raise RuntimeError(
            f"{name}: tau dtype {tau._dtype.scalar_name} does not match input dtype "
            f"{A._dtype.scalar_name}"
        )
    rows = unsqueeze(arange(m), -1)
    product = expand(eye(m, n, dtype=A._dtype), A.shape)
    for i in reversed(range(tau.shape[-1])):  # H_i applied to the product of those after it
        v = where(rows > i, A[..., i : i + 1], (rows == i).to(A._dtype))
        projected = sum(v * product, -2, keepdim=True)
        product = product - unsqueeze(tau[..., i : i + 1], -1) * v * projected
    return product


@public
def orgqr(input, tau):
    return householder_product(input, tau)


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """The pseudo-inverse V diag(1/s) U^T, singular values at or below the
    tolerance (max(atol, rtol * the largest)) taken as 0."""
    u, values, v = _svd_of(A)
    if rtol is None:
        rtol = (
            0.0
            if atol is not None
            else max(u.shape[-2], v.shape[-2]) * dtypes.finfo(values.dtype).eps
        )
    largest = amax(values, -1, keepdim=True)
    tolerance = largest * rtol if atol is None else maximum(largest * rtol, atol)
    kept = values > tolerance
    reciprocal = where(kept, 1.0 / where(kept, values, 1.0), 0.0)
    return matmul(v * unsqueeze(reciprocal, -2), P.swap_last(u))


@public
def pinverse(input, rcond=1e-15):
    return pinv(input, rtol=rcond)


@autocasts("linalg_matrix_rank")
def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):
    values = svdvals(A)
    if rtol is None:
        rtol = 0.0 if atol is not None else max(A.shape[-2:]) * dtypes.finfo(values.dtype).eps
    largest = amax(values, -1, keepdim=True)
    tolerance = largest * rtol if atol is None else maximum(largest * rtol, atol)
    return sum(values > tolerance, -1)


@autocasts("linalg_solve")
def solve(A, B, *, left=True):
    """X with A X = B (X A = B for ``left=False``). B is one vector per matrix
    where it has A's batch shape with one size (or is 1-d), as in PyTorch."""
    A, B = _promote_all([_matrices(A), as_tensor_arg(B, "B")], "linalg.solve")
    if not left:
        return P.swap_last(solve(P.swap_last(A), P.swap_last(B)))
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])
    if vector:
        return P.solve(A, unsqueeze(B, -1))[..., 0]
    return P.solve(A, B)


@autocasts("linalg_inv")
def inv(A):
    return inverse(A)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    x = as_tensor_arg(x, "x")
    if dtype is not None:
        x = x.to(dtype)
    if dim is None and not keepdim:
        x = reshape(x, -1)
    return norm(x, _vector_ord(ord), dim, keepdim)


def _vector_ord(ord):
    return "fro" if ord == 2 else ord


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The Frobenius norm; the largest (ord inf, 1) or smallest (-inf, -1)
    absolute row or column sum; the largest (2) or smallest (-2) singular
    value, or their sum (nuclear)."""
    A = _to_float(as_tensor_arg(A, "A"))
    if dtype is not None:
        A = A.to(dtype)
    if A.ndim < 2:
        raise RuntimeError(
            "linalg.matrix_norm: The input tensor A must have at least 2 dimensions."
        )
    rows, cols = (normalize_dim(d, A.ndim) for d in dim)
    if ord == "fro":
        return norm(A, "fro", (rows, cols), keepdim)
    if ord in (math.inf, -math.inf, 1, -1):
        summed, across = (cols, rows) if ord in (math.inf, -math.inf) else (rows, cols)
        sums = sum(abs(A), summed, keepdim=True)
        extreme = amax if ord > 0 else amin
        out = extreme(sums, across, keepdim=True)
        return (
            out
            if keepdim
            else reshape(out, tuple(s for d, s in enumerate(A.shape) if d not in (rows, cols)))
        )
    if ord in ("nuc", 2, -2):
        values = svdvals(movedim(A, (rows, cols), (-2, -1)))
        out = sum(values, -1) if ord == "nuc" else (amax if ord == 2 else amin)(values, -1)
        if keepdim:
            out = unsqueeze(unsqueeze(out, min(rows, cols)), max(rows, cols))
        return out
    raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")


def linalg_norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """A vector norm of the flattened input (ord None, dim None), of a vector
    or along one dim; a matrix norm for 2-d inputs or two dims."""
    A = as_tensor_arg(A, "A")
    if dim is not None:
        dims = normalize_axes(dim, A.ndim)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    raise RuntimeError(
        f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
        f"Got {A.ndim}D."
    )


@public
def matrix_power(input, n):
    """A^n by repeated squaring; a negative n powers the inverse."""
    A = as_tensor_arg(input)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(
            "linalg.matrix_power: A must be batches of square matrices, but they are "
            f"{A.shape[-2] if A.ndim > 1 else 1} by {A.shape[-1]} matrices"
        )
    if n == 0:
        return expand(eye(A.shape[-1], dtype=A.dtype), A.shape).clone()
    if n < 0:
        A, n = inverse(A), -n
    result, power = None, A
    while n:
        if n & 1:
            result = power if result is None else matmul(result, power)
        n >>= 1
        if n:
            power = matmul(power, power)
    return result


def multi_dot(tensors):
    """The product of the matrices, first and last may be vectors, multiplied
    left to right."""
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    return functools.reduce(matmul, tensors)


@autocasts("linalg_vecdot")
def vecdot(x, y, *, dim=-1):
    return sum(as_tensor_arg(x, "x") * as_tensor_arg(y, "y"), dim)


@public
def cross(input, other, dim=None):
    """The cross product of 3-vectors along ``dim`` (the first dimension of
    size 3 when not given, as torch.cross did)."""
    a, b = as_tensor_arg(input), as_tensor_arg(other, "other")
    if dim is None:
        dim = next((d for d, size in enumerate(a.shape) if size == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return linalg_cross(a, b, dim=dim)


def linalg_cross(input, other, *, dim=-1):
    a, b = as_tensor_arg(input), as_tensor_arg(other, "other")
    if a.ndim != b.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    axis = normalize_dim(dim, a.ndim)
    if a.shape[axis] != 3 or b.shape[axis] != 3:
        raise RuntimeError(
            f"linalg.cross: inputs dimension {dim} must have length 3. Got {a.shape[axis]} "
            f"and {b.shape[axis]}"
        )
    a0, a1, a2 = (a.select(axis, k) for k in range(3))
    b0, b1, b2 = (b.select(axis, k) for k in range(3))
    return stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis)
