"""The disk cache of compiled kernels: a second process skips LLVM; bad
entries (damaged, or another key's) are recompiled and rewritten; a
read-only cache is read; concurrent writers leave whole entries; the size
stays bounded, at a cost that does not grow with the number of entries."""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from fusegrad import timing
from fusegrad.codegen import disk_cache, target

PROGRAM = """
import numpy as np, fusegrad as fg
from fusegrad import timing
x = fg.tensor(np.linspace(-3, 3, 50000, dtype=np.float32), requires_grad=True)
f = fg.jit(lambda x: (fg.tanh(x) * fg.exp(-x * x)).sum())
loss = f(x)
loss.backward()
print(float(loss), float(x.grad.sum()))
print(timing.counts["modules compiled"], timing.counts["modules from the disk cache"])
"""


def _run(cache, env_extra=None):
    """What the program printed, and how many machine-code modules (kernels
    and drivers) it compiled and how many it loaded from the disk cache."""
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=str(cache))
    env.update(env_extra or {})
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, check=True
    )
    *printed, counts = result.stdout.splitlines()
    compiled, cached = map(int, counts.split())
    return "\n".join(printed), compiled, cached


def _entries(cache) -> list:
    return sorted(cache.glob("*/*.o"))


def test_a_second_process_loads_every_kernel_from_the_disk_cache(tmp_path):
    first, compiled, cached = _run(tmp_path)
    assert compiled >= 2 and cached == 0
    second, compiled_again, cached_again = _run(tmp_path)
    assert second == first and compiled_again == 0 and cached_again == compiled
    assert len(_entries(tmp_path)) == compiled


def test_entries_swapped_on_disk_are_not_loaded_for_each_other(tmp_path):
    first, compiled, _ = _run(tmp_path)
    a, b = _entries(tmp_path)[:2]
    swap = tmp_path / "swap"
    a.rename(swap)
    b.rename(a)
    swap.rename(b)
    second, compiled_again, cached_again = _run(tmp_path)  # the wrong code would crash
    assert second == first and compiled_again == 2 and cached_again == compiled - 2
    _, compiled_last, _ = _run(tmp_path)  # written again under their own names
    assert compiled_last == 0


KERNEL = """
define void @%NAME%(double* noalias %out) {
entry:
  store double %VALUE%, double* %out
  ret void
}
"""


def _module(value: float):
    """A module storing ``value`` from a function named after it (the
    process has one JIT engine: names tell modules apart)."""
    name = "store_" + repr(float(value)).replace(".", "_").replace("-", "minus")
    module = target.CompiledModule(
        KERNEL.replace("%VALUE%", repr(float(value))).replace("%NAME%", name)
    )
    module.name = name
    return module


def _call(module) -> float:
    import ctypes

    out = np.zeros(1)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(module.address(module.name))(out.ctypes.data)
    return float(out[0])


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # truncated
        lambda data: data[:-1] + bytes([data[-1] ^ 1]),  # a flipped bit
        lambda data: b"",
        lambda data: b"not an object file at all",
    ],
    ids=["truncated", "flipped", "empty", "garbage"],
)
def test_a_damaged_entry_is_compiled_again_and_rewritten(damage, tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(tmp_path))
    assert _call(_module(2.5)) == 2.5
    (entry,) = _entries(tmp_path)
    good = entry.read_bytes()
    entry.write_bytes(damage(good))
    loaded = timing.counts["modules from the disk cache"]
    assert _call(_module(2.5)) == 2.5
    assert timing.counts["modules from the disk cache"] == loaded  # not trusted
    assert entry.read_bytes() == good
    _module(2.5)
    assert timing.counts["modules from the disk cache"] == loaded + 1


def test_an_empty_cache_directory_setting_turns_the_cache_off(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", "")
    assert _call(_module(7.0)) == 7.0
    assert not list(tmp_path.iterdir())


def _read_only_file_system(monkeypatch):
    """What a read-only mount, or files of another user, refuse (the tests may
    run as root, whom permission bits do not stop)."""

    def refuse(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    for name in ("utime", "replace", "rename", "unlink", "mkdir"):
        monkeypatch.setattr(os, name, refuse)
    monkeypatch.setattr(tempfile, "mkstemp", refuse)


def test_a_read_only_cache_is_read_and_not_written(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(tmp_path))
    _module(21.0)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with monkeypatch.context() as read_only:
        _read_only_file_system(read_only)
        loaded = timing.counts["modules from the disk cache"]
        assert _call(_module(21.0)) == 21.0
        assert timing.counts["modules from the disk cache"] == loaded + 1
        assert _call(_module(22.0)) == 22.0  # compiled; storing it fails silently
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def _fake_entries(cache, count: int, size: int, linked: bool = False) -> list:
    """``count`` entries of ``size`` bytes; ``linked``: hard links to one file,
    quick to make, but of one modification time."""
    cache.mkdir(exist_ok=True)
    source = cache / "fake"
    source.write_bytes(b"x" * size)
    paths = []
    for i in range(count):
        name = hashlib.sha256(f"fake {i}".encode()).hexdigest()
        path = cache / name[:2] / f"{name}.o"
        path.parent.mkdir(exist_ok=True)
        if linked:
            os.link(source, path)
        else:
            path.write_bytes(source.read_bytes())
        paths.append(path)
    source.unlink()
    return paths


def _scans(monkeypatch) -> list:
    """The directories listed from now on."""
    listed = []
    for name in ("scandir", "listdir"):
        original = getattr(os, name)

        def listing(path=".", original=original):
            listed.append(path)
            return original(path)

        monkeypatch.setattr(os, name, listing)
    return listed


def _recorded_total(cache) -> int:
    return int((cache / "total-bytes").read_bytes())


def test_a_compile_lists_no_directory_of_a_cache_of_20000_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(tmp_path))
    _fake_entries(tmp_path, 20_000, 100, linked=True)
    disk_cache.write("first", b"code")  # no record yet: one survey makes it
    assert _recorded_total(tmp_path) == sum(p.stat().st_size for p in _entries(tmp_path))
    scans = _scans(monkeypatch)
    assert _call(_module(31.0)) == 31.0  # looked up, compiled, stored
    loaded = timing.counts["modules from the disk cache"]
    assert _call(_module(31.0)) == 31.0  # found
    assert timing.counts["modules from the disk cache"] == loaded + 1
    assert scans == []


def test_past_its_bound_the_cache_drops_the_least_recently_used_in_one_survey(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(tmp_path))
    old = _fake_entries(tmp_path, 200, 1000)
    for age, path in enumerate(reversed(old)):
        os.utime(path, ns=(0, (1000 - age) * 10**9))  # old[0] the least recently used
    disk_cache.write("first", b"code")
    limit = 100.5 * 1000  # room for a hundred of them
    monkeypatch.setenv("FUSEGRAD_CACHE_MB", str(limit / 2**20))
    scans = _scans(monkeypatch)
    disk_cache.write("second", b"code")
    assert len(scans) == 1 + len(list(tmp_path.glob("??/")))  # the top, then each subdirectory
    left = _entries(tmp_path)
    assert sum(p.stat().st_size for p in left) <= 0.9 * limit
    assert _recorded_total(tmp_path) == sum(p.stat().st_size for p in left)
    kept = len(left) - 2  # besides "first" and "second"
    assert [p.exists() for p in old] == [False] * (200 - kept) + [True] * kept
    assert disk_cache.read("first") == disk_cache.read("second") == b"code"
    scans.clear()
    disk_cache.write("third", b"code")  # under the bound again: no survey
    assert scans == []


def test_the_cache_stays_within_its_size_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(tmp_path))
    _module(0.0)
    (entry,) = _entries(tmp_path)
    limit = 2.5 * entry.stat().st_size  # room for two entries of this kernel
    monkeypatch.setenv("FUSEGRAD_CACHE_MB", str(limit / 2**20))
    for value in range(1, 6):
        assert _call(_module(value)) == value
    sizes = [p.stat().st_size for p in _entries(tmp_path)]
    assert len(sizes) == 2 and sum(sizes) <= limit
    loaded = timing.counts["modules from the disk cache"]
    _module(5.0)  # the most recent entries stayed
    assert timing.counts["modules from the disk cache"] == loaded + 1


@pytest.mark.parametrize("record", [None, b"", b"lots", b"-1", b"99999999999"], ids=repr)
def test_a_missing_or_wrong_size_record_is_recomputed(record, tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(tmp_path))
    for i in range(3):
        disk_cache.write(f"key {i}", b"x" * 1000)
    if record is None:
        (tmp_path / "total-bytes").unlink()
    else:
        (tmp_path / "total-bytes").write_bytes(record)
    disk_cache.write("key 3", b"x" * 1000)
    entries = _entries(tmp_path)
    assert len(entries) == 4
    assert _recorded_total(tmp_path) == sum(p.stat().st_size for p in entries)


def test_a_survey_removes_format_1_entries_and_what_dead_writers_left(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(tmp_path))
    format_1 = tmp_path / f"{'ab' * 32}.o"
    format_1.write_bytes(b"fusegrad-object-1\n")
    (tmp_path / "ab").mkdir()
    abandoned, recent = tmp_path / "ab" / ".writing-1", tmp_path / ".writing-2"
    for path in (abandoned, recent):
        path.write_bytes(b"half an entry")
    os.utime(abandoned, (0, 0))
    unrelated = tmp_path / "notes.txt"
    unrelated.write_text("not the cache's")
    disk_cache.write("key", b"code")  # no record yet: a survey
    assert not format_1.exists() and not abandoned.exists()
    assert recent.exists() and unrelated.exists()


def test_an_entry_of_another_format_is_not_read(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(tmp_path))
    disk_cache.write("key", b"code")
    (entry,) = _entries(tmp_path)
    entry.write_bytes(entry.read_bytes().replace(b"fusegrad-object-2", b"fusegrad-object-1"))
    assert disk_cache.read("key") is None


def test_concurrent_writers_leave_whole_entries(tmp_path):
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=str(tmp_path), FUSEGRAD_LOG="compile")
    writers = [
        subprocess.Popen([sys.executable, "-c", PROGRAM], env=env, stdout=subprocess.PIPE)
        for _ in range(4)
    ]
    outputs = {writer.communicate()[0].splitlines()[0] for writer in writers}  # the values
    assert all(writer.returncode == 0 for writer in writers) and len(outputs) == 1
    assert not list(tmp_path.rglob(".writing-*"))  # no half-written files
    _, compiled, cached = _run(tmp_path)
    assert compiled == 0 and cached >= 2


def test_the_key_covers_the_cpu_and_the_versions():
    import llvmlite
    import llvmlite.binding as llvm

    import fusegrad

    identity = target._target_identity().decode(errors="replace")
    for part in (llvm.get_host_cpu_name(), fusegrad.__version__, llvmlite.__version__):
        assert part in identity
    assert target._cache_key("a") != target._cache_key("b")


def test_bad_cache_settings_are_clear_errors_or_no_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FUSEGRAD_CACHE_MB", "lots")
    with pytest.raises(ValueError, match="FUSEGRAD_CACHE_MB must be a number"):
        _module(11.0)
    monkeypatch.delenv("FUSEGRAD_CACHE_MB")
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(blocker / "cache"))  # cannot be created
    assert _call(_module(12.0)) == 12.0  # compiled, just not cached
