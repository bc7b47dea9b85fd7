"""The memory a step frees stays with the process (runtime/memory.py): a
loop allocating and freeing arrays as a training step does faults on no
page after its first round, where glibc's own rule made it fault on each."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import fusegrad  # noqa: F401  (importing it is what sets the allocator)
from fusegrad.runtime import memory

pytestmark = pytest.mark.skipif(not memory._glibc(), reason="glibc's allocator only")

# a round of 24 MB in arrays of 2 MB, all freed at its end
ROUNDS = """
import resource, numpy as np
import fusegrad

def round_of_arrays():
    arrays = [np.ones(1 << 19, np.float32) for _ in range(12)]
    del arrays

def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

round_of_arrays()
before = faults()
for _ in range(3):
    round_of_arrays()
print(faults() - before)
"""


def _faults_in_a_new_process(keep_freed_mb: str) -> int:
    env = dict(os.environ, FUSEGRAD_KEEP_FREED_MB=keep_freed_mb)
    done = subprocess.run(
        [sys.executable, "-c", ROUNDS], env=env, capture_output=True, text=True, check=True
    )
    return int(done.stdout.split()[-1])


def test_arrays_freed_and_allocated_again_fault_on_no_page():
    assert _faults_in_a_new_process(str(memory.KEEP_FREED_MB)) == 0
    # glibc's own rule hands the arrays back each round: most of their 3 x 12 x 512
    # pages fault again
    assert _faults_in_a_new_process("0") > 3 * 12 * 256


def test_a_setting_that_is_not_a_number_is_refused(monkeypatch):
    monkeypatch.setenv("FUSEGRAD_KEEP_FREED_MB", "lots")
    with pytest.raises(ValueError, match="whole number of megabytes"):
        memory.keep_freed_memory()
