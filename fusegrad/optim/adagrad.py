"""Adagrad: each coordinate's step scaled by the root of its summed squared gradients."""

from __future__ import annotations

from ..eager.creation import full_like, tensor
from ..eager.tensor import Tensor
from .optimizer import Optimizer, check_flags, in_dtype, step_count, with_weight_decay


class Adagrad(Optimizer):
    """``sum += g**2`` and ``p -= clr * g / (sqrt(sum) + eps)``, with the
    learning rate decayed as ``clr = lr / (1 + (step - 1) * lr_decay)``.
    The state is made for every parameter up front, as PyTorch makes it."""

    def __init__(
        self,
        params,
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(
                f"Invalid initial_accumulator_value value: {initial_accumulator_value}"
            )
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        check_flags(differentiable=differentiable)
        super().__init__(
            params,
            dict(
                lr=lr,
                lr_decay=lr_decay,
                eps=eps,
                weight_decay=weight_decay,
                initial_accumulator_value=initial_accumulator_value,
                foreach=foreach,
                maximize=maximize,
                differentiable=differentiable,
                fused=fused,
            ),
        )
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = self._initial_state(group, p)

    def _initial_state(self, group: dict, p: Tensor) -> dict:
        return {
            "step": tensor(0.0),
            "sum": full_like(p, group["initial_accumulator_value"]),
        }

    def _update(self, group: dict, p: Tensor, grad: Tensor, state: dict) -> None:
        step, state_sum = state["step"], state["sum"]
        step.add_(1)
        grad = with_weight_decay(group, p, grad)
        clr = group["lr"] / (1 + (step_count(step) - 1) * group["lr_decay"])
        state_sum.add_(1 * grad * grad)
        std = state_sum.sqrt() + group["eps"]
        p.add_(in_dtype(-clr, p.dtype) * grad / std)
