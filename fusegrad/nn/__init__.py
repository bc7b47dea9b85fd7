"""``fusegrad.nn``: modules, parameters, ``functional``, ``init`` and ``utils``,
in PyTorch's shape."""

from . import functional, init, parallel, utils
from .modules import *  # noqa: F403
from .modules import __all__ as _modules
from .parallel import DataParallel
from .parameter import Parameter, UninitializedBuffer, UninitializedParameter

__all__ = [
    *_modules,
    "DataParallel",
    "Parameter",
    "UninitializedBuffer",
    "UninitializedParameter",
    "functional",
    "init",
    "parallel",
    "utils",
]
