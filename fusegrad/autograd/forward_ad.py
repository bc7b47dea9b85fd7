"""Forward-mode automatic differentiation (``torch.autograd.forward_ad``).

A dual tensor is a tensor with a tangent at a dual level: ``make_dual``
gives one, ``unpack_dual`` reads it. While a level is active every eager
primitive gives its output a tangent, at each level where an input has one
(``eager_bind`` calls ``propagate``), by the primitive's JVP rules
(``Primitive.defjvp``): an explicit rule, the VJP rule of an elementwise
primitive, the primitive itself for a linear one, else the transpose of
its VJP rule. Tangents are computed with ordinary operations, so reverse
mode records them and outer levels differentiate them.

Levels nest (``torch.func.jvp`` inside another): while the tangent at a
level is computed, that level and those inside it are hidden, so a level's
tangent carries tangents of the levels outside it only, and the levels are
done outermost first, so a rule reading the output sees its outer
tangents. A tangent is kept under its level's key, new for every level
entered, so a level exited never lends its tangents to a later one.
"""

from __future__ import annotations

import itertools
import sys
import weakref
from collections import namedtuple

from ..eager import grad_mode
from ..eager import tensor as eager_tensor
from ..eager.autograd import grad as autograd_grad
from ..eager.creation import ones, zeros_like
from ..eager.tensor import Tensor
from ..ir import primitives as P

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])


class _Level:
    __slots__ = ("key", "duals")

    def __init__(self, key: int):
        self.key = key
        # weak references to the tensors make_dual gave a tangent here, whose
        # tangents go with the level (others computed from them keep a
        # tangent of a key no level has, until they are freed)
        self.duals: list = []


_keys = itertools.count()
_levels: list = []  # the active levels, outermost first
_visible = [0]  # how many of the outermost levels propagate tangents now


def enter_dual_level() -> int:
    """Enters a new dual level (inside the active ones) and returns it."""
    _levels.append(_Level(next(_keys)))
    _visible[0] = len(_levels)
    eager_tensor.dual_levels = sys.modules[__name__]
    return len(_levels) - 1


def exit_dual_level(*, level=None) -> None:
    """Exits the innermost dual level; its tangents are gone."""
    if not _levels:
        raise RuntimeError("Trying to exit a forward AD level but no level exists.")
    if level is not None and level != len(_levels) - 1:
        raise RuntimeError(
            "Trying to exit a forward AD level that was not the last one that was created. "
            "This is not supported."
        )
    level = _levels.pop()
    for ref in level.duals:
        tensor = ref()
        if tensor is not None and tensor._tangents:
            tensor._tangents = {k: t for k, t in tensor._tangents.items() if k != level.key}
    _visible[0] = len(_levels)
    if not _levels:
        eager_tensor.dual_levels = None


class dual_level:
    """A context manager entering a dual level.

    >>> import fusegrad
    >>> import fusegrad.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     x = fwAD.make_dual(fusegrad.tensor([1.0, 2.0]), fusegrad.ones(2))
    ...     fwAD.unpack_dual(x * x).tangent
    tensor([2., 4.])
    """

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc) -> None:
        exit_dual_level()


def _level_at(level, api: str) -> _Level:
    if not _levels:  # unpack_dual answers (tensor, None) without asking
        raise RuntimeError(
            "Trying to create a dual Tensor for forward AD but no level exists, make sure to "
            "enter_dual_level() first."
        )
    if level is None:
        return _levels[-1]
    if not (isinstance(level, int) and 0 <= level < len(_levels)):
        raise RuntimeError(f"Invalid level given to _{api}")
    return _levels[level]


def make_dual(tensor: Tensor, tangent: Tensor, *, level=None) -> Tensor:
    """A view of ``tensor`` with ``tangent`` as its tangent at ``level``
    (the innermost by default); its tangents at other levels are kept."""
    found = _level_at(level, "make_dual")
    for what, t in (("primal", tensor), ("tangent", tangent)):
        if not t.dtype.is_floating_point:
            raise ValueError(f"Expected {what} to be floating point or complex, but got: {t.dtype}")
    if tangent.shape != tensor.shape:
        raise RuntimeError(
            "Trying to set a forward gradient that has a different size than that of the "
            f"original Tensor, this is not supported. Tensor is of size {list(tensor.shape)} "
            f"while the given forward gradient is of size {list(tangent.shape)}."
        )
    if tangent.dtype is not tensor.dtype:
        tangent = P.convert(tangent, dtype=tensor.dtype)
    dual = _alias(tensor)
    _set_tangent(dual, found, tangent)
    found.duals.append(weakref.ref(dual))
    return dual


def unpack_dual(tensor: Tensor, *, level=None) -> UnpackedDualTensor:
    """``(primal, tangent)``: a view of ``tensor`` without its tangent at
    ``level`` (the innermost by default), and that tangent (None without one)."""
    if not _levels:
        return UnpackedDualTensor(tensor, None)
    found = _level_at(level, "unpack_dual")
    tangent = tensor._tangents.get(found.key) if tensor._tangents else None
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    primal = _alias(tensor)
    primal._tangents = {k: t for k, t in tensor._tangents.items() if k != found.key}
    return UnpackedDualTensor(primal, tangent)


def _alias(tensor: Tensor) -> Tensor:
    """A differentiable view of ``tensor`` with its tangents (none added here)."""
    visible, _visible[0] = _visible[0], 0
    try:
        alias = P.reshape(tensor, shape=tuple(tensor.shape))
    finally:
        _visible[0] = visible
    alias._tangents = tensor._tangents
    return alias


def _set_tangent(tensor: Tensor, level: _Level, tangent: Tensor) -> None:
    # a new dict: a tensor made from another (an alias, a saved output) may share its dict
    tangents = dict(tensor._tangents) if tensor._tangents else {}
    tangents[level.key] = tangent
    tensor._tangents = tangents


def propagate(prim, args: tuple, params: dict, out: Tensor) -> None:
    """Gives ``out`` (``prim`` applied to ``args``) its tangent at each
    visible level where an input has one, outermost first."""
    if not _visible[0] or not out._dtype.is_floating_point:
        return
    for a in args:
        if a._tangents:
            break
    else:
        return
    for depth in range(_visible[0]):
        level = _levels[depth]
        tangents = [a._tangents.get(level.key) if a._tangents else None for a in args]
        if all(t is None for t in tangents):
            continue
        visible, _visible[0] = _visible[0], depth
        try:
            tangent = _tangent_of(prim, args, params, out, tangents)
        finally:
            _visible[0] = visible
        if tangent is not None:
            _set_tangent(out, level, tangent)
    node = out.grad_fn
    if node is not None and node.saved_out is not None:
        node.saved_tangents = out._tangents


def commit_inplace(tensor: Tensor, result: Tensor) -> None:
    """``tensor`` took ``result``'s value in place: at each visible level its
    tangent takes ``result``'s (zeros without one), written into the tangent
    it had, as PyTorch does, so views of that tangent see the change."""
    for depth in range(_visible[0]):
        level = _levels[depth]
        new = result._tangents.get(level.key) if result._tangents else None
        old = tensor._tangents.get(level.key) if tensor._tangents else None
        if old is None or not _writable(old):
            if new is not None:
                _set_tangent(tensor, level, new)
            continue
        visible, _visible[0] = _visible[0], depth
        try:
            old._commit_inplace(zeros_like(old) if new is None else new)
        finally:
            _visible[0] = visible


def _writable(tangent: Tensor) -> bool:
    """Whether a tangent can change in place: its own memory, not a leaf
    reverse mode differentiates."""
    return tangent._data.flags.writeable and not (tangent.is_leaf and tangent.requires_grad)


def give_custom_tangents(jvp, ctx, args: tuple, outputs: list) -> None:
    """Gives a custom Function's outputs their tangents by its ``jvp``
    (``ctx`` and a tangent per input, zeros for a tensor without one: a
    tangent per output), at each visible level where an input has one, in
    place of what its forward's operations computed."""
    for depth in range(_visible[0]):
        level = _levels[depth]
        tangents = [
            a._tangents.get(level.key) if isinstance(a, Tensor) and a._tangents else None
            for a in args
        ]
        if all(t is None for t in tangents):
            continue
        tangents = [
            zeros_like(a) if t is None and isinstance(a, Tensor) else t
            for a, t in zip(args, tangents)
        ]
        visible, _visible[0] = _visible[0], depth
        try:
            result = jvp(ctx, *tangents)
        finally:
            _visible[0] = visible
        for out, tangent in zip(outputs, result if isinstance(result, tuple) else (result,)):
            if isinstance(out, Tensor) and tangent is not None:
                _set_tangent(out, level, tangent)


def _tangent_of(prim, args: tuple, params: dict, out: Tensor, tangents: list):
    """The output's tangent from the inputs' (None where an input has none),
    or None when no input with a tangent is differentiable."""
    if all(t is None or not _carries_tangent(prim, i) for i, t in enumerate(tangents)):
        return None
    if prim.linear:  # inputs without a rule (indices, where a pooling looks) stay
        operands = [
            a if prim.rule_for(i) is None else (zeros_like(a) if t is None else t)
            for i, (a, t) in enumerate(zip(args, tangents))
        ]
        return _in_output_form(prim(*operands, **params), out)
    total = None
    for i, t in enumerate(tangents):
        if t is None or not _carries_tangent(prim, i):
            continue
        part = _contribution(prim, i, args, params, out, t)
        if part is not None:
            part = _in_output_form(part, out)
            total = part if total is None else total + part
    if total is not None and any(total is t for t in tangents):
        # x + c: a tangent of its own, which an in-place change of it may write
        total = P.convert(total, dtype=total._dtype)
    return total


def _carries_tangent(prim, i: int) -> bool:
    """Whether input ``i`` is differentiable in forward mode: it has a VJP
    rule, or a JVP rule alone (``forward_only``, reverse mode's detach)."""
    return prim.rule_for(i) is not None or prim.jvp_rule_for(i) is not None


def _contribution(prim, i: int, args: tuple, params: dict, out: Tensor, t: Tensor):
    """Input ``i``'s tangent ``t`` carried to the output by its JVP rule."""
    shapes = tuple([_shape(a) for a in args])
    dtypes = tuple([a._dtype for a in args])
    found = prim.jvp_rule_for(i)
    if found is None:
        return _transposed_vjp(prim, i, args, params, out, t, shapes, dtypes)
    rule, tangent_name = found
    if tangent_name == "g":  # an elementwise VJP rule: the tangent as its cotangent
        t = _in_output_form(t, out)
    kwargs = prim.jvp_arguments(
        i, len(args), t, lambda: out, args.__getitem__, shapes, dtypes, params
    )
    return rule(**kwargs)


def _transposed_vjp(prim, i, args, params, out, t, shapes, dtypes):
    """J t for any primitive: the VJP rule is linear in its cotangent g, so
    J t is the gradient in g of <vjp(g), t>, at any g. At ones: a rule may
    compute its linear map through functions of g smooth only away from 0
    (logcumsumexp's logarithms of g's positive and negative parts). Under
    jit the forward pass of vjp(g) reaches no output, and is dropped."""
    recorded = grad_mode.is_grad_enabled() and (
        t.requires_grad or out.requires_grad or any(a.requires_grad for a in args)
    )
    with grad_mode.enable_grad():
        # detached: a value the function computes, which a trace lets require grad
        g = ones(tuple(out.shape), dtype=out.dtype).detach().requires_grad_()
        kwargs = prim.vjp_arguments(
            i, len(args), g, lambda: out, args.__getitem__, shapes, dtypes, params
        )
        cotangent = prim.rule_for(i)(**kwargs)
        if cotangent is None:
            return None
        cotangent = P.unbroadcast(cotangent, shapes[i], dtypes[i])
        product = (cotangent * t).sum()
        if not product.requires_grad:
            return None
        (jt,) = autograd_grad(product, g, create_graph=recorded, allow_unused=True)
    return jt


def _in_output_form(t: Tensor, out: Tensor) -> Tensor:
    """``t`` broadcast to ``out``'s shape and cast to its dtype."""
    if t._dtype is not out._dtype:
        t = P.convert(t, dtype=out._dtype)
    if _shape(t) != _shape(out):
        t = P.broadcast_to(t, shape=tuple(out.shape))
    return t


def _shape(t: Tensor) -> tuple:
    """``t``'s shape: its array's, or, in a trace, the trace's (whose sizes may vary)."""
    return t._data.shape if eager_tensor.recording.trace is None else tuple(t.shape)


__all__ = [
    "UnpackedDualTensor",
    "dual_level",
    "enter_dual_level",
    "exit_dual_level",
    "make_dual",
    "unpack_dual",
]
