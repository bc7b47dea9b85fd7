"""The files ``fusegrad.jit.save`` writes and ``load`` reads: ``fusegrad.save``
archives of a scripted object (with its extra files), told apart from
PyTorch's TorchScript archives, which hold TorchScript code fusegrad cannot run."""

from __future__ import annotations

import os
import pickle
import zipfile

from .. import serialization
from . import _deprecation


class _Saved:
    """What a file of ``jit.save`` holds: the object, and the extra files by name."""

    def __init__(self, obj, extra_files: dict):
        self.obj = obj
        self.extra_files = extra_files


def write(obj, f, extra_files: dict | None = None) -> None:
    extra = {
        name: content.encode() if isinstance(content, str) else bytes(content)
        for name, content in (extra_files or {}).items()
    }
    try:
        serialization.save(_Saved(obj, extra), f)
    except (pickle.PicklingError, AttributeError, TypeError) as error:
        raise RuntimeError(
            f"fusegrad.jit.save cannot save this {type(obj).__name__} ({error}): the file "
            "names a scripted module's class and a scripted function for load to import, "
            "so they must be defined at the top level of a module, and the module's "
            "attributes must pickle"
        ) from error


def load(f, map_location=None, _extra_files: dict | None = None):
    """What ``fusegrad.jit.save`` wrote to ``f`` (a path or a binary file).
    ``map_location`` may only name the CPU; ``_extra_files``, a dict of
    names, gets the contents saved under them, as bytes.

    Loading imports the classes and functions the file names and unpickles
    the module's attributes, which can run code of the file's choosing:
    load only files you trust. A TorchScript archive of PyTorch's
    ``torch.jit.save`` raises a RuntimeError: its program is TorchScript
    code, which only PyTorch runs.
    """
    _deprecation.warn("load")
    if _is_torchscript_archive(f):
        raise RuntimeError(
            "fusegrad cannot run TorchScript programs: this file is a TorchScript archive "
            "written by PyTorch's torch.jit.save, whose code only PyTorch's TorchScript "
            "interpreter runs; define the model in Python and load its weights instead"
        )
    saved = serialization.load(f, map_location, weights_only=False)
    if not isinstance(saved, _Saved):
        raise RuntimeError(
            "not a file written by fusegrad.jit.save (a checkpoint of torch.save or "
            "fusegrad.save loads with fusegrad.load)"
        )
    if _extra_files is not None:
        for name in _extra_files:
            if name in saved.extra_files:
                _extra_files[name] = saved.extra_files[name]
    return saved.obj


def _is_torchscript_archive(f) -> bool:
    """Whether ``f`` is a zip archive whose records include TorchScript code
    (``<archive>/code/...``), as every archive of ``torch.jit.save`` does."""
    if isinstance(f, (str, os.PathLike)):
        if not os.path.isfile(f):
            return False  # serialization.load says what is wrong with the path
        return _holds_code(f)
    position = f.tell()
    try:
        return _holds_code(f)
    finally:
        f.seek(position)


def _holds_code(f) -> bool:
    try:
        with zipfile.ZipFile(f) as archive:
            names = archive.namelist()
    except zipfile.BadZipFile:
        return False
    return any(name.split("/")[1:2] == ["code"] for name in names)
