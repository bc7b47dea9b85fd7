"""Running a kernel's chunks on all cores: the caller runs the first, and
for each other a worker thread spinning in native code (codegen/team.py)
runs it, with no lock or wake-up between them while the workers are busy.
ctypes releases the GIL for the length of a native call, so the caller's
part runs beside them. ``FUSEGRAD_NUM_THREADS``, when set to a number, is one budget for
kernels and matrix products: numpy's OpenBLAS gets as many threads; set to
``auto``, OpenBLAS runs on one thread while other processes keep a core busy
(``adapt_blas_to_load``)."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import os
import threading
import time
import weakref

import numpy as np

from ..codegen import team

_renewed_in_child: weakref.WeakSet = weakref.WeakSet()


def renew_in_forked_child(owner) -> None:
    """Has a forked child call ``owner.forked_in_child()``. A child has no
    thread but the forking one: a lock another thread held stays held, an
    event it would have set is never set, and its first use hung forever."""
    _renewed_in_child.add(owner)


def _forked_in_child() -> None:
    _team.workers.clear()  # a kernel split across them waited for work no thread would run
    _team.lock = threading.Lock()
    _load.lock = threading.Lock()
    _owned.lock = threading.Lock()
    if _owned.blas_threads is not None:  # owned by programs on the parent's threads
        limit_blas(_owned.blas_threads)
    _owned.depth, _owned.blas_threads = 0, None
    for owner in list(_renewed_in_child):
        owner.forked_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked_in_child)


_chosen_count = None  # set_count's, which outranks FUSEGRAD_NUM_THREADS
_steady_blas = False  # hold_blas_steady's


def count() -> int:
    """``set_count``'s, else FUSEGRAD_NUM_THREADS, else the cores this process may run on."""
    if _chosen_count is not None:
        return _chosen_count
    setting = os.environ.get("FUSEGRAD_NUM_THREADS")
    if setting and setting != "auto":
        try:
            return max(1, int(setting))
        except ValueError:
            raise ValueError(
                f"FUSEGRAD_NUM_THREADS must be an integer or 'auto', got {setting!r}"
            ) from None
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


# How long a worker spins for the next call (then it sleeps until posted
# to), and how long the caller spins for a worker between looks at signals:
# in cycles of the processor's time-stamp counter, about 1 ms and 0.1 ms.
# Beside matrix products a worker sleeps at once, and the caller offers its
# core to other threads between short spins: spinning, they took cores from
# OpenBLAS's threads (the GPT-mini step ran 1-2% slower).
LINGER_CYCLES = 3_000_000
JOIN_SPIN_CYCLES = 300_000
_yield_core = getattr(os, "sched_yield", lambda: time.sleep(0))


class _Worker:
    """A thread running the calls posted to its slot (see codegen/team.py)."""

    def __init__(self, work):
        self.slot = np.zeros(team.SLOT_WORDS, np.int64)
        self.address = self.slot.ctypes.data
        self.generation = 0
        self.wake = threading.Event()
        thread = threading.Thread(target=self._loop, args=(work,), name="fusegrad", daemon=True)
        thread.start()

    def _loop(self, work) -> None:
        while True:
            work(self.address)  # returns when it goes to sleep
            self.wake.wait()
            self.wake.clear()

    def post(self, address: int, arguments: tuple, linger: int) -> None:
        slot = self.slot
        slot[team.FUNCTION] = address
        slot[team.COUNT] = len(arguments)
        slot[team.LINGER] = linger
        slot[team.ARGUMENTS : team.ARGUMENTS + len(arguments)] = arguments
        self.generation += 1
        if _team.post(self.address, self.generation):
            self.wake.set()

    def join(self, beside_blas: bool):
        """Returns once the posted call finished, with the exception a signal
        handler raised meanwhile (Ctrl-C), if one did: the caller raises it
        only then, since the call writes into arrays it would free unwinding."""
        spin_cycles = JOIN_SPIN_CYCLES // 10 if beside_blas else JOIN_SPIN_CYCLES
        interrupted = None
        while True:
            try:
                if _team.join(self.address, self.generation, spin_cycles):
                    return interrupted
                if beside_blas:
                    _yield_core()
            except BaseException as exc:
                interrupted = exc


class _Team:
    """The workers, made as calls need them; one caller at a time."""

    def __init__(self):
        self.workers: list = []
        self.lock = threading.Lock()
        self.work = self.post = self.join = None

    def hired(self, count: int):
        """``count`` workers, or None while another thread's calls have them."""
        if not self.lock.acquire(blocking=False):
            return None
        try:
            if self.work is None:  # compiled here: a worker that failed to would never answer
                self.work, self.post, self.join = team.work(), team.post(), team.join()
            while len(self.workers) < count:
                self.workers.append(_Worker(self.work))
        except BaseException:
            self.lock.release()
            raise
        return self.workers[:count]


_team = _Team()


def _no_worker_in_native_code() -> None:
    """At exit, before the JIT engine's memory is freed with the modules:
    waits until every worker stopped lingering in its native loop (its
    LINGER cycles at most), which would otherwise run in freed code."""
    if not _team.workers:
        return
    for worker in _team.workers:
        deadline = time.monotonic() + 0.1
        while not worker.slot[team.ASLEEP] and time.monotonic() < deadline:
            time.sleep(0.0005)
    time.sleep(0.001)  # past the return from the loop, into ctypes' own code


atexit.register(_no_worker_in_native_code)


def run(function, calls: list, beside_blas: bool = False) -> None:
    """``function(*arguments)`` (a native function of pointer-sized
    arguments) for every arguments tuple in ``calls``: the first on this
    thread, the others on the workers', all finished on return. While
    another thread's calls hold the workers, or a call has more arguments
    than a slot holds, all run here, one after another. ``beside_blas``:
    the program runs matrix products on OpenBLAS's threads too (see
    ``LINGER_CYCLES``)."""
    workers = None
    if len(calls) > 1 and max(map(len, calls)) <= team.MAX_ARGUMENTS:
        workers = _team.hired(len(calls) - 1)
    if workers is None:
        for arguments in calls:
            function(*arguments)
        return
    posted = []  # joined whatever happens: their calls write into the caller's arrays
    interrupted = None
    try:
        address = ctypes.cast(function, ctypes.c_void_p).value
        for worker, arguments in zip(workers, calls[1:]):
            worker.post(address, arguments, 0 if beside_blas else LINGER_CYCLES)
            posted.append(worker)
        function(*calls[0])
    finally:
        for worker in posted:
            interrupted = worker.join(beside_blas) or interrupted
        _team.lock.release()
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
    return (
        os.environ.get("FUSEGRAD_NUM_THREADS") == "auto"
        and _chosen_count is None
        and not _steady_blas
        and _openblas() is not None
    )


def set_count(threads: int) -> None:
    """``torch.set_num_threads``: from now on kernels and routines split
    across ``threads`` cores and OpenBLAS runs on as many threads, whatever
    FUSEGRAD_NUM_THREADS says (``auto`` no longer adapts OpenBLAS)."""
    global _chosen_count
    _chosen_count = threads
    _keep_blas_at(threads)


def hold_blas_steady(steady: bool) -> None:
    """While ``steady``, FUSEGRAD_NUM_THREADS=auto leaves OpenBLAS's thread
    count alone: its products' last bits depend on the count, so results
    would depend on what else the machine ran."""
    global _steady_blas
    _steady_blas = steady
    if steady and _load.own_threads is not None:
        _keep_blas_at(_load.own_threads)


def _keep_blas_at(threads: int) -> None:
    """OpenBLAS's thread count from now on: at once, or where a program that
    owns the cores gives it back (``own_cores``)."""
    with _load.lock:
        _load.own_threads = None
    with _owned.lock:
        if _owned.depth:
            _owned.blas_threads = threads
        else:
            limit_blas(threads)


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
