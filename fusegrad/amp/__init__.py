"""``fusegrad.amp`` (``torch.amp``): automatic mixed precision. ``autocast``
runs regions of a script in a lower-precision dtype where PyTorch's policy
says an op may (bfloat16 products on the CPU); ``GradScaler`` scales a loss
so that small gradients survive a reduced dtype."""

from .autocast_mode import autocast, custom_bwd, custom_fwd, is_autocast_available
from .grad_scaler import GradScaler

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd", "is_autocast_available"]
