"""torch.func's forward-mode transforms: ``jvp``, ``linearize``, ``jacfwd``
and ``hessian`` (forward over reverse), on the dual tensors of ``autograd/forward_ad.py``.

Each call of a transform enters a dual level of its own, so transforms
nest (a jvp of a jvp is a second derivative) and compose with the
reverse-mode ones in either order: tangents are computed with ordinary
operations, which reverse mode records, and the reverse-mode transforms'
variables keep their tangents.
"""

from __future__ import annotations

import functools

import numpy as np

from ..autograd import forward_ad
from ..autograd.transforms import argument_positions
from ..eager import ops
from ..eager.creation import as_tensor, zeros, zeros_like
from ..eager.tensor import Tensor
from ..utils._pytree import tree_flatten, treespec_pprint
from .transforms import _check_aux, _with_aux, jacrev
from .vmap import vmap

_RANDOMNESS = ("error", "different", "same")


def _jvp_leaves(func, args: tuple, kwargs: dict, positions: tuple, tangents: list):
    """``func(*args, **kwargs)`` with the tensors of the arguments at
    ``positions`` made dual with ``tangents`` (one per leaf, in order):
    (what it returned, the tangent of each tensor in it, zeros for a
    tensor without one), the tangents' level exited."""
    args, given = list(args), iter(tangents)
    with forward_ad.dual_level():
        for i in positions:
            leaves, spec = tree_flatten(args[i])
            args[i] = spec.unflatten(forward_ad.make_dual(x, next(given)) for x in leaves)
        output = func(*args, **kwargs)
        return _unpacked(output)


def _unpacked(output) -> tuple:
    """(``output`` with each tensor's tangent taken off, the tangents)."""
    leaves, spec = tree_flatten(output)
    primals, tangents = [], []
    for leaf in leaves:
        if not isinstance(leaf, Tensor):
            primals.append(leaf)
            tangents.append(None)
            continue
        primal, tangent = forward_ad.unpack_dual(leaf)
        primals.append(primal)
        tangents.append(zeros_like(primal) if tangent is None else tangent)
    return spec.unflatten(primals), tangents


def _check_primals(primals, tangents, api: str) -> tuple:
    if not isinstance(primals, tuple):
        raise RuntimeError(
            f"{api}: Expected primals to be a tuple. E.g. it should be valid to call f(*primals)."
        )
    primal_leaves, primal_spec = tree_flatten(primals)
    tangent_leaves, tangent_spec = tree_flatten(tangents)
    if primal_spec != tangent_spec:
        raise RuntimeError(
            f"{api}: Expected primals and tangents to have the same python structure. For "
            "example, if primals is a tuple of 3 tensors, tangents also must be. Got primals "
            f"with structure {treespec_pprint(primal_spec)} and tangents with structure "
            f"{treespec_pprint(tangent_spec)}"
        )
    if not primal_leaves:
        raise RuntimeError(f"{api}: Expected primals to contain at least one Tensor.")
    for what, leaves in (("primals", primal_leaves), ("tangents", tangent_leaves)):
        for leaf in leaves:
            if not isinstance(leaf, Tensor):
                raise RuntimeError(
                    f"{api}: Expected {what} to only contain Tensors, got {type(leaf)}"
                )
    return tangent_leaves


def _split_output(output, tangents: list, has_aux: bool, api: str) -> tuple:
    """(the output, its tangents in its structure, the aux or None), checked."""
    value, aux = _with_aux(output, has_aux, api)
    leaves, spec = tree_flatten(value)
    for leaf in leaves:
        if not isinstance(leaf, Tensor):
            raise RuntimeError(
                f"{api}: expected f(*primals) to return only tensors, got unsupported type "
                f"{type(leaf)}"
            )
    return value, spec.unflatten(tangents[: len(leaves)]), aux


def jvp(func, primals, tangents, *, strict: bool = False, has_aux: bool = False):
    """``(func(*primals), J @ tangents)``, the Jacobian-vector product in
    forward mode; with ``has_aux``, the aux third. ``primals`` is a tuple of
    pytrees of tensors, ``tangents`` the same structure.

    >>> import fusegrad
    >>> from fusegrad.func import jvp
    >>> jvp(lambda x: x ** 2, (fusegrad.tensor([1.0, 2.0]),), (fusegrad.ones(2),))
    (tensor([1., 4.]), tensor([2., 4.]))
    """
    api = "jvp(f, primals, tangents)"
    tangent_leaves = _check_primals(primals, tangents, api)
    positions = tuple(range(len(primals)))
    output, out_tangents = _jvp_leaves(func, primals, {}, positions, tangent_leaves)
    value, jvp_out, aux = _split_output(output, out_tangents, has_aux, api)
    return (value, jvp_out, aux) if has_aux else (value, jvp_out)


def linearize(func, *primals):
    """``(func(*primals), jvp_fn)``: ``jvp_fn(*tangents)`` is the
    Jacobian-vector product at ``primals`` (computed again at each call).

    >>> import fusegrad
    >>> from fusegrad.func import linearize
    >>> out, jvp_fn = linearize(lambda x: x.sin(), fusegrad.zeros(2))
    >>> jvp_fn(fusegrad.ones(2))
    tensor([1., 1.])
    """
    output = func(*primals)
    primal_leaves, spec = tree_flatten(primals)

    def jvp_fn(*tangents):
        tangent_leaves, tangent_spec = tree_flatten(tangents)
        if tangent_spec != spec:
            raise RuntimeError(
                "linearize: Expected tangents to have the structure of the primals, got "
                f"{treespec_pprint(tangent_spec)} for {treespec_pprint(spec)}"
            )
        for k, (p, t) in enumerate(zip(primal_leaves, tangent_leaves)):
            if t.shape != p.shape:
                raise RuntimeError(
                    f"tangent:{k} with shape {t.shape} in flattened pytree doesn't match the "
                    f"shape {p.shape} of the corresponding primal."
                )
        return jvp(func, primals, tangents)[1]

    return output, jvp_fn


def jacfwd(func, argnums=0, has_aux: bool = False, *, randomness: str = "error"):
    """The Jacobian of ``func`` with respect to the arguments at ``argnums``,
    by forward mode: a jvp per element of the inputs. Structured as
    ``jacrev``'s: for each output tensor, the arguments' structure holding
    blocks of shape ``output.shape + input.shape``.

    >>> import fusegrad
    >>> from fusegrad.func import jacfwd
    >>> jacfwd(lambda x: x ** 2)(fusegrad.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 4.]])
    """
    if randomness not in _RANDOMNESS:
        raise RuntimeError(
            "Only allowed values for randomness are 'error', 'different', or 'same'. "
            f"Got {randomness}"
        )

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        positions = argument_positions(argnums, len(args))
        specs = [tree_flatten(args[i])[1] for i in positions]
        variables = [leaf for i in positions for leaf in tree_flatten(args[i])[0]]
        for leaf in variables:
            if not isinstance(leaf, Tensor):
                raise ValueError(f"Thing passed to transform API must be Tensor, got {type(leaf)}")
        value, aux = _with_aux(func(*args, **kwargs), has_aux, "jacfwd(f, *args)")
        outputs, out_spec = tree_flatten(value)
        _check_aux(outputs)

        def jvp_of(tangents):
            _, out_tangents = _jvp_leaves(func, args, kwargs, positions, tangents)
            return out_tangents[: len(outputs)]

        columns = [
            _jacobian_columns(jvp_of, variables, j, len(outputs)) for j in range(len(variables))
        ]
        blocks = [
            [_block(out, columns[j][k], x) for j, x in enumerate(variables)]
            for k, out in enumerate(outputs)
        ]
        single = isinstance(argnums, int)
        jacobian = out_spec.unflatten(_per_argument(row, specs, single) for row in blocks)
        return (jacobian, aux) if has_aux else jacobian

    return wrapper


def _jacobian_columns(jvp_of, variables: list, j: int, outputs: int) -> list:
    """For each of the ``outputs``, the jvps along each element of
    ``variables[j]``, stacked: (elements of the variable, *output shape);
    None for a variable without elements. One vmap of ``jvp_of`` over the
    basis."""
    x = variables[j]
    count = x.numel()
    if count == 0:
        return [None] * outputs
    basis = ops.reshape(as_tensor(np.eye(count), dtype=x.dtype), (count, *x.shape))

    def column(direction):
        return tuple(
            jvp_of([direction if k == j else zeros_like(v) for k, v in enumerate(variables)])
        )

    return list(vmap(column)(basis))


def _block(out: Tensor, column, x: Tensor) -> Tensor:
    """The Jacobian block of ``out`` by ``x``, shaped ``out.shape + x.shape``."""
    if column is None:
        return zeros(out.shape + x.shape, dtype=out.dtype)
    moved = ops.movedim(column, 0, -1) if column.ndim > 1 else column
    return ops.reshape(moved, out.shape + x.shape)


def _per_argument(flat: list, specs: list, single: bool):
    trees, start = [], 0
    for spec in specs:
        trees.append(spec.unflatten(flat[start : start + spec.num_leaves]))
        start += spec.num_leaves
    return trees[0] if single else tuple(trees)


def hessian(func, argnums=0):
    """The Hessian of ``func`` with respect to the arguments at ``argnums``:
    the Jacobian of its Jacobian, ``jacfwd(jacrev(func))`` as PyTorch
    defines it.

    >>> import fusegrad
    >>> from fusegrad.func import hessian
    >>> hessian(lambda x: (x ** 3).sum())(fusegrad.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    return jacfwd(jacrev(func, argnums), argnums)
