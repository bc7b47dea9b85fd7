"""RMSprop: the gradient divided by a running root mean square of its history."""

from __future__ import annotations

from ..eager.creation import tensor, zeros_like
from ..eager.tensor import Tensor
from .optimizer import Optimizer, check_flags, lerp, with_weight_decay


class RMSprop(Optimizer):
    """``square_avg = alpha * square_avg + (1 - alpha) * g**2`` and
    ``p -= lr * g / (sqrt(square_avg) + eps)``; ``centered`` subtracts the
    square of the running mean gradient first, ``momentum`` keeps a running
    buffer of the scaled steps."""

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        check_flags(differentiable=differentiable, capturable=capturable)
        super().__init__(
            params,
            dict(
                lr=lr,
                momentum=momentum,
                alpha=alpha,
                eps=eps,
                centered=centered,
                weight_decay=weight_decay,
                capturable=capturable,
                foreach=foreach,
                maximize=maximize,
                differentiable=differentiable,
            ),
        )

    def _initial_state(self, group: dict, p: Tensor) -> dict:
        state = {"step": tensor(0.0), "square_avg": zeros_like(p)}
        if group["momentum"] > 0:
            state["momentum_buffer"] = zeros_like(p)
        if group["centered"]:
            state["grad_avg"] = zeros_like(p)
        return state

    def _update(self, group: dict, p: Tensor, grad: Tensor, state: dict) -> None:
        alpha = group["alpha"]
        state["step"].add_(1)
        grad = with_weight_decay(group, p, grad)
        square_avg = state["square_avg"]
        square_avg.mul_(alpha).add_((1 - alpha) * grad * grad)
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg.copy_(lerp(grad_avg, grad, 1 - alpha))
            avg = (square_avg + -1 * grad_avg * grad_avg).sqrt()
        else:
            avg = square_avg.sqrt()
        avg = avg + group["eps"]
        if group["momentum"] > 0:
            buf = state["momentum_buffer"]
            buf.mul_(group["momentum"]).add_(grad / avg)
            p.add_(-group["lr"] * buf)
        else:
            p.add_(-group["lr"] * grad / avg)
