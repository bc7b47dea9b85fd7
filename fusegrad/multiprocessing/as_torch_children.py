"""Children that "spawn" starts for a program whose ``torch`` is fusegrad
(``python -m fusegrad``) get ``torch`` as fusegrad too.

Such a child imports the parent's main module again (as ``__mp_main__``)
before it runs anything of the parent's, and a script's ``import torch``
there would find PyTorch. What the child reads to prepare itself is
unpickled before that import, so when the parent's ``torch`` is fusegrad it
gets one more entry, whose unpickling installs ``fusegrad.as_torch`` in the
child.
"""

from __future__ import annotations

import multiprocessing.spawn
import sys

from .. import as_torch

_KEY = "fusegrad_as_torch"  # not one of the keys the child's preparation reads


class _InstallAsTorch:
    def __reduce__(self):
        return as_torch.install, ()


def _torch_is_fusegrad() -> bool:
    return getattr(sys.modules.get("torch"), "__name__", None) == "fusegrad"


def _with_as_torch(get_preparation_data):
    def preparation_data(name):
        data = get_preparation_data(name)
        if _torch_is_fusegrad():
            data[_KEY] = _InstallAsTorch()
        return data

    preparation_data.wraps_for_as_torch = True
    return preparation_data


def install() -> None:
    """Makes "spawn" tell children to install ``as_torch`` when the parent's
    torch is fusegrad; once, however often it is called."""
    current = multiprocessing.spawn.get_preparation_data
    if not getattr(current, "wraps_for_as_torch", False):
        multiprocessing.spawn.get_preparation_data = _with_as_torch(current)
