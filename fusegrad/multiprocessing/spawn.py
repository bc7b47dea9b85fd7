"""``spawn`` and ``start_processes``: run ``fn(i, *args)`` in ``nprocs``
processes; the first to fail stops the others, and its error is raised in
the parent: the child's traceback as text in a ``ProcessRaisedException``,
or a ``ProcessExitedException`` for an exit code or a signal.

A child reports an exception in a file of its own (pickled traceback text),
which the parent reads once the child has exited: one message, written
once, needs no queue that a dying process could leave locked.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import tempfile
import time
import traceback
import warnings

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies


class ProcessException(Exception):
    """A spawned process failed: ``error_index`` is its index, ``error_pid`` its pid."""

    def __init__(self, msg: str, error_index: int, error_pid: int):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.error_pid = error_pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid)


class ProcessRaisedException(ProcessException):
    """A spawned process's function raised; the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """A spawned process exited with a nonzero code (``exit_code``) or was
    killed by a signal (``exit_code`` its negative, ``signal_name`` its name)."""

    def __init__(
        self,
        msg: str,
        error_index: int,
        error_pid: int,
        exit_code: int,
        signal_name: str | None = None,
    ):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        arguments = (self.msg, self.error_index, self.error_pid, self.exit_code, self.signal_name)
        return type(self), arguments


def _run(fn, index: int, args: tuple, error_file: str) -> None:
    """A child's body: ``fn(index, *args)``, an exception's traceback to
    ``error_file`` and exit code 1."""
    if sys.platform == "linux":  # interrupted, as by Ctrl-C, when the parent dies first
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGINT)
    try:
        fn(index, *args)
    except KeyboardInterrupt:
        pass  # the parent interrupted it, stopping the processes
    except Exception:
        with open(error_file, "wb") as f:
            pickle.dump(traceback.format_exc(), f)
        sys.exit(1)


class ProcessContext:
    """The processes ``start_processes(join=False)`` started; ``join()``
    waits for them and raises the first failure."""

    def __init__(self, processes: list, error_files: list):
        self.processes = processes
        self.error_files = error_files
        self.sentinels = {process.sentinel: index for index, process in enumerate(processes)}

    def pids(self) -> list[int]:
        return [int(process.pid) for process in self.processes]

    def join(self, timeout: float | None = None, grace_period: float | None = None) -> bool:
        """Waits up to ``timeout`` seconds (None: until one exits) and returns
        whether every process has exited successfully. When one failed, the
        others get ``grace_period`` seconds to end, then SIGTERM, then after
        as long again (30 s without a grace period) SIGKILL, and the failure
        is raised."""
        if not self.sentinels:
            return True
        failed = None
        for sentinel in multiprocessing.connection.wait(list(self.sentinels), timeout=timeout):
            index = self.sentinels.pop(sentinel)
            self.processes[index].join()
            if self.processes[index].exitcode != 0:
                failed = index
                break
        if failed is None:
            return not self.sentinels
        self._stop_the_others(grace_period)
        raise self._failure(failed)

    def _stop_the_others(self, grace_period: float | None) -> None:
        if grace_period is not None:
            self._join_all(grace_period)
        for process in self.processes:
            if process.is_alive():
                log.warning("Terminating process %s via signal SIGTERM", process.pid)
                process.terminate()
        self._join_all(30 if grace_period is None else grace_period)
        for process in self.processes:
            if process.is_alive():
                log.warning(
                    "Unable to shutdown process %s via SIGTERM, forcefully exiting via SIGKILL",
                    process.pid,
                )
                process.kill()
            process.join()

    def _join_all(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        for process in self.processes:
            process.join(max(0.0, deadline - time.monotonic()))

    def _failure(self, index: int) -> ProcessException:
        process = self.processes[index]
        if os.access(self.error_files[index], os.R_OK):
            with open(self.error_files[index], "rb") as f:
                child_traceback = pickle.load(f)
            os.unlink(self.error_files[index])
            message = f"\n\n-- Process {index} terminated with the following error:\n"
            return ProcessRaisedException(message + child_traceback, index, process.pid)
        exit_code = process.exitcode
        if exit_code >= 0:
            return ProcessExitedException(
                f"process {index} terminated with exit code {exit_code}",
                index,
                process.pid,
                exit_code,
            )
        try:
            name = signal.Signals(-exit_code).name
        except ValueError:
            name = f"<Unknown signal {-exit_code}>"
        return ProcessExitedException(
            f"process {index} terminated with signal {name}", index, process.pid, exit_code, name
        )


class SpawnContext(ProcessContext):
    """``ProcessContext``'s name before PyTorch 1.4."""

    def __init__(self, processes: list, error_files: list):
        warnings.warn("SpawnContext is renamed to ProcessContext since 1.4 release.", stacklevel=2)
        super().__init__(processes, error_files)


def start_processes(
    fn,
    args: tuple = (),
    nprocs: int = 1,
    join: bool = True,
    daemon: bool = False,
    start_method: str = "spawn",
):
    """Starts ``nprocs`` processes by ``start_method`` ("spawn", "fork",
    "forkserver"), process ``i`` calling ``fn(i, *args)``. With ``join``,
    waits for all of them (raising the first failure) and returns None;
    otherwise returns their ``ProcessContext``. Under "spawn", ``fn`` and
    ``args`` are pickled: ``fn`` must be defined at the top of a module."""
    context = multiprocessing.get_context(start_method)
    processes, error_files = [], []
    for index in range(nprocs):
        # The file exists only once a child writes it: its name is reserved, then freed.
        with tempfile.NamedTemporaryFile(
            prefix="fusegrad-errorfile-", suffix=".pickle", delete=False
        ) as f:
            error_file = f.name
        os.unlink(error_file)
        process = context.Process(target=_run, args=(fn, index, args, error_file), daemon=daemon)
        process.start()
        processes.append(process)
        error_files.append(error_file)
    process_context = ProcessContext(processes, error_files)
    if not join:
        return process_context
    while not process_context.join():
        pass
    return None


def spawn(
    fn,
    args: tuple = (),
    nprocs: int = 1,
    join: bool = True,
    daemon: bool = False,
    start_method: str = "spawn",
):
    """``start_processes`` by "spawn", whatever ``start_method`` says (another
    is warned about, as deprecated)."""
    if start_method != "spawn":
        warnings.warn(
            f"This method only supports start_method=spawn (got: {start_method}).\n"
            "To use a different start_method use:\n\t\t"
            " torch.multiprocessing.start_processes(...)",
            FutureWarning,
            stacklevel=2,
        )
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
