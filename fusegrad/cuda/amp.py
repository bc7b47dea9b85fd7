"""``torch.cuda.amp``: the deprecated spellings of ``torch.amp.autocast("cuda")``,
``torch.amp.GradScaler("cuda")`` and the custom Function decorators, which
warn as PyTorch's do. CUDA is not available, so autocast and the scaler
then warn that too and are off, as in a CPU-only PyTorch build."""

from __future__ import annotations

import functools

from ..amp import autocast_mode, grad_scaler
from ..amp.deprecation import deprecated
from ..ir import dtypes


class autocast(autocast_mode.autocast):
    """``torch.amp.autocast("cuda", ...)``, under its deprecated name."""

    @deprecated(
        "`torch.cuda.amp.autocast(args...)` is deprecated. "
        "Please use `torch.amp.autocast('cuda', args...)` instead."
    )
    def __init__(self, enabled=True, dtype=dtypes.float16, cache_enabled=True):
        super().__init__("cuda", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(grad_scaler.GradScaler):
    """``torch.amp.GradScaler("cuda", ...)``, under its deprecated name."""

    @deprecated(
        "`torch.cuda.amp.GradScaler(args...)` is deprecated. "
        "Please use `torch.amp.GradScaler('cuda', args...)` instead."
    )
    def __init__(
        self,
        init_scale=2.0**16,
        growth_factor=2.0,
        backoff_factor=0.5,
        growth_interval=2000,
        enabled=True,
    ):
        super().__init__(
            "cuda",
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
            enabled=enabled,
        )


@deprecated(
    "`torch.cuda.amp.custom_fwd(args...)` is deprecated. "
    "Please use `torch.amp.custom_fwd(args..., device_type='cuda')` instead."
)
def custom_fwd(fwd=None, *, cast_inputs=None):
    return functools.partial(autocast_mode.custom_fwd, device_type="cuda")(
        fwd=fwd, cast_inputs=cast_inputs
    )


@deprecated(
    "`torch.cuda.amp.custom_bwd(args...)` is deprecated. "
    "Please use `torch.amp.custom_bwd(args..., device_type='cuda')` instead."
)
def custom_bwd(bwd):
    return functools.partial(autocast_mode.custom_bwd, device_type="cuda")(bwd)
