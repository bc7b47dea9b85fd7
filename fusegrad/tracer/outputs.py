"""A traced function's result: flattened to the tensors a program outputs,
and built again from a run's output tensors."""

from __future__ import annotations

from ..eager.complex_tensor import ComplexTensor
from ..eager.sparse import SparseTensor
from ..eager.tensor import Tensor
from .numbers import TracedFloat, TracedNumber


def flatten_output(value, tensors: list):
    if isinstance(value, Tensor):
        if value.is_sparse:  # returned as its indices and values
            tensors += (value._indices(), value._values_t)
            return ("sparse", value.shape, value.is_coalesced())
        if isinstance(value, ComplexTensor):  # returned as its pair
            tensors.append(value._pair)
            return ("complex",)
        tensors.append(value)
        return ("tensor",)
    if isinstance(value, TracedNumber):  # an output, returned as a Python number
        tensors.append(value.tensor)
        return ("number", float if isinstance(value, TracedFloat) else int)
    if isinstance(value, (tuple, list)):
        return (type(value), tuple(flatten_output(v, tensors) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, flatten_output(v, tensors)) for k, v in value.items()))
    return ("value", value)


def unflattener(tree, count=None, hidden=0):
    """A function building the output's structure from the flat output
    tensors, made once per program rather than walking the tree per call;
    with ``hidden`` outputs (what the function stored, after the ``count``
    it returned), from the first ``count``."""
    if hidden:
        build = unflattener(tree)
        return lambda tensors: build(tensors[:count])
    kind = tree[0]
    if kind == "tensor":
        return lambda tensors: tensors[0]
    if kind == "number":
        return lambda tensors: tree[1](tensors[0]._data)
    if kind == "value":
        return lambda tensors: tree[1]
    if kind == "sparse":
        return lambda tensors: SparseTensor._of(tensors[0], tensors[1], tree[1], tree[2])
    if kind == "complex":
        return lambda tensors: ComplexTensor._of(tensors[0])
    parts, start = [], 0
    for sub in tree[1] if kind != "dict" else (v for _, v in tree[1]):
        count = _tensor_count(sub)
        parts.append((unflattener(sub), start, start + count))
        start += count
    if kind == "dict":
        keys = [k for k, _ in tree[1]]
        return lambda tensors: {k: build(tensors[a:b]) for k, (build, a, b) in zip(keys, parts)}
    if all(sub == ("tensor",) for sub in tree[1]) and not hasattr(kind, "_fields"):
        return kind  # a flat tuple or list of tensors
    if hasattr(kind, "_fields"):
        return lambda tensors: kind(*[build(tensors[a:b]) for build, a, b in parts])
    return lambda tensors: kind([build(tensors[a:b]) for build, a, b in parts])


def _tensor_count(tree) -> int:
    kind = tree[0]
    if kind in ("tensor", "number", "complex"):
        return 1
    if kind == "sparse":
        return 2
    if kind == "value":
        return 0
    subtrees = (v for _, v in tree[1]) if kind == "dict" else tree[1]
    return sum(_tensor_count(sub) for sub in subtrees)


def plain(value):
    """A traced function's result with its traced numbers as their values."""
    if isinstance(value, TracedNumber):
        return value.value
    if isinstance(value, (tuple, list)) and not isinstance(value, Tensor):
        items = [plain(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value
