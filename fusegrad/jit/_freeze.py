"""``freeze`` and ``optimize_for_inference``: a scripted module whose
parameters and buffers became constants, as TorchScript folds them into
the program. Here they become plain attributes holding the same memory
without gradients, so the forward runs as written and nothing in the
module trains."""

from __future__ import annotations

from . import _deprecation
from ._script import ScriptModule, scripted_copy

_NOT_SCRIPTED = (
    "{} expects a ScriptModule as input. Please use torch.jit.script or torch.jit.trace to "
    "script your 'nn.Module'."
)


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    """A frozen copy of the scripted module ``mod``, which must be in eval
    mode: its ``parameters()`` and ``state_dict()`` are empty, and its
    outputs need no gradient. Every attribute stays reachable, so
    ``preserved_attrs`` is kept without asking."""
    _deprecation.warn("freeze")
    if not isinstance(mod, ScriptModule):
        raise RuntimeError(_NOT_SCRIPTED.format("Freezing"))
    if mod.training:
        raise RuntimeError(
            "Freezing is currently only implemented for modules in eval mode. Please call "
            ".eval() on your module before freezing."
        )
    frozen = scripted_copy(mod)
    for module in frozen.modules():
        _fold(module)
    return frozen


def _fold(module) -> None:
    for registry in (module._parameters, module._buffers):
        for name, tensor in list(registry.items()):
            del registry[name]
            object.__setattr__(module, name, None if tensor is None else tensor.detach())
    module._non_persistent_buffers_set.clear()


def optimize_for_inference(mod, other_methods=None):
    """``mod`` put in eval mode, frozen (TorchScript's further rewrites
    change no values: fusegrad's jit compiles the forward as it is)."""
    _deprecation.warn("optimize_for_inference")
    if not isinstance(mod, ScriptModule):
        raise RuntimeError(_NOT_SCRIPTED.format("optimize_for_inference"))
    return freeze(mod.eval(), preserved_attrs=other_methods)
