"""Where compile time goes: named phases accumulate seconds, so a caller
can read what one compilation cost in each (FUSEGRAD_LOG=compile). A phase
counts its own time only: one that runs inside another (machine code
compiled while the trace runs eager operations natively) is taken out of
the other's."""

from __future__ import annotations

import threading
import time
from collections import Counter
from contextlib import contextmanager

seconds: Counter = Counter()  # phase -> seconds spent in it so far
counts: Counter = Counter()  # event -> how many times it happened so far


class _Open(threading.local):
    def __init__(self):
        self.nested: list = []  # per phase open in this thread: the seconds of phases inside it


_open = _Open()


@contextmanager
def phase(name: str):
    start = time.perf_counter()
    _open.nested.append(0.0)
    try:
        yield
    finally:
        elapsed = time.perf_counter() - start
        seconds[name] += elapsed - _open.nested.pop()
        if _open.nested:
            _open.nested[-1] += elapsed
