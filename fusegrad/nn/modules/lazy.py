"""``LazyModuleMixin``: a module whose parameters' shapes come from its first
input. Its parameters and buffers start uninitialized (nn/parameter.py);
the first call materializes them (``initialize_parameters``), initializes
them as the module it becomes would (``reset_parameters``), and turns the
module into ``cls_to_become`` (``LazyLinear`` into ``Linear``). Loading a
state dict materializes them too, with the loaded shapes."""

from __future__ import annotations

from ...eager.grad_mode import no_grad
from ..parameter import is_lazy


class LazyModuleMixin:
    """Mixed in before the module a lazy module becomes, which gives it
    ``cls_to_become``; the lazy module defines ``initialize_parameters(input)``."""

    cls_to_become = None
    _inferred = False  # with no cls_to_become: set once the first input was seen

    def __call__(self, *args, **kwargs):
        if self._inferred:
            return super().__call__(*args, **kwargs)
        with no_grad():
            self.initialize_parameters(*args, **kwargs)
        if self.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        if self.cls_to_become is None:
            self._inferred = True
            return super().__call__(*args, **kwargs)
        self.__class__ = self.cls_to_become
        return self(*args, **kwargs)

    def has_uninitialized_params(self) -> bool:
        tensors = (*self._parameters.values(), *self._buffers.values())
        return any(is_lazy(t) for t in tensors)

    def initialize_parameters(self, *args, **kwargs) -> None:
        raise NotImplementedError(
            f"initialize_parameters is not implemented for {type(self).__name__}"
        )
