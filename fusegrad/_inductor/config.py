"""``torch._inductor.config``: the settings scripts set, accepted and kept
with PyTorch's defaults. They tune PyTorch's Inductor backend, which
fusegrad does not have (its jit makes LLVM kernels), so they change nothing here."""

import sys as _sys

from .._settings_module import Group as _Group
from .._settings_module import SettingsModule as _SettingsModule

coordinate_descent_tuning = False
fx_graph_cache = True
freezing = False
epilogue_fusion = True
max_autotune = False
max_autotune_gemm = False
conv_1x1_as_mm = False
force_fuse_int_mm_with_mul = False
debug = False
benchmark_kernel = False
triton = _Group(
    "torch._inductor.config.triton",
    unique_kernel_names=True,
    cudagraphs=False,
    cudagraph_trees=True,
)

_sys.modules[__name__].__class__ = _SettingsModule
