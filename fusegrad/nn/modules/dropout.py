"""``Dropout`` of elements, and of whole channels (``Dropout1d/2d/3d``)."""

from __future__ import annotations

from ...eager.tensor import Tensor
from .. import functional as F
from .module import Module


class Dropout(Module):
    """Zeroes each element with probability ``p`` in training, scaling the
    others by 1/(1 - p); the identity in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class _ChannelDropout(Dropout):
    """Zeroes whole channels with probability ``p`` in training."""

    function = None

    def forward(self, input: Tensor) -> Tensor:
        return type(self).function(input, self.p, self.training, self.inplace)


class Dropout1d(_ChannelDropout):
    function = F.dropout1d


class Dropout2d(_ChannelDropout):
    function = F.dropout2d


class Dropout3d(_ChannelDropout):
    function = F.dropout3d
