"""The deprecated spellings of torch.cpu.amp and torch.cuda.amp warn as
PyTorch's do (typing_extensions.deprecated, category FutureWarning)."""

from __future__ import annotations

import functools
import warnings


def deprecated(message: str):
    """Decorator: the function warns ``message`` at its caller (for a
    class's ``__init__``, the line making the object), then runs."""

    def decorate(fn):
        @functools.wraps(fn)
        def warning_first(*args, **kwargs):
            warnings.warn(message, FutureWarning, stacklevel=2)
            return fn(*args, **kwargs)

        return warning_first

    return decorate
