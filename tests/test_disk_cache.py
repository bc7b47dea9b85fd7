"""The disk cache of compiled kernels: a second process skips LLVM; bad
entries are recompiled and rewritten; concurrent writers leave whole
entries; the size stays bounded."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

from fusegrad import timing
from fusegrad.codegen import target

PROGRAM = """
import numpy as np, fusegrad as fg
x = fg.tensor(np.linspace(-3, 3, 50000, dtype=np.float32), requires_grad=True)
f = fg.jit(lambda x: (fg.tanh(x) * fg.exp(-x * x)).sum())
loss = f(x)
loss.backward()
print(float(loss), float(x.grad.sum()))
"""


def _run(cache, env_extra=None):
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=str(cache), FUSEGRAD_LOG="compile")
    env.update(env_extra or {})
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, check=True
    )
    compiled, cached = map(
        int, re.search(r"(\d+) modules compiled, (\d+) from the disk cache", result.stderr).groups()
    )
    return result.stdout, compiled, cached


def test_a_second_process_loads_every_kernel_from_the_disk_cache(tmp_path):
    first, compiled, cached = _run(tmp_path)
    assert compiled >= 2 and cached == 0
    second, compiled_again, cached_again = _run(tmp_path)
    assert second == first and compiled_again == 0 and cached_again == compiled
    assert len(list(tmp_path.glob("*.o"))) == compiled


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
    (entry,) = tmp_path.glob("*.o")
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


def test_the_cache_stays_within_its_size_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_CACHE_DIR", str(tmp_path))
    _module(0.0)
    (entry,) = tmp_path.glob("*.o")
    limit = 2.5 * entry.stat().st_size  # room for two entries of this kernel
    monkeypatch.setenv("FUSEGRAD_CACHE_MB", str(limit / 2**20))
    for value in range(1, 6):
        assert _call(_module(value)) == value
    sizes = [p.stat().st_size for p in tmp_path.glob("*.o")]
    assert len(sizes) == 2 and sum(sizes) <= limit
    loaded = timing.counts["modules from the disk cache"]
    _module(5.0)  # the most recent entries stayed
    assert timing.counts["modules from the disk cache"] == loaded + 1


def test_concurrent_writers_leave_whole_entries(tmp_path):
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=str(tmp_path), FUSEGRAD_LOG="compile")
    writers = [
        subprocess.Popen([sys.executable, "-c", PROGRAM], env=env, stdout=subprocess.PIPE)
        for _ in range(4)
    ]
    outputs = {writer.communicate()[0] for writer in writers}
    assert all(writer.returncode == 0 for writer in writers) and len(outputs) == 1
    assert not [p for p in tmp_path.iterdir() if p.suffix != ".o"]  # no half-written files
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
