"""``fusegrad.optim``: SGD (momentum, Nesterov, weight decay) and Adam (AdamW-free, amsgrad)."""

from __future__ import annotations

import math

from ..runtime.grad_mode import no_grad
from ..tracer.tensor import Tensor


class Optimizer:
    def __init__(self, params, defaults: dict):
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.defaults = defaults
        self.param_groups = []
        self.state: dict = {}
        for group in groups:
            group = dict(group)
            group["params"] = list(group["params"])
            for p in group["params"]:
                if not isinstance(p, Tensor):
                    raise TypeError(
                        f"optimizer can only optimize Tensors, but one of the params "
                        f"is {type(p).__name__}"
                    )
                if not p.is_leaf:
                    raise ValueError("can't optimize a non-leaf Tensor")
            for key, value in defaults.items():
                group.setdefault(key, value)
            self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        p.grad.zero_()

    def _params_with_grad(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    yield group, p, self.state.setdefault(id(p), {})


class SGD(Optimizer):
    def __init__(
        self,
        params,
        lr=1e-3,
        momentum=0.0,
        dampening=0.0,
        weight_decay=0.0,
        nesterov=False,
        maximize=False,
    ):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(
            params,
            dict(
                lr=lr,
                momentum=momentum,
                dampening=dampening,
                weight_decay=weight_decay,
                nesterov=nesterov,
                maximize=maximize,
            ),
        )

    @no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p, state in self._params_with_grad():
            d = p.grad if not group["maximize"] else -p.grad
            if group["weight_decay"]:
                d = d + p * group["weight_decay"]
            if group["momentum"]:
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = d.clone()
                else:
                    buf.mul_(group["momentum"]).add_(d * (1 - group["dampening"]))
                d = d + buf * group["momentum"] if group["nesterov"] else buf
            p.sub_(d * group["lr"])
        return loss


class Adam(Optimizer):
    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0.0,
        amsgrad=False,
        maximize=False,
    ):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= betas[0] < 1.0 or not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameters: {betas}")
        super().__init__(
            params,
            dict(
                lr=lr,
                betas=betas,
                eps=eps,
                weight_decay=weight_decay,
                amsgrad=amsgrad,
                maximize=maximize,
            ),
        )

    @no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p, state in self._params_with_grad():
            g = p.grad if not group["maximize"] else -p.grad
            if group["weight_decay"]:
                g = g + p * group["weight_decay"]
            beta1, beta2 = group["betas"]
            if not state:
                state["step"] = 0
                state["exp_avg"] = p.detach().clone().zero_()
                state["exp_avg_sq"] = p.detach().clone().zero_()
                if group["amsgrad"]:
                    state["max_exp_avg_sq"] = p.detach().clone().zero_()
            state["step"] += 1
            step = state["step"]
            state["exp_avg"].mul_(beta1).add_(g * (1 - beta1))
            state["exp_avg_sq"].mul_(beta2).add_(g * g * (1 - beta2))
            second = state["exp_avg_sq"]
            if group["amsgrad"]:
                state["max_exp_avg_sq"].copy_(state["max_exp_avg_sq"].maximum(second))
                second = state["max_exp_avg_sq"]
            bias1 = 1 - beta1**step
            bias2 = 1 - beta2**step
            denom = (second / bias2).sqrt() + group["eps"]
            p.sub_(state["exp_avg"] / denom * (group["lr"] / bias1))
        return loss


__all__ = ["Adam", "Optimizer", "SGD"]
del math
