"""``biject_to`` and ``transform_to``: for a constraint, a transform from
unconstrained real numbers onto it, so parameters can be optimized freely
and mapped onto their set. ``biject_to``'s transforms are bijections
(simplex: stick breaking); ``transform_to``'s need only reach the set
(simplex: softmax)."""

from __future__ import annotations

from . import constraints, transforms

__all__ = ["ConstraintRegistry", "biject_to", "transform_to"]


class ConstraintRegistry:
    def __init__(self):
        self._registry = {}

    def register(self, constraint, factory=None):
        """Registers ``factory(constraint)`` for a constraint's type (an
        instance stands for its type); usable as a decorator."""
        if factory is None:
            return lambda factory: self.register(constraint, factory)
        kind = constraint if isinstance(constraint, type) else type(constraint)
        self._registry[kind] = factory
        return factory

    def __call__(self, constraint):
        try:
            factory = self._registry[type(constraint)]
        except KeyError:
            raise NotImplementedError(
                f"Cannot transform {type(constraint).__name__} constraints"
            ) from None
        return factory(constraint)


biject_to = ConstraintRegistry()
transform_to = ConstraintRegistry()


def _to_real(constraint):
    return transforms.identity_transform


def _to_independent(constraint, registry):
    base = registry(constraint.base_constraint)
    return transforms.IndependentTransform(base, constraint.reinterpreted_batch_ndims)


def _to_greater_than(constraint):
    if isinstance(constraint.lower_bound, (int, float)) and constraint.lower_bound == 0:
        return transforms.ExpTransform()
    shift = transforms.AffineTransform(constraint.lower_bound, 1)
    return transforms.ComposeTransform([transforms.ExpTransform(), shift])


def _to_less_than(constraint):
    flip = transforms.AffineTransform(constraint.upper_bound, -1)
    return transforms.ComposeTransform([transforms.ExpTransform(), flip])


def _to_interval(constraint):
    lower, upper = constraint.lower_bound, constraint.upper_bound
    if isinstance(lower, (int, float)) and isinstance(upper, (int, float)):
        if (lower, upper) == (0, 1):
            return transforms.SigmoidTransform()
    stretch = transforms.AffineTransform(lower, upper - lower)
    return transforms.ComposeTransform([transforms.SigmoidTransform(), stretch])


def _register_shared(registry):
    """The constraints both registries reach by the same bijection."""
    registry.register(constraints.real, _to_real)
    registry.register(constraints.independent, lambda c: _to_independent(c, registry))
    registry.register(constraints.greater_than, _to_greater_than)
    registry.register(constraints.greater_than_eq, _to_greater_than)
    registry.register(constraints.less_than, _to_less_than)
    registry.register(constraints.interval, _to_interval)
    registry.register(constraints.half_open_interval, _to_interval)


_register_shared(biject_to)
_register_shared(transform_to)
biject_to.register(constraints.simplex, lambda c: transforms.StickBreakingTransform())
transform_to.register(constraints.simplex, lambda c: transforms.SoftmaxTransform())
