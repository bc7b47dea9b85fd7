"""Pytrees: nested containers flattened to a list of leaves and a ``TreeSpec``
that rebuilds them, under PyTorch's names (``torch.utils._pytree``), which
public code imports directly.

Tuples, lists, dicts (in insertion order), OrderedDicts, defaultdicts,
deques, namedtuples and ``Size`` are nodes; anything else (None too, as in
PyTorch 2.13) is a leaf. ``register_pytree_node`` adds a node type.

>>> leaves, spec = tree_flatten({"a": (1, 2), "b": [3]})
>>> leaves
[1, 2, 3]
>>> tree_unflatten([x * 10 for x in leaves], spec)
{'a': (10, 20), 'b': [30]}
"""

from __future__ import annotations

import collections
from typing import NamedTuple

from ..eager.tensor import Size


class NodeDef(NamedTuple):
    flatten_fn: object  # node -> (children, context)
    unflatten_fn: object  # (children, context) -> node


SUPPORTED_NODES: dict = {}


def register_pytree_node(
    cls,
    flatten_fn,
    unflatten_fn,
    *,
    serialized_type_name=None,
    to_dumpable_context=None,
    from_dumpable_context=None,
    flatten_with_keys_fn=None,
) -> None:
    """Makes instances of ``cls`` nodes: ``flatten_fn(node)`` gives (children,
    context), ``unflatten_fn(children, context)`` the node again. (The
    serialization and key-path arguments are accepted for PyTorch's callers;
    nothing here serializes specs.)"""
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    SUPPORTED_NODES[cls] = NodeDef(flatten_fn, unflatten_fn)


register_pytree_node(tuple, lambda t: (list(t), None), lambda children, _: tuple(children))
register_pytree_node(list, lambda t: (list(t), None), lambda children, _: list(children))
register_pytree_node(Size, lambda t: (list(t), None), lambda children, _: Size(children))
register_pytree_node(
    dict, lambda d: (list(d.values()), list(d)), lambda children, keys: dict(zip(keys, children))
)
register_pytree_node(
    collections.OrderedDict,
    lambda d: (list(d.values()), list(d)),
    lambda children, keys: collections.OrderedDict(zip(keys, children)),
)
register_pytree_node(
    collections.defaultdict,
    lambda d: (list(d.values()), [d.default_factory, list(d)]),
    lambda children, context: collections.defaultdict(context[0], zip(context[1], children)),
)
register_pytree_node(
    collections.deque,
    lambda d: (list(d), d.maxlen),
    lambda children, maxlen: collections.deque(children, maxlen=maxlen),
)


class _NamedTuple:
    """The node type namedtuples share: their specs say ``namedtuple``, their
    context is the class."""


def _is_namedtuple(node) -> bool:
    return isinstance(node, tuple) and hasattr(type(node), "_fields")


register_pytree_node(
    _NamedTuple, lambda t: (list(t), type(t)), lambda children, cls: cls(*children)
)


def _node_type(node):
    """The registered type ``node`` flattens as, or None for a leaf."""
    cls = type(node)
    if cls in SUPPORTED_NODES:
        return cls
    return _NamedTuple if _is_namedtuple(node) else None


class TreeSpec:
    """A pytree's structure: its node's type and context (dict keys, a
    namedtuple's class) and its children's specs."""

    def __init__(self, type, context, children_specs: list):
        self.type = type
        self.context = context
        self.children_specs = children_specs
        self.num_children = len(children_specs)
        self.num_leaves = sum(c.num_leaves for c in children_specs)
        self.num_nodes = 1 + sum(c.num_nodes for c in children_specs)

    def is_leaf(self) -> bool:
        return self.type is None

    def unflatten(self, leaves):
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(
                f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec "
                f"refers to a pytree that holds {self.num_leaves} items ({self})."
            )
        return self._build(iter(leaves))

    def _build(self, leaves):
        if self.is_leaf():
            return next(leaves)
        children = [child._build(leaves) for child in self.children_specs]
        return SUPPORTED_NODES[self.type].unflatten_fn(children, self.context)

    def flatten_up_to(self, tree) -> list:
        """``tree``'s subtrees where this spec has leaves; ``tree`` must have
        this spec's structure above them."""
        subtrees: list = []
        self._take(tree, subtrees)
        return subtrees

    def _take(self, tree, subtrees: list) -> None:
        if self.is_leaf():
            subtrees.append(tree)
            return
        node_type = _node_type(tree)
        if node_type is not self.type:
            raise ValueError(
                f"Node type mismatch; expected {_type_name(self.type)}, "
                f"but got {type(tree) if node_type is None else _type_name(node_type)}."
            )
        children, context = SUPPORTED_NODES[node_type].flatten_fn(tree)
        if len(children) != self.num_children:
            raise ValueError(
                f"Node arity mismatch; expected {self.num_children}, but got {len(children)}."
            )
        if context != self.context:
            raise ValueError(
                f"Node context mismatch for node type {_type_name(self.type)}; "
                f"expected {self.context!r}, but got {context!r}."
            )
        for child, spec in zip(children, self.children_specs):
            spec._take(child, subtrees)

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, TreeSpec)
            and self.type is other.type
            and self.context == other.context
            and self.children_specs == other.children_specs
        )

    def __repr__(self) -> str:
        if self.is_leaf():
            return "*"
        children = ", ".join(repr(c) for c in self.children_specs)
        return f"TreeSpec({_type_name(self.type)}, {self.context!r}, [{children}])"


class LeafSpec(TreeSpec):
    def __init__(self):
        super().__init__(None, None, [])
        self.num_leaves = 1


def _type_name(node_type) -> str:
    return "namedtuple" if node_type is _NamedTuple else node_type.__name__


def tree_flatten(tree, is_leaf=None) -> tuple:
    """(the leaves, left to right, and the ``TreeSpec`` that rebuilds ``tree``
    from them). ``is_leaf(node)`` true makes ``node`` a leaf."""
    leaves: list = []
    return leaves, _flatten(tree, leaves, is_leaf)


def _flatten(tree, leaves: list, is_leaf) -> TreeSpec:
    node_type = None if is_leaf is not None and is_leaf(tree) else _node_type(tree)
    if node_type is None:
        leaves.append(tree)
        return LeafSpec()
    children, context = SUPPORTED_NODES[node_type].flatten_fn(tree)
    return TreeSpec(node_type, context, [_flatten(c, leaves, is_leaf) for c in children])


def tree_unflatten(leaves, treespec: TreeSpec):
    if not isinstance(treespec, TreeSpec):
        raise TypeError(
            "tree_unflatten(leaves, treespec): Expected `treespec` to be instance of "
            f"TreeSpec but got item of type {type(treespec)}."
        )
    return treespec.unflatten(leaves)


def tree_leaves(tree, is_leaf=None) -> list:
    return tree_flatten(tree, is_leaf)[0]


def tree_iter(tree, is_leaf=None):
    return iter(tree_leaves(tree, is_leaf))


def tree_structure(tree, is_leaf=None) -> TreeSpec:
    return tree_flatten(tree, is_leaf)[1]


def tree_map(func, tree, *rests, is_leaf=None):
    """``tree`` with each leaf ``x`` replaced by ``func(x, *ys)``, the ``ys``
    the subtrees of ``rests`` (of ``tree``'s structure) at that leaf."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [spec.flatten_up_to(r) for r in rests]
    return spec.unflatten(func(*xs) for xs in zip(leaves, *others))


def _of_types(type_or_types, func):
    def apply(x):
        return func(x) if isinstance(x, type_or_types) else x

    return apply


def tree_map_only(type_or_types, func, tree, is_leaf=None):
    """``tree_map`` of ``func`` over the leaves of the given type(s) only."""
    return tree_map(_of_types(type_or_types, func), tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None) -> bool:
    return all(pred(x) for x in tree_leaves(tree, is_leaf))


def tree_any(pred, tree, is_leaf=None) -> bool:
    return any(pred(x) for x in tree_leaves(tree, is_leaf))


class _Star:
    def __repr__(self) -> str:
        return "*"


def treespec_pprint(treespec: TreeSpec) -> str:
    """The structure written as the containers it describes, leaves as ``*``:
    ``{'p': *, 'q': (*,)}``."""
    return repr(treespec.unflatten([_Star()] * treespec.num_leaves))


__all__ = [
    "LeafSpec",
    "TreeSpec",
    "register_pytree_node",
    "tree_all",
    "tree_any",
    "tree_flatten",
    "tree_iter",
    "tree_leaves",
    "tree_map",
    "tree_map_only",
    "tree_structure",
    "tree_unflatten",
    "treespec_pprint",
]
