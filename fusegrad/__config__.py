"""``torch.__config__``: how this build was made, for the bug reports and
logs that print it. fusegrad is Python over numpy, with kernels compiled by
LLVM (through llvmlite) for the host's CPU."""

from __future__ import annotations

import platform

import llvmlite
import llvmlite.binding as llvm
import numpy as np

from . import _settings
from .codegen import target
from .version import __version__


def _cpu_features() -> str:
    target.target_machine()  # initializes LLVM's native target
    features = llvm.get_host_cpu_features()
    return " ".join(sorted(name for name, on in features.items() if on))


def show() -> str:
    """The build: fusegrad's version and what computes its values."""
    return (
        f"fusegrad {__version__} built with:\n"
        f"  - Python {platform.python_version()}\n"
        f"  - numpy {np.__version__} (eager operations and linear algebra)\n"
        f"  - llvmlite {llvmlite.__version__}, LLVM {'.'.join(map(str, llvm.llvm_version_info))} "
        "(compiled kernels)\n"
        f"  - CPU: {llvm.get_host_cpu_name()} ({platform.machine()})\n"
        f"  - CPU features: {_cpu_features()}\n"
        "  - no CUDA, ROCm, XPU or MPS support\n"
    )


def parallel_info() -> str:
    """How many threads compiled kernels and inter-op work use."""
    return (
        "fusegrad parallelism:\n"
        f"\tget_num_threads() : {_settings.get_num_threads()}\n"
        f"\tget_num_interop_threads() : {_settings.get_num_interop_threads()}\n"
        "compiled kernels run on fusegrad's own thread team\n"
    )
