"""``fusegrad.func`` (``torch.func``): composable function transforms of
the gradient (``grad``, ``grad_and_value``, ``vjp``, ``jacrev``,
``hessian``) and functional calls of modules (``functional_call``,
``stack_module_state``)."""

from .module_state import functional_call, stack_module_state
from .transforms import grad, grad_and_value, hessian, jacrev, vjp

__all__ = [
    "grad",
    "grad_and_value",
    "vjp",
    "jacrev",
    "hessian",
    "functional_call",
    "stack_module_state",
]
