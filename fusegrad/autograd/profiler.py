"""``torch.autograd.profiler``: the older spelling of the profiler, a
context manager recording everything inside it (no schedule), and
``emit_nvtx``, which needs CUDA."""

from __future__ import annotations

import warnings

from ..cuda.devices import not_compiled
from ..profiler import profiler as _profiler
from ..profiler.events import EventList, FunctionEvent, FunctionEventAvg
from ..profiler.spans import record_function


class profile(_profiler.profile):
    """``with profile() as prof``: ``prof.table()``, ``prof.key_averages()``,
    ``prof.function_events``; ``enabled=False`` records nothing (and
    ``with`` gives None, as PyTorch's does)."""

    def __init__(
        self,
        enabled: bool = True,
        *,
        use_cuda: bool = False,
        use_device=None,
        record_shapes: bool = False,
        with_flops: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_modules: bool = False,
        use_kineto: bool = False,
        use_cpu: bool = True,
        acc_events: bool = False,
    ):
        activities = {_profiler.ProfilerActivity.CPU} if use_cpu else set()
        if use_cuda:
            warnings.warn(
                "The attribute `use_cuda` will be deprecated soon, please use "
                "``use_device = 'cuda'`` instead.",
                FutureWarning,
                stacklevel=2,
            )
        if use_cuda or use_device == "cuda":
            activities.add(_profiler.ProfilerActivity.CUDA)
        super().__init__(
            activities=activities,
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
            with_flops=with_flops,
            with_modules=with_modules,
            acc_events=acc_events,
        )
        self.enabled = enabled

    def __enter__(self):
        if not self.enabled:
            return None
        return super().__enter__()

    def __exit__(self, *exc):
        if self.enabled:
            self.stop()
        return False

    @property
    def function_events(self) -> EventList:
        return self.events()

    @property
    def self_cpu_time_total(self) -> float:
        return self.events().self_cpu_time_total

    def table(self, sort_by=None, row_limit: int = 100, **options) -> str:
        return self.events().table(sort_by=sort_by, row_limit=row_limit, **options)

    def total_average(self) -> FunctionEventAvg:
        return self.events().total_average()


class emit_nvtx:
    """NVTX ranges for NVIDIA's profilers: entering one needs CUDA, so on
    this CPU-only build it raises as PyTorch's CPU build does."""

    def __init__(self, enabled: bool = True, record_shapes: bool = False):
        self.enabled = enabled
        self.record_shapes = record_shapes

    def __enter__(self):
        if self.enabled:
            raise not_compiled()
        return self

    def __exit__(self, *exc):
        return False


__all__ = [
    "EventList",
    "FunctionEvent",
    "FunctionEventAvg",
    "emit_nvtx",
    "profile",
    "record_function",
]
