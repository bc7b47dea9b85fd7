"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList``,
``ParameterDict``. Their entries are registered under their position or key,
so parameters inside them are the container's parameters."""

from __future__ import annotations

import operator
from collections import OrderedDict

from ...eager.tensor import Tensor
from ..parameter import Parameter
from .module import Module, addindent


def _position(index, length: int) -> int:
    """A position in a container of ``length`` entries, negative ones from the end."""
    index = operator.index(index)
    if not -length <= index < length:
        raise IndexError(f"index {index} is out of range")
    return index % length


def _renumber(registry: OrderedDict, modules=None) -> None:
    """Names the entries "0", "1", ... again, after one was removed or inserted."""
    modules = list(registry.values()) if modules is None else modules
    registry.clear()
    for position, module in enumerate(modules):
        registry[str(position)] = module


class Sequential(Module):
    """Modules applied one after another: ``Sequential(a, b)(x)`` is ``b(a(x))``.
    Built from modules (named "0", "1", ...) or from an OrderedDict of named ones."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for index, module in enumerate(args):
                self.add_module(str(index), module)

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input

    def __getitem__(self, index):
        if isinstance(index, slice):
            return type(self)(OrderedDict(list(self._modules.items())[index]))
        return list(self._modules.values())[_position(index, len(self))]

    def __setitem__(self, index, module: Module) -> None:
        key = list(self._modules)[_position(index, len(self))]
        setattr(self, key, module)

    def __delitem__(self, index) -> None:
        keys = list(self._modules)
        for key in keys[index] if isinstance(index, slice) else [keys[_position(index, len(self))]]:
            delattr(self, key)
        _renumber(self._modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError(
                "add operator supports only objects of Sequential class, but "
                f"{type(other)} is given."
            )
        return Sequential(*self, *other)

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        index %= n + 1
        modules = list(self._modules.values())
        modules.insert(index, module)
        _renumber(self._modules, modules)
        return self

    def extend(self, sequential) -> Sequential:
        for module in sequential:
            self.append(module)
        return self

    def pop(self, key):
        module = self[key]
        del self[key]
        return module


class ModuleList(Module):
    """A list of modules, registered as "0", "1", ...; it has no forward of its own."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return type(self)(list(self._modules.values())[index])
        return self._modules[str(_position(index, len(self)))]

    def __setitem__(self, index, module: Module) -> None:
        setattr(self, str(_position(index, len(self))), module)

    def __delitem__(self, index) -> None:
        keys = [str(i) for i in range(len(self))]
        for key in keys[index] if isinstance(index, slice) else [keys[_position(index, len(self))]]:
            delattr(self, key)
        _renumber(self._modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other) -> ModuleList:
        return ModuleList([*self, *other])

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules) -> ModuleList:
        if isinstance(modules, (Tensor, str)) or not hasattr(modules, "__iter__"):
            raise TypeError(
                "ModuleList.extend should be called with an iterable, but got "
                + type(modules).__name__
            )
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        modules = list(self._modules.values())
        modules.insert(index, module)
        _renumber(self._modules, modules)

    def pop(self, key=-1) -> Module:
        module = self[key]
        del self[key]
        return module

    def __repr__(self) -> str:
        """Runs of equal entries print once, as ``(0-3): 4 x Block(...)``."""
        reprs = [repr(module) for module in self]
        if not reprs:
            return self._get_name() + "()"
        runs = []  # [first, last, repr]
        for index, text in enumerate(reprs):
            if runs and runs[-1][2] == text:
                runs[-1][1] = index
            else:
                runs.append([index, index, text])
        lines = []
        for first, last, text in runs:
            head = f"({first}): " if first == last else f"({first}-{last}): {last - first + 1} x "
            lines.append(addindent(head + text, 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """A dict of modules, registered under their keys, in insertion order."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key) -> bool:
        return key in self._modules

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        module = self[key]
        del self[key]
        return module

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        pairs = modules.items() if hasattr(modules, "items") else modules
        for index, pair in enumerate(pairs):
            if len(pair) != 2:
                raise ValueError(
                    f"ModuleDict update sequence element #{index} has length {len(pair)}; "
                    "2 is required"
                )
            self[pair[0]] = pair[1]


def _describe(value) -> str:
    if not isinstance(value, Tensor):
        return f"Object of type: {type(value).__name__}"
    kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
    size = "x".join(str(s) for s in value.shape)
    return f"{kind} containing: [{value.dtype} of size {size}]"


def _as_parameter(value):
    """Tensors put into a parameter container become Parameters (others stay as they are)."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


class ParameterList(Module):
    """A list of parameters, registered as "0", "1", ...; plain tensors become Parameters."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return type(self)([self[i] for i in range(len(self))[index]])
        return getattr(self, str(_position(index, len(self))))

    def __setitem__(self, index, value) -> None:
        setattr(self, str(_position(index, len(self))), _as_parameter(value))

    def __len__(self) -> int:
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values) -> ParameterList:
        return self.extend(values)

    def append(self, value) -> ParameterList:
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values) -> ParameterList:
        if isinstance(values, Tensor) or not hasattr(values, "__iter__"):
            raise TypeError(
                "ParameterList.extend should be called with an iterable, but got "
                + type(values).__name__
            )
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"  ({k}): {_describe(value)}" for k, value in enumerate(self))


class ParameterDict(Module):
    """A dict of parameters, registered under their keys; plain tensors become Parameters."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys: dict = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        return getattr(self, key)

    def __setitem__(self, key: str, value) -> None:
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __contains__(self, key) -> bool:
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((key, self[key]) for key in self._keys)

    def values(self):
        return (self[key] for key in self._keys)

    def get(self, key: str, default=None):
        return self[key] if key in self else default

    def pop(self, key: str):
        value = self[key]
        del self[key]
        return value

    def clear(self) -> None:
        for key in list(self._keys):
            del self[key]

    def update(self, parameters) -> None:
        pairs = parameters.items() if hasattr(parameters, "items") else parameters
        for pair in pairs:
            key, value = pair
            self[key] = value

    def extra_repr(self) -> str:
        return "\n".join(f"  ({key}): {_describe(value)}" for key, value in self.items())
