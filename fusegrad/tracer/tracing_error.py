"""The error a trace raises for what a compiled program cannot do, and the
line of the user's code its messages name."""

from __future__ import annotations

import os
import traceback

from .numbers import PACKAGE_DIR


class TracingError(RuntimeError):
    """Something a traced function did cannot be compiled; the message names the line."""


def user_line() -> str:
    """``file:line`` of the innermost frame outside fusegrad (the user's code)."""
    for frame in reversed(traceback.extract_stack()):
        if not os.path.abspath(frame.filename).startswith(PACKAGE_DIR):
            return f"{frame.filename}:{frame.lineno}"
    return "<unknown>"
