"""The collectives on tensors, as ``torch.distributed``'s: each changes its
tensor in place, and with ``async_op=True`` returns a ``Work`` to wait for.

A tensor that records nothing (no trace is running and no autograd graph
takes it in) is communicated from and into its own memory: a contiguous
tensor's array is MPI's buffer. Otherwise the collective is the IR's
primitive (ir/primitives.py) applied as an in-place update, so a traced
function records it, its program runs it as a step between kernels, and
gradients flow through it; it is then done before the call returns.

As with any MPI program, every process calls the same collectives in the
same order, on tensors of the same shapes; and where gradients flow through
a collective, every process differentiates through it (its backward
communicates too).
"""

from __future__ import annotations

import numpy as np

from ..eager import grad_mode
from ..eager.creation import tensor as make_tensor
from ..eager.tensor import Tensor, recording
from ..ir import primitives as P
from .process_group import ProcessGroup, ReduceOp, Work, resolve


def _check_tensor(value, name: str) -> None:
    if not isinstance(value, Tensor):
        raise TypeError(
            f"Invalid function argument. Expected parameter `{name}` of type fusegrad.Tensor "
            f"but got {type(value)} instead."
        )


def _reduction(op) -> str:
    if not isinstance(op, ReduceOp):
        raise TypeError(f"op must be a ReduceOp (fusegrad.distributed.ReduceOp.SUM...), got {op!r}")
    return op.value


def _records(*tensors: Tensor) -> bool:
    """Whether a collective on these tensors must be an operation the
    running trace or autograd sees (float16 and bfloat16 too: their values
    live in float32 arrays and are rounded by the primitive's handler)."""
    if recording.trace is not None:
        return True
    grad = grad_mode.is_grad_enabled()
    return any((grad and t._requires_grad) or t._dtype.reduced for t in tensors)


def _operand(tensor: Tensor) -> Tensor:
    """What a reduction reads: a copy of the tensor when autograd records it,
    since the reduction's backward reads its operand and the tensor is overwritten."""
    if grad_mode.is_grad_enabled() and tensor._requires_grad:
        return tensor.clone()
    return tensor


def _result(work: Work, async_op: bool):
    if async_op:
        return work
    work.wait()
    return None


def _in_place(tensor: Tensor, start) -> Work:
    """``start(array)`` (starting a collective in place on a contiguous
    array) on ``tensor``'s memory, through a contiguous copy if need be."""
    data = tensor._data
    if data.flags.c_contiguous:
        work = start(data)
    else:
        staged = np.ascontiguousarray(data)
        work = start(staged).then(lambda: np.copyto(data, staged))
    tensor._version_counter[0] += 1
    return work


def all_reduce(
    tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group: ProcessGroup | None = None, async_op=False
):
    """Every process's ``tensor`` becomes the reduction (``op``) of all of them.

    The gradient of a sum flows to every process's input (the sum of the
    cotangents), of an average likewise divided; of a maximum or minimum to
    the processes holding it (ties share it), of a product as the product
    of the others' values."""
    process_group = resolve(group)
    _check_tensor(tensor, "tensor")
    op = _reduction(op)
    P.all_reduce.shape_rule(tensor, op=op, group=process_group)
    if _records(tensor):
        tensor._check_inplace()
        tensor._commit_inplace(P.all_reduce(_operand(tensor), op=op, group=process_group))
        return Work() if async_op else None
    return _result(_in_place(tensor, lambda a: process_group.all_reduce_(a, op)), async_op)


def broadcast(tensor: Tensor, src: int, group: ProcessGroup | None = None, async_op=False):
    """Every process's ``tensor`` becomes process ``src``'s."""
    process_group = resolve(group)
    _check_tensor(tensor, "tensor")
    P.broadcast.shape_rule(tensor, src=src, group=process_group)
    if _records(tensor):
        tensor._check_inplace()
        tensor._commit_inplace(P.broadcast(tensor, src=src, group=process_group))
        return Work() if async_op else None
    return _result(_in_place(tensor, lambda a: process_group.broadcast_(a, src)), async_op)


def reduce(
    tensor: Tensor,
    dst: int,
    op: ReduceOp = ReduceOp.SUM,
    group: ProcessGroup | None = None,
    async_op=False,
):
    """Process ``dst``'s ``tensor`` becomes the reduction of every process's;
    the others' stay as they are. It communicates as ``all_reduce`` does
    (the others drop the result), so it pairs with itself whether or not a
    process records it, and has all_reduce's gradients."""
    process_group = resolve(group)
    _check_tensor(tensor, "tensor")
    op = _reduction(op)
    P.broadcast.shape_rule(tensor, src=dst, group=process_group)  # dst is a rank
    P.all_reduce.shape_rule(tensor, op=op, group=process_group)
    mine = process_group.rank() == dst
    if _records(tensor):
        tensor._check_inplace()
        reduced = P.all_reduce(_operand(tensor), op=op, group=process_group)
        # selected rather than dropped: every process's allreduce then gets a
        # cotangent (zeros but at dst), so each runs its backward's collective
        tensor._commit_inplace(P.where(make_tensor(mine), reduced, tensor))
        return Work() if async_op else None
    if mine:
        work = _in_place(tensor, lambda a: process_group.all_reduce_(a, op))
    else:
        work = process_group.all_reduce_(np.array(tensor._data, order="C"), op)
    return _result(work, async_op)


def all_gather(
    tensor_list: list, tensor: Tensor, group: ProcessGroup | None = None, async_op=False
):
    """``tensor_list[r]`` becomes process r's ``tensor``, in every process."""
    process_group = resolve(group)
    _check_tensor(tensor, "tensor")
    size = process_group.size()
    if not isinstance(tensor_list, list) or len(tensor_list) != size:
        raise ValueError(
            f"all_gather: tensor_list must be a list of one tensor per process ({size}), "
            f"got {len(tensor_list) if isinstance(tensor_list, list) else type(tensor_list)}"
        )
    for k, t in enumerate(tensor_list):
        _check_tensor(t, f"tensor_list[{k}]")
        if t.shape != tensor.shape or t.dtype is not tensor.dtype:
            raise ValueError(
                f"all_gather: tensor_list[{k}] is {t.type()}{list(t.shape)}, but the tensor "
                f"gathered is {tensor.type()}{list(tensor.shape)}"
            )
    if _records(tensor, *tensor_list):
        for t in tensor_list:
            t._check_inplace()
        gathered = P.all_gather(tensor, group=process_group)
        for k, t in enumerate(tensor_list):
            t._commit_inplace(gathered[k])
        return Work() if async_op else None
    gathered = np.empty((size, *tensor.shape), tensor._data.dtype)

    def scatter_locally():
        for t, part in zip(tensor_list, gathered):
            np.copyto(t._data, part)

    for t in tensor_list:
        t._version_counter[0] += 1
    work = process_group.all_gather_into(gathered, tensor._data).then(scatter_locally)
    return _result(work, async_op)


def all_gather_into_tensor(
    output_tensor: Tensor, input_tensor: Tensor, group: ProcessGroup | None = None, async_op=False
):
    """``output_tensor`` (world size times as many elements as
    ``input_tensor``: the inputs concatenated along the first dimension, or
    stacked) becomes every process's ``input_tensor``, in rank order."""
    process_group = resolve(group)
    _check_tensor(output_tensor, "output_tensor")
    _check_tensor(input_tensor, "input_tensor")
    size = process_group.size()
    if output_tensor.numel() != size * input_tensor.numel():
        raise ValueError("output tensor size must be equal to world_size times input tensor size")
    if output_tensor.dtype is not input_tensor.dtype:
        raise TypeError("output tensor must have the same type as input tensor")
    if _records(output_tensor, input_tensor):
        output_tensor._check_inplace()
        gathered = P.all_gather(input_tensor, group=process_group)
        output_tensor._commit_inplace(gathered.reshape(output_tensor.shape))
        return Work() if async_op else None

    def start(array):
        return process_group.all_gather_into(
            array.reshape(size, *input_tensor.shape), input_tensor._data
        )

    return _result(_in_place(output_tensor, start), async_op)
