"""``nn.Parameter``: a tensor a Module registers as one of its parameters."""

from __future__ import annotations

from ..eager import creation
from ..eager.tensor import Tensor


class Parameter(Tensor):
    """A tensor that requires grad by default and that a Module assigned it to
    registers, so ``parameters()`` finds it. It shares ``data``'s storage."""

    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = creation.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter data must be a Tensor, not {type(data).__name__}")
        p = cls._make(data._data, data.dtype)
        p._version_counter = data._version_counter
        p.requires_grad = requires_grad
        return p

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        return (Parameter, (Tensor._make(self._data.copy(), self.dtype), self.requires_grad))

    def __deepcopy__(self, memo):
        p = Parameter(Tensor._make(self._data.copy(), self.dtype), self.requires_grad)
        if self._grad is not None:
            p._grad = self._grad.detach().clone()
        memo[id(self)] = p
        return p
