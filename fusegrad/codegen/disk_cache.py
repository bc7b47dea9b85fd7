"""The disk cache of machine code, so a second process skips LLVM.

Entries live in FUSEGRAD_CACHE_DIR (default: fusegrad/ in the user's cache
directory; empty: no disk cache), one file per key, in 256 subdirectories
named by the first two hex digits of the key's hash: finding an entry opens
one path, however many the cache holds. An entry carries the hash of its key
and the length and hash of its machine code, so an entry under another key's
name (files renamed or swapped), truncated or corrupt is ignored, and
written again after the compile. Entries are written to a temporary file
and renamed into place: concurrent writers never leave half an entry.

The size stays within FUSEGRAD_CACHE_MB (default 256). The entries' total
size is recorded in a small file, ``total-bytes``, that every write updates
without a lock (writers at the same moment may lose an update: the record is
approximate). Only when the record passes the bound is the directory
surveyed: the least recently used entries (a read refreshes an entry's
modification time) go until the total is a tenth below the bound, so a
survey is paid once per tenth of the bound written, not on every write. A
missing or unreadable record is recomputed by a survey; a stale one only
brings the next survey forward or back. A read-only cache is read all the
same; what would change it fails silently.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import struct
import tempfile
import time
from pathlib import Path

_MAGIC = b"fusegrad-object-2\n"  # format 1 (a flat directory, no key in the entry) is ignored
_HEADER = struct.Struct("<32sQ32s")  # sha256 of the key, length of the code, sha256 of the code
_TOTAL = "total-bytes"
_WRITING = ".writing-"  # prefix of temporary files
_ABANDONED_AFTER = 3600  # seconds: a temporary file this old was left by a writer that died
_SHARD = re.compile(r"[0-9a-f]{2}")
_ENTRY = re.compile(r"[0-9a-f]{64}\.o")  # in a shard; at the top, an entry of format 1
_LOW_WATER = 0.9  # of the bound: what an eviction leaves


def directory() -> Path | None:
    """Where the cache is, or None when FUSEGRAD_CACHE_DIR turns it off."""
    setting = os.environ.get("FUSEGRAD_CACHE_DIR")
    if setting is not None:
        return Path(setting) if setting else None
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "fusegrad"


def read(key: str) -> bytes | None:
    """The machine code stored for ``key``, or None if there is none intact."""
    root = directory()
    if root is None:
        return None
    key_hash = hashlib.sha256(key.encode()).digest()
    path = _entry_path(root, key_hash)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    code = _intact_code(data, key_hash)
    if code is not None:
        with contextlib.suppress(OSError):  # a read-only cache serves all the same
            os.utime(path)  # recently used: among the last to go
    return code


def write(key: str, code: bytes) -> None:
    """Stores ``code`` for ``key``; a read-only or full disk costs the cache,
    not the compile."""
    root = directory()
    if root is None:
        return
    limit = _limit()
    key_hash = hashlib.sha256(key.encode()).digest()
    path = _entry_path(root, key_hash)
    entry = _MAGIC + _HEADER.pack(key_hash, len(code), hashlib.sha256(code).digest()) + code
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            replaced = path.stat().st_size  # a damaged entry written again
        except FileNotFoundError:
            replaced = 0
        _write_atomically(path, entry)
    except OSError:
        return
    _account(root, len(entry) - replaced, limit)


def _entry_path(root: Path, key_hash: bytes) -> Path:
    name = key_hash.hex()
    return root / name[:2] / f"{name}.o"


def _intact_code(data: bytes, key_hash: bytes) -> bytes | None:
    start = len(_MAGIC) + _HEADER.size
    if len(data) < start or not data.startswith(_MAGIC):
        return None
    stored_key_hash, length, code_hash = _HEADER.unpack_from(data, len(_MAGIC))
    code = data[start:]
    if stored_key_hash != key_hash:  # another key's entry, renamed or swapped on disk
        return None
    if len(code) != length or hashlib.sha256(code).digest() != code_hash:
        return None  # truncated or corrupt
    return code


def _write_atomically(path: Path, data: bytes) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=_WRITING)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _limit() -> int:
    setting = os.environ.get("FUSEGRAD_CACHE_MB", "256")
    try:
        return int(float(setting) * 2**20)
    except ValueError:
        raise ValueError(
            f"FUSEGRAD_CACHE_MB must be a number of megabytes, got {setting!r}"
        ) from None


def _account(root: Path, added: int, limit: int) -> None:
    """Adds ``added`` bytes to the recorded total, evicting past the bound."""
    total = _recorded_total(root)
    entries = None
    if total is None:
        entries = _survey(root)
        total = sum(size for _, size, _ in entries)
    else:
        total += added
    if total > limit:
        total = _evict(_survey(root) if entries is None else entries, limit)
    with contextlib.suppress(OSError):
        _write_atomically(root / _TOTAL, str(total).encode())


def _recorded_total(root: Path) -> int | None:
    try:
        total = int((root / _TOTAL).read_bytes())
    except (OSError, ValueError):
        return None
    return total if total >= 0 else None


def _survey(root: Path) -> list[tuple[int, int, Path]]:
    """Every entry as (modification time, size, path). On the way it removes
    the temporary files of writers that died and format 1's entries."""
    entries = []
    for item in _listing(root):
        if _SHARD.fullmatch(item.name) and item.is_dir(follow_symlinks=False):
            for inner in _listing(item.path):
                if _ENTRY.fullmatch(inner.name):
                    with contextlib.suppress(OSError):
                        stat = inner.stat(follow_symlinks=False)
                        entries.append((stat.st_mtime_ns, stat.st_size, Path(inner.path)))
                else:
                    _remove_if_abandoned(inner)
        elif _ENTRY.fullmatch(item.name):
            _remove(item.path)
        else:
            _remove_if_abandoned(item)
    return entries


def _listing(path: str | Path) -> list[os.DirEntry]:
    try:
        with os.scandir(path) as items:
            return list(items)
    except OSError:
        return []


def _remove_if_abandoned(item: os.DirEntry) -> None:
    if item.name.startswith(_WRITING):
        with contextlib.suppress(OSError):
            if time.time() - item.stat(follow_symlinks=False).st_mtime > _ABANDONED_AFTER:
                _remove(item.path)


def _remove(path: str | Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _evict(entries: list[tuple[int, int, Path]], limit: int) -> int:
    """Removes the least recently used entries when ``entries`` exceed
    ``limit``, down to the low-water mark; returns the total left."""
    total = sum(size for _, size, _ in entries)
    if total <= limit:
        return total
    for _, size, path in sorted(entries):
        if total <= limit * _LOW_WATER:
            break
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass  # another process evicted it
        except OSError:
            continue
        total -= size
    return total
