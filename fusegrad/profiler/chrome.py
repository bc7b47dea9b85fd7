"""A profile as Chrome trace JSON, which Perfetto and chrome://tracing
open: a complete ("ph": "X") event per span, times in microseconds, a
track per thread; a path ending in .gz is written gzipped."""

from __future__ import annotations

import gzip
import json
import os


def write_chrome_trace(events, path: str, base_time_ns: int | None = None) -> None:
    pid = os.getpid()
    trace = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python"}},
    ]
    for thread in dict.fromkeys(e.thread for e in events):
        trace.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": pid,
                "tid": thread,
                "args": {"name": f"thread {thread} (python)"},
            }
        )
    for event in events:
        args = {}
        if event.input_shapes:
            args["Input Dims"] = event.input_shapes
        if event.self_cpu_memory_usage:
            args["Allocated bytes"] = event.self_cpu_memory_usage
        if event.stack:
            args["Call stack"] = ";".join(event.stack)
        trace.append(
            {
                "ph": "X",
                "cat": event.category,
                "name": event.name,
                "pid": pid,
                "tid": event.thread,
                "ts": round(event.time_range.start, 3),
                "dur": round(event.cpu_time_total, 3),
                "args": args,
            }
        )
    document = {"schemaVersion": 1, "displayTimeUnit": "ms", "traceEvents": trace}
    if base_time_ns is not None:
        document["baseTimeNanoseconds"] = base_time_ns
    text = json.dumps(document)
    if str(path).endswith(".gz"):
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)
