"""The collectives on picklable Python objects (``broadcast_object_list``,
``all_gather_object``, ``gather_object``, ``scatter_object_list``) and
``gather`` of tensors, over the process group's array collectives: an
object travels as its pickle's bytes, after their lengths (a process
cannot receive bytes it does not know the number of).

A gather is an all-gather whose other processes drop the result, as
``reduce`` is an all-reduce: MPI's collective is the same on every process.
Every process calls these with the same root, as with any collective."""

from __future__ import annotations

import pickle

import numpy as np

from ..eager.tensor import Tensor
from .process_group import Work, resolve


def _pickled(obj) -> np.ndarray:
    return np.frombuffer(pickle.dumps(obj), np.uint8)


def _root(process_group, rank, group_rank, name: str) -> int:
    """The root rank of a collective: ``rank`` or, within the group, ``group_rank`` (default 0)."""
    if rank is not None and group_rank is not None:
        raise ValueError(f"Can not specify both {name} and group_{name}")
    root = group_rank if rank is None else rank
    root = 0 if root is None else root
    if not 0 <= root < process_group.size():
        raise RuntimeError(f"fusegrad.distributed: invalid root rank: {root}")
    return root


def _all_gathered_objects(process_group, obj) -> list:
    data = _pickled(obj)
    lengths = process_group.all_gather(np.array([data.size], np.int64))[:, 0]
    padded = np.zeros(int(lengths.max()), np.uint8)
    padded[: data.size] = data
    rows = process_group.all_gather(padded)
    return [pickle.loads(row[:length].tobytes()) for row, length in zip(rows, lengths)]


def _broadcast_object(process_group, obj, src: int):
    mine = process_group.rank() == src
    data = _pickled(obj) if mine else None
    length = process_group.broadcast(np.array([0 if data is None else data.size]), src)[0]
    received = process_group.broadcast(data if mine else np.zeros(length, np.uint8), src)
    return obj if mine else pickle.loads(received.tobytes())


def _check_gather_list(gather_list, mine: bool, size: int, what: str) -> None:
    if mine and gather_list is None:
        raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
    if not mine and gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    if mine and len(gather_list) != size:
        raise ValueError(
            f"{what}: gather_list has {len(gather_list)} entries; it takes one per process ({size})"
        )


def broadcast_object_list(object_list: list, src=None, group=None, device=None, group_src=None):
    """Every process's ``object_list`` becomes process ``src``'s, in place."""
    process_group = resolve(group)
    root = _root(process_group, src, group_src, "src")
    object_list[:] = _broadcast_object(process_group, list(object_list), root)


def all_gather_object(object_list: list, obj, group=None) -> None:
    """``object_list[r]`` becomes process r's ``obj``, in every process."""
    process_group = resolve(group)
    for rank, gathered in enumerate(_all_gathered_objects(process_group, obj)):
        object_list[rank] = gathered


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None) -> None:
    """On process ``dst``, ``object_gather_list[r]`` becomes process r's ``obj``."""
    process_group = resolve(group)
    mine = process_group.rank() == _root(process_group, dst, group_dst, "dst")
    _check_gather_list(object_gather_list, mine, process_group.size(), "gather_object")
    gathered = _all_gathered_objects(process_group, obj)
    if mine:
        object_gather_list[:] = gathered


def scatter_object_list(
    scatter_object_output_list: list,
    scatter_object_input_list=None,
    src=None,
    group=None,
    group_src=None,
) -> None:
    """``scatter_object_output_list[0]`` becomes element r of process
    ``src``'s ``scatter_object_input_list``, in process r."""
    process_group = resolve(group)
    root = _root(process_group, src, group_src, "src")
    if not isinstance(scatter_object_output_list, list) or not scatter_object_output_list:
        raise ValueError(
            "Expected argument scatter_object_output_list to be a list of size at least 1."
        )
    size = process_group.size()
    if process_group.rank() == root and len(scatter_object_input_list) != size:
        raise ValueError(
            f"scatter_object_list: the input list has {len(scatter_object_input_list)} "
            f"objects; it takes one per process ({size})"
        )
    objects = _broadcast_object(process_group, scatter_object_input_list, root)
    scatter_object_output_list[0] = objects[process_group.rank()]


def gather(tensor: Tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """On process ``dst``, ``gather_list[r]`` becomes process r's ``tensor``.
    As PyTorch's, it is not differentiable."""
    process_group = resolve(group)
    mine = process_group.rank() == _root(process_group, dst, group_dst, "dst")
    _check_gather_list(gather_list, mine, process_group.size(), "gather")
    if mine:
        for t in gather_list:
            if t.shape != tensor.shape or t.dtype is not tensor.dtype:
                raise ValueError(
                    f"gather: gather_list holds a {t.type()}{list(t.shape)}, but the tensor "
                    f"gathered is {tensor.type()}{list(tensor.shape)}"
                )
    gathered = process_group.all_gather(np.ascontiguousarray(tensor._data))
    if mine:
        for t, part in zip(gather_list, gathered):
            np.copyto(t._data, part)
            t._version_counter[0] += 1
    return Work() if async_op else None


def get_default_backend_for_device(device) -> str:
    """The backend for collectives on ``device``'s tensors: "mpi" for the
    CPU, fusegrad's only device and backend."""
    device_type = str(getattr(device, "type", device)).partition(":")[0]
    if device_type != "cpu":
        raise RuntimeError(
            f"fusegrad.distributed has no backend for {device_type!r} tensors: its one "
            "backend, 'mpi', communicates CPU tensors"
        )
    return "mpi"
