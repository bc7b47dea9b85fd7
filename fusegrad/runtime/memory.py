"""How the process's C allocator treats the arrays a step frees.

glibc hands a large freed block back to the system (an array from 128 KB
is a mapping of its own until one is freed; then, at its size, up to twice
that much free at the top of the heap is trimmed), so the next step's
arrays are fresh pages, and each page's first touch is a fault: some 3 us
on the machines measured. A compiled GPT-mini training step faulted on
1636 pages a step, some 4 ms of 25. Once fusegrad is imported, glibc keeps
freed memory as it would after a 32 MB array had been freed: arrays under
32 MB come from its heap and up to 64 MB free at the heap's top stays
there (``FUSEGRAD_KEEP_FREED_MB``; 0 leaves glibc's own rule)."""

from __future__ import annotations

import ctypes
import os

KEEP_FREED_MB = 64
# mallopt's parameters (malloc.h) and glibc's largest mapping threshold on
# 64-bit machines
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_LARGEST_MAPPING_THRESHOLD = 32 << 20


def keep_freed_memory() -> None:
    """Asks glibc to keep ``FUSEGRAD_KEEP_FREED_MB`` (default 64) of freed
    memory for the process's next arrays; elsewhere (another C library)
    nothing changes."""
    setting = os.environ.get("FUSEGRAD_KEEP_FREED_MB", str(KEEP_FREED_MB))
    try:
        megabytes = int(setting)
    except ValueError:
        raise ValueError(
            f"FUSEGRAD_KEEP_FREED_MB must be a whole number of megabytes, not {setting!r}"
        ) from None
    if megabytes <= 0 or not _glibc():
        return
    kept = megabytes << 20
    mallopt = ctypes.CDLL(None).mallopt
    mallopt(_M_MMAP_THRESHOLD, min(kept // 2, _LARGEST_MAPPING_THRESHOLD))
    mallopt(_M_TRIM_THRESHOLD, kept)


def _glibc() -> bool:
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (AttributeError, ValueError, OSError):
        return False
