"""Checking analytical gradients against finite differences, as PyTorch's
``gradcheck`` and ``gradgradcheck`` do: the full Jacobian, column by column
numerically (central differences) and row by row through the engine."""

from __future__ import annotations

import warnings

import numpy as np

from ..eager import grad_mode
from ..eager.autograd import grad
from ..eager.creation import randn
from ..eager.tensor import Tensor
from . import forward_ad


class GradcheckError(RuntimeError):
    pass


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _float_outputs(func, inputs):
    return [
        o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor) and o.dtype.is_floating_point
    ]


def _numerical_jacobian(func, inputs, i, eps):
    x = inputs[i]
    flat = x._data.reshape(-1)  # a view: perturbing it perturbs the input
    with grad_mode.no_grad():
        outputs = _float_outputs(func, inputs)
        columns = [np.zeros((o.numel(), x.numel())) for o in outputs]
        for j in range(x.numel()):
            original = flat[j].item()
            flat[j] = original + eps
            plus = [o._data.astype(np.float64).ravel() for o in _float_outputs(func, inputs)]
            flat[j] = original - eps
            minus = [o._data.astype(np.float64).ravel() for o in _float_outputs(func, inputs)]
            flat[j] = original
            for column, p, m in zip(columns, plus, minus):
                column[:, j] = (p - m) / (2 * eps)
    return columns


def _analytical_jacobian(func, inputs, i_list):
    outputs = _float_outputs(func, inputs)
    wrt = [inputs[i] for i in i_list]
    jacobians = [[np.zeros((o.numel(), inputs[i].numel())) for i in i_list] for o in outputs]
    for k, out in enumerate(outputs):
        if not out.requires_grad:
            continue
        for m in range(out.numel()):
            seed = np.zeros(out.numel(), out.dtype.np)
            seed[m] = 1
            grads = grad(
                out,
                wrt,
                Tensor._make(seed.reshape(out.shape), out.dtype),
                retain_graph=True,
                allow_unused=True,
            )
            for col, g in enumerate(grads):
                if g is not None:
                    jacobians[k][col][m, :] = g._data.astype(np.float64).ravel()
    return jacobians


def _forward_jacobian(func, inputs, i):
    """Input i's Jacobian by forward mode: the outputs' tangents along each
    element of the input, column by column."""
    x = inputs[i]
    columns = [np.zeros((o.numel(), x.numel())) for o in _float_outputs(func, inputs)]
    for j in range(x.numel()):
        direction = np.zeros(x.numel(), x.dtype.np)
        direction[j] = 1
        with forward_ad.dual_level():
            tangent = Tensor._make(direction.reshape(x._data.shape), x.dtype)
            dual = forward_ad.make_dual(x, tangent)
            outputs = _float_outputs(func, inputs[:i] + (dual,) + inputs[i + 1 :])
            for column, out in zip(columns, outputs):
                found = forward_ad.unpack_dual(out).tangent
                if found is not None:
                    column[:, j] = found._data.astype(np.float64).ravel()
    return columns


def gradcheck(
    func,
    inputs,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    check_forward_ad: bool = False,
    **ignored,
) -> bool:
    """True when ``func``'s analytical Jacobian matches central differences
    for every input that requires grad (use float64 inputs); with
    ``check_forward_ad``, so does the Jacobian forward mode computes."""
    inputs = _as_tuple(inputs)
    diff = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not diff:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, but "
            "none of the them have requires_grad=True."
        )
    for i in diff:
        if inputs[i].dtype.name != "float64":
            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision floating "
                "point. This check will likely fail if all the inputs are not of "
                "double precision floating point.",
                stacklevel=2,
            )
    analytical = _analytical_jacobian(func, inputs, diff)
    for col, i in enumerate(diff):
        numerical = _numerical_jacobian(func, inputs, i, eps)
        checked = [("Jacobian", [a[col] for a in analytical])]
        if check_forward_ad:
            forward = _forward_jacobian(func, inputs, i)
            checked.append(("Jacobian computed with forward mode", forward))
        for what, computed in checked:
            for k, (num, ana) in enumerate(zip(numerical, computed)):
                if not np.allclose(ana, num, rtol=rtol, atol=atol, equal_nan=True):
                    if not raise_exception:
                        return False
                    raise GradcheckError(
                        f"{what} mismatch for output {k} with respect to input "
                        f"{i},\nnumerical:{num}\nanalytical:{ana}\n"
                    )
    return True


def gradgradcheck(
    func,
    inputs,
    grad_outputs=None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    **ignored,
) -> bool:
    """``gradcheck`` of the function (inputs, cotangents) -> vector-Jacobian
    products: checks second derivatives."""
    inputs = _as_tuple(inputs)
    outputs = _float_outputs(func, inputs)
    if grad_outputs is None:
        grad_outputs = tuple(
            randn(o.shape, dtype=o.dtype, requires_grad=True) for o in outputs if o.requires_grad
        )
    grad_outputs = _as_tuple(grad_outputs)
    n = len(inputs)
    diff = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]

    def vjp(*args):
        with grad_mode.enable_grad():  # the numerical pass calls this under no_grad
            return _vjp(*args)

    def _vjp(*args):
        primal, cotangents = args[:n], args[n:]
        outs = [o for o in _float_outputs(func, primal) if o.requires_grad]
        grads = grad(
            outs, [primal[i] for i in diff], cotangents, create_graph=True, allow_unused=True
        )
        return tuple(g for g in grads if g is not None)

    return gradcheck(
        vjp, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol, raise_exception=raise_exception
    )
