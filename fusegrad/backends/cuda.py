"""``fusegrad.backends.cuda``: not built. ``matmul.allow_tf32`` is PyTorch's
older spelling of the float32 matrix-product precision (True: "high", False:
"highest"), read and set through ``set_float32_matmul_precision``; fusegrad
computes every float32 product in full precision either way."""

from .. import _settings


class _MatmulSettings:
    """``torch.backends.cuda.matmul``: its flags, and no others."""

    allow_fp16_reduced_precision_reduction = True
    allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self) -> bool:
        return _settings.get_float32_matmul_precision() != "highest"

    @allow_tf32.setter
    def allow_tf32(self, allow: bool) -> None:
        _settings.set_float32_matmul_precision("high" if allow else "highest")

    def __getattr__(self, name: str):
        raise AttributeError(f"Unknown attribute {name}")

    def __setattr__(self, name: str, value) -> None:
        if not hasattr(type(self), name):
            raise AttributeError(f"Unknown attribute {name}")
        object.__setattr__(self, name, value)


matmul = _MatmulSettings()


def is_built() -> bool:
    return False
