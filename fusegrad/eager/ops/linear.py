"""Products of vectors, matrices and tensors: dot, mm, mv, bmm, matmul,
outer, inner, tensordot, kron, and a product added to a tensor (addmm,
addmv, addr, baddbmm, addbmm). einsum and torch.linalg's functions are
eager/einsum.py's and eager/linalg.py's."""

from __future__ import annotations

import builtins
import math

from ...ir import primitives as P
from ...ir.shapes import broadcast_shapes, normalize_dim
from ..tensor import Tensor
from .arguments import _ints, _short, as_tensor_arg
from .composite import _named
from .copies import clone
from .registry import public
from .shape import broadcast_to, permute, reshape, unsqueeze

# ------------------------------------------------------------- matrix products


def _check_same_dtype(a, b, what):
    if a._dtype is not b._dtype:
        if what == "dot":
            raise RuntimeError(
                f"dot : expected both vectors to have same dtype, but found "
                f"{_short(a._dtype)} and {_short(b._dtype)}"
            )
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: "
            f"{_c_name(a._dtype)} != {_c_name(b._dtype)}"
        )


def _c_name(dtype) -> str:
    """The dtype's name as some of PyTorch's messages spell it (C's)."""
    return dtype.name.replace("float32", "float").replace("float64", "double")


def _refuse_mixed_dtypes(operands: list, message):
    """PyTorch's fused products (addmv, baddbmm) refuse operands of
    different dtypes rather than promote: ``message(dtypes)`` says so."""
    operands = [as_tensor_arg(t) for t in operands]
    if len({t._dtype for t in operands}) > 1:
        raise RuntimeError(message([t._dtype for t in operands]))


@public(out=True)
@_named("DotBackward0")
def dot(input, other):
    input, other = as_tensor_arg(input), as_tensor_arg(other, "other")
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.shape != other.shape:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{input.shape[0]}] and "
            f"src [{other.shape[0]}] to have the same number of elements, but "
            f"got {input.shape[0]} and {other.shape[0]} elements respectively"
        )
    _check_same_dtype(input, other, "dot")
    return P.reduce_sum(P.mul(input, other), axes=(0,))


@public
def vdot(input, other):
    return dot(input, other)


@public(out=True)
@_named("MmBackward0")
def mm(input, mat2):
    input, mat2 = as_tensor_arg(input), as_tensor_arg(mat2, "mat2")
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"{'self' if input.ndim != 2 else 'mat2'} must be a matrix")
    if input.is_sparse or mat2.is_sparse:
        return _sparse_matmul(input, mat2)
    _check_same_dtype(input, mat2, "mm")
    return P.matmul(input, mat2)


@public(out=True)
@_named("MvBackward0")
def mv(input, vec):
    input, vec = as_tensor_arg(input), as_tensor_arg(vec, "vec")
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.ndim}, {vec.ndim}")
    _check_same_dtype(input, vec, "mv")
    out = P.matmul(input, P.reshape(vec, shape=(vec.shape[0], 1)))
    return P.reshape(out, shape=(input.shape[0],))


@public(out=True)
@_named("BmmBackward0")
def bmm(input, mat2):
    input, mat2 = as_tensor_arg(input), as_tensor_arg(mat2, "mat2")
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError(f"batch{1 if input.ndim != 3 else 2} must be a 3D tensor")
    if input.shape[0] != mat2.shape[0]:
        raise RuntimeError(
            "batch1 and batch2 must have same number of batches, got "
            f"{input.shape[0]} and {mat2.shape[0]}"
        )
    _check_same_dtype(input, mat2, "bmm")
    return P.matmul(input, mat2)


@public(out=True)
def matmul(input, other):
    input, other = as_tensor_arg(input), as_tensor_arg(other, "other")
    if input.ndim == 0 or other.ndim == 0:
        raise RuntimeError(
            "both arguments to matmul need to be at least 1D, but they are "
            f"{input.ndim}D and {other.ndim}D"
        )
    if input.is_sparse or other.is_sparse:
        return _sparse_matmul(input, other)
    _check_same_dtype(input, other, "matmul")
    if input.ndim == 1 and other.ndim == 1:
        return dot(input, other)
    if input.ndim == 2 and other.ndim == 2:
        return mm(input, other)
    if input.ndim == 2 and other.ndim == 1:
        return mv(input, other)
    if input.ndim == 3 and other.ndim == 3 and input.shape[0] == other.shape[0]:
        return bmm(input, other)
    return _batched_matmul(input, other)


def _sparse_matmul(input, other):
    from ..sparse import matmul  # a product of gathered rows (sparse COO tensors)

    return matmul(input, other)


@_named("UnsafeViewBackward0")
def _batched_matmul(input, other):
    a = P.reshape(input, shape=(1,) + input.shape) if input.ndim == 1 else input
    b = P.reshape(other, shape=other.shape + (1,)) if other.ndim == 1 else other
    out = P.matmul(a, b)
    if input.ndim == 1:
        out = P.reshape(out, shape=out.shape[:-2] + out.shape[-1:])
    if other.ndim == 1:
        out = P.reshape(out, shape=out.shape[:-1])
    return out


# -------------------------------------------------------------- other products


@public(out=True)
def outer(input, vec2):
    for name, vector in (("self", input), ("vec2", vec2)):
        if as_tensor_arg(vector, name).ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {vector.ndim}-D")
    return unsqueeze(input, 1) * unsqueeze(vec2, 0)


ger = public(outer, name="ger", out=True)  # outer's old name


@public
def inner(input, other):
    input, other = as_tensor_arg(input), as_tensor_arg(other, "other")
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    return tensordot(input, other, ([-1], [-1]))


@public(method=False)
def tensordot(a, b, dims=2):
    a, b = as_tensor_arg(a, "a"), as_tensor_arg(b, "b")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        dims_a, dims_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        dims_a, dims_b = (list(_ints(d)) for d in dims)
    dims_a = [normalize_dim(d, a.ndim) for d in dims_a]
    dims_b = [normalize_dim(d, b.ndim) for d in dims_b]
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    for da, db in zip(dims_a, dims_b):
        if a.shape[da] != b.shape[db]:
            raise RuntimeError(
                f"contracted dimensions need to match, but first has size {a.shape[da]} in dim "
                f"{da} and second has size {b.shape[db]} in dim {db}"
            )
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    contracted = math.prod(a.shape[d] for d in dims_a)
    left = reshape(permute(a, free_a + dims_a), (math.prod(a.shape[d] for d in free_a), contracted))
    right = reshape(
        permute(b, dims_b + free_b), (contracted, math.prod(b.shape[d] for d in free_b))
    )
    shape = tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b)
    if a._dtype is not b._dtype:
        raise RuntimeError("both inputs should have same dtype")
    return reshape(mm(left, right), shape)


@public
def kron(input, other):
    a, b = as_tensor_arg(input), as_tensor_arg(other, "other")
    ndim = builtins.max(a.ndim, b.ndim)
    a = reshape(a, (1,) * (ndim - a.ndim) + a.shape)
    b = reshape(b, (1,) * (ndim - b.ndim) + b.shape)
    interleaved_a = reshape(a, tuple(s for size in a.shape for s in (size, 1)))
    interleaved_b = reshape(b, tuple(s for size in b.shape for s in (1, size)))
    return reshape(interleaved_a * interleaved_b, tuple(x * y for x, y in zip(a.shape, b.shape)))


# ------------------------------------------------- a product added to a tensor


def _scaled_sum(input, product, beta, alpha):
    """beta * input + alpha * product; input only shapes the result when beta
    is 0 (its NaNs do not reach it), as in PyTorch."""
    product = product if alpha == 1 else product * alpha
    if beta == 0:
        shape = broadcast_shapes(input.shape, product.shape)
        return product if product.shape == shape else clone(broadcast_to(product, shape))
    return (input if beta == 1 else input * beta) + product


def check_added_dtype(input, mat1, mat2):
    """PyTorch's addmm (and addbmm, linear with a bias) refuses an added
    tensor or a first factor of another dtype than the second factor's,
    rather than promoting."""
    input, mat1, mat2 = (as_tensor_arg(t) for t in (input, mat1, mat2))
    for name, t in (("self", input), ("mat1", mat1)):
        if t._dtype is not mat2._dtype:
            raise RuntimeError(
                f"{name} and mat2 must have the same dtype, but got "
                f"{_short(t._dtype)} and {_short(mat2._dtype)}"
            )


@public(inplace=True)
@_named("AddmmBackward0")
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    check_added_dtype(input, mat1, mat2)
    return _scaled_sum(input, mm(mat1, mat2), beta, alpha)


@public(inplace=True)
@_named("AddmvBackward0")
def addmv(input, mat, vec, *, beta=1, alpha=1):
    _refuse_mixed_dtypes(
        [input, mat, vec],
        lambda d: (
            "addmv input tensors must have the same dtype, but got "
            f"{_short(d[0])}, {_short(d[1])}, and {_short(d[2])}"
        ),
    )
    return _scaled_sum(input, mv(mat, vec), beta, alpha)


@public(inplace=True)
@_named("AddrBackward0")
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    return _scaled_sum(input, outer(vec1, vec2), beta, alpha)


@public(inplace=True)
@_named("BaddbmmBackward0")
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    _refuse_mixed_dtypes(
        [input, batch1, batch2],
        lambda d: (
            f"Input dtypes must be the same, got: input {_c_name(d[0])}, "
            f"batch1: {_c_name(d[1])}, batch2: {_c_name(d[2])}"
        ),
    )
    return _scaled_sum(input, bmm(batch1, batch2), beta, alpha)


@public(inplace=True)
@_named("AddbmmBackward0")
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    check_added_dtype(input, batch1, batch2)
    return _scaled_sum(input, P.reduce_sum(bmm(batch1, batch2), axes=(0,)), beta, alpha)
