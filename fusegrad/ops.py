"""``torch.ops``: PyTorch's registry of operators, where C++ extensions and
``torch.library`` register custom ones (``torch.ops.mylib.myop``).
fusegrad has no operator registry: a namespace can be named, as in
PyTorch, but every operator in it is missing, with the reason."""

from __future__ import annotations


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


def load_library(path) -> None:
    raise RuntimeError(
        f"torch.ops.load_library({path!r}): fusegrad cannot load PyTorch operator libraries "
        "(they are compiled against libtorch, which fusegrad does not have)"
    )


def __getattr__(name: str) -> OpNamespace:
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return OpNamespace(name)
