"""``torch.nn.modules.utils``'s helpers that layer code imports by this path:
``_pair(3) == (3, 3)``, ``_pair((1, 2)) == (1, 2)``, and their kin."""

from __future__ import annotations

import collections.abc
import itertools


def _ntuple(n: int, name: str = "parse"):
    """A function making an argument an n-tuple: an iterable as a tuple of
    its items, anything else repeated n times."""

    def parse(x):
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return tuple(itertools.repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")
