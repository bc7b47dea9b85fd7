"""Whether operations record a graph: ``no_grad``, ``enable_grad``,
``set_grad_enabled``, and ``inference_mode`` (no graph, and the tensors made
are inference tensors, which autograd refuses later).

Thread-local, as in PyTorch. Each works as a context manager and as a decorator.
"""

from __future__ import annotations

import functools
import threading


class _GradState(threading.local):
    enabled = True
    inference = False


_state = _GradState()

# Whether any thread has entered inference mode yet: until then no tensor is an
# inference tensor, and eager operations skip asking (a thread-local read
# costs a few percent of a small operation).
inference_tensors_exist = False


def is_grad_enabled() -> bool:
    return _state.enabled


def is_inference_mode_enabled() -> bool:
    return _state.inference


class _GradModeContext:
    """Base: subclasses choose the mode; the previous mode comes back on exit."""

    mode: bool

    def __new__(cls, orig_func=None):
        # `@no_grad` without parentheses decorates at once
        if orig_func is None or cls is set_grad_enabled:
            return super().__new__(cls)
        return cls()(orig_func)

    def __enter__(self):
        self.prev = _state.enabled
        _state.enabled = self.mode

    def __exit__(self, *exc):
        _state.enabled = self.prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(*self._init_args()):
                return fn(*args, **kwargs)

        return wrapper

    def _init_args(self):
        return ()


class no_grad(_GradModeContext):
    """Context manager and decorator that disables graph recording.

    >>> import fusegrad
    >>> x = fusegrad.ones(2, requires_grad=True)
    >>> with fusegrad.no_grad():
    ...     (x * 2).requires_grad
    False
    """

    mode = False


class enable_grad(_GradModeContext):
    mode = True


class set_grad_enabled(_GradModeContext):
    """Sets grad mode at once (so it also works as a plain call), and restores
    the previous mode when used as a context manager that exits."""

    def __init__(self, mode: bool):
        self.mode = bool(mode)
        self.prev = _state.enabled
        _state.enabled = self.mode

    def __enter__(self):
        _state.enabled = self.mode

    def _init_args(self):
        return (self.mode,)

    def __call__(self, fn):
        _state.enabled = self.prev  # used as a decorator: the call above was not meant to stick
        return super().__call__(fn)


class inference_mode(_GradModeContext):
    """``no_grad`` and more: the tensors made inside are inference tensors
    (``is_inference()``), which PyTorch lets no later autograd save or
    in-place update outside inference mode. ``inference_mode(False)`` turns it
    off (and grad mode on) for its block, as PyTorch does.

    >>> import fusegrad
    >>> with fusegrad.inference_mode():
    ...     y = fusegrad.ones(2, requires_grad=True) * 2
    >>> y.requires_grad, y.is_inference()
    (False, True)
    """

    def __new__(cls, mode=True):
        # `@inference_mode` without parentheses: its "mode" is the function, decorated at once
        if mode is None or isinstance(mode, bool):
            return object.__new__(cls)
        return cls()(mode)

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)

    def __enter__(self):
        global inference_tensors_exist
        self.prev = (_state.enabled, _state.inference)
        if self.mode:
            inference_tensors_exist = True
        _state.enabled = not self.mode
        _state.inference = self.mode

    def __exit__(self, *exc):
        _state.enabled, _state.inference = self.prev
        return False

    def _init_args(self):
        return (self.mode,)
