"""``einsum``: Einstein summation as a composition of diagonals, sums,
broadcasts, transposes, reshapes and batched matrix products, so its
gradients (of any order) are those of the primitives it is made of.

Operands are contracted left to right, each pair by one matrix product over
the labels both share: the labels later operands or the output still need
form the batch, the others are summed by the product. A label only one
operand has and nothing later needs is summed out of it first.
"""

from __future__ import annotations

import math

from ..ir import primitives as P
from ..ir.shapes import broadcast_shapes
from .autocast_policy import autocasts
from .ops import _check_same_dtype, _rounded_once, as_tensor_arg, public
from .tensor import Tensor

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # PyTorch's label order


@public(method=False)
def einsum(*args):
    """``einsum("ij,jk->ik", a, b)``, the operands also as one list, or in
    sublist form ``einsum(a, [0, 1], b, [1, 2], [0, 2])``. Without ``->`` the
    output is the ellipsis dimensions, then the labels that appear once in
    alphabetical order (upper case first)."""
    if not args:
        raise TypeError("einsum(): must specify the equation string and at least one operand")
    if isinstance(args[0], str):
        equation, operands = args[0], args[1:]
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = tuple(operands[0])
    else:
        equation, operands = _sublist_equation(args)
    operands = [as_tensor_arg(t, "operands") for t in operands]
    if not operands:
        raise ValueError("einsum(): must provide at least one operand")
    for t in operands[1:]:
        _check_same_dtype(operands[0], t, "einsum")
    terms, output = _parse(equation, operands)
    return _rounded_once(_contract)(terms, output, *operands)


def _sublist_equation(args) -> tuple:
    """The equation that the sublist form (operand, labels, ..., [output labels]) stands for."""

    def term(labels) -> str:
        return "".join("..." if label is Ellipsis else _LETTERS[label] for label in labels)

    operands, terms = args[0::2], args[1::2]
    output = None
    if len(args) % 2:  # a trailing list of output labels
        operands, output = operands[:-1], args[-1]
    equation = ",".join(term(t) for t in terms)
    return (equation if output is None else f"{equation}->{term(output)}"), operands


def _labels(term: str, where: str) -> list:
    """A term's labels; "..." stays one token."""
    labels, i = [], 0
    while i < len(term):
        char = term[i]
        if char == ".":
            if term[i : i + 3] != "...":
                raise RuntimeError(
                    f"einsum(): found '.' for {where} that is not part of any ellipsis"
                )
            if "..." in labels:
                raise RuntimeError(
                    f"einsum(): found '.' for {where} for which an ellipsis was already found"
                )
            labels.append("...")
            i += 3
            continue
        if char != " ":
            if char not in _LETTERS:
                raise RuntimeError(
                    f"einsum(): invalid subscript given at index {i} in the equation string, "
                    "subscripts must be in [a-zA-Z]"
                )
            labels.append(char)
        i += 1
    return labels


def _parse(equation: str, operands: list) -> tuple:
    """Each operand's labels, one per dimension (an ellipsis as (".", k),
    aligned from the right across operands), and the output's labels."""
    lhs, arrow, rhs = equation.partition("->")
    pieces = lhs.split(",")
    if len(pieces) > len(operands):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    if len(pieces) < len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    parsed = [_labels(piece, f"operand {k}") for k, piece in enumerate(pieces)]
    ellipsis_dims = 0
    for k, (labels, t) in enumerate(zip(parsed, operands)):
        named = len(labels) - ("..." in labels)
        if ("..." in labels and named > t.ndim) or ("..." not in labels and named != t.ndim):
            detail = (
                f") is more than the number of dimensions ({t.ndim}) for operand {k}"
                if "..." in labels
                else f") does not match the number of dimensions ({t.ndim}) for operand {k} "
                "and no ellipsis was given"
            )
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({named}{detail}"
            )
        if "..." in labels:
            ellipsis_dims = max(ellipsis_dims, t.ndim - named)
    terms = []
    for labels, t in zip(parsed, operands):
        covered = t.ndim - (len(labels) - ("..." in labels))
        expanded = []
        for label in labels:
            if label == "...":
                expanded += [(".", ellipsis_dims - covered + j) for j in range(covered)]
            else:
                expanded.append(label)
        terms.append(expanded)
    ellipsis = [(".", j) for j in range(ellipsis_dims)]
    if not arrow:
        counts: dict = {}
        for labels in parsed:
            for label in labels:
                counts[label] = counts.get(label, 0) + 1
        singles = sorted(
            (label for label, n in counts.items() if n == 1 and label != "..."), key=_LETTERS.index
        )
        return terms, ellipsis + singles
    output = []
    seen = {label for labels in parsed for label in labels}
    for label in _labels(rhs, "output"):
        if label == "...":
            output += ellipsis
        elif label in output:
            raise RuntimeError(
                f"einsum(): output subscript {label} appears more than once in the output"
            )
        elif label not in seen:
            raise RuntimeError(
                f"einsum(): output subscript {label} does not appear in the equation for any "
                "input operand"
            )
        else:
            output.append(label)
    return terms, output


def _diagonals(t: Tensor, labels: list, k: int) -> tuple:
    """t with each repeated label's dimensions made one (their diagonal)."""
    labels = list(labels)
    for label in dict.fromkeys(labels):
        while labels.count(label) > 1:
            first = labels.index(label)
            second = labels.index(label, first + 1)
            if t.shape[first] != t.shape[second]:
                raise RuntimeError(
                    f"einsum(): subscript {label} is repeated for operand {k} but the sizes "
                    f"don't match, {t.shape[second]} != {t.shape[first]}"
                )
            t = P.diagonal(t, offset=0, dim1=first, dim2=second)  # the diagonal comes last
            del labels[second]
            labels.append(labels.pop(first))
    return t, labels


def _sum_labels(t: Tensor, labels: list, drop) -> tuple:
    axes = tuple(i for i, label in enumerate(labels) if label in drop)
    if not axes:
        return t, labels
    return P.reduce_sum(t, axes=axes), [label for label in labels if label not in drop]


def _arranged(t: Tensor, labels: list, order: list, sizes: dict) -> Tensor:
    """t with its dimensions in ``order``, broadcast to ``sizes``."""
    perm = tuple(labels.index(label) for label in order)
    if perm != tuple(range(len(perm))):
        t = P.transpose(t, perm=perm)
    target = tuple(sizes[label] for label in order)
    return t if t.shape == target else P.broadcast_to(t, shape=target)


def _contract(terms: list, output: list, *operands: Tensor) -> Tensor:
    pending = [_diagonals(t, labels, k) for k, (t, labels) in enumerate(zip(operands, terms))]
    sizes: dict = {}
    for t, labels in pending:
        for label, size in zip(labels, t.shape):
            sizes[label] = broadcast_shapes((sizes.get(label, 1),), (size,))[0]
    result, labels = pending[0]
    for k in range(1, len(pending)):
        other, other_labels = pending[k]
        later = set(output).union(*(set(ls) for _, ls in pending[k + 1 :]))
        result, labels = _sum_labels(result, labels, set(labels) - later - set(other_labels))
        other, other_labels = _sum_labels(
            other, other_labels, set(other_labels) - later - set(labels)
        )
        result, labels = _product(result, labels, other, other_labels, later, sizes)
    result, labels = _sum_labels(result, labels, set(labels) - set(output))
    return _arranged(result, labels, output, sizes)


@autocasts("bmm")
def _summed_product(a: Tensor, b: Tensor) -> Tensor:
    return P.matmul(a, b)


def _product(a, a_labels, b, b_labels, later, sizes) -> tuple:
    """The pair's product summed over the labels both have and nothing later
    needs: one batched matrix product, (batch, a's, summed) @ (batch, summed, b's)."""
    shared = [label for label in a_labels if label in b_labels]
    batch = [label for label in shared if label in later]
    summed = [label for label in shared if label not in later]
    a_only = [label for label in a_labels if label not in b_labels]
    b_only = [label for label in b_labels if label not in a_labels]
    # PyTorch sums with bmm, which autocast lowers, only over labels both
    # operands have more than one of; it multiplies where there is none
    a_sizes, b_sizes = dict(zip(a_labels, a.shape)), dict(zip(b_labels, b.shape))
    by_bmm = any(a_sizes[label] != 1 and b_sizes[label] != 1 for label in summed)
    a = _arranged(a, a_labels, batch + a_only + summed, sizes)
    b = _arranged(b, b_labels, batch + summed + b_only, sizes)

    def extent(labels):
        return math.prod(sizes[label] for label in labels)

    count = extent(batch)
    a = P.reshape(a, shape=(count, extent(a_only), extent(summed)))
    b = P.reshape(b, shape=(count, extent(summed), extent(b_only)))
    out = _summed_product(a, b) if by_bmm else P.matmul(a, b)
    labels = batch + a_only + b_only
    return P.reshape(out, shape=tuple(sizes[label] for label in labels)), labels
