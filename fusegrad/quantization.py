"""``torch.quantization``: the older path of ``torch.ao.quantization``."""

from .ao.quantization import *  # noqa: F403
from .ao.quantization import __all__  # noqa: F401
