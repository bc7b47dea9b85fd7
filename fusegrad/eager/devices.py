"""Devices: fusegrad computes on the CPU only. ``device("cpu")`` is every
tensor's device; other devices can be named (so code that chooses one runs),
and using one is a clear error."""

from __future__ import annotations

_TYPES = ("cpu", "cuda", "mps", "xpu", "hip", "xla", "meta", "hpu", "mtia")


class device:
    """``device("cpu")``, ``device("cuda:1")``, ``device("cuda", 1)``, ``device(0)``
    (an index alone names a CUDA device), as PyTorch parses them.

    >>> import fusegrad
    >>> fusegrad.device("cpu")
    device(type='cpu')
    >>> fusegrad.ones(2).device == fusegrad.device("cpu")
    True
    """

    __slots__ = ("type", "index")

    def __init__(self, type, index: int | None = None):
        if isinstance(type, device):
            type, index = type.type, type.index
        elif isinstance(type, int) and not isinstance(type, bool):
            type, index = "cuda", type
        elif isinstance(type, str):
            kind, colon, number = type.partition(":")
            if kind not in _TYPES:
                raise RuntimeError(
                    f"Expected one of {', '.join(_TYPES)} device type at start of device "
                    f"string: {type}"
                )
            if colon:
                if index is not None:
                    raise RuntimeError(
                        "type (string) must not include an index because index was passed "
                        "explicitly: " + type
                    )
                if not number.isdigit():
                    raise RuntimeError(f"Invalid device string: '{type}'")
                index = int(number)
            type = kind
        else:
            raise TypeError(
                f"device() received an invalid combination of arguments: {type!r}, {index!r}"
            )
        if index is not None and index < 0:
            raise RuntimeError(f"Device index must not be negative, got {index}")
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "index", index)

    def __setattr__(self, name, value):
        raise AttributeError(f"attribute '{name}' of 'fusegrad.device' objects is not writable")

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __eq__(self, other) -> bool:
        if not isinstance(other, device):
            return NotImplemented
        return (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __reduce__(self):
        return (device, (self.type, self.index))


CPU = device("cpu")


def check_device(where) -> device:
    """The device ``where`` names (a device, a string, an index, or None for the
    default), which must be the CPU: anything else is an error, never a tensor
    silently made on the CPU instead."""
    if where is None:
        return CPU
    found = where if isinstance(where, device) else device(where)
    if found.type == "cuda":
        raise RuntimeError(
            "Torch not compiled with CUDA enabled: fusegrad computes on the CPU only "
            f"(device '{found}' was asked for); fusegrad.cuda.is_available() is False"
        )
    if found.type != "cpu":
        raise RuntimeError(f"fusegrad computes on the CPU only: device '{found}' is not available")
    return found


def set_default_device(where) -> None:
    """Where new tensors are made: the CPU is the only device there is."""
    check_device(where)


def get_default_device() -> device:
    return CPU
