"""``DistributedDataParallel``: a replica of a module in every process, whose
gradients are averaged over the processes during the backward pass, so that
each replica takes the step one process would take on the global batch."""

from __future__ import annotations

import contextlib

from ... import distributed as dist
from ...eager import autograd
from ...eager.creation import tensor as make_tensor
from ...eager.creation import zeros
from ...eager.grad_mode import no_grad
from ...eager.ops import cat
from ...eager.tensor import Tensor, recording
from ...ir import dtypes
from ..modules.module import Module

MB = 1024 * 1024
FIRST_BUCKET_BYTES = 1 * MB  # small, so that communication starts early in the backward
DEFAULT_BUCKET_MB = 25

UNUSED_MESSAGE = (
    "Expected to have finished reduction in the prior iteration before starting a new one. "
    "This error indicates that your module has parameters that were not used in producing "
    "loss. You can enable unused parameter detection by passing the keyword argument "
    "`find_unused_parameters=True` to `fusegrad.nn.parallel.DistributedDataParallel`. "
    "Parameter indices which did not receive grad for rank {rank}: {indices}"
)


class DistributedDataParallel(Module):
    """Wraps ``module`` (``.module``) for data-parallel training: construction
    broadcasts process 0's parameters and buffers; every forward, with
    ``broadcast_buffers``, its buffers; ``backward()`` returns with each
    parameter's ``.grad`` the average over the processes. Within
    ``no_sync()``, backward passes only accumulate into ``.grad`` (the next
    synchronized one averages what accumulated).

    Overlap: the parameters are split into buckets of about
    ``bucket_cap_mb`` (by default 25, and the first one 1 MB), in the reverse order of
    ``parameters()``, the order a backward pass roughly computes their
    gradients in. A hook on each parameter runs once its gradient is in
    ``.grad``; when a bucket's parameters all have theirs, the bucket's
    gradients are flattened and a nonblocking allreduce (the mean) starts,
    while the backward pass goes on. Buckets start in order, the same on
    every process. A callback the engine runs at the end of the backward
    waits for them and writes the averages into ``.grad``.

    Compiled: in a ``fusegrad.jit`` function the same hooks run while the
    backward is traced, where the allreduce is an equation of the trace, so
    the program averages the gradients as a step of its plan. Unlike
    PyTorch, which decides at the forward, whether a backward pass
    synchronizes is decided when it runs (a compiled program has no Python
    forward to decide in); a change of ``no_sync()`` compiles another program.

    ``find_unused_parameters``: parameters that get no gradient in a backward
    pass are reduced at its end (as zeros from this process), and one more
    allreduce tells which were used anywhere: those get the average, the
    others keep the ``.grad`` they had (compiled, that answer is a guard;
    see jit's rule for programs that communicate). Without it, a parameter
    that gets no gradient is an error.
    """

    def __init__(
        self,
        module: Module,
        device_ids=None,
        output_device=None,
        broadcast_buffers: bool = True,
        init_sync: bool = True,
        process_group=None,
        bucket_cap_mb: float | None = None,
        find_unused_parameters: bool = False,
    ):
        super().__init__()
        if device_ids is not None or output_device is not None:
            raise ValueError(
                "DistributedDataParallel device_ids and output_device arguments only work with "
                "single-device/multiple-device GPU modules or CPU modules, but got device_ids "
                f"{device_ids}, output_device {output_device}, and module parameters "
                "{device(type='cpu')}."
            )
        self.module = module
        self.process_group = dist.process_group.resolve(process_group)
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.bucket_cap_mb = DEFAULT_BUCKET_MB if bucket_cap_mb is None else bucket_cap_mb
        bucket_bytes = int(self.bucket_cap_mb * MB)
        first_bucket_bytes = FIRST_BUCKET_BYTES if bucket_cap_mb is None else bucket_bytes
        self.require_backward_grad_sync = True
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        _verify_same_model([p for _, p in named], self.process_group)
        if init_sync:
            _broadcast_coalesced(
                list(module.parameters()) + list(module.buffers()), self.process_group
            )
        self.reducer = _Reducer(self, named, (first_bucket_bytes, bucket_bytes))

    def forward(self, *inputs, **kwargs):
        self.reducer.reset()  # a backward pass that failed left no state behind
        buffers = list(self.module.buffers())
        if self.broadcast_buffers and buffers:
            _broadcast_coalesced(buffers, self.process_group)
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes within accumulate gradients locally, without communicating."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous


def _verify_same_model(params: list, group) -> None:
    """Every process has as many parameters as process 0, of the same sizes
    (checked before any bucket is built: a mismatch would pair unrelated
    gradients). Every process learns of a mismatch and raises, rather than
    wait for the others in the next collective."""
    rank = group.rank()
    for other, count in enumerate(_gathered(len(params), group)):
        if count != len(params):
            raise RuntimeError(
                f"DDP expects same model across all ranks, but Rank {rank} has {len(params)} "
                f"params, while rank {other} has inconsistent {count} params."
            )
    for sizes in (lambda p: [p.ndim], lambda p: list(p.shape)):  # the ndims decide the length
        first = make_tensor([d for p in params for d in sizes(p)], dtype=dtypes.int64)
        dist.broadcast(first, 0, group=group)
        theirs, position, mismatch = first.tolist(), 0, None
        for k, p in enumerate(params):
            mine = sizes(p)
            if mismatch is None and theirs[position : position + len(mine)] != mine:
                mismatch = k
            position += len(mine)
        matching = _gathered(int(mismatch is None), group)
        if mismatch is not None:
            raise RuntimeError(
                f"[{rank}]: params[{mismatch}] in this process with sizes "
                f"{list(params[mismatch].shape)} appears not to match sizes of the same param "
                "in process 0."
            )
        if not all(matching):
            raise RuntimeError(
                f"DDP expects same model across all ranks, but the params of rank "
                f"{matching.index(0)} do not match the sizes of rank 0's."
            )


def _gathered(value: int, group) -> list:
    """``value`` of every process, in rank order."""
    parts = [zeros(1, dtype=dtypes.int64) for _ in range(group.size())]
    dist.all_gather(parts, make_tensor([value]), group=group)
    return [int(part.item()) for part in parts]


def _broadcast_coalesced(tensors: list, group) -> None:
    """Process 0's values into these tensors: one broadcast per dtype."""
    with no_grad():
        for dtype in dict.fromkeys(t.dtype for t in tensors):
            same = [t for t in tensors if t.dtype is dtype]
            flat = cat([t.reshape(-1) for t in same])
            dist.broadcast(flat, 0, group=group)
            _scatter(flat, same)


def _scatter(flat: Tensor, tensors: list) -> None:
    """``flat``'s consecutive parts into ``tensors``, in place."""
    start = 0
    for t in tensors:
        stop = start + t.numel()
        t._commit_inplace(flat[start:stop].reshape(t.shape))
        start = stop


class _Bucket:
    """Parameters whose gradients are averaged by one allreduce."""

    def __init__(self, params: list):
        self.params = params  # [(index among the module's parameters, parameter)]
        self.ready = 0  # how many have their gradient in this backward pass
        self.flat = None  # the gradients, flattened, while they are reduced
        self.work = None

    @property
    def complete(self) -> bool:
        return self.ready == len(self.params)


class _Reducer:
    """The buckets of a DistributedDataParallel and their state during one backward pass."""

    def __init__(self, ddp: DistributedDataParallel, named: list, limits: tuple):
        self.ddp = ddp
        self.buckets = _buckets(list(enumerate(p for _, p in named)), limits)
        self.bucket_of = {id(p): bucket for bucket in self.buckets for _, p in bucket.params}
        for _, p in named:
            p.register_post_accumulate_grad_hook(self._ready)
        self.reset()

    def reset(self) -> None:
        self.running = False  # whether a backward pass is running (and queued _finish)
        self.syncing = False  # whether it averages the gradients
        self.started = 0  # buckets whose allreduce started, in order
        self.arrived: set = set()  # ids of the parameters that got a gradient
        for bucket in self.buckets:
            bucket.ready, bucket.flat, bucket.work = 0, None, None

    def _ready(self, param: Tensor) -> None:
        """A parameter's gradient is in its ``.grad``."""
        if not self.running:
            self._begin()
        if not self.syncing or id(param) in self.arrived:
            return
        self.arrived.add(id(param))
        self.bucket_of[id(param)].ready += 1
        while self.started < len(self.buckets) and self.buckets[self.started].complete:
            self._start(self.buckets[self.started])
        for bucket in self.buckets[: self.started]:
            bucket.work.is_completed()  # MPI moves the started allreduces on when asked

    def _begin(self) -> None:
        """The first gradient of a backward pass: it synchronizes unless in no_sync()."""
        self.running = True
        ddp = self.ddp
        self.syncing = ddp.require_backward_grad_sync
        trace = recording.trace
        if trace is not None:  # the program holds the allreduces or not: retrace on a change
            trace.guard_python(
                lambda: ddp.require_backward_grad_sync, "DistributedDataParallel.no_sync()"
            )
        autograd.queue_callback(self._finish)

    def _start(self, bucket: _Bucket) -> None:
        with no_grad():
            grads = [_grad_or_zeros(p) for _, p in bucket.params]
            bucket.flat = cat([g.reshape(-1) for g in grads])
        bucket.work = dist.all_reduce(
            bucket.flat, op=dist.ReduceOp.AVG, group=self.ddp.process_group, async_op=True
        )
        self.started += 1

    def _finish(self) -> None:
        """The end of the backward pass: every bucket reduced, the averages in ``.grad``."""
        try:
            if self.syncing:
                self._reduce_the_rest()
        finally:
            self.reset()

    def _reduce_the_rest(self) -> None:
        missing = sorted(
            index
            for bucket in self.buckets
            for index, p in bucket.params
            if id(p) not in self.arrived
        )
        if missing and not self.ddp.find_unused_parameters:
            for bucket in self.buckets[: self.started]:
                bucket.work.wait()
            raise RuntimeError(
                UNUSED_MESSAGE.format(
                    rank=self.ddp.process_group.rank(), indices=" ".join(map(str, missing))
                )
            )
        while self.started < len(self.buckets):
            self._start(self.buckets[self.started])
        used = self._used_anywhere() if missing else None
        with no_grad():
            for bucket in self.buckets:
                bucket.work.wait()
                self._write(bucket, used)

    def _used_anywhere(self) -> dict:
        """id(parameter) -> whether it got a gradient in some process (asked
        after the buckets: every process starts its allreduces in the same order)."""
        params = [p for bucket in self.buckets for _, p in bucket.params]
        used = make_tensor([id(p) in self.arrived for p in params])
        dist.all_reduce(used, op=dist.ReduceOp.MAX, group=self.ddp.process_group)
        return dict(zip(map(id, params), used.tolist()))

    @staticmethod
    def _write(bucket: _Bucket, used) -> None:
        start = 0
        for _, p in bucket.params:
            stop = start + p.numel()
            average = bucket.flat[start:stop].reshape(p.shape)
            start = stop
            if p.grad is not None:
                p.grad._commit_inplace(average)
            elif used is None or used[id(p)]:
                p.grad = average.clone()


def _grad_or_zeros(p: Tensor) -> Tensor:
    """What a parameter contributes: zeros when it has no gradient (find_unused_parameters)."""
    return p.grad if p.grad is not None else zeros(p.shape, dtype=p.dtype)


def _buckets(params: list, limits: tuple) -> list:
    """(index, parameter) pairs into buckets, one dtype each, in reverse
    order; a bucket closes once it holds its limit in bytes (``limits``:
    each dtype's first bucket's, then the others')."""
    first_limit, bucket_bytes = limits
    buckets: list = []
    filling: dict = {}  # dtype -> (params, bytes, limit)
    for index, p in reversed(params):
        members, size, limit = filling.get(p.dtype, ([], 0, first_limit))
        members.append((index, p))
        size += p.numel() * p.element_size()
        if size >= limit:
            buckets.append(_Bucket(members))
            members, size, limit = [], 0, bucket_bytes
        filling[p.dtype] = (members, size, limit)
    buckets += [_Bucket(members) for members, _, _ in filling.values() if members]
    return buckets
