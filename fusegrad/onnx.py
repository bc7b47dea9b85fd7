"""``fusegrad.onnx``: importable, as scripts import it, but fusegrad has no
ONNX exporter: ``export`` and ``dynamo_export`` raise a RuntimeError saying
so, rather than a script failing on a missing name or writing no file."""

from __future__ import annotations

import enum


class TrainingMode(enum.IntEnum):
    """The mode ``export(training=...)`` would export a model in."""

    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


class OperatorExportTypes(enum.IntEnum):
    """How ``export(operator_export_type=...)`` would export operators."""

    ONNX = 0
    ONNX_ATEN = 1
    ONNX_ATEN_FALLBACK = 2
    ONNX_FALLTHROUGH = 3


def _cannot_export(function: str) -> RuntimeError:
    return RuntimeError(
        f"fusegrad.onnx.{function}: fusegrad cannot export ONNX (it has no ONNX exporter); "
        "export the model with PyTorch"
    )


def export(*args, **kwargs):
    raise _cannot_export("export")


def dynamo_export(*args, **kwargs):
    raise _cannot_export("dynamo_export")


def is_in_onnx_export() -> bool:
    """Whether an ONNX export is running: never, here."""
    return False
