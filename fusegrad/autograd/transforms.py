"""``fusegrad.grad`` and ``value_and_grad``: functions of the gradient, JAX-style.

They compose with each other (``grad(grad(f))``: an inner call whose inputs
already require grad keeps the graph of its result, so the outer call can
differentiate it) and with ``jit`` in either order.
"""

from __future__ import annotations

import functools

from ..eager import grad_mode
from ..eager.autograd import grad as autograd_grad
from ..eager.creation import zeros_like
from ..eager.tensor import Tensor


def value_and_grad(fn, argnums=0, has_aux: bool = False):
    """``fn``'s value and its gradient with respect to the arguments at ``argnums``.

    >>> import fusegrad
    >>> f = lambda x: (x ** 3).sum()
    >>> fusegrad.value_and_grad(f)(fusegrad.tensor([1.0, 2.0]))
    (tensor(9.), tensor([ 3., 12.]))
    >>> fusegrad.grad(fusegrad.grad(lambda x: x ** 3))(fusegrad.tensor(2.0))
    tensor(12.)
    """
    positions = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        args = list(args)
        for i in positions:
            if i >= len(args) or not isinstance(args[i], Tensor):
                raise TypeError(
                    f"grad: argument {i} must be a Tensor to differentiate with respect to it"
                )
            if not args[i].dtype.is_floating_point:
                raise TypeError(
                    f"grad requires floating-point inputs, but argument {i} is {args[i].dtype}"
                )
        # Inside another grad (or a differentiable context) keep the graph.
        nested = grad_mode.is_grad_enabled() and any(args[i].requires_grad for i in positions)
        for i in positions:
            if not args[i].requires_grad:
                args[i] = args[i].detach().requires_grad_()
        with grad_mode.enable_grad():
            out = fn(*args, **kwargs)
            value, aux = out if has_aux else (out, None)
            if not isinstance(value, Tensor) or value.numel() != 1:
                raise TypeError(
                    "grad requires a function returning a single-element Tensor, "
                    f"got {type(value).__name__}"
                    f"{'' if not isinstance(value, Tensor) else list(value.shape)}"
                )
            if value.requires_grad:
                grads = autograd_grad(
                    value, [args[i] for i in positions], create_graph=nested, allow_unused=True
                )
            else:
                grads = (None,) * len(positions)
        grads = tuple(zeros_like(args[i]) if g is None else g for i, g in zip(positions, grads))
        if not nested:
            value = value.detach()
        result = grads[0] if isinstance(argnums, int) else grads
        return ((value, aux) if has_aux else value), result

    return wrapper


def grad(fn, argnums=0, has_aux: bool = False):
    """The gradient of ``fn`` (returning a single-element tensor) with respect
    to the arguments at ``argnums``."""
    value_and_grad_fn = value_and_grad(fn, argnums, has_aux)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        value, g = value_and_grad_fn(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return wrapper
