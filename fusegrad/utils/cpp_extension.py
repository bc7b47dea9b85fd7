"""``torch.utils.cpp_extension``: importable, so that a model file that
imports it (to build its custom kernels when asked) loads. Building fails:
a PyTorch C++ or CUDA extension is compiled against libtorch's headers and
library and operates on PyTorch's C++ tensors, none of which fusegrad has;
its operations are Python over numpy and its own LLVM kernels."""

from __future__ import annotations

# no CUDA or ROCm toolkit is used by fusegrad; code tests these for None
CUDA_HOME = None
ROCM_HOME = None


def _cannot_build(what: str) -> RuntimeError:
    return RuntimeError(
        f"torch.utils.cpp_extension.{what}: fusegrad cannot build PyTorch C++/CUDA "
        "extensions (they compile against libtorch, which fusegrad does not have); "
        "run this code with PyTorch, or write the operation with fusegrad's tensor operations"
    )


def load(name, sources, *args, **kwargs):
    raise _cannot_build("load")


def load_inline(name, cpp_sources, *args, **kwargs):
    raise _cannot_build("load_inline")


def CppExtension(name, sources, *args, **kwargs):
    raise _cannot_build("CppExtension")


def CUDAExtension(name, sources, *args, **kwargs):
    raise _cannot_build("CUDAExtension")


class BuildExtension:
    """The setuptools command that builds extensions: naming it in a setup
    script's ``cmdclass`` works, running it fails."""

    @classmethod
    def with_options(cls, **options):
        return cls

    def __init__(self, *args, **kwargs):
        raise _cannot_build("BuildExtension")
