"""The process group: which processes train together, and how their
collectives reach each other (MPI, through mpi4py).

mpiexec starts the processes; ``init_process_group`` gives them a
communicator of their own (a duplicate of MPI's world, so fusegrad's
messages never mix with the program's own MPI traffic). mpi4py is imported
there, not before: importing it starts MPI, and ``import fusegrad`` must
work where MPI is not installed.

Every collective is MPI's nonblocking call, waited for at once unless the
caller asked for a ``Work``: MPI pairs a nonblocking collective only with
nonblocking ones, so a process running a step eagerly (DDP's overlapped
gradient buckets) and one running it compiled still agree.

MPI pairs the n-th collective of each process with the others' n-th, whatever
they are: a sum of 3 floats with one of 5 gives numbers, not an error. So
every collective is first agreed on: a fingerprint of the call (which
collective, dtype, shape, root) gathered from every process, on a
communicator of its own, waited for no longer than the group's timeout; a
mismatch is an error on every process, naming each one's call.
"""

from __future__ import annotations

import datetime
import enum
import functools
import importlib.util
import os
import time
import zlib

import numpy as np

NOT_INITIALIZED = (
    "Default process group has not been initialized, please make sure to call init_process_group."
)
DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)  # PyTorch's default
SPIN_SECONDS = 0.01  # how long a collective's agreement polls without sleeping


class ReduceOp(enum.Enum):
    """How ``all_reduce`` and ``reduce`` combine the processes' tensors
    (``AVG`` for floating-point tensors; the bitwise ones for integer and
    bool tensors)."""

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"


def _mpi():
    """mpi4py's MPI module (importing it starts MPI)."""
    try:
        from mpi4py import MPI
    except ImportError:
        raise RuntimeError(
            'fusegrad.distributed needs mpi4py and an MPI: pip install "fusegrad[distributed]"'
        ) from None
    return MPI


def _mpi_op(op: str, dtype: np.dtype):
    MPI = _mpi()
    if dtype == np.bool_:  # MPI combines C bools logically only
        logical = {"sum": MPI.LOR, "max": MPI.LOR, "bor": MPI.LOR, "bxor": MPI.LXOR}
        return logical.get(op, MPI.LAND)  # product, min, band
    return {
        "sum": MPI.SUM,
        "avg": MPI.SUM,  # divided by the group's size once it is done
        "product": MPI.PROD,
        "min": MPI.MIN,
        "max": MPI.MAX,
        "band": MPI.BAND,
        "bor": MPI.BOR,
        "bxor": MPI.BXOR,
    }[op]


class Work:
    """A collective started with ``async_op=True``: ``wait()`` blocks until its
    result is in the tensor. What ``then`` adds runs once it is done, in
    this process (an average's division, a copy back into strided memory)."""

    def __init__(self, request=None):
        self._request = request  # None once done
        self._finishers: list = []

    def then(self, finish) -> Work:
        if self._request is None:
            finish()
        else:
            self._finishers.append(finish)
        return self

    def is_completed(self) -> bool:
        """Whether it is done (asking lets MPI move it on)."""
        if self._request is not None and self._request.Test():
            self._done()
        return self._request is None

    def wait(self) -> bool:
        if self._request is not None:
            self._request.Wait()
            self._done()
        return True

    def _done(self) -> None:
        self._request = None
        for finish in self._finishers:
            finish()
        self._finishers = []


class ProcessGroup:
    """A group of processes and its communicator. There is one, ``WORLD``
    (every process mpiexec started); compiled programs name it in their
    collectives' equations and find its communicator when they run."""

    def __init__(self, name: str):
        self.name = name
        self.comm = None  # set by init_process_group, unset by destroy_process_group
        self.agreement = None  # the communicator collectives are agreed on
        self.timeout = DEFAULT_TIMEOUT

    def __repr__(self) -> str:
        return self.name

    def _communicator(self):
        if self.comm is None:
            raise ValueError(NOT_INITIALIZED)
        return self.comm

    def rank(self) -> int:
        return self._communicator().Get_rank()

    def size(self) -> int:
        return self._communicator().Get_size()

    def _agree(self, call: str) -> None:
        """Checks that every process makes this collective ``call`` (its
        description: what, dtype, shape, root) as its next one."""
        agreement = self.agreement
        mine = np.array([zlib.crc32(call.encode())], np.int64)
        everyone = np.empty(agreement.Get_size(), np.int64)
        request = agreement.Iallgather(mine, everyone)
        start = time.monotonic()
        deadline = start + self.timeout.total_seconds()
        while not request.Test():
            now = time.monotonic()
            if now > deadline:
                raise RuntimeError(
                    f"fusegrad.distributed: {call} waited {self.timeout} for the other "
                    "processes: does every process make this call? (the group is unusable now)"
                )
            if now - start > SPIN_SECONDS:  # polled as MPI's own waits do, then gently
                time.sleep(0.001)
        if (everyone != mine[0]).any():
            calls = agreement.allgather(call)  # every process saw the mismatch: all take part
            listed = "; ".join(f"rank {r}: {c}" for r, c in enumerate(calls))
            raise RuntimeError(
                f"fusegrad.distributed: the processes' collectives do not match ({listed})"
            )

    # -- collectives on numpy arrays: started in place, on contiguous arrays

    def all_reduce_(self, array: np.ndarray, op: str) -> Work:
        """Reduces ``array`` in place; ``op`` as in primitives.REDUCTIONS."""
        comm = self._communicator()
        self._agree(f"all_reduce({array.dtype}{list(array.shape)}, {op})")
        work = Work(comm.Iallreduce(_mpi().IN_PLACE, array, op=_mpi_op(op, array.dtype)))
        if op == "avg":
            work.then(functools.partial(np.divide, array, comm.Get_size(), out=array))
        return work

    def broadcast_(self, array: np.ndarray, src: int) -> Work:
        """``src``'s ``array`` into every process's, in place."""
        comm = self._communicator()
        self._agree(f"broadcast({array.dtype}{list(array.shape)}, src={src})")
        return Work(comm.Ibcast(array, root=src))

    def all_gather_into(self, out: np.ndarray, array: np.ndarray) -> Work:
        """Every process's ``array`` into ``out`` (``size()`` times as large), in rank order."""
        comm = self._communicator()
        self._agree(f"all_gather({array.dtype}{list(array.shape)})")
        return Work(comm.Iallgather(np.ascontiguousarray(array), out))

    def barrier(self) -> Work:
        comm = self._communicator()
        self._agree("barrier()")
        return Work(comm.Ibarrier())

    # -- the primitives' implementations: a new array, the operand untouched

    def all_reduce(self, array: np.ndarray, op: str) -> np.ndarray:
        result = np.array(array, order="C")
        self.all_reduce_(result, op).wait()
        return result

    def broadcast(self, array: np.ndarray, src: int) -> np.ndarray:
        result = np.array(array, order="C")
        self.broadcast_(result, src).wait()
        return result

    def all_gather(self, array: np.ndarray) -> np.ndarray:
        result = np.empty((self.size(), *array.shape), array.dtype)
        self.all_gather_into(result, array).wait()
        return result


WORLD = ProcessGroup("WORLD")


class group:
    """The process groups by name, as ``torch.distributed.group``."""

    WORLD = WORLD


def resolve(process_group) -> ProcessGroup:
    """The group a collective's ``group`` argument names (None: the default one), initialized."""
    if process_group is None:
        process_group = WORLD
    if process_group is not WORLD:
        raise ValueError("Invalid process group specified")
    process_group._communicator()
    return process_group


# ------------------------------------------------------------------ the default group


def is_available() -> bool:
    """Whether fusegrad.distributed can run here: mpi4py is installed."""
    return importlib.util.find_spec("mpi4py") is not None


def is_mpi_available() -> bool:
    return is_available()


def is_nccl_available() -> bool:
    return False


def is_gloo_available() -> bool:
    return False


def is_initialized() -> bool:
    return WORLD.comm is not None


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: datetime.timedelta | None = None,
    world_size: int = -1,
    rank: int = -1,
    group_name: str = "",
) -> None:
    """Joins the processes mpiexec started (``backend="mpi"``, the only one):
    their ranks and number come from MPI. ``world_size`` and ``rank``, and
    the variables RANK, WORLD_SIZE and LOCAL_RANK that launchers such as
    torchrun set, must agree with MPI where given; those not set are set,
    for code written for torchrun that reads them. ``init_method`` and
    ``group_name`` are ignored, as PyTorch's MPI backend ignores them (MPI
    connected the processes already). ``timeout`` (30 minutes by default)
    bounds how long a collective waits for the other processes to make it."""
    if timeout is not None and not isinstance(timeout, datetime.timedelta):
        raise TypeError("Expected timeout argument to be of type datetime.timedelta")
    if WORLD.comm is not None:
        raise ValueError("trying to initialize the default process group twice!")
    name = "mpi" if backend is None else str(getattr(backend, "value", backend)).lower()
    if name != "mpi":
        raise ValueError(
            f"fusegrad.distributed has the 'mpi' backend only (processes started by mpiexec), "
            f"not {backend!r}"
        )
    MPI = _mpi()
    comm = MPI.COMM_WORLD.Dup()
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)  # the processes on this machine
    actual = {
        "rank": comm.Get_rank(),
        "world_size": comm.Get_size(),
        "local_rank": node.Get_rank(),
        "local_world_size": node.Get_size(),
    }
    node.Free()
    given = [("rank", rank, "rank"), ("world_size", world_size, "world_size")]
    for variable in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        if os.environ.get(variable, "").strip():
            given.append((f"${variable}", int(os.environ[variable]), variable.lower()))
    for what, value, key in given:
        if value != -1 and value != actual[key]:
            comm.Free()
            raise ValueError(
                f"init_process_group: {what} is {value}, but MPI started this process "
                f"with {key} {actual[key]}"
            )
    for key, value in actual.items():
        os.environ.setdefault(key.upper(), str(value))
    WORLD.agreement = comm.Dup()
    WORLD.timeout = DEFAULT_TIMEOUT if timeout is None else timeout
    WORLD.comm = comm


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Leaves the process group; ``init_process_group`` may join again."""
    resolve(group)
    WORLD.comm.Free()
    WORLD.agreement.Free()
    WORLD.comm = WORLD.agreement = None


def get_rank(group: ProcessGroup | None = None) -> int:
    return resolve(group).rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    return resolve(group).size()


def get_backend(group: ProcessGroup | None = None) -> str:
    resolve(group)
    return "mpi"


def barrier(group: ProcessGroup | None = None, async_op: bool = False):
    """Returns once every process of the group has called it (a ``Work`` with ``async_op``)."""
    work = resolve(group).barrier()
    if async_op:
        return work
    work.wait()
    return None
