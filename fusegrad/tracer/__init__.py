"""Eager tensors: the Tensor class, its ops, creation and indexing."""

from . import methods  # noqa: F401  (attaches the ops to Tensor as methods and operators)
