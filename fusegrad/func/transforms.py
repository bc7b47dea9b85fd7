"""torch.func's reverse-mode transforms: ``grad``, ``grad_and_value``, ``vjp``
and ``jacrev``, on the variables and gradients of
``autograd/transforms.py`` (which also makes ``fusegrad.grad``).

Arguments and outputs are pytrees of tensors (tuples, lists, dicts); a
transform's results are differentiable only with respect to tensors from
outside it (an enclosing transform's, a parameter), so transforms nest
and run under ``fusegrad.jit`` in either order.
"""

from __future__ import annotations

import functools

from ..autograd.transforms import (
    Differentiated,
    argument_positions,
    detached,
    grad_and_value_call,
    jacobian_blocks,
)
from ..eager import grad_mode
from ..eager.creation import zeros_like
from ..eager.tensor import Tensor
from ..utils._pytree import tree_flatten, treespec_pprint


def _check_aux(aux) -> None:
    for leaf in tree_flatten(aux)[0]:
        if not isinstance(leaf, Tensor):
            raise RuntimeError(f"Expected tensors, got unsupported type {type(leaf)}")


def _with_aux(output, has_aux: bool, api: str) -> tuple:
    """(the output, the aux or None) of what the function returned."""
    if not has_aux:
        return output, None
    if not (isinstance(output, tuple) and len(output) == 2):
        raise RuntimeError(
            f"{api}: output of function f should be a tuple: (output, aux) if has_aux is True"
        )
    _check_aux(output[1])
    return output


def _scalar_output(has_aux: bool):
    def split(output):
        value, aux = _with_aux(output, has_aux, "grad_and_value(f)(*args)")
        if not isinstance(value, Tensor):
            raise RuntimeError(
                f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got {type(value)}"
            )
        if value.dim() != 0:
            raise RuntimeError(
                "grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                f"tensor with {value.dim()} dims. Maybe you wanted to use the vjp or jacrev "
                "APIs instead?"
            )
        return value, aux

    return split


def grad_and_value(func, argnums=0, has_aux: bool = False):
    """``func``'s gradient with respect to the arguments at ``argnums``, and its
    value: ``(grad, value)``, or ``(grad, (value, aux))`` with ``has_aux``.

    >>> import fusegrad
    >>> from fusegrad.func import grad_and_value
    >>> grad_and_value(lambda x: (x ** 2).sum())(fusegrad.tensor([1.0, 2.0]))
    (tensor([2., 4.]), tensor(5.))
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value, aux = grad_and_value_call(
            func, argnums, has_aux, args, kwargs, _scalar_output(has_aux)
        )
        return g, ((value, aux) if has_aux else value)

    return wrapper


def grad(func, argnums=0, has_aux: bool = False):
    """The gradient of ``func`` (returning a 0-d tensor) with respect to the
    arguments at ``argnums``; with ``has_aux``, ``(grad, aux)``.

    >>> import fusegrad
    >>> from fusegrad.func import grad
    >>> grad(grad(lambda x: x ** 3))(fusegrad.tensor(2.0))
    tensor(12.)
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, _, aux = grad_and_value_call(
            func, argnums, has_aux, args, kwargs, _scalar_output(has_aux)
        )
        return (g, aux) if has_aux else g

    return wrapper


def _tensor_outputs(call: Differentiated, has_aux: bool) -> tuple:
    """(output, its tensors, their structure, aux) of a vjp's call, checked."""
    output, aux = _with_aux(call.output, has_aux, "vjp(f, *primals)")
    leaves, spec = tree_flatten(output)
    for leaf in leaves:
        if not isinstance(leaf, Tensor):
            raise RuntimeError(
                "vjp(f, *primals): expected f(*primals) to return only tensors, got "
                f"unsupported type {type(leaf)}"
            )
    return output, leaves, spec, aux


def vjp(func, *primals, has_aux: bool = False):
    """``(func(*primals), vjp_fn)``, and the aux with ``has_aux``:
    ``vjp_fn(cotangents, *, retain_graph=True, create_graph=None)``,
    cotangents shaped as the output, returns the vector-Jacobian product
    with respect to each primal, as a tuple; it can be called any number of
    times (with ``retain_graph``). Its result is differentiable when grad
    mode is on and the output or the cotangents depend on tensors requiring
    grad from outside (``create_graph=None``), or as ``create_graph`` says.

    >>> import fusegrad
    >>> from fusegrad.func import vjp
    >>> out, vjp_fn = vjp(lambda x: x ** 2, fusegrad.tensor([1.0, 2.0]))
    >>> vjp_fn(fusegrad.ones(2))
    (tensor([2., 4.]),)
    """
    call = Differentiated(func, primals, {}, tuple(range(len(primals))))
    output, leaves, spec, aux = _tensor_outputs(call, has_aux)
    keep = call.keeps_graph(leaves)

    def vjp_fn(cotangents, *, retain_graph: bool = True, create_graph=None):
        cotangent_leaves, cotangent_spec = tree_flatten(cotangents)
        if cotangent_spec != spec:
            raise RuntimeError(
                "Expected pytree structure of cotangents to be the same as pytree structure "
                f"of outputs to the function. cotangents: {treespec_pprint(cotangent_spec)}, "
                f"primal output: {treespec_pprint(spec)}"
            )
        if create_graph is None:
            create_graph = grad_mode.is_grad_enabled() and (
                keep or any(isinstance(c, Tensor) and c.requires_grad for c in cotangent_leaves)
            )
        grads = call.gradients(
            leaves, cotangent_leaves, retain_graph=retain_graph, create_graph=create_graph
        )
        grads = [zeros_like(v) if g is None else g for v, g in zip(call.variables, grads)]
        return call.per_argument(grads, single=False)

    result = (detached(output, keep), vjp_fn)
    if has_aux:
        result += (detached(aux, call.keeps_graph(tree_flatten(aux)[0])),)
    return result


def jacrev(func, argnums=0, *, has_aux: bool = False, chunk_size=None):
    """The Jacobian of ``func`` with respect to the arguments at ``argnums``,
    by reverse mode: a vjp per element of the output. For each output
    tensor, the arguments' structure (one argument's for an int
    ``argnums``, else a tuple) holding blocks of shape
    ``output.shape + input.shape``. ``chunk_size`` bounds how many rows of
    the identity are made at a time.

    >>> import fusegrad
    >>> from fusegrad.func import jacrev
    >>> jacrev(lambda x: x ** 2)(fusegrad.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 4.]])
    """
    if chunk_size is not None and not (isinstance(chunk_size, int) and chunk_size > 0):
        raise ValueError("jacrev: `chunk_size` should be greater than 0.")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        call = Differentiated(func, args, kwargs, argument_positions(argnums, len(args)))
        _, leaves, spec, aux = _tensor_outputs(call, has_aux)
        keep = call.keeps_graph(leaves)

        def vjp_at(k, cotangent):
            return call.gradients([leaves[k]], [cotangent], retain_graph=True, create_graph=keep)

        blocks, _ = jacobian_blocks(vjp_at, leaves, call.variables, chunk_size)
        single = isinstance(argnums, int)
        jacobian = spec.unflatten(call.per_argument(row, single) for row in blocks)
        if has_aux:
            return jacobian, detached(aux, call.keeps_graph(tree_flatten(aux)[0]))
        return jacobian

    return wrapper
