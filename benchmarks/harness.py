"""Interleaved timing: every implementation of a workload runs in turn, in
one process, so they all see the same machine state; medians are reported."""

from __future__ import annotations

import statistics
import timeit


def measure(workloads: dict, repeat: int, number: int) -> dict:
    """``workloads``: {row: {implementation: callable}} -> {row: {implementation: median us}}."""
    samples = {row: {name: [] for name in impls} for row, impls in workloads.items()}
    for _ in range(repeat):
        for row, impls in workloads.items():
            for name, fn in impls.items():
                seconds = timeit.timeit(fn, number=number)
                samples[row][name].append(seconds / number * 1e6)
    return {
        row: {name: statistics.median(times) for name, times in impls.items()}
        for row, impls in samples.items()
    }


def table(medians: dict, columns: list, reference: str, title: str) -> str:
    """Medians in microseconds and the reference's ratio to every other column."""
    others = [c for c in columns if c != reference]
    heads = [f"{c} us" for c in columns] + [f"vs {c}" for c in others]
    widths = [max(12, len(h) + 2) for h in heads]
    first = max(len(title), *(len(row) for row in medians)) + 2
    lines = [f"{title:<{first}}" + "".join(f"{h:>{w}}" for h, w in zip(heads, widths))]
    lines.append("-" * len(lines[0]))
    for row, values in medians.items():
        cells = [f"{values[c]:.2f}" if c in values else "-" for c in columns]
        cells += [f"{values[reference] / values[c]:.2f}x" if c in values else "-" for c in others]
        lines.append(f"{row:<{first}}" + "".join(f"{c:>{w}}" for c, w in zip(cells, widths)))
    return "\n".join(lines)
