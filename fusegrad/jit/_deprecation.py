"""PyTorch 2.13's deprecation warnings for TorchScript's API, which fusegrad
gives too: code written for it sees the same advice."""

import warnings

_ADVICE = {
    "script": "Please switch to `torch.compile` or `torch.export`.",
    "script_method": "Please switch to `torch.compile` or `torch.export`.",
    "trace": "Please switch to `torch.compile` or `torch.export`.",
    "trace_method": "Please switch to `torch.compile` or `torch.export`.",
    "save": "Please switch to `torch.export`.",
    "load": "Please switch to `torch.export`.",
    "freeze": "Please use `torch.compile` instead.",
    "optimize_for_inference": "Please use `torch.compile` instead.",
    "fork": "Please use `torch.compile` instead.",
    "wait": "Please use `torch.compile` instead.",
    "interface": "Please use `torch.compile` instead.",
}


def warn(name: str) -> None:
    """The warning ``torch.jit.<name>`` gives; attributed, as PyTorch's is, to
    the library's function (the caller of this one), so Python's default
    filters show it only to those who ask."""
    message = f"`torch.jit.{name}` is deprecated. {_ADVICE[name]}"
    warnings.warn(message, DeprecationWarning, stacklevel=2)
