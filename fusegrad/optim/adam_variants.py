"""Adam's relatives: Adamax (the infinity norm in place of the second
moment), NAdam (Nesterov momentum, with PyTorch's momentum decay) and RAdam
(the second moment's variance rectified, plain momentum while it is not yet
tractable). Each follows PyTorch's arithmetic, its factors in float64."""

from __future__ import annotations

import math

from ..eager.creation import tensor, zeros_like
from ..eager.ops import maximum
from ..eager.tensor import Tensor
from .optimizer import Optimizer, check_flags, in_dtype, lerp, step_count, with_weight_decay


def _check(lr, betas, eps, weight_decay) -> None:
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    for index, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {index}: {beta}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


class Adamax(Optimizer):
    def __init__(
        self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
        foreach=None, *, maximize=False, differentiable=False, capturable=False,
    ):  # fmt: skip
        _check(lr, betas, eps, weight_decay)
        check_flags(differentiable=differentiable, capturable=capturable)
        defaults = dict(
            lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
            maximize=maximize, differentiable=differentiable, capturable=capturable,
        )  # fmt: skip
        super().__init__(params, defaults)

    def _initial_state(self, group: dict, p: Tensor) -> dict:
        return {"step": tensor(0.0), "exp_avg": zeros_like(p), "exp_inf": zeros_like(p)}

    def _update(self, group: dict, p: Tensor, grad: Tensor, state: dict) -> None:
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        state["step"].add_(1)
        grad = with_weight_decay(group, p, grad)
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        exp_avg.copy_(lerp(exp_avg, grad, 1 - beta1))
        exp_inf.copy_(maximum(exp_inf * beta2, grad.abs() + eps))
        step_size = lr / (1 - beta1 ** step_count(state["step"]))
        p.add_(in_dtype(-step_size, p.dtype) * exp_avg / exp_inf)


class NAdam(Optimizer):
    def __init__(
        self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
        momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None, maximize=False,
        capturable=False, differentiable=False,
    ):  # fmt: skip
        _check(lr, betas, eps, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        check_flags(differentiable=differentiable, capturable=capturable)
        defaults = dict(
            lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
            momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
            foreach=foreach, maximize=maximize, capturable=capturable,
            differentiable=differentiable,
        )  # fmt: skip
        super().__init__(params, defaults)

    def _initial_state(self, group: dict, p: Tensor) -> dict:
        return {
            "step": tensor(0.0),
            "mu_product": tensor(1.0),
            "exp_avg": zeros_like(p),
            "exp_avg_sq": zeros_like(p),
        }

    def _update(self, group: dict, p: Tensor, grad: Tensor, state: dict) -> None:
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        state["step"].add_(1)
        count = step_count(state["step"])
        grad = with_weight_decay(group, p, grad)
        decay = group["momentum_decay"]
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (count * decay))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((count + 1) * decay))
        mu_product = state["mu_product"]
        mu_product.mul_(in_dtype(mu, mu_product.dtype))  # in float32, eagerly and compiled
        product = mu_product.item() if isinstance(count, float) else mu_product.double()
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.copy_(lerp(exp_avg, grad, 1 - beta1))
        exp_avg_sq.mul_(beta2).add_((1 - beta2) * grad * grad)
        bias_correction2 = 1 - beta2**count
        denom = (exp_avg_sq / in_dtype(bias_correction2, p.dtype)).sqrt() + eps
        p.add_(in_dtype(-lr * (1.0 - mu) / (1.0 - product), p.dtype) * grad / denom)
        p.add_(in_dtype(-lr * mu_next / (1.0 - product * mu_next), p.dtype) * exp_avg / denom)


class RAdam(Optimizer):
    def __init__(
        self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
        decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
        differentiable=False,
    ):  # fmt: skip
        _check(lr, betas, eps, weight_decay)
        check_flags(differentiable=differentiable, capturable=capturable)
        defaults = dict(
            lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
            decoupled_weight_decay=decoupled_weight_decay, foreach=foreach, maximize=maximize,
            capturable=capturable, differentiable=differentiable,
        )  # fmt: skip
        super().__init__(params, defaults)

    def _initial_state(self, group: dict, p: Tensor) -> dict:
        return {"step": tensor(0.0), "exp_avg": zeros_like(p), "exp_avg_sq": zeros_like(p)}

    def _update(self, group: dict, p: Tensor, grad: Tensor, state: dict) -> None:
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        state["step"].add_(1)
        count = step_count(state["step"])
        grad = with_weight_decay(group, p, grad)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.copy_(lerp(exp_avg, grad, 1 - beta1))
        exp_avg_sq.mul_(beta2).add_((1 - beta2) * grad * grad)
        bias_correction1, bias_correction2 = 1 - beta1**count, 1 - beta2**count
        corrected = exp_avg / in_dtype(bias_correction1, p.dtype)
        rho_inf = 2 / (1 - beta2) - 1
        rho = rho_inf - 2 * count * beta2**count / bias_correction2
        # the variance is tractable from step 6 on (beta2 = 0.999): a Python
        # branch, so a compiled step is traced again once, when it turns
        if bool(rho > 5.0):
            rect = ((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho)) ** 0.5
            sqrt_bias = (
                math.sqrt(bias_correction2) if isinstance(count, float) else bias_correction2.sqrt()
            )
            adaptive = in_dtype(sqrt_bias, p.dtype) / (exp_avg_sq.sqrt() + eps)
            p.add_(-(corrected * in_dtype(lr * rect, p.dtype) * adaptive))
        else:
            p.add_(-(corrected * lr))
