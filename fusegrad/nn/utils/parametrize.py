"""``nn.utils.parametrize``: a module's parameter or buffer computed, on
every read, by modules from the tensors it is kept as.

``register_parametrization(module, "weight", p)`` moves ``module.weight``
into ``module.parametrizations.weight.original`` (or, when ``p``'s
``right_inverse`` gives several tensors, ``original0``, ``original1``, ...)
and makes ``weight`` a property of a class made for the module,
``Parametrized<Class>``, that returns ``p(original)``; assigning to it
stores ``p.right_inverse(value)``. Inside ``cached()`` each parametrized
tensor is computed once.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Sequence

from ...eager.grad_mode import no_grad
from ...eager.tensor import Tensor
from ..modules.container import ModuleDict, ModuleList
from ..modules.module import Module
from ..parameter import Parameter

__all__ = [
    "ParametrizationList",
    "cached",
    "is_parametrized",
    "register_parametrization",
    "remove_parametrizations",
    "type_before_parametrizations",
]

_cache_enabled = 0
_cache: dict = {}


@contextlib.contextmanager
def cached():
    """Within it, each parametrized tensor is computed at its first read and
    then reused (a weight read at every step of a recurrent network)."""
    global _cache_enabled, _cache
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache = {}


def _register_parameter_or_buffer(module: Module, name: str, tensor: Tensor) -> None:
    if isinstance(tensor, Parameter):
        module.register_parameter(name, tensor)
    else:
        module.register_buffer(name, tensor)


def _difference(value: Tensor, reference: Tensor):
    """(what, value's, reference's) for the first of dtype and shape they differ in, or None."""
    for what in ("dtype", "shape"):
        if getattr(value, what) != getattr(reference, what):
            return what, getattr(value, what), getattr(reference, what)
    return None


def _check_is_tensor(value) -> None:
    if not isinstance(value, Tensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(value).__name__}.")


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order to the tensors it
    is kept as: ``original``, or ``original0``, ``original1``, ... when the
    first one's ``right_inverse`` gives several."""

    def __init__(self, modules, original: Tensor, unsafe: bool = False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        with no_grad():
            new = original
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    new = module.right_inverse(new)
        if not isinstance(new, (Tensor, Sequence)):
            raise ValueError(
                "'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                f"Got {type(new).__name__}"
            )
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if new.dtype is not original.dtype:
                raise ValueError(
                    "When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                    f"original.dtype: {original.dtype}\nright_inverse(original).dtype: "
                    f"{new.dtype}"
                )
            # the original keeps its identity (an optimizer may hold it) and takes the value
            with no_grad():
                original.data = new.detach()
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, tensor in enumerate(new):
                if not isinstance(tensor, Tensor):
                    raise ValueError(
                        "'right_inverse' must return a Tensor or a Sequence of tensors "
                        f"(list, tuple...). Got element {i} of the sequence with type "
                        f"{type(tensor).__name__}."
                    )
                if isinstance(original, Parameter):
                    tensor = Parameter(tensor.detach(), original.requires_grad)
                tensor.requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", tensor)
        if not self.unsafe:
            value = self()
            _check_is_tensor(value)
            difference = _difference(value, original)
            if difference is not None:
                what, got, wanted = difference
                raise ValueError(
                    f"Registering a parametrization may not change the {what} of the tensor, "
                    f"unless `unsafe` flag is enabled.\nunparametrized {what}: {wanted}\n"
                    f"parametrized {what}: {got}"
                )

    def right_inverse(self, value: Tensor) -> None:
        """Stores ``value``: the originals become what the parametrizations'
        right inverses, last to first, make of it."""
        with no_grad():
            for module in reversed(self):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(
                        f"parametrization {type(module).__name__} does not implement right_inverse."
                    )
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(
                        f"`right_inverse` should return a tensor. Got {type(value).__name__}"
                    )
                if value.dtype is not self.original.dtype:
                    raise ValueError(
                        f"The tensor returned by `right_inverse` has dtype {value.dtype} while "
                        f"`original` has dtype {self.original.dtype}"
                    )
                self.original.data = value.detach()
                return
            if not isinstance(value, Sequence):
                raise ValueError(
                    "'right_inverse' must return a sequence of tensors. "
                    f"Got {type(value).__name__}."
                )
            if len(value) != self.ntensors:
                raise ValueError(
                    f"'right_inverse' must return a sequence of tensors of length {self.ntensors}. "
                    f"Got a sequence of length {len(value)}."
                )
            for i, tensor in enumerate(value):
                original = getattr(self, f"original{i}")
                if not isinstance(tensor, Tensor):
                    raise ValueError(
                        "'right_inverse' must return a sequence of tensors or reference-type "
                        f"opaques. Got element {i} of type {type(tensor).__name__}."
                    )
                if tensor.dtype is not original.dtype:
                    raise ValueError(
                        f"Tensor {i} returned by `right_inverse` has dtype {tensor.dtype} while "
                        f"`original{i}` has dtype {original.dtype}"
                    )
                original.data = tensor.detach()

    def forward(self) -> Tensor:
        if self.is_tensor:
            value = self[0](self.original)
        else:
            value = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in list(self)[1:]:
            value = module(value)
        return value


def _refuse_pickling(self):
    raise RuntimeError(
        "Serialization of parametrized modules is only supported through state_dict(). See:\n"
        "https://pytorch.org/tutorials/beginner/saving_loading_models.html"
        "#saving-loading-a-general-checkpoint-for-inference-and-or-resuming-training"
    )


def _deepcopy(self, memo):
    replica = object.__new__(type(self))
    memo[id(self)] = replica
    replica.__dict__ = copy.deepcopy(self.__dict__, memo)
    return replica


def _inject_new_class(module: Module) -> None:
    """Gives the module a class of its own, ``Parametrized<Class>``, to hold
    its parametrized tensors' properties."""
    cls = module.__class__
    module.__class__ = type(
        f"Parametrized{cls.__name__}",
        (cls,),
        {"__getstate__": _refuse_pickling, "__deepcopy__": _deepcopy},
    )


def _inject_property(module: Module, tensor_name: str) -> None:
    def get_parametrized(self) -> Tensor:
        parametrization = self.parametrizations[tensor_name]
        if not _cache_enabled:
            return parametrization()
        key = (id(self), tensor_name)
        if key not in _cache:
            _cache[key] = parametrization()
        return _cache[key]

    def set_original(self, value: Tensor) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def _check_appended(module: Module, tensor_name: str, parametrization: Module) -> None:
    """A parametrization added to others must keep the tensor's dtype and
    shape, and so must its right inverse."""
    current = getattr(module, tensor_name)
    value = parametrization(current)
    _check_is_tensor(value)
    difference = _difference(value, current)
    if difference is not None:
        what, got, wanted = difference
        raise ValueError(
            f"Registering a parametrization may not change the {what} of the tensor, unless "
            f"the `unsafe` flag is enabled.\nmodule.{tensor_name}.{what}: {wanted}\n"
            f"parametrization(module.{tensor_name}).{what}: {got}"
        )
    if not hasattr(parametrization, "right_inverse"):
        return
    inverted = parametrization.right_inverse(current)
    if not isinstance(inverted, Tensor):
        raise ValueError(
            f"parametrization.right_inverse must return a tensor. Got: {type(inverted).__name__}"
        )
    difference = _difference(inverted, current)
    if difference is not None:
        what, got, wanted = difference
        raise ValueError(
            f"The tensor returned by parametrization.right_inverse must have the same {what} as "
            f"module.{tensor_name}, unless the `unsafe` flag is enabled.\n"
            f"module.{tensor_name}.{what}: {wanted}\nreturned {what}: {got}"
        )


def register_parametrization(
    module: Module, tensor_name: str, parametrization: Module, *, unsafe: bool = False
) -> Module:
    """Makes ``module.<tensor_name>`` ``parametrization`` of the tensor it was
    (a parameter, a buffer, or already parametrized: then the new one applies
    after the others). ``unsafe=True`` skips the checks that the result keeps
    the tensor's shape and dtype."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            _check_appended(module, tensor_name, parametrization)
        module.parametrizations[tensor_name].append(parametrization)
        module.parametrizations[tensor_name].unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        parametrizations = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = parametrizations
    else:
        raise ValueError(
            f"Module '{module}' does not have a parameter, a buffer, or a parametrized element "
            f"with name '{tensor_name}'"
        )
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has parametrized tensors (``tensor_name`` among them)."""
    parametrizations = getattr(module, "parametrizations", None)
    if not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(
    module: Module, tensor_name: str, leave_parametrized: bool = True
) -> Module:
    """Makes ``module.<tensor_name>`` a plain parameter or buffer again: its
    current value (``leave_parametrized``) or its original. The module gets
    its class back with its last parametrization."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    parametrizations = module.parametrizations[tensor_name]
    if parametrizations.is_tensor:
        original = parametrizations.original
        if leave_parametrized:
            with no_grad():
                original.data = getattr(module, tensor_name).detach()
    else:
        if not leave_parametrized:
            raise ValueError(
                "Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is "
                "parametrized in terms of a sequence of tensors."
            )
        # computed with gradients on: whether they flow tells if it is a parameter
        value = getattr(module, tensor_name)
        original = Parameter(value.detach()) if value.requires_grad else value.detach()
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """The module's class, not the one parametrizing gave it."""
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)
