"""Eager tensors: the Tensor class, its ops, creation, indexing and random
sampling, and the autograd engine that differentiates them op by op."""

from . import methods, plain, random
