"""Parameters as one flat vector, and back."""

from __future__ import annotations

from ...eager import ops
from ...eager.tensor import Tensor


def parameters_to_vector(parameters) -> Tensor:
    """The parameters, flattened and concatenated in order."""
    return ops.cat([ops.reshape(p, (-1,)) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters) -> None:
    """Makes each parameter's data the next slice of ``vec`` (sharing its storage)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    start = 0
    for param in parameters:
        count = param.numel()
        param.data = ops.reshape(vec[start : start + count], tuple(param.shape)).data
        start += count
