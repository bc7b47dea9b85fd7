"""Eager tensors: the Tensor class, its ops, creation and indexing."""

from . import methods
