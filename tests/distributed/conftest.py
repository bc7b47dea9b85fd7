"""The tests of this directory run in every process of an MPI job at once
(tests/test_distributed.py starts them: ``mpiexec -n 2 python -m pytest
tests/distributed/<file>``), each test in every process in the same order,
so their collectives pair up. Each process's data follows from its rank, so
every process can compute what the others hold, and the expected result."""

import pytest

import fusegrad.distributed as dist


@pytest.fixture(scope="session", autouse=True)
def process_group():
    dist.init_process_group("mpi")
    yield
    if dist.is_initialized():
        dist.destroy_process_group()
