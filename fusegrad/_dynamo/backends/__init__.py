"""``torch._dynamo.backends``: here ``debugging``, where PyTorch defines ``explain``'s report."""

from . import debugging

__all__ = ["debugging"]
