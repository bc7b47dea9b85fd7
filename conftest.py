"""Every test session compiles into a disk cache of its own, so tests neither
read nor fill the user's."""

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def private_kernel_cache(tmp_path_factory):
    os.environ.setdefault("FUSEGRAD_CACHE_DIR", str(tmp_path_factory.mktemp("kernel-cache")))
