"""``torch.profiler.profile``: records the CPU work of a block or of a
schedule's steps, and hands each finished recording to ``on_trace_ready``."""

from __future__ import annotations

import enum
import os
import socket
import time
import warnings

from . import hooks, spans
from .events import EventList, function_events


class ProfilerActivity(enum.Enum):
    CPU = 0
    XPU = 1
    MTIA = 2
    CUDA = 3
    HPU = 4
    PrivateUse1 = 5


def supported_activities() -> set:
    return {ProfilerActivity.CPU}


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0):
    """The action for each step number: ``skip_first`` steps, then cycles of
    ``wait`` steps, ``warmup`` and ``active`` ones (the last of which saves
    the recording), ``repeat`` times (0: until the profiler stops)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError("Invalid profiler schedule arguments")
    if warmup == 0:
        warnings.warn(
            "Profiler won't be using warmup, this can skew profiler results", stacklevel=2
        )
    cycle = wait + warmup + active

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if repeat and step // cycle >= repeat:
            return ProfilerAction.NONE
        place = step % cycle
        if place < wait:
            return ProfilerAction.NONE
        if place < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if place < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return action


def _always_record(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


def tensorboard_trace_handler(
    dir_name: str, worker_name: str | None = None, use_gzip: bool = False
):
    """An ``on_trace_ready`` writing each recording into ``dir_name`` as
    ``<worker>.<time in ns>.pt.trace.json``, which TensorBoard's profiler
    plugin reads (the worker: host name and process id by default)."""

    def handler(prof) -> None:
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, name))

    return handler


_recording: list = []  # the profilers recording now


class profile:
    """Records every eager operation, autograd node, optimizer step,
    compiled call (its kernels, routines and BLAS products, its tracing and
    compilation) and ``record_function`` block while active: as a context
    manager, or between ``start()`` and ``stop()``; ``step()`` moves
    through ``schedule``'s actions. A compiled call runs its program step by
    step while profiled, so that each kernel is a span of its own (a plan
    runs consecutive kernels as one native call): a tiny program's call
    takes some 100 us rather than 7. Only the CPU is profiled; ``with_modules``
    adds nothing, as in PyTorch's eager mode (it names TorchScript modules).
    ``acc_events`` keeps the events of every cycle rather than the last's."""

    def __init__(
        self,
        *,
        activities=None,
        schedule=None,
        on_trace_ready=None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        with_flops: bool = False,
        with_modules: bool = False,
        acc_events: bool = False,
    ):
        activities = set(activities) if activities is not None else supported_activities()
        for activity in sorted(activities - supported_activities(), key=lambda a: a.value):
            warnings.warn(
                f"{activity.name} is not available, disabling {activity.name} profiling",
                stacklevel=2,
            )
        self.activities = activities & supported_activities()
        if not self.activities:
            raise AssertionError("No activities specified for the profiler")
        self.schedule = schedule or _always_record
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.with_flops = with_flops
        self.with_modules = with_modules
        self.acc_events = acc_events
        self._steps_shown = schedule is not None  # PyTorch marks steps only under a schedule
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._spans: list = []
        self._origin_ns = time.perf_counter_ns()
        self._base_time_ns = time.time_ns()
        self._step_span = None
        self._events = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self) -> None:
        self.step_num = 0
        self.current_action = self.schedule(0)
        self._change(ProfilerAction.NONE, self.current_action)

    def stop(self) -> None:
        self._change(self.current_action, None)
        self.current_action = ProfilerAction.NONE  # stopping again does nothing

    def step(self) -> None:
        before = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        self._change(before, self.current_action)

    def _change(self, before, after) -> None:
        was, will = before in _RECORDING, after in _RECORDING
        if was and (not will or before is ProfilerAction.RECORD_AND_SAVE):
            self._end_recording()
            was = False
        if will and not was:
            self._begin_recording()
        elif was and will and self._steps_shown:
            spans.end(self._step_span)
            self._step_span = spans.begin(f"ProfilerStep#{self.step_num}", "user_annotation")

    def _begin_recording(self) -> None:
        if not (self.acc_events and self._spans):
            self._spans = []
            self._origin_ns = time.perf_counter_ns()
            self._base_time_ns = time.time_ns()
        self._events = None
        if not _recording:
            hooks.install()
        _recording.append(self)
        spans.collections.append(self._spans)
        _set_options()
        if self._steps_shown:
            self._step_span = spans.begin(f"ProfilerStep#{self.step_num}", "user_annotation")

    def _end_recording(self) -> None:
        if self._step_span is not None:
            spans.end(self._step_span)
            self._step_span = None
        spans.collections.remove(self._spans)
        _recording.remove(self)
        _set_options()
        if not _recording:
            hooks.uninstall()
        self._events = None
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def events(self) -> EventList:
        if self._events is None:
            self._events = function_events(self._spans, self._origin_ns)
        return self._events

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0):
        return self.events().key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path: str) -> None:
        self.events().export_chrome_trace(path, self._base_time_ns)


def _set_options() -> None:
    spans.options["shapes"] = any(p.record_shapes for p in _recording)
    spans.options["memory"] = any(p.profile_memory for p in _recording)
    spans.options["stack"] = any(p.with_stack for p in _recording)
    spans.options["flops"] = any(p.with_flops for p in _recording)
