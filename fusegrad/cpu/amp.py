"""``torch.cpu.amp``: the deprecated spellings of ``torch.amp.autocast("cpu")``
and ``torch.amp.GradScaler("cpu")``, which warn as PyTorch's do."""

from __future__ import annotations

from ..amp import autocast_mode, grad_scaler
from ..amp.deprecation import deprecated
from ..ir import dtypes


class autocast(autocast_mode.autocast):
    """``torch.amp.autocast("cpu", ...)``, under its deprecated name."""

    @deprecated(
        "`torch.cpu.amp.autocast(args...)` is deprecated. "
        "Please use `torch.amp.autocast('cpu', args...)` instead."
    )
    def __init__(self, enabled=True, dtype=dtypes.bfloat16, cache_enabled=True):
        super().__init__("cpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(grad_scaler.GradScaler):
    """``torch.amp.GradScaler("cpu", ...)``, under its deprecated name."""

    @deprecated(
        "`torch.cpu.amp.GradScaler(args...)` is deprecated. "
        "Please use `torch.amp.GradScaler('cpu', args...)` instead."
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
            "cpu",
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
            enabled=enabled,
        )
