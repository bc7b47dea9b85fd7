"""``fusegrad.nn``: modules and parameters, in PyTorch's shape."""

from . import functional
from .modules import (
    GELU,
    CrossEntropyLoss,
    Dropout,
    LayerNorm,
    Linear,
    Module,
    MSELoss,
    Parameter,
    ReLU,
    Sequential,
    Sigmoid,
    Softplus,
    Tanh,
)

__all__ = [
    "CrossEntropyLoss",
    "Dropout",
    "GELU",
    "LayerNorm",
    "Linear",
    "MSELoss",
    "Module",
    "Parameter",
    "ReLU",
    "Sequential",
    "Sigmoid",
    "Softplus",
    "Tanh",
    "functional",
]
