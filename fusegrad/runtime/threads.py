"""Running a kernel's chunks on all cores: ctypes releases the GIL for the
length of a native call, so plain Python threads run compiled loops in
parallel. ``FUSEGRAD_NUM_THREADS``, when set, is one budget for kernels and
matrix products: numpy's OpenBLAS gets as many threads (with another
process busy on a 2-core machine, an MLP step took 6.4-7.8 ms eagerly and
1.9-2.1 ms compiled with OpenBLAS's two threads fighting it for a core,
3.4-3.7 and 1.7-1.9 ms with one)."""

from __future__ import annotations

import ctypes
import os
import weakref
from concurrent.futures import ThreadPoolExecutor

_pools: dict = {}  # worker count -> pool
_renewed_in_child: weakref.WeakSet = weakref.WeakSet()


def renew_in_forked_child(owner) -> None:
    """Has a forked child call ``owner.forked_in_child()``. A child has no
    thread but the forking one: a lock another thread held stays held, an
    event it would have set is never set, and its first use hung forever."""
    _renewed_in_child.add(owner)


def _forked_in_child() -> None:
    _pools.clear()  # a kernel split across them waited for work no thread would run
    for owner in list(_renewed_in_child):
        owner.forked_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked_in_child)


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


# numpy's OpenBLAS (its name and symbols by build), whose thread count we set
_OPENBLAS_SETTERS = (
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)


def limit_blas(threads: int) -> None:
    """Sets the thread count of the OpenBLAS numpy loaded (nothing where
    numpy uses another BLAS)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:
        return
    for path in sorted(paths):
        try:
            library = ctypes.CDLL(path)  # already loaded: the same handle
        except OSError:
            continue
        for name in _OPENBLAS_SETTERS:
            setter = getattr(library, name, None)
            if setter is not None:
                setter.argtypes = [ctypes.c_int]
                setter(threads)
                return


if os.environ.get("FUSEGRAD_NUM_THREADS"):
    limit_blas(count())
