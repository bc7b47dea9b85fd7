"""``torch.ao.quantization`` (also ``torch.quantization``): importable, and
the stubs a float model holds before conversion (``QuantStub``,
``DeQuantStub``) pass their input through, as PyTorch's do. Quantizing
fails: quantized modules compute with PyTorch's quantized backends (FBGEMM,
QNNPACK) on quantized tensors, which fusegrad does not have."""

from __future__ import annotations

from ...nn.modules.module import Module

__all__ = [
    "DeQuantStub",
    "QuantStub",
    "convert",
    "fuse_modules",
    "get_default_qconfig",
    "prepare",
    "prepare_qat",
    "quantize",
    "quantize_dynamic",
    "quantize_qat",
]


def _cannot_quantize(function: str) -> RuntimeError:
    return RuntimeError(
        f"torch.ao.quantization.{function}: fusegrad cannot quantize models (it has no "
        "quantized tensors or quantized backends such as FBGEMM and QNNPACK); quantize "
        "with PyTorch"
    )


class QuantStub(Module):
    """Where a quantized model would quantize its input; in the float model, nothing."""

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x):
        return x


class DeQuantStub(Module):
    """Where a quantized model would dequantize its output; in the float model, nothing."""

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x):
        return x


def quantize_dynamic(model, qconfig_spec=None, dtype=None, mapping=None, inplace=False):
    raise _cannot_quantize("quantize_dynamic")


def quantize(model, run_fn, run_args, mapping=None, inplace=False):
    raise _cannot_quantize("quantize")


def quantize_qat(model, run_fn, run_args, inplace=False):
    raise _cannot_quantize("quantize_qat")


def prepare(model, inplace=False, *args, **kwargs):
    raise _cannot_quantize("prepare")


def prepare_qat(model, mapping=None, inplace=False):
    raise _cannot_quantize("prepare_qat")


def convert(module, mapping=None, inplace=False, *args, **kwargs):
    raise _cannot_quantize("convert")


def fuse_modules(model, modules_to_fuse, inplace=False, *args, **kwargs):
    raise _cannot_quantize("fuse_modules")


def get_default_qconfig(backend="x86", version=0):
    raise _cannot_quantize("get_default_qconfig")
