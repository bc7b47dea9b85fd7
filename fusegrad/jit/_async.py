"""``fork`` and ``wait``. Outside TorchScript, PyTorch's ``fork`` runs the
call at once on the calling thread and returns its result as a completed
future; so does fusegrad's (which never runs TorchScript)."""

from __future__ import annotations

from ..futures import Future
from . import _deprecation


def fork(func, *args, **kwargs) -> Future:
    """``func(*args, **kwargs)``, run now; its exceptions are raised here."""
    _deprecation.warn("fork")
    future = Future()
    future.set_result(func(*args, **kwargs))
    return future


def wait(future: Future):
    _deprecation.warn("wait")
    if not isinstance(future, Future):
        raise TypeError(f"wait(): expected a Future from fork, got {type(future).__name__}")
    return future.wait()
