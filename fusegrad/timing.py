"""Where compile time goes: named phases accumulate seconds, so a caller
can read what one compilation cost in each (FUSEGRAD_LOG=compile)."""

from __future__ import annotations

import time
from collections import Counter
from contextlib import contextmanager

seconds: Counter = Counter()  # phase -> seconds spent in it so far
counts: Counter = Counter()  # event -> how many times it happened so far


@contextmanager
def phase(name: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        seconds[name] += time.perf_counter() - start
