"""``torch.futures``: a value that a computation sets later, which callers
wait for or chain callbacks on; safe to use across threads."""

from __future__ import annotations

import logging
import threading
import traceback

__all__ = ["Future", "collect_all", "wait_all"]

_log = logging.getLogger(__name__)


def _callback_error(error: BaseException) -> RuntimeError:
    described = "".join(traceback.format_exception_only(type(error), error)).strip()
    return RuntimeError(f"Got the following error when running the callback: {described}")


class Future:
    """Complete once ``set_result`` or ``set_exception`` is called, once."""

    def __init__(self, *, devices=None):
        self._completed = threading.Condition()
        self._done = False
        self._value = None
        self._error: BaseException | None = None
        self._callbacks: list = []

    def done(self) -> bool:
        return self._done

    def wait(self):
        """The value, once set (the error, once set, raised)."""
        with self._completed:
            self._completed.wait_for(lambda: self._done)
        return self.value()

    def value(self):
        """The value of a complete future, without waiting."""
        if not self._done:
            raise RuntimeError("Future.value(): the future is not complete; wait() for it")
        if self._error is not None:
            raise self._error
        return self._value

    def set_result(self, result) -> None:
        self._complete(result, None)

    def set_exception(self, result) -> None:
        if not isinstance(result, Exception):
            raise AssertionError(f"{result} is of type {type(result)}, not an Exception.")
        self._complete(None, result)

    def _complete(self, value, error) -> None:
        with self._completed:
            if self._done:
                raise RuntimeError(
                    "Attempting to mark a completed Future as complete again. Note that a "
                    "Future can only be marked completed once."
                )
            self._value, self._error, self._done = value, error, True
            callbacks, self._callbacks = self._callbacks, []
            self._completed.notify_all()
        for callback in callbacks:
            self._run(callback)

    def _run(self, callback) -> None:
        # as PyTorch does, a callback's error is logged and not raised:
        # completing the future succeeded
        try:
            callback(self)
        except Exception:
            _log.exception("Got an error when running a Future's callback")

    def add_done_callback(self, callback) -> None:
        """``callback(self)`` once complete (now, if it is)."""
        with self._completed:
            if not self._done:
                self._callbacks.append(callback)
                return
        self._run(callback)

    def then(self, callback) -> Future:
        """A future of ``callback(self)``'s result, set once this one completes;
        an error the callback raises becomes its error."""
        chained = Future()

        def run_callback(future):
            try:
                result = callback(future)
            except Exception as error:
                chained.set_exception(_callback_error(error))
            else:
                chained.set_result(result)

        self.add_done_callback(run_callback)
        return chained


def collect_all(futures: list) -> Future:
    """A future of the list ``futures``, complete once all of them are (with
    the first error among them, if any)."""
    collected = Future()
    remaining = [len(futures)]
    lock = threading.Lock()

    def one_done(_):
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:
            errors = [f._error for f in futures if f._error is not None]
            if errors:
                collected.set_exception(errors[0])
            else:
                collected.set_result(list(futures))

    if not futures:
        collected.set_result([])
    for future in futures:
        future.add_done_callback(one_done)
    return collected


def wait_all(futures: list) -> list:
    """The futures' values, once all are complete; the first error raised."""
    return [future.wait() for future in collect_all(futures).wait()]
