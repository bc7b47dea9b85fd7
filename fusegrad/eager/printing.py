"""``repr`` of tensors, formatted the way PyTorch 2.x formats them.

By default: precision 4, scientific notation when the magnitudes span more
than 1000x, integers in floating tensors printed as ``1.``, more than 1000
elements summarized with ``...``, lines wrapped at 80 columns;
``set_printoptions`` changes these, as PyTorch's does.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np


@dataclasses.dataclass
class PrintOptions:
    """PyTorch's ``PRINT_OPTS``; ``sci_mode`` None chooses by the values."""

    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


options = PrintOptions()

_PROFILES = {
    "default": PrintOptions(),
    "short": PrintOptions(precision=2, edgeitems=2),
    "full": PrintOptions(threshold=math.inf),
}


def set_printoptions(
    precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None
) -> None:
    """``torch.set_printoptions``: a ``profile`` ("default", "short", "full")
    sets the first four, then each given option; ``sci_mode`` is always set
    (None: chosen by the values)."""
    if profile is not None:
        preset = _PROFILES.get(profile)
        if preset is not None:  # PyTorch ignores an unknown profile
            for name in ("precision", "threshold", "edgeitems", "linewidth"):
                setattr(options, name, getattr(preset, name))
    given = dict(precision=precision, threshold=threshold, edgeitems=edgeitems, linewidth=linewidth)
    for name, value in given.items():
        if value is not None:
            setattr(options, name, value)
    options.sci_mode = sci_mode


def get_printoptions() -> dict:
    return dataclasses.asdict(options)


class _Formatter:
    def __init__(self, values: np.ndarray, floating: bool):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        if not floating:
            for value in values.ravel().tolist():
                self.max_width = max(self.max_width, len(str(value)))
            return
        finite = values[np.isfinite(values) & (values != 0)].astype(np.float64)
        if finite.size == 0:
            return
        magnitudes = np.abs(finite)
        lo, hi = magnitudes.min(), magnitudes.max()
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        if self.int_mode:
            if hi / lo > 1000.0 or hi > 1.0e8:
                self.sci_mode = True
                widths = [len(f"{v:.{options.precision}e}") for v in finite.tolist()]
            else:
                widths = [len(f"{v:.0f}") + 1 for v in finite.tolist()]
        else:
            if hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4:
                self.sci_mode = True
                widths = [len(f"{v:.{options.precision}e}") for v in finite.tolist()]
            else:
                widths = [len(f"{v:.{options.precision}f}") for v in finite.tolist()]
        self.max_width = max(widths)
        if options.sci_mode is not None:  # forced, keeping the widths found (as PyTorch)
            self.sci_mode = options.sci_mode

    def format(self, value) -> str:
        if not self.floating:
            text = str(value)
        elif self.sci_mode:
            text = f"{value:{self.max_width}.{options.precision}e}"
        elif self.int_mode:
            text = f"{value:.0f}"
            if not (math.isinf(value) or math.isnan(value)):
                text += "."
        else:
            text = f"{value:.{options.precision}f}"
        return (self.max_width - len(text)) * " " + text


def _summarized(values: np.ndarray) -> np.ndarray:
    """The elements a summarized print shows, for choosing the format."""
    if values.ndim == 0:
        return values
    edge = options.edgeitems
    if values.shape[0] > 2 * edge:
        values = np.concatenate([values[:edge], values[-edge:]])
    return np.stack([_summarized(v) for v in values]) if values.ndim > 1 else values


def _vector(values, indent, summarize, fmt) -> str:
    element_length = fmt.max_width + 2
    per_line = max(1, (options.linewidth - indent) // element_length)
    edge = options.edgeitems
    if summarize and values.shape[0] > 2 * edge:
        items = (
            [fmt.format(v) for v in values[:edge].tolist()]
            + [" ..."]
            + [fmt.format(v) for v in values[-edge:].tolist()]
        )
    else:
        items = [fmt.format(v) for v in values.tolist()]
    lines = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(values, indent, summarize, fmt) -> str:
    if values.ndim == 0:
        return fmt.format(values.item())
    if values.ndim == 1:
        return _vector(values, indent, summarize, fmt)
    edge = options.edgeitems
    if summarize and values.shape[0] > 2 * edge:
        rows = (
            [_nested(values[i], indent + 1, summarize, fmt) for i in range(edge)]
            + ["..."]
            + [
                _nested(values[i], indent + 1, summarize, fmt)
                for i in range(values.shape[0] - edge, values.shape[0])
            ]
        )
    else:
        rows = [_nested(values[i], indent + 1, summarize, fmt) for i in range(values.shape[0])]
    return "[" + ("," + "\n" * (values.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def format_values(values: np.ndarray, indent: int) -> str:
    if values.size == 0:
        return "[]"
    summarize = values.size > options.threshold
    floating = values.dtype.kind == "f"
    fmt = _Formatter(_summarized(values) if summarize else values, floating)
    return _nested(values, indent, summarize, fmt)


def tensor_repr(
    data: np.ndarray, dtype, default_dtype, suffixes: list, prefix: str = "tensor("
) -> str:
    indent = len(prefix)
    extra = []
    if data.size == 0 and data.shape != (0,):
        extra.append(f"size={tuple(data.shape)}")
    if dtype is not default_dtype and dtype.name not in ("int64", "bool"):
        extra.append(f"dtype={dtype!r}")
    body = prefix + format_values(data, indent)
    return _add_suffixes(body, extra + suffixes, indent)


def _add_suffixes(text: str, suffixes: list, indent: int) -> str:
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > options.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)
