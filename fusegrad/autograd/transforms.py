"""Function transforms of the gradient: ``fusegrad.grad`` and
``value_and_grad`` (JAX-style), and what they share with torch.func's
transforms (``fusegrad/func``) and ``autograd.functional``.

A transform differentiates with respect to variables of its own, as
functorch's levels do: each differentiated input becomes a new tensor
(``track``), a view of it when gradients of the result must still reach
it, else a detached leaf. So a transform inside another never takes the
outer one's variable for its own (``grad(lambda x: grad(lambda y: x * y)(x))``
is 1, not 2), and gradients are taken with ``autograd.grad``, which leaks
nothing into any ``.grad``. The results keep a graph only when the
function's graph reaches a tensor requiring grad from outside the
transform (an enclosing transform's variable, a parameter) and grad mode
was on at the call, as torch.func's results are differentiable exactly
with respect to the enclosing levels' tensors; then the gradients are
computed with ``create_graph``, which is what lets ``grad(grad(f))`` and
``jit`` compose in either order.
"""

from __future__ import annotations

import functools

import numpy as np

from ..eager import grad_mode, ops
from ..eager.autograd import AccumulateGrad, gradient_edge, sequence_mark
from ..eager.autograd import grad as autograd_grad
from ..eager.creation import as_tensor, zeros, zeros_like
from ..eager.tensor import Tensor
from ..utils._pytree import tree_flatten, tree_map_only


def track(tensor: Tensor, connected: bool) -> Tensor:
    """``tensor`` as a variable of a transform: a view of it when ``connected``
    (gradients of what is computed from it still reach it) and it requires
    grad, else a detached leaf requiring grad. Either keeps the tangents
    forward mode gave ``tensor``."""
    if connected and tensor.requires_grad:
        return ops.reshape(tensor, tensor.shape)
    return tensor._detached_keeping_tangents().requires_grad_()


def argument_positions(argnums, count: int) -> tuple:
    """``argnums`` (an int or a tuple of ints, negative from the end) as
    positions among ``count`` arguments, checked as torch.func checks them."""
    if isinstance(argnums, tuple):
        if not argnums:
            raise RuntimeError("argnums must be non-empty")
        for argnum in argnums:
            if not isinstance(argnum, int):
                raise RuntimeError(f"argnum must be int, got: {type(argnum)}")
        if len(set(argnums)) != len(argnums):
            raise RuntimeError(f"argnums elements must be unique, got {argnums}")
    elif not isinstance(argnums, int):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    positions = (argnums,) if isinstance(argnums, int) else argnums
    for argnum in positions:
        if not -count <= argnum < count:
            raise RuntimeError(f"Got argnum={argnum}, but only {count} positional inputs")
    return tuple(argnum % count for argnum in positions)


def _tensor_leaf(value) -> Tensor:
    if not isinstance(value, Tensor):
        raise ValueError(f"Thing passed to transform API must be Tensor, got {type(value)}")
    return value


class Differentiated:
    """One call of ``fn`` with the arguments at ``positions`` (pytrees of
    tensors) replaced by the transform's own variables (``variables``, their
    leaves in order; ``specs``, each argument's structure); ``output`` is
    what it returned."""

    def __init__(self, fn, args: tuple, kwargs: dict, positions: tuple):
        self.grad_enabled = grad_mode.is_grad_enabled()
        self.mark = sequence_mark()
        self.variables, self.specs = [], []
        args = list(args)
        with grad_mode.enable_grad():
            for i in positions:
                leaves, spec = tree_flatten(args[i])
                tracked = [track(_tensor_leaf(x), self.grad_enabled) for x in leaves]
                args[i] = spec.unflatten(tracked)
                self.variables += tracked
                self.specs.append(spec)
            self.output = fn(*args, **kwargs)

    def keeps_graph(self, tensors) -> bool:
        """Whether results computed from ``tensors`` stay differentiable: grad
        mode was on at the call and their graph, or their forward-mode
        tangents' (a jvp's tangent requiring grad), reaches a tensor
        requiring grad from outside the transform."""
        if not self.grad_enabled:
            return False
        # a view variable leads outside; a leaf variable is the transform's own
        own = {id(gradient_edge(v)[0]) for v in self.variables if v.grad_fn is None}
        tangents = [t for tensor in tensors for t in (tensor._tangents or {}).values()]
        stack = [gradient_edge(t)[0] for t in (*tensors, *tangents) if t.requires_grad]
        seen = set()
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen or id(node) in own:
                continue
            seen.add(id(node))
            if isinstance(node, AccumulateGrad):
                # a leaf no one holds any more (the stand-in cotangent of a
                # transposed VJP rule, see forward_ad) receives nothing
                if node.variable is not None:
                    return True
                continue
            if node.sequence_nr < self.mark:
                return True
            stack.extend(next_node for next_node, _ in node.edges)
        return False

    def gradients(self, outputs, cotangents, *, retain_graph: bool, create_graph: bool) -> list:
        """The vjp of ``outputs`` with ``cotangents`` with respect to each
        variable, None where no gradient reaches it; outputs that do not
        require grad send nothing."""
        seeded = [(o, c) for o, c in zip(outputs, cotangents) if o.requires_grad]
        if not seeded:
            return [None] * len(self.variables)
        return list(
            autograd_grad(
                [o for o, _ in seeded],
                self.variables,
                [c for _, c in seeded],
                retain_graph=retain_graph,
                create_graph=create_graph,
                allow_unused=True,
            )
        )

    def per_argument(self, flat: list, single: bool):
        """Values per variable, regrouped as the differentiated arguments
        were: a tuple of arguments, or the one argument's structure if
        ``single``."""
        trees, start = [], 0
        for spec in self.specs:
            trees.append(spec.unflatten(flat[start : start + spec.num_leaves]))
            start += spec.num_leaves
        return trees[0] if single else tuple(trees)


def detached(tree, keep_graph: bool):
    """``tree`` with its tensors detached, unless the results keep a graph."""
    if keep_graph:
        return tree
    return tree_map_only(Tensor, Tensor._detached_keeping_tangents, tree)


def grad_and_value_call(fn, argnums, has_aux: bool, args: tuple, kwargs: dict, split_output):
    """The gradient of ``fn(*args, **kwargs)`` with respect to the arguments at
    ``argnums``, with the value and aux: ``(gradient, value, aux)``.
    ``split_output(output)`` checks what ``fn`` returned and gives (the
    single-element value, the aux or None): the front ends word it."""
    call = Differentiated(fn, args, kwargs, argument_positions(argnums, len(args)))
    value, aux = split_output(call.output)
    keep = call.keeps_graph([value])
    grads = call.gradients([value], [None], retain_graph=keep, create_graph=keep)
    grads = [zeros_like(v) if g is None else g for v, g in zip(call.variables, grads)]
    aux_tensors = [t for t in tree_flatten(aux)[0] if isinstance(t, Tensor)]
    aux = detached(aux, call.keeps_graph(aux_tensors))
    return call.per_argument(grads, isinstance(argnums, int)), detached(value, keep), aux


def _jax_output(has_aux: bool):
    def split(output):
        value, aux = output if has_aux else (output, None)
        if not isinstance(value, Tensor) or value.numel() != 1:
            shape = list(value.shape) if isinstance(value, Tensor) else ""
            raise TypeError(
                "grad requires a function returning a single-element Tensor, "
                f"got {type(value).__name__}{shape}"
            )
        return value, aux

    return split


def value_and_grad(fn, argnums=0, has_aux: bool = False):
    """``fn``'s value and its gradient with respect to the arguments at
    ``argnums`` (tensors, or tuples, lists and dicts of them).

    >>> import fusegrad
    >>> f = lambda x: (x ** 3).sum()
    >>> fusegrad.value_and_grad(f)(fusegrad.tensor([1.0, 2.0]))
    (tensor(9.), tensor([ 3., 12.]))
    >>> fusegrad.grad(fusegrad.grad(lambda x: x ** 3))(fusegrad.tensor(2.0))
    tensor(12.)
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        g, value, aux = grad_and_value_call(
            fn, argnums, has_aux, args, kwargs, _jax_output(has_aux)
        )
        return ((value, aux) if has_aux else value), g

    return wrapper


def grad(fn, argnums=0, has_aux: bool = False):
    """The gradient of ``fn`` (returning a single-element tensor) with respect
    to the arguments at ``argnums``; with ``has_aux``, ``(gradient, aux)``."""
    value_and_grad_fn = value_and_grad(fn, argnums, has_aux)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        value, g = value_and_grad_fn(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapper


def jacobian_blocks(vjp_at, outputs: list, inputs: list, chunk_size=None) -> tuple:
    """``blocks[k][j]``, the Jacobian of ``outputs[k]`` with respect to
    ``inputs[j]``, shaped ``outputs[k].shape + inputs[j].shape``: the vjps of
    the rows of the identity over the output's elements, ``chunk_size`` rows
    at a time (None: all). ``vjp_at(k, cotangent)`` is the vjp seeded at
    output k alone, a gradient or None per input. Also returns the set of
    (k, j) that no gradient reached (their blocks are zeros)."""
    blocks, independent = [], set()
    for k, out in enumerate(outputs):
        count = out.numel()
        size = chunk_size or max(count, 1)
        chunks = [
            _stacked_vjps(
                functools.partial(vjp_at, k), _basis(out, start, min(start + size, count))
            )
            for start in range(0, count, size)
        ]
        row = []
        for j, x in enumerate(inputs):
            parts = [chunk[j] for chunk in chunks]
            if any(p is None for p in parts):
                independent.add((k, j))
            if parts and (k, j) not in independent:
                rows = parts[0] if len(parts) == 1 else ops.cat(parts)
                row.append(ops.reshape(rows, out.shape + x.shape))
            else:
                row.append(zeros(out.shape + x.shape, dtype=x.dtype))
        blocks.append(row)
    return blocks, independent


def _basis(out: Tensor, start: int, end: int) -> Tensor:
    """Rows ``start`` to ``end`` of the identity over ``out``'s elements,
    each shaped as ``out``."""
    rows = np.eye(end - start, out.numel(), k=start)
    return ops.reshape(as_tensor(rows, dtype=out.dtype), (end - start, *out.shape))


def _stacked_vjps(vjp, basis: Tensor) -> list:
    """``vjp`` of each row of ``basis``, stacked per input (None for an input
    no gradient reaches): one vmap of ``vjp`` over the basis."""
    from ..func.vmap import vmap  # func builds on this module

    unreached: list = []

    def row(cotangent):
        grads = vjp(cotangent)
        unreached[:] = [g is None for g in grads]
        return tuple(zeros((), dtype=cotangent.dtype) if g is None else g for g in grads)

    stacked = vmap(row)(basis)
    return [None if missing else rows for missing, rows in zip(unreached, stacked)]
