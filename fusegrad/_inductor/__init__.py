"""``torch._inductor``: PyTorch's compiler backend; here only its ``config``,
which scripts set (fusegrad compiles with its own code generator)."""

from . import config

__all__ = ["config"]
