"""``fusegrad.nn.utils``: gradient clipping, flattening parameters to a
vector, and (``rnn``) padding and packing sequences."""

from . import rnn
from .clip_grad import clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = [
    "clip_grad_norm_",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "get_total_norm",
    "parameters_to_vector",
    "rnn",
    "vector_to_parameters",
]
