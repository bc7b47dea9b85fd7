"""``torch.ops``: PyTorch's registry of operators, where C++ extensions and
``torch.library`` register custom ones (``torch.ops.mylib.myop``).
fusegrad has no operator registry: a namespace can be named, as in
PyTorch, but every operator in it is missing, with the reason."""

from __future__ import annotations

import sys
import types


class OpNamespace:
    """``torch.ops.<namespace>``: it holds no operators."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"torch.ops.{self.name}"

    def __getattr__(self, op: str):
        if op.startswith("__"):
            raise AttributeError(op)
        raise AttributeError(
            f"torch.ops.{self.name}.{op}: fusegrad has no operator registry, so there are no "
            "PyTorch operators or custom operators (from C++ extensions or torch.library) "
            "to call; use fusegrad's functions, or run this code with PyTorch"
        )


class Ops(types.ModuleType):
    """``torch.ops``, a module object as PyTorch's is, whose every attribute
    is a namespace. It is an object rather than a module file because a
    module-level ``__getattr__`` would answer the probes tools make of
    modules (pytest's ``pytest_plugins``) with a namespace."""

    def __getattr__(self, name: str) -> OpNamespace:
        if name.startswith("__"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        return OpNamespace(name)

    @staticmethod
    def load_library(path) -> None:
        raise RuntimeError(
            f"torch.ops.load_library({path!r}): fusegrad cannot load PyTorch operator "
            "libraries (they are compiled against libtorch, which fusegrad does not have)"
        )


ops = Ops("fusegrad.ops", __doc__)
sys.modules[ops.__name__] = ops  # so that `import torch.ops` finds it
