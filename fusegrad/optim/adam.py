"""Adam (optionally AMSGrad) and AdamW, whose weight decay shrinks the parameters
directly rather than adding to the gradient."""

from __future__ import annotations

import math

from ..eager.creation import tensor, zeros_like
from ..eager.ops import maximum
from ..eager.tensor import Tensor
from .optimizer import Optimizer, check_flags, in_dtype, lerp, step_count, with_weight_decay


class Adam(Optimizer):
    """Adam: running averages of the gradient and its square, bias-corrected.

    The step count is a float32 tensor in the state, as PyTorch keeps it; the
    bias corrections are computed from it in float64 (the Python floats
    PyTorch computes them in), so a compiled step needs no Python number that
    changes every step.
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool = False,
    ):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        check_flags(differentiable=differentiable, capturable=capturable)
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=betas,
                eps=eps,
                weight_decay=weight_decay,
                amsgrad=amsgrad,
                maximize=maximize,
                foreach=foreach,
                capturable=capturable,
                differentiable=differentiable,
                fused=fused,
                decoupled_weight_decay=decoupled_weight_decay,
            ),
        )

    def _initial_state(self, group: dict, p: Tensor) -> dict:
        state = {"step": tensor(0.0), "exp_avg": zeros_like(p), "exp_avg_sq": zeros_like(p)}
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = zeros_like(p)
        return state

    def _update(self, group: dict, p: Tensor, grad: Tensor, state: dict) -> None:
        lr, (beta1, beta2) = group["lr"], group["betas"]
        step = state["step"]
        step.add_(1)
        grad = with_weight_decay(group, p, grad)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.copy_(lerp(exp_avg, grad, 1 - beta1))
        exp_avg_sq.mul_(beta2).add_((1 - beta2) * grad * grad)
        second = exp_avg_sq
        if group["amsgrad"]:
            second = state["max_exp_avg_sq"]
            second.copy_(maximum(second, exp_avg_sq))
        count = step_count(step)
        step_size = lr / (1 - beta1**count)
        bias_correction2 = 1 - beta2**count
        bias_correction2_sqrt = (
            math.sqrt(bias_correction2) if isinstance(count, float) else bias_correction2.sqrt()
        )
        denom = second.sqrt() / in_dtype(bias_correction2_sqrt, p.dtype) + group["eps"]
        p.add_(in_dtype(-step_size, p.dtype) * exp_avg / denom)


class AdamW(Adam):
    """Adam with decoupled weight decay: ``p *= 1 - lr * weight_decay`` before
    the Adam update (default ``weight_decay=1e-2``)."""

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ):
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
            foreach=foreach,
            maximize=maximize,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=True,
        )
