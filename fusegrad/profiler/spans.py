"""Spans: what the profiler records, one per operation, node, kernel or
annotated block, each with its thread, its times and the span it ran in.

A span goes to every collection recording when it begins (a profiler
started inside a span records what runs after, not that span). Nothing
here runs while no profiler records: ``hooks.py`` puts the recording
wrappers in place only then, and ``record_function`` asks one list.
"""

from __future__ import annotations

import threading
import time
import traceback
from contextlib import ContextDecorator
from pathlib import Path

collections: list = []  # each recording profiler's list of spans
# what any recording profiler asks for: record_shapes, profile_memory, with_stack, with_flops
options = {"shapes": False, "memory": False, "stack": False, "flops": False}


class Span:
    """One timed region: ``parent`` is the span open on its thread when it
    began; ``shapes`` its operands' shapes (record_shapes); ``memory`` the
    bytes it allocated itself (profile_memory); ``stack`` the user's frames
    that called it, innermost first (with_stack); ``flops`` the floating
    point operations of a product, sum or multiplication (with_flops)."""

    __slots__ = (
        "name",
        "category",
        "parent",
        "thread",
        "start_ns",
        "end_ns",
        "shapes",
        "memory",
        "stack",
        "flops",
    )

    def __init__(self, name: str, category: str, parent, shapes):
        self.name = name
        self.category = category
        self.parent = parent
        self.thread = threading.get_native_id()
        self.shapes = shapes
        self.memory = 0
        self.stack = _user_frames() if options["stack"] else ()
        self.flops = 0
        self.end_ns = None


class _Open(threading.local):
    def __init__(self):
        self.spans: list = []  # begun on this thread, not ended yet, innermost last


_open = _Open()


def begin(name: str, category: str = "cpu_op", shapes=None) -> Span:
    stack = _open.spans
    span = Span(name, category, stack[-1] if stack else None, shapes)
    for collection in collections:
        collection.append(span)
    stack.append(span)
    span.start_ns = time.perf_counter_ns()
    return span


def end(span: Span) -> None:
    span.end_ns = time.perf_counter_ns()
    stack = _open.spans
    if stack and stack[-1] is span:
        stack.pop()
    elif span in stack:  # a span ended from outside its nesting (ProfilerStep)
        stack.remove(span)


def innermost():
    """The span open innermost on this thread, or None."""
    stack = _open.spans
    return stack[-1] if stack else None


def shape_of(value) -> list:
    """An operand's shape as the profiler shows it: [] for a number; a
    size that varies as its symbol's expression."""
    shape = getattr(value, "shape", ())
    return [d if type(d) is int else str(d) for d in shape]


class record_function(ContextDecorator):
    """Labels a block (``with``) or a function (as a decorator) in the
    profile: a span named ``name`` around it, when a profiler records.
    ``args``, PyTorch's string of extra inputs, is kept as given."""

    def __init__(self, name: str, args: str | None = None):
        self.name = name
        self.args = args
        self._span = None

    def _recreate_cm(self):
        # each call of a decorated function enters its own: calls may nest or run in threads
        return record_function(self.name, self.args)

    def __enter__(self):
        self._span = begin(self.name, "user_annotation") if collections else None
        return self

    def __exit__(self, *exc):
        if self._span is not None:
            end(self._span)
            self._span = None
        return False


_PACKAGE = str(Path(__file__).resolve().parents[1])


def _user_frames() -> tuple:
    """'file(line): function' of the frames outside fusegrad, innermost first."""
    frames = traceback.extract_stack()[::-1]
    return tuple(
        f"{f.filename}({f.lineno}): {f.name}" for f in frames if not f.filename.startswith(_PACKAGE)
    )
