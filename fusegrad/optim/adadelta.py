"""Adadelta: steps scaled by the ratio of running RMS of past updates to that of gradients."""

from __future__ import annotations

from ..eager.creation import tensor, zeros_like
from ..eager.tensor import Tensor
from .optimizer import Optimizer, check_flags, with_weight_decay


class Adadelta(Optimizer):
    """``square_avg = rho * square_avg + (1 - rho) * g**2``, the step
    ``delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g``, then
    ``acc_delta = rho * acc_delta + (1 - rho) * delta**2`` and ``p -= lr * delta``."""

    def __init__(
        self,
        params,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        check_flags(differentiable=differentiable, capturable=capturable)
        super().__init__(
            params,
            dict(
                lr=lr,
                rho=rho,
                eps=eps,
                weight_decay=weight_decay,
                maximize=maximize,
                capturable=capturable,
                foreach=foreach,
                differentiable=differentiable,
            ),
        )

    def _initial_state(self, group: dict, p: Tensor) -> dict:
        return {"step": tensor(0.0), "square_avg": zeros_like(p), "acc_delta": zeros_like(p)}

    def _update(self, group: dict, p: Tensor, grad: Tensor, state: dict) -> None:
        rho, eps = group["rho"], group["eps"]
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        state["step"].add_(1)
        grad = with_weight_decay(group, p, grad)
        square_avg.mul_(rho).add_((1 - rho) * grad * grad)
        std = (square_avg + eps).sqrt()
        delta = (acc_delta + eps).sqrt() / std * grad
        acc_delta.mul_(rho).add_((1 - rho) * delta * delta)
        p.add_(-group["lr"] * delta)
