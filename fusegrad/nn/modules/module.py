"""``nn.Module``: parameters, buffers and submodules registered by assignment,
walked, converted, saved and loaded the way PyTorch does it."""

from __future__ import annotations

import itertools
from collections import OrderedDict, namedtuple

from ...eager.autograd import RemovableHandle
from ...eager.grad_mode import no_grad
from ...eager.tensor import Tensor
from ...ir import dtypes
from ..parameter import Parameter, is_lazy


def typename(obj) -> str:
    """The type's name as PyTorch's error messages spell it (``torch.typename``)."""
    if isinstance(obj, Tensor):
        return obj.type()
    cls = obj if isinstance(obj, type) else type(obj)
    module = getattr(cls, "__module__", "")
    return cls.__qualname__ if module in ("", "builtins") else f"{module}.{cls.__qualname__}"


def addindent(text: str, spaces: int) -> str:
    """Indents every line of ``text`` but the first (it follows a label)."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class Module:
    """Base class of network layers. Assigning a Parameter, a Module or a
    registered buffer to an attribute registers it, so ``parameters()``,
    ``state_dict()``, ``to()`` and ``train()`` reach the whole tree.

    >>> import fusegrad.nn as nn
    >>> nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    Sequential(
      (0): Linear(in_features=3, out_features=2, bias=True)
      (1): ReLU()
    )
    """

    training: bool
    _hook_ids = itertools.count()

    def __init__(self):
        init = object.__setattr__
        init(self, "training", True)
        init(self, "_parameters", OrderedDict())
        init(self, "_buffers", OrderedDict())
        init(self, "_non_persistent_buffers_set", set())
        init(self, "_modules", OrderedDict())
        init(self, "_forward_pre_hooks", OrderedDict())
        init(self, "_forward_hooks", OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    def __call__(self, *args, **kwargs):
        # (a compiled program's guard on Python state covers the training flag
        # and the numbers a forward reads: tracer/python_state.py)
        for hook in tuple(self._forward_pre_hooks.values()):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hook in tuple(self._forward_hooks.values()):
            result = hook(self, args, output)
            if result is not None:
                output = result
        return output

    # ------------------------------------------------------------ registration

    def __setattr__(self, name: str, value) -> None:
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, keep=params)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{typename(value)}' as parameter '{name}' "
                    "(torch.nn.Parameter or None expected)"
                )
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name, keep=self._modules)
            self._modules[name] = value
        elif params is not None and name in self._modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{typename(value)}' as child module '{name}' "
                    "(torch.nn.Module or None expected)"
                )
            self._modules[name] = value
        elif params is not None and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{typename(value)}' as buffer '{name}' "
                    "(torch.Tensor or None expected)"
                )
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name: str, keep: dict) -> None:
        """Removes ``name`` from the registries but ``keep`` (where it is
        registered anew, keeping its place) before it is assigned."""
        self.__dict__.pop(name, None)
        for registry in (self._parameters, self._buffers, self._modules):
            if registry is not keep:
                registry.pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __getattr__(self, name: str):
        state = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            found = state.get(registry)
            if found is not None and name in found:
                return found[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        return sorted(
            set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules)
        )

    def _check_name(self, kind: str, name, registry: dict) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {typename(name)}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if hasattr(self, name) and name not in registry:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name: str, param) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name("parameter", name, self._parameters)
        if param is not None:
            if not isinstance(param, Parameter):
                raise TypeError(
                    f"cannot assign '{typename(param)}' object to parameter '{name}' "
                    "(torch.nn.Parameter or None required)"
                )
            if param.grad_fn is not None:
                raise ValueError(
                    f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters "
                    "must be created explicitly. To express '{name}' as a function of another "
                    "Tensor, compute the value in the forward() method."
                )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        """Registers a tensor that is part of the module's state but no parameter
        (BatchNorm's running statistics, a mask); ``persistent=False`` keeps it
        out of ``state_dict()``."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name("buffer", name, self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{typename(tensor)}' object to buffer '{name}' "
                "(torch Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module) -> None:
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{typename(module)} is not a Module subclass")
        self._check_name("module", name, self._modules)
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> Module:
        module = self
        for item in target.split(".") if target else []:
            if not hasattr(module, item):
                raise AttributeError(f"{module._get_name()} has no attribute `{item}`")
            module = getattr(module, item)
            if not isinstance(module, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return module

    def get_parameter(self, target: str) -> Parameter:
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if name not in module._parameters:
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return module._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if name not in module._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return module._buffers[name]

    # ------------------------------------------------------------------ hooks

    def register_forward_pre_hook(self, hook) -> RemovableHandle:
        """``hook(module, args)`` runs before ``forward``; a returned value replaces args."""
        handle = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[handle.id] = hook
        return handle

    def register_forward_hook(self, hook) -> RemovableHandle:
        """``hook(module, args, output)`` runs after ``forward``; a returned value
        replaces the output."""
        handle = RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        return handle

    # ---------------------------------------------------------------- walking

    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(
                    memo, prefix + "." + name if prefix else name, remove_duplicate
                )

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def _named_members(self, registry: str, prefix: str, recurse: bool, remove_duplicate: bool):
        modules = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        seen = set()
        for module_prefix, module in modules:
            for name, value in getattr(module, registry).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield (module_prefix + "." + name if module_prefix else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate=True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True):
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True):
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    def apply(self, fn) -> Module:
        """Calls ``fn`` on every submodule (children first), then on this module."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ modes

    def train(self, mode: bool = True) -> Module:
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for param in self.parameters():
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
            else:
                if param.grad.grad_fn is not None:
                    param.grad.detach_()
                else:
                    param.grad.requires_grad_(False)
                param.grad.zero_()

    # ------------------------------------------------------------- conversion

    def _apply(self, fn) -> Module:
        """Replaces the data of every parameter, gradient and buffer by ``fn`` of it.
        Tensors keep their identity (as PyTorch's ``param.data = ...`` keeps a
        Parameter's), so optimizers and compiled programs holding them see the change."""
        for module in self.children():
            module._apply(fn)
        with no_grad():
            for tensor in itertools.chain(self._parameters.values(), self._buffers.values()):
                if tensor is None:
                    continue
                if is_lazy(tensor):  # no values yet: the dtype fn gives them, later
                    tensor._convert_like(fn)
                    continue
                converted = fn(tensor)
                if converted is not tensor:
                    tensor.data = converted
                if tensor.grad is not None:
                    converted = fn(tensor.grad)
                    if converted is not tensor.grad:
                        tensor.grad.data = converted
        return self

    def _to_floating(self, dtype) -> Module:
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def to(self, *args, **kwargs) -> Module:
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(tensor)``:
        floating parameters and buffers converted to the dtype; the device is
        the CPU. ``memory_format=`` lays out the 4-d and 5-d ones so."""
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        memory_format = kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
        for arg in args:
            if isinstance(arg, Tensor):
                dtype = arg.dtype
            elif isinstance(arg, dtypes.DType) or arg in (float, int, bool):
                dtype = arg
            elif not isinstance(arg, bool):
                device = arg
        if device is not None:
            check_device(device)
        if dtype is not None:
            dtype = dtypes.as_dtype(dtype)
            if not dtype.is_floating_point:
                raise TypeError(
                    "nn.Module.to only accepts floating point or complex dtypes, but got "
                    f"desired dtype={dtype}"
                )
            self._to_floating(dtype)
        if memory_format is not None:
            self._apply(lambda t: t.to(memory_format=memory_format) if t.dim() in (4, 5) else t)
        return self

    def float(self) -> Module:
        return self._to_floating(dtypes.float32)

    def double(self) -> Module:
        return self._to_floating(dtypes.float64)

    def half(self) -> Module:
        raise TypeError(
            "fusegrad has no half-precision dtypes (float16, bfloat16): its floating dtypes "
            "are float32 and float64"
        )

    bfloat16 = half

    def cpu(self) -> Module:
        return self

    def cuda(self, device=None) -> Module:
        check_device("cuda")

    def type(self, dst_type) -> Module:
        return self._apply(lambda t: t.type(dst_type))

    # --------------------------------------------------------------- state

    def state_dict(self, *, destination=None, prefix: str = "", keep_vars: bool = False):
        """An OrderedDict of every parameter and persistent buffer by its dotted
        name, detached unless ``keep_vars``; tensors reached by two names appear
        under both."""
        if destination is None:
            destination = OrderedDict()
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buffer in self._buffers.items():
            if buffer is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buffer if keep_vars else buffer.detach()
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(
                    destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars
                )
        return destination

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copies the tensors of ``state_dict`` into this module's parameters and
        persistent buffers (``assign=True`` takes the tensors themselves).
        Returns the missing and unexpected keys; with ``strict`` they are an error."""
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        own = self.state_dict(keep_vars=True)
        missing = [key for key in own if key not in state_dict]
        unexpected = [key for key in state_dict if key not in own]
        errors = []
        for key, value in state_dict.items():
            if key in own:
                errors.extend(self._load_one(key, own[key], value, assign))
        if strict:
            if unexpected:
                errors.insert(
                    0,
                    "Unexpected key(s) in state_dict: "
                    + ", ".join(f'"{k}"' for k in unexpected)
                    + ". ",
                )
            if missing:
                errors.insert(
                    0,
                    "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ",
                )
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                + "\n\t".join(errors)
            )
        return _IncompatibleKeys(missing, unexpected)

    def _load_one(self, key: str, target: Tensor, value, assign: bool) -> list:
        if not isinstance(value, Tensor):
            return [
                f'While copying the parameter named "{key}", expected torch.Tensor or '
                f"Tensor-like object from checkpoint but received {type(value)}"
            ]
        if is_lazy(target):  # a lazy module's parameter takes the shape it is given
            target.materialize(value.shape)
        if value.shape != target.shape:
            return [
                f"size mismatch for {key}: copying a param with shape {value.shape} from "
                f"checkpoint, the shape in current model is {target.shape}."
            ]
        if assign:
            module_path, _, name = key.rpartition(".")
            module = self.get_submodule(module_path)
            if isinstance(target, Parameter):
                value = Parameter(value, requires_grad=target.requires_grad)
            setattr(module, name, value)
        else:
            with no_grad():
                target.copy_(value)
        return []

    # ------------------------------------------------------------------ repr

    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The module's own settings, shown inside its ``repr``'s parentheses."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [
            f"({name}): " + addindent(repr(module), 2) for name, module in self._modules.items()
        ]
        lines = extra_lines + child_lines
        if not lines:
            return self._get_name() + "()"
        if len(extra_lines) == 1 and not child_lines:
            return f"{self._get_name()}({extra_lines[0]})"
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


def check_device(device) -> None:
    """A ``device=`` argument: the CPU (fusegrad has no other) or None."""
    if device is not None and not str(device).startswith("cpu"):
        raise RuntimeError(
            f"fusegrad runs on the CPU only, so a module cannot move to {str(device)!r}"
        )
