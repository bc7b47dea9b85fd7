"""``torch._dynamo.config``: the settings scripts set, accepted and kept with
PyTorch's defaults. They tune PyTorch's frontend; fusegrad's jit has its own
(``fusegrad.jit(dynamic=...)``), so they change nothing here."""

import sys as _sys

from .._settings_module import SettingsModule as _SettingsModule

automatic_dynamic_shapes = True
assume_static_by_default = True
optimize_ddp = True
suppress_errors = False
cache_size_limit = 8
recompile_limit = 8
accumulated_cache_size_limit = 256
accumulated_recompile_limit = 256
verbose = False
capture_scalar_outputs = False
capture_dynamic_output_shape_ops = False
specialize_int = False
inline_inbuilt_nn_modules = True

_sys.modules[__name__].__class__ = _SettingsModule
