"""``fusegrad.nn`` modules: Module, Parameter, Linear, Sequential and activations."""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np

from ..tracer import creation
from ..tracer.tensor import Tensor, recording
from . import functional as F


class Parameter(Tensor):
    """A tensor that a Module registers as one of its parameters (requires grad by default)."""

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
        memo[id(self)] = p
        return p


class Module:
    """Base class of network layers: attributes that are Parameters or Modules
    are registered, so ``parameters()`` finds them all."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign attributes before Module.__init__() call")
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        for registry in ("_parameters", "_modules"):
            found = self.__dict__.get(registry, {})
            if name in found:
                return found[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def register_parameter(self, name, param):
        if param is None:
            self._parameters[name] = None
        else:
            setattr(self, name, param)

    def add_module(self, name, module):
        self._modules[name] = module

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def named_parameters(self, prefix="", recurse=True):
        seen = set()
        for module_prefix, module in self.named_modules(prefix) if recurse else [(prefix, self)]:
            for name, p in module._parameters.items():
                if p is None or id(p) in seen:
                    continue
                seen.add(id(p))
                yield (module_prefix + "." + name if module_prefix else name), p

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, module in self._modules.items():
            yield from module.named_modules(prefix + "." + name if prefix else name)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def children(self):
        yield from self._modules.values()

    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.zero_()

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def state_dict(self):
        return OrderedDict((name, p.detach()) for name, p in self.named_parameters())

    def load_state_dict(self, state):
        own = dict(self.named_parameters())
        missing = set(own) - set(state)
        unexpected = set(state) - set(own)
        if missing or unexpected:
            raise RuntimeError(
                f"Error(s) in loading state_dict: missing keys {sorted(missing)}, "
                f"unexpected keys {sorted(unexpected)}"
            )
        for name, value in state.items():
            if own[name].shape != value.shape:
                raise RuntimeError(
                    f"size mismatch for {name}: copying a param with shape "
                    f"{value.shape} from checkpoint, the shape in current model "
                    f"is {own[name].shape}."
                )
            np.copyto(own[name]._data, value._data)
            own[name]._version_counter[0] += 1

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        if not lines:
            return f"{type(self).__name__}({self.extra_repr()})"
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"


class Linear(Module):
    """y = x @ weight.T + bias, initialized as PyTorch does (uniform in +-1/sqrt(in_features))."""

    def __init__(self, in_features, out_features, bias=True, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in_features) if in_features else 0.0
        self.weight = Parameter(_uniform((out_features, in_features), bound, dtype))
        self.bias = Parameter(_uniform((out_features,), bound, dtype)) if bias else None
        if not bias:
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


def _uniform(shape, bound, dtype):
    t = creation.rand(shape, dtype=dtype)
    return t * (2 * bound) - bound


class Sequential(Module):
    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class ReLU(Module):
    def forward(self, input):
        return F.relu(input)


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, self.approximate)


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)


class Dropout(Module):
    def __init__(self, p=0.5):
        super().__init__()
        self.p = p

    def forward(self, input):
        if recording.trace is not None:
            recording.trace.guard_python(lambda: (self.training, self.p), "Dropout settings")
        return F.dropout(input, self.p, self.training)


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, dtype=None):
        super().__init__()
        shape = (
            (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        )
        self.normalized_shape, self.eps = shape, eps
        self.weight = Parameter(creation.ones(shape, dtype=dtype)) if elementwise_affine else None
        self.bias = Parameter(creation.zeros(shape, dtype=dtype)) if elementwise_affine else None

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)


class MSELoss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class CrossEntropyLoss(Module):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__()
        self.weight, self.ignore_index = weight, ignore_index
        self.reduction, self.label_smoothing = reduction, label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(
            input,
            target,
            self.weight,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
        )
