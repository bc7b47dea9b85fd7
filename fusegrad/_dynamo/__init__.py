"""``torch._dynamo``: what scripts call of PyTorch's compiler frontend,
answered by ``fusegrad.jit``, which traces a whole call or runs it eagerly
(it makes no partial graphs: control flow on tensor values becomes a guard
of the one program, not a graph break)."""

from __future__ import annotations

from ..compiler import disable, is_compiling
from ..tracer.jit import reset
from . import backends, config
from .explain import ExplainOutput, explain

__all__ = [
    "ExplainOutput",
    "backends",
    "config",
    "disable",
    "explain",
    "is_compiling",
    "list_backends",
    "reset",
]


def list_backends(exclude_tags=("debug", "experimental")) -> list:
    """The backend names ``torch.compile`` takes that compile (as PyTorch lists them)."""
    return ["cudagraphs", "inductor", "openxla", "tvm"]
