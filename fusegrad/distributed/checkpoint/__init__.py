"""``torch.distributed.checkpoint``: saving and loading a state dict
(nested dicts of tensors and values) as a checkpoint directory, for state
whole in every process: fusegrad shards no tensor across processes, so the
directory holds one file, written by ``fusegrad.save`` (by the first
process alone when a process group is running), which every process reads.
It is not PyTorch's file format: a checkpoint PyTorch wrote is refused by
name. ``load`` fills the given state dict in place, as PyTorch's does:
tensors are copied into, other values replaced."""

from __future__ import annotations

import os

from ...eager.grad_mode import no_grad
from ...eager.tensor import Tensor
from ...serialization import load as _load_file
from ...serialization import save as _save_file
from .. import process_group as _groups
from . import state_dict

__all__ = ["FileSystemReader", "FileSystemWriter", "load", "save", "state_dict"]

_FILE = "fusegrad_state_dict.pt"


class FileSystemWriter:
    """Where ``save`` writes: the directory ``path``."""

    def __init__(self, path, *args, **kwargs):
        self.path = os.fspath(path)


class FileSystemReader:
    """Where ``load`` reads: the directory ``path``."""

    def __init__(self, path, *args, **kwargs):
        self.path = os.fspath(path)


def _directory(checkpoint_id, storage) -> str:
    if storage is not None:
        return storage.path
    if checkpoint_id is None:
        raise RuntimeError("checkpoint_id and the storage reader/writer cannot both be None")
    return os.fspath(checkpoint_id)


def save(
    state_dict,
    *,
    checkpoint_id=None,
    storage_writer=None,
    planner=None,
    process_group=None,
    no_dist=False,
):
    directory = _directory(checkpoint_id, storage_writer)
    in_group = not no_dist and _groups.is_initialized()
    if not in_group or _groups.get_rank() == 0:
        os.makedirs(directory, exist_ok=True)
        _save_file(state_dict, os.path.join(directory, _FILE))
    if in_group:  # the others read it only once it is written
        _groups.barrier()


def load(
    state_dict,
    *,
    checkpoint_id=None,
    storage_reader=None,
    planner=None,
    process_group=None,
    no_dist=False,
) -> None:
    directory = _directory(checkpoint_id, storage_reader)
    path = os.path.join(directory, _FILE)
    if not os.path.exists(path):
        raise RuntimeError(
            f"torch.distributed.checkpoint.load: {directory} holds no checkpoint fusegrad "
            f"wrote (no {_FILE}); fusegrad cannot read the format of PyTorch's distributed "
            "checkpoints"
        )
    with no_grad():
        _fill(state_dict, _load_file(path), "")


def _fill(target: dict, saved: dict, prefix: str) -> None:
    for key, value in target.items():
        if key not in saved:
            raise RuntimeError(f"Missing key in checkpoint state_dict: {prefix}{key}.")
        if isinstance(value, dict):
            _fill(value, saved[key], f"{prefix}{key}.")
        elif isinstance(value, Tensor):
            value.copy_(saved[key])
        else:
            target[key] = saved[key]
