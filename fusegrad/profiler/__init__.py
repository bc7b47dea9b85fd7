"""``fusegrad.profiler`` (``torch.profiler``): where a program's CPU time
goes, by operation, autograd node, optimizer step, compiled call and its
kernels, as PyTorch's profiler shows it (``key_averages().table()``, a
Chrome trace). Nothing is recorded, and nothing costs, while no profiler
is active."""

from .profiler import (
    ProfilerAction,
    ProfilerActivity,
    profile,
    schedule,
    supported_activities,
    tensorboard_trace_handler,
)
from .spans import record_function

__all__ = [
    "ProfilerAction",
    "ProfilerActivity",
    "profile",
    "record_function",
    "schedule",
    "supported_activities",
    "tensorboard_trace_handler",
]
