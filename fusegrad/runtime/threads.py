"""Running a kernel's chunks on all cores: ctypes releases the GIL for the
length of a native call, so plain Python threads run compiled loops in
parallel. ``FUSEGRAD_NUM_THREADS``, when set to a number, is one budget for
kernels and matrix products: numpy's OpenBLAS gets as many threads; set to
``auto``, OpenBLAS runs on one thread while other processes keep a core busy
(``adapt_blas_to_load``)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_for

_pools: dict = {}  # worker count -> pool
_renewed_in_child: weakref.WeakSet = weakref.WeakSet()


def renew_in_forked_child(owner) -> None:
    """Has a forked child call ``owner.forked_in_child()``. A child has no
    thread but the forking one: a lock another thread held stays held, an
    event it would have set is never set, and its first use hung forever."""
    _renewed_in_child.add(owner)


def _forked_in_child() -> None:
    _pools.clear()  # a kernel split across them waited for work no thread would run
    _load.lock = threading.Lock()
    _owned.lock = threading.Lock()
    if _owned.blas_threads is not None:  # owned by programs on the parent's threads
        limit_blas(_owned.blas_threads)
    _owned.depth, _owned.blas_threads = 0, None
    for owner in list(_renewed_in_child):
        owner.forked_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked_in_child)


def count() -> int:
    """FUSEGRAD_NUM_THREADS, else the cores this process may run on."""
    setting = os.environ.get("FUSEGRAD_NUM_THREADS")
    if setting and setting != "auto":
        try:
            return max(1, int(setting))
        except ValueError:
            raise ValueError(
                f"FUSEGRAD_NUM_THREADS must be an integer or 'auto', got {setting!r}"
            ) from None
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def run(function, calls: list) -> None:
    """``function(*arguments)`` for every arguments tuple in ``calls``: the
    first on this thread, the others on the pool's, all finished on return,
    or on an exception: Ctrl-C while this thread waited raised at once, and
    the pool's kernels went on writing into arrays it freed unwinding."""
    if len(calls) > 1:
        workers = len(calls) - 1
        pool = _pools.get(workers)
        if pool is None:
            pool = _pools[workers] = ThreadPoolExecutor(workers, thread_name_prefix="fusegrad")
        pending = [pool.submit(function, *arguments) for arguments in calls[1:]]
        try:
            function(*calls[0])
        finally:
            _finish(pending)
        for future in pending:
            future.result()
    else:
        function(*calls[0])


def _finish(futures: list) -> None:
    """Waits until ``futures`` are done; what interrupted the wait (a signal
    handler's exception) is raised then."""
    interrupted = None
    while True:
        try:
            wait_for(futures)
            break
        except BaseException as exc:
            interrupted = exc
    if interrupted is not None:
        raise interrupted


# numpy's OpenBLAS: its symbols' prefixes and suffixes by build
_OPENBLAS_NAMES = [(p, s) for p in ("scipy_openblas_", "openblas_") for s in ("64_", "")]


@functools.cache
def _openblas():
    """(set_num_threads, get_num_threads) of the OpenBLAS numpy loaded, or
    None where numpy uses another BLAS."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            library = ctypes.CDLL(path)  # already loaded: the same handle
        except OSError:
            continue
        for prefix, suffix in _OPENBLAS_NAMES:
            setter = getattr(library, f"{prefix}set_num_threads{suffix}", None)
            getter = getattr(library, f"{prefix}get_num_threads{suffix}", None)
            if setter is not None and getter is not None:
                setter.argtypes, setter.restype = [ctypes.c_int], None
                getter.argtypes, getter.restype = [], ctypes.c_int
                return setter, getter
    return None


def limit_blas(threads: int) -> None:
    """Sets the thread count of the OpenBLAS numpy loaded (nothing where
    numpy uses another BLAS)."""
    functions = _openblas()
    if functions is not None:
        functions[0](threads)


# OpenBLAS's threads wait for each other by spinning, and a thread on a core
# another process keeps busy runs only in turns with it: beside one busy
# process on two cores, the W3 MLP step took 136 ms with OpenBLAS's two
# threads and 25 ms with one, the W7 GPT-mini step 353 and 97. Only asked for
# (FUSEGRAD_NUM_THREADS=auto): OpenBLAS's products differ in their last bits
# between thread counts, so results would depend on what else the machine ran.
SAMPLE_SECONDS = 0.5  # how often the load is read, at the next matrix product
BUSY_ELSEWHERE = 0.5  # cores other processes use: from this many, OpenBLAS gets one thread
IDLE_ELSEWHERE = 0.2  # and its own count again below this many
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class _Load:
    """What the last reading of the load found, and OpenBLAS's own thread count
    while it runs on one thread."""

    def __init__(self):
        self.next_reading = 0.0
        self.reading = None  # (monotonic seconds, seconds cores worked, seconds this process ran)
        self.own_threads = None  # set while OpenBLAS is limited to one thread
        self.lock = threading.Lock()


_load = _Load()


def _adapts() -> bool:
    return os.environ.get("FUSEGRAD_NUM_THREADS") == "auto" and _openblas() is not None


def _cpu_seconds() -> tuple:
    """(seconds the cores worked or were taken by the hypervisor, seconds this
    process ran), so far."""
    with open("/proc/stat") as stat:
        ticks = [int(n) for n in stat.readline().split()[1:9]]
    own = os.times()
    worked = sum(ticks) - ticks[3] - ticks[4]  # all but idle and waiting for I/O
    return worked / _TICKS, own.user + own.system


def other_processes_cores(before: tuple, after: tuple) -> float:
    """Cores other processes used on average between two readings
    (monotonic seconds, seconds any core worked, seconds this process ran)."""
    seconds = after[0] - before[0]
    if seconds <= 0:
        return 0.0
    return ((after[1] - before[1]) - (after[2] - before[2])) / seconds


def adapt_blas_to_load() -> None:
    """Runs OpenBLAS on one thread while other processes keep a core busy,
    and on its own count again once they stop: read every SAMPLE_SECONDS,
    at the matrix product after (a clock read the other times)."""
    now = time.monotonic()
    if now < _load.next_reading or _owned.depth:
        return
    if not _load.lock.acquire(blocking=False):
        return
    try:
        _load.next_reading = now + SAMPLE_SECONDS
        if not _adapts():
            _load.next_reading = float("inf")
            return
        try:
            reading = (now, *_cpu_seconds())
        except (OSError, ValueError):
            _load.next_reading = float("inf")  # no /proc/stat: nothing to go by
            return
        if _load.reading is not None:
            others = other_processes_cores(_load.reading, reading)
            set_threads, get_threads = _openblas()
            if _load.own_threads is None and others >= BUSY_ELSEWHERE:
                _load.own_threads = get_threads()
                set_threads(1)
            elif _load.own_threads is not None and others < IDLE_ELSEWHERE:
                set_threads(_load.own_threads)
                _load.own_threads = None
        _load.reading = reading
    finally:
        _load.lock.release()


class _Owned:
    """How many programs run with the cores to themselves (``own_cores``),
    and OpenBLAS's thread count to give back when the last one ends."""

    def __init__(self):
        self.depth = 0
        self.blas_threads = None
        self.lock = threading.Lock()


_owned = _Owned()


@contextlib.contextmanager
def own_cores():
    """While a program runs whose matrix products are mostly fusegrad's own
    routines (a convolution's, stacked small matrices), OpenBLAS runs its
    products on one thread, and the routines split across the cores. After
    each product OpenBLAS's worker spins on its core for a while: a routine
    split beside it waited for that core (LeNet's step took 1.5x as long)."""
    functions = _openblas()
    with _owned.lock:
        if _owned.depth == 0 and functions is not None:
            _owned.blas_threads = functions[1]()
            functions[0](1)
        _owned.depth += 1
    try:
        yield
    finally:
        with _owned.lock:
            _owned.depth -= 1
            if _owned.depth == 0 and _owned.blas_threads is not None:
                functions[0](_owned.blas_threads)
                _owned.blas_threads = None


def routines_split() -> int:
    """Across how many threads a routine's items split now (1: none)."""
    return count() if _owned.depth else 1


if os.environ.get("FUSEGRAD_NUM_THREADS", "auto") != "auto":
    limit_blas(count())
