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
"""

from __future__ import annotations

import datetime
import enum
import functools
import importlib.util
import os

import numpy as np

NOT_INITIALIZED = (
    "Default process group has not been initialized, please make sure to call init_process_group."
)


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

    # -- collectives on numpy arrays: started in place, on contiguous arrays

    def all_reduce_(self, array: np.ndarray, op: str) -> Work:
        """Reduces ``array`` in place; ``op`` as in primitives.REDUCTIONS."""
        comm = self._communicator()
        work = Work(comm.Iallreduce(_mpi().IN_PLACE, array, op=_mpi_op(op, array.dtype)))
        if op == "avg":
            work.then(functools.partial(np.divide, array, comm.Get_size(), out=array))
        return work

    def broadcast_(self, array: np.ndarray, src: int) -> Work:
        """``src``'s ``array`` into every process's, in place."""
        return Work(self._communicator().Ibcast(array, root=src))

    def all_gather_into(self, out: np.ndarray, array: np.ndarray) -> Work:
        """Every process's ``array`` into ``out`` (``size()`` times as large), in rank order."""
        return Work(self._communicator().Iallgather(np.ascontiguousarray(array), out))

    def barrier(self) -> Work:
        return Work(self._communicator().Ibarrier())

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
    connected the processes already); MPI has no timeout to apply."""
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
    WORLD.comm = comm


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Leaves the process group; ``init_process_group`` may join again."""
    resolve(group)
    WORLD.comm.Free()
    WORLD.comm = None


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
