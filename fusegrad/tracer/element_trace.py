"""The trace vmap takes of one batch element (func/vmap.py): a ``Trace`` that
also knows which of its values depend on the batched inputs, so that what
torch.func refuses on a batched value — Python reading it (``.item()``, an
``if`` on it), a random draw unless the call said how to batch it — is
refused where it happens, as there; a decision on a batched value holds
if every element decides the same (checked on the batch), else it is
refused too."""

from __future__ import annotations

import numpy as np

from ..ir import primitives as P
from .trace import Trace

ITEM = (
    "vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over "
    "calling .item() on a Tensor, please try to rewrite what you're doing with other "
    "operations. If error is occurring somewhere inside PyTorch internals, please file a "
    "bug report."
)
CONTROL_FLOW = (
    "vmap: It looks like you're attempting to use a Tensor in some data-dependent control "
    "flow. We don't support that yet, please file an issue at "
    "https://github.com/pytorch/pytorch/issues ."
)
RANDOM = (
    "vmap: called random operation while in randomness error mode. Please either use the "
    "'same' or 'different' randomness flags on vmap or perform the randomness operation "
    "out of vmap"
)


class ElementTrace(Trace):
    """A trace whose ``batched`` vars are the batched inputs and every value
    computed from one."""

    def __init__(self, randomness: str):
        super().__init__()
        self.randomness = randomness
        self.batched: set = set()
        self.batched_guards: list = []  # (var, the value this element decided on)

    def add_batched_input(self, tensor) -> None:
        self.batched.add(self.add_input(tensor))

    def record(self, prim, args, params, out) -> None:
        if prim is P.random_bits:
            if self.randomness == "error":
                raise RuntimeError(RANDOM)
            super().record(prim, args, params, out)
            if self.randomness == "different":
                self.batched.add(self.eqns[-1].out)
            return
        super().record(prim, args, params, out)
        eqn = self.eqns[-1]
        if any(v in self.batched for v in eqn.inputs):
            self.batched.add(eqn.out)

    def guard(self, tensor, how: str, keyed: bool = False) -> None:
        """A decision on a batched value stands if every element decides as
        this one did (``batched_guards``, checked on the batch): so the
        checks library code makes (a target in range) hold for every
        element, and the result is what a loop over the elements gives."""
        var = self.var_of(tensor)
        if var in self.batched:
            self.batched_guards.append((var, np.array(tensor._data)))
            return
        super().guard(tensor, how, keyed)

    def number_of(self, tensor):
        if self.var_of(tensor) in self.batched:
            raise RuntimeError(ITEM)
        return super().number_of(tensor)

    def indexes_by_tensor(self, tensor) -> bool:
        return self.var_of(tensor) in self.batched  # each element's own position

    def unsupported(self, what: str):
        raise RuntimeError(f"vmap: {what} is not supported inside a vmapped function")
