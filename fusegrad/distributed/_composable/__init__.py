"""``torch.distributed._composable``: ``checkpoint``, activation
checkpointing applied to a module in place."""

from __future__ import annotations

import functools

from ...utils import checkpoint as _activation_checkpoint

__all__ = ["checkpoint"]


def checkpoint(module, **kwargs):
    """``module``, its forward's activations recomputed in the backward rather
    than kept (``torch.utils.checkpoint``'s non-reentrant kind); returns it."""
    forward = module.forward

    @functools.wraps(forward)
    def checkpointed_forward(*args, **forward_kwargs):
        return _activation_checkpoint.checkpoint(
            forward, *args, use_reentrant=False, **forward_kwargs
        )

    module.forward = checkpointed_forward
    return module
