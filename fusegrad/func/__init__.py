"""``fusegrad.func`` (``torch.func``): composable function transforms of
the gradient, reverse mode (``grad``, ``grad_and_value``, ``vjp``,
``jacrev``) and forward mode (``jvp``, ``linearize``, ``jacfwd``), the
``hessian``, batching (``vmap``), and functional calls of modules
(``functional_call``, ``stack_module_state``)."""

from .forward_transforms import hessian, jacfwd, jvp, linearize
from .module_state import functional_call, stack_module_state
from .transforms import grad, grad_and_value, jacrev, vjp
from .vmap import vmap

__all__ = [
    "grad",
    "grad_and_value",
    "vjp",
    "jacrev",
    "hessian",
    "jvp",
    "linearize",
    "jacfwd",
    "functional_call",
    "stack_module_state",
    "vmap",
]
