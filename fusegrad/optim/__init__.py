"""``fusegrad.optim``: SGD (momentum, Nesterov, weight decay) and Adam (AdamW-free, amsgrad)."""

from __future__ import annotations

from ..runtime.grad_mode import no_grad
from ..tracer.creation import zeros, zeros_like
from ..tracer.ops import maximum, where
from ..tracer.tensor import Tensor, recording


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
        if recording.trace is not None:  # a scheduler may change them between calls
            for group in self.param_groups:
                recording.trace.guard_python(
                    lambda group=group: {k: v for k, v in group.items() if k != "params"},
                    "optimizer hyperparameters",
                )
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    yield group, p, self.state.get(id(p), {})


class SGD(Optimizer):
    """Stochastic gradient descent with momentum (optionally Nesterov) and weight decay.

    The state is tensors made up front and updated in place, with no Python
    branch on the step count, so a training step compiles under ``jit``.
    """

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
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
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
        for group in self.param_groups:
            if group["momentum"]:
                for p in group["params"]:
                    self.state[id(p)] = {
                        "momentum_buffer": zeros_like(p),
                        "step": zeros((), dtype=p.dtype),
                    }

    @no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p, state in self._params_with_grad():
            d = p.grad if not group["maximize"] else -p.grad
            if group["weight_decay"]:
                d = d + p * group["weight_decay"]
            if group["momentum"]:
                buf = state["momentum_buffer"]
                # the first step starts the buffer at d itself, as PyTorch does
                buf.copy_(
                    where(
                        state["step"] == 0,
                        d,
                        buf * group["momentum"] + d * (1 - group["dampening"]),
                    )
                )
                state["step"].add_(1)
                d = d + buf * group["momentum"] if group["nesterov"] else buf
            p.sub_(d * group["lr"])
        return loss


class Adam(Optimizer):
    """Adam (optionally AMSGrad), with weight decay added to the gradient.

    The state (moments and step count) is tensors made up front and updated
    in place, so a training step compiles under ``jit``.
    """

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
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
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
        for group in self.param_groups:
            for p in group["params"]:
                state = {
                    "step": zeros((), dtype=p.dtype),
                    "exp_avg": zeros_like(p),
                    "exp_avg_sq": zeros_like(p),
                }
                if group["amsgrad"]:
                    state["max_exp_avg_sq"] = zeros_like(p)
                self.state[id(p)] = state

    @no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group, p, state in self._params_with_grad():
            g = p.grad if not group["maximize"] else -p.grad
            if group["weight_decay"]:
                g = g + p * group["weight_decay"]
            beta1, beta2 = group["betas"]
            step = state["step"]
            step.add_(1)
            state["exp_avg"].mul_(beta1).add_(g * (1 - beta1))
            state["exp_avg_sq"].mul_(beta2).add_(g * g * (1 - beta2))
            second = state["exp_avg_sq"]
            if group["amsgrad"]:
                state["max_exp_avg_sq"].copy_(maximum(state["max_exp_avg_sq"], second))
                second = state["max_exp_avg_sq"]
            bias1 = 1 - beta1**step
            bias2 = 1 - beta2**step
            denom = (second / bias2).sqrt() + group["eps"]
            p.sub_(state["exp_avg"] / denom * (group["lr"] / bias1))
        return loss


__all__ = ["Adam", "Optimizer", "SGD"]
