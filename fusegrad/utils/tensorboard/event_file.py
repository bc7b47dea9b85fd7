"""TensorBoard's event files: TFRecords of encoded ``Event`` messages.

A record is its length (8 bytes, little-endian), the length's masked CRC-32C
(4 bytes), the data, and the data's masked CRC-32C. The first event of a file
names its format (``file_version: "brain.Event:2"``); TensorBoard reads every
file in a run's directory whose name holds ``tfevents``.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import os
import socket
import struct
import threading
import time

import numpy as np

from . import protobuf as pb

FILE_VERSION = "brain.Event:2"
# the Event's source_metadata: which program wrote the file
SOURCE_METADATA = pb.data(10, pb.string(1, "fusegrad.utils.tensorboard"))


def _crc32c_table() -> list[int]:
    """The CRC of each byte value, for Castagnoli's polynomial (reflected)."""
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()
_TABLE_ARRAY = np.array(_TABLE, dtype=np.uint32)
# Data from this size on is cut into blocks whose CRCs numpy computes side by side.
BLOCK = 256
_BLOCKWISE_FROM = 64 * BLOCK


def crc32c(data: bytes) -> int:
    if len(data) < _BLOCKWISE_FROM:
        return _update(0xFFFFFFFF, data) ^ 0xFFFFFFFF
    blocks = len(data) // BLOCK
    state = 0xFFFFFFFF
    shift = _zeros_operator()
    for block_crc in _block_crcs(data[: blocks * BLOCK], blocks).tolist():
        state = _apply(shift, state) ^ block_crc
    return _update(state, data[blocks * BLOCK :]) ^ 0xFFFFFFFF


def _update(state: int, data: bytes) -> int:
    """The CRC register after ``data``, from ``state``: byte by byte."""
    table = _TABLE
    for byte in data:
        state = table[(state ^ byte) & 0xFF] ^ (state >> 8)
    return state


# The register's update is linear over GF(2) in the register and the data
# together, so the register after block A then block B is the register after
# A followed by BLOCK zero bytes (a linear map of it), xor B's register from 0.


def _block_crcs(data: bytes, blocks: int) -> np.ndarray:
    """The register after each block of BLOCK bytes, from 0: the blocks' bytes
    at one offset are one vector, a step of all the registers at once."""
    columns = np.frombuffer(data, np.uint8).reshape(blocks, BLOCK).T.astype(np.uint32)
    state = np.zeros(blocks, np.uint32)
    for column in columns:
        state = _TABLE_ARRAY[(state ^ column) & 0xFF] ^ (state >> 8)
    return state


@functools.cache
def _zeros_operator() -> list[list[int]]:
    """What BLOCK zero bytes do to the register, as four tables: per byte of
    the register, its image for each value of that byte."""
    basis = np.arange(256, dtype=np.uint32)
    states = np.concatenate([basis << (8 * i) for i in range(4)])
    for _ in range(BLOCK):
        states = _TABLE_ARRAY[states & 0xFF] ^ (states >> 8)
    return [states[256 * i : 256 * (i + 1)].tolist() for i in range(4)]


def _apply(operator: list[list[int]], state: int) -> int:
    low, second, third, high = operator
    return (
        low[state & 0xFF]
        ^ second[(state >> 8) & 0xFF]
        ^ third[(state >> 16) & 0xFF]
        ^ high[state >> 24]
    )


def masked_crc32c(data: bytes) -> int:
    """The CRC rotated and offset, as TFRecords store it: a CRC of data that
    holds CRCs is then not as easily fooled."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data: bytes) -> bytes:
    """``data`` framed as one TFRecord."""
    length = struct.pack("<Q", len(data))
    return (
        length
        + struct.pack("<I", masked_crc32c(length))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )


def event(wall_time: float, step: int | None = None, **what: bytes) -> bytes:
    """An encoded ``Event``; ``what`` is one of its oneof members, already
    encoded: ``file_version``, ``graph_def``, ``summary``, ``session_log``,
    ``tagged_run_metadata``."""
    ((name, value),) = what.items()
    return (
        pb.double(1, wall_time)
        + pb.integer(2, step or 0)
        + pb.data(_EVENT_FIELDS[name], value, always=True)
    )


_EVENT_FIELDS = {
    "file_version": 3,
    "graph_def": 4,
    "summary": 5,
    "session_log": 7,
    "tagged_run_metadata": 8,
}


_file_numbers = itertools.count()  # per process, as several writers may open a file in one second
_open_writers: set = set()  # flushed at exit


class EventFileWriter:
    """Appends events to a new event file in ``log_dir``.

    Events wait in memory until ``max_queue`` of them are pending or
    ``flush_secs`` have passed (a background thread flushes), or ``flush()``;
    at the interpreter's exit open writers flush what they hold.
    """

    def __init__(
        self, log_dir: str, max_queue: int = 10, flush_secs: float = 120, filename_suffix: str = ""
    ):
        self.log_dir = str(log_dir)
        os.makedirs(self.log_dir, exist_ok=True)
        name = (
            f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
            f"{os.getpid()}.{next(_file_numbers)}{filename_suffix}"
        )
        self.path = os.path.join(self.log_dir, name)
        self.max_queue = max_queue
        self._file = open(self.path, "wb")
        self._pending: list[bytes] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.add_event(event(time.time(), file_version=FILE_VERSION.encode()) + SOURCE_METADATA)
        self.flush()
        self._flusher = threading.Thread(
            target=self._flush_every,
            args=(flush_secs,),
            daemon=True,
            name="tensorboard-event-flusher",
        )
        self._flusher.start()
        _open_writers.add(self)

    def get_logdir(self) -> str:
        return self.log_dir

    def add_event(self, encoded_event: bytes) -> None:
        framed = record(encoded_event)
        with self._lock:
            if self._closed.is_set():
                raise RuntimeError(f"the event file {self.path} is closed")
            self._pending.append(framed)
            full = len(self._pending) >= self.max_queue
        if full:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            if self._file.closed:
                return
            self._file.write(b"".join(self._pending))
            self._pending.clear()
            self._file.flush()

    def close(self) -> None:
        self.flush()
        with self._lock:
            self._closed.set()
            self._file.close()
        _open_writers.discard(self)

    def _flush_every(self, seconds: float) -> None:
        while not self._closed.wait(seconds):
            self.flush()


@atexit.register
def _flush_open_writers() -> None:
    for writer in list(_open_writers):
        writer.flush()
