"""What a profile shows: its spans as ``FunctionEvent`` s (times in
microseconds from the profiler's start, self times without the children's),
their averages per name (``key_averages``), and the table PyTorch prints."""

from __future__ import annotations

import math
from collections import namedtuple

from .chrome import write_chrome_trace


class Interval(namedtuple("Interval", ["start", "end"])):
    """A span's start and end, in microseconds from the profiler's start."""

    def elapsed_us(self) -> float:
        return self.end - self.start


class FunctionEvent:
    """One recorded span: ``cpu_children`` ran inside it, on its thread."""

    count = 1
    # the CPU's work only: sorting a table by device time (a CUDA tutorial's) keeps its order
    device_time_total = self_device_time_total = cuda_time_total = self_cuda_time_total = 0.0

    def __init__(self, id: int, span, origin_ns: int):
        self.id = id
        self.name = span.name
        # steps are told apart by number, averaged as one
        self.key = "ProfilerStep*" if span.name.startswith("ProfilerStep#") else span.name
        self.category = span.category
        self.thread = span.thread
        self.time_range = Interval(
            (span.start_ns - origin_ns) / 1e3, (span.end_ns - origin_ns) / 1e3
        )
        self.input_shapes = span.shapes or []
        self.stack = list(span.stack)
        self.self_cpu_memory_usage = span.memory
        self.flops = span.flops
        self.cpu_parent = None
        self.cpu_children: list = []

    def __repr__(self) -> str:
        return (
            f"<FunctionEvent id={self.id} name={self.name} cpu_time={_time(self.cpu_time_total)} "
            f"start_us={self.time_range.start:.3f} end_us={self.time_range.end:.3f} "
            f"cpu_children={[c.id for c in self.cpu_children]} thread={self.thread} "
            f"input_shapes={self.input_shapes} cpu_memory_usage={self.cpu_memory_usage}>"
        )

    @property
    def cpu_time_total(self) -> float:
        return self.time_range.elapsed_us()

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total

    @property
    def cpu_memory_usage(self) -> int:
        return self.self_cpu_memory_usage + sum(c.cpu_memory_usage for c in self.cpu_children)


class FunctionEventAvg:
    """The events of one key (and input shapes or stack, when grouped by
    them) added up."""

    device_time_total = self_device_time_total = cuda_time_total = self_cuda_time_total = 0.0

    def __init__(self, key: str, input_shapes=None, stack=None):
        self.key = key
        self.input_shapes = input_shapes
        self.stack = stack or []
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.flops = 0

    def add(self, event) -> FunctionEventAvg:
        self.count += event.count
        self.cpu_time_total += event.cpu_time_total
        self.self_cpu_time_total += event.self_cpu_time_total
        self.cpu_memory_usage += event.cpu_memory_usage
        self.self_cpu_memory_usage += event.self_cpu_memory_usage
        self.flops += event.flops
        return self

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self) -> str:
        return (
            f"<FunctionEventAvg key={self.key} self_cpu_time={_time(self.self_cpu_time_total)} "
            f"cpu_time={_time(self.cpu_time)} input_shapes={self.input_shapes or ''} "
            f"cpu_memory_usage={self.cpu_memory_usage}>"
        )


class EventList(list):
    """A profile's events (or their averages), in the order they began."""

    @property
    def self_cpu_time_total(self) -> float:
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shapes: bool = False, group_by_stack_n: int = 0):
        averages: dict = {}
        for event in self:
            key = [event.key]
            if group_by_input_shapes:
                key.append(str(event.input_shapes))
            if group_by_stack_n:
                key += event.stack[:group_by_stack_n]
            average = averages.get(tuple(key))
            if average is None:
                shapes = event.input_shapes if group_by_input_shapes else None
                stack = event.stack[:group_by_stack_n] if group_by_stack_n else None
                average = averages[tuple(key)] = FunctionEventAvg(event.key, shapes, stack)
            average.add(event)
        return EventList(averages.values())

    def total_average(self) -> FunctionEventAvg:
        total = FunctionEventAvg("Total")
        for event in self:
            total.add(event)
        return total

    def table(
        self,
        sort_by: str | None = None,
        row_limit: int = 100,
        max_name_column_width: int = 55,
        max_shapes_column_width: int = 80,
        header: str | None = None,
        top_level_events_only: bool = False,
    ) -> str:
        """PyTorch's table: a row per event or average (the ``sort_by``
        attribute's largest first, at most ``row_limit``), percentages of
        the self time of all of them."""
        rows = [e for e in self if not top_level_events_only or _is_top_level(e)]
        if sort_by is not None:
            rows.sort(key=lambda e: getattr(e, sort_by), reverse=True)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        shown = {  # columns of what the profile recorded, whichever rows show it
            "memory": any(e.cpu_memory_usage or e.self_cpu_memory_usage for e in self),
            "shapes": any(e.input_shapes for e in self),
            "stack": any(e.stack for e in self),
            "flops": any(e.flops for e in self),
        }
        widths = (max_name_column_width, max_shapes_column_width)
        return _table(rows, self.self_cpu_time_total, shown, widths, header)

    def export_chrome_trace(self, path: str, base_time_ns: int | None = None) -> None:
        write_chrome_trace(self, path, base_time_ns)


def _is_top_level(event) -> bool:
    return getattr(event, "cpu_parent", None) is None


def _table(rows: list, total: float, shown: dict, widths: tuple, header) -> str:
    name_width, shapes_width = widths
    names = [r.key for r in rows]
    columns = [("Name", min(max(map(len, names), default=0) + 4, name_width), names)]
    columns += [
        ("Self CPU %", 12, [_share(r.self_cpu_time_total, total) for r in rows]),
        ("Self CPU", 12, [_time(r.self_cpu_time_total) for r in rows]),
        ("CPU total %", 12, [_share(r.cpu_time_total, total) for r in rows]),
        ("CPU total", 12, [_time(r.cpu_time_total) for r in rows]),
        ("CPU time avg", 12, [_time(r.cpu_time) for r in rows]),
    ]
    if shown["memory"]:
        columns += [
            ("CPU Mem", 12, [_memory(r.cpu_memory_usage) for r in rows]),
            ("Self CPU Mem", 12, [_memory(r.self_cpu_memory_usage) for r in rows]),
        ]
    columns.append(("# of Calls", 12, [str(r.count) for r in rows]))
    if shown["flops"]:
        columns.append(_flops_column(rows))
    if shown["shapes"]:
        shapes = [str(r.input_shapes or []) for r in rows]
        width = min(max(map(len, shapes), default=0) + 4, shapes_width)
        columns.append(("Input Shapes", width, shapes))
    if shown["stack"]:
        places = [r.stack[0] if r.stack else "" for r in rows]
        columns.append(("Source Location", min(max(map(len, places), default=0) + 4, 75), places))
    rule = "".join("-" * width + "  " for _, width, _ in columns)
    lines = [header] if header else []
    lines += [rule, _row([(title, width) for title, width, _ in columns]), rule]
    for k in range(len(rows)):
        lines.append(_row([(cells[k], width) for _, width, cells in columns]))
    lines += [rule, f"Self CPU time total: {_time(total)}", ""]
    return "\n".join(lines)


def _flops_column(rows: list) -> tuple:
    """Total FLOPs in the unit that keeps the largest in thousands, as
    PyTorch's table shows them ("--" for none)."""
    largest = max((r.flops for r in rows), default=0)
    power = max(int(math.log10(largest)) // 3 - 1, 0) if largest else 0
    unit = ("", "K", "M", "G", "T", "P")[min(power, 5)]
    scale = 1000 ** min(power, 5)
    return (f"Total {unit}FLOPs", 12, [f"{r.flops / scale:.3f}" if r.flops else "--" for r in rows])


def _row(cells: list) -> str:
    return "".join(f"{_fitted(text, width):>{width}}  " for text, width in cells)


def _fitted(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _time(us: float) -> str:
    if abs(us) >= 1e6:
        return f"{us / 1e6:.3f}s"
    if abs(us) >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _share(us: float, total: float) -> str:
    return f"{100 * us / total:.2f}%" if total else "0.00%"


def _memory(nbytes: int) -> str:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} B"


def function_events(spans: list, origin_ns: int) -> EventList:
    """The finished spans as events, each linked to its parent's."""
    finished = [s for s in spans if s.end_ns is not None]
    events = {s: FunctionEvent(k, s, origin_ns) for k, s in enumerate(finished, 1)}
    for span, event in events.items():
        parent = events.get(span.parent)
        if parent is not None:
            event.cpu_parent = parent
            parent.cpu_children.append(event)
    return EventList(events.values())
