"""Eager tensors: the Tensor class, its ops, creation, indexing and random sampling."""

from . import methods, plain, random
