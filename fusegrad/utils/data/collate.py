"""How a DataLoader turns a list of samples into a batch: ``default_collate``
stacks tensors, numpy arrays and numbers into tensors and recurses into dicts,
tuples and lists; ``default_convert`` (no batching) only converts numpy arrays."""

from __future__ import annotations

import collections.abc
import copy
import re

import numpy as np

from ...eager.creation import as_tensor, tensor
from ...eager.ops import stack
from ...eager.tensor import Tensor
from ...ir import dtypes

# numpy dtypes of strings and objects, which make no tensor
_STRINGS_OR_OBJECTS = re.compile(r"[SaUO]")
_ERROR = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)


def default_collate(batch: list):
    """A batch from a list of samples of one structure.

    >>> import fusegrad
    >>> default_collate([(fusegrad.tensor([1.0, 2.0]), 0), (fusegrad.tensor([3.0, 4.0]), 1)])
    [tensor([[1., 2.],
            [3., 4.]]), tensor([0, 1])]
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(batch, 0)
    if isinstance(elem, np.ndarray):
        if _STRINGS_OR_OBJECTS.search(elem.dtype.str) is not None:
            raise TypeError(_ERROR.format(elem.dtype))
        return default_collate([as_tensor(b) for b in batch])
    if isinstance(elem, (np.bool_, np.number, np.object_)):
        return as_tensor(np.array(batch))
    if isinstance(elem, float):
        return tensor(batch, dtype=dtypes.float64)
    if isinstance(elem, int):
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: default_collate([sample[key] for sample in batch]) for key in elem}
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)
                clone.update(collated)
                return clone
            return type(elem)(collated)
        except TypeError:  # a mapping type that cannot be made from a dict
            return collated
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple
        return type(elem)(*(default_collate(list(samples)) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(sample) != size for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [default_collate(list(samples)) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        try:
            if isinstance(elem, collections.abc.MutableSequence):
                clone = copy.copy(elem)
                clone[:] = columns
                return clone
            return type(elem)(columns)
        except TypeError:
            return columns
    raise TypeError(_ERROR.format(type(elem)))


def default_convert(data):
    """Numpy arrays and scalars in ``data`` (recursing into containers) as
    tensors; everything else as it is."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray):
        if _STRINGS_OR_OBJECTS.search(data.dtype.str) is not None:
            return data
        return as_tensor(data)
    if isinstance(data, (np.bool_, np.number)):
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        converted = {key: default_convert(data[key]) for key in data}
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update(converted)
                return clone
            return type(data)(converted)
        except TypeError:
            return converted
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        converted = [default_convert(d) for d in data]
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                clone[:] = converted
                return clone
            return type(data)(converted)
        except TypeError:
            return converted
    return data
