"""``torch.nn.modules.distance``'s path: ``CosineSimilarity`` and
``PairwiseDistance``, which fusegrad keeps in activation.py."""

from .activation import (
    CosineSimilarity,
    PairwiseDistance,
)

__all__ = [
    "CosineSimilarity",
    "PairwiseDistance",
]
