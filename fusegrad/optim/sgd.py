"""Stochastic gradient descent, with momentum (optionally Nesterov's) and weight decay."""

from __future__ import annotations

from ..eager.tensor import Tensor
from .optimizer import Optimizer, check_flags, with_weight_decay


class SGD(Optimizer):
    """``p -= lr * g``, where ``g`` is the gradient plus ``weight_decay * p``,
    or with ``momentum`` a running ``buf = momentum * buf + (1 - dampening) * g``
    (``buf = g`` at the first step), or with ``nesterov`` ``g + momentum * buf``.

    >>> import fusegrad
    >>> w = fusegrad.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = fusegrad.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> (w * w).sum().backward(); opt.step()
    >>> w
    tensor([ 0.8000, -1.6000], requires_grad=True)
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        check_flags(differentiable=differentiable)
        super().__init__(
            params,
            dict(
                lr=lr,
                momentum=momentum,
                dampening=dampening,
                weight_decay=weight_decay,
                nesterov=nesterov,
                maximize=maximize,
                foreach=foreach,
                differentiable=differentiable,
                fused=fused,
            ),
        )

    def _initial_state(self, group: dict, p: Tensor) -> dict:
        return {"momentum_buffer": None} if group["momentum"] != 0 else {}

    def _update(self, group: dict, p: Tensor, grad: Tensor, state: dict) -> None:
        grad = with_weight_decay(group, p, grad)
        momentum = group["momentum"]
        if momentum != 0:
            buf = state["momentum_buffer"]
            if buf is None:
                buf = state["momentum_buffer"] = grad.detach().clone()
            else:
                buf.mul_(momentum).add_((1 - group["dampening"]) * grad)
            grad = grad + momentum * buf if group["nesterov"] else buf
        p.add_(-group["lr"] * grad)
