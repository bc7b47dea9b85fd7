"""``fork`` and ``wait``. Outside TorchScript, PyTorch's ``fork`` runs the
call at once on the calling thread and returns its result as a completed
future; so does fusegrad's (which never runs TorchScript)."""

from __future__ import annotations

from . import _deprecation


class Future:
    """A call's result, complete (``fork`` ran the call)."""

    def __init__(self, value):
        self._value = value

    def done(self) -> bool:
        return True

    def wait(self):
        return self._value

    def value(self):
        return self._value


def fork(func, *args, **kwargs) -> Future:
    """``func(*args, **kwargs)``, run now; its exceptions are raised here."""
    _deprecation.warn("fork")
    return Future(func(*args, **kwargs))


def wait(future: Future):
    _deprecation.warn("wait")
    if not isinstance(future, Future):
        raise TypeError(f"wait(): expected a Future from fork, got {type(future).__name__}")
    return future.wait()
