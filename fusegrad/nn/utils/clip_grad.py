"""Gradient clipping: by the norm of all gradients together, or by value."""

from __future__ import annotations

import types
import warnings

from ...eager import creation, ops
from ...eager.grad_mode import no_grad
from ...eager.tensor import Tensor


def _as_list(parameters) -> list:
    if isinstance(parameters, Tensor):
        return [parameters]
    generator = isinstance(parameters, types.GeneratorType)
    parameters = list(parameters)
    if generator and not parameters:
        warnings.warn(
            "`parameters` is an empty generator, no gradient clipping will occur.", stacklevel=3
        )
    return parameters


@no_grad()
def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None):
    """The ``norm_type``-norm of the norms of ``tensors``: their norm as one vector."""
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return creation.tensor(0.0)
    norms = [ops.norm(t, norm_type) for t in tensors]
    total = ops.norm(ops.stack(norms), norm_type)
    if error_if_nonfinite and bool(ops.logical_not(ops.isfinite(total))):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the "
            "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`"
        )
    return total


@no_grad()
def clip_grads_with_norm_(parameters, max_norm: float, total_norm: Tensor, foreach=None) -> None:
    """Scales the gradients by max_norm / (total_norm + 1e-6) where that is below 1."""
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return
    coefficient = ops.clamp(float(max_norm) / (total_norm + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coefficient)


@no_grad()
def clip_grad_norm_(
    parameters,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach=None,
) -> Tensor:
    """Scales the gradients of ``parameters`` in place so that their total
    ``norm_type``-norm (``math.inf`` for the largest magnitude) is at most
    ``max_norm``; returns the total norm before clipping."""
    parameters = _as_list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    clip_grads_with_norm_(parameters, max_norm, total)
    return total


def clip_grad_norm(
    parameters,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach=None,
) -> Tensor:
    """Deprecated: ``clip_grad_norm_``."""
    warnings.warn(
        "`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
        "`torch.nn.utils.clip_grad_norm_`.",
        FutureWarning,
        stacklevel=2,
    )
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


@no_grad()
def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamps every gradient of ``parameters`` into [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    for p in _as_list(parameters):
        if p.grad is not None:
            p.grad.clamp_(min=-clip_value, max=clip_value)
