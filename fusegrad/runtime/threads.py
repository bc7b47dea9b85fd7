"""Running a kernel's chunks on all cores: ctypes releases the GIL for the
length of a native call, so plain Python threads run compiled loops in
parallel."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

_pools: dict = {}  # worker count -> pool


def count() -> int:
    """FUSEGRAD_NUM_THREADS, else the cores this process may run on."""
    setting = os.environ.get("FUSEGRAD_NUM_THREADS")
    if setting:
        try:
            return max(1, int(setting))
        except ValueError:
            raise ValueError(f"FUSEGRAD_NUM_THREADS must be an integer, got {setting!r}") from None
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def run(function, calls: list) -> None:
    """``function(*arguments)`` for every arguments tuple in ``calls``: the
    first on this thread, the others on the pool's, all finished on return."""
    if len(calls) > 1:
        workers = len(calls) - 1
        pool = _pools.get(workers)
        if pool is None:
            pool = _pools[workers] = ThreadPoolExecutor(workers, thread_name_prefix="fusegrad")
        pending = [pool.submit(function, *arguments) for arguments in calls[1:]]
        function(*calls[0])
        for future in pending:
            future.result()
    else:
        function(*calls[0])
