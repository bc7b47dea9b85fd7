"""The composition matrix: each of jit, grad, vjp, jvp, vmap, jacrev, jacfwd
and hessian applied to each (and to the plain function), against a
reference for the outer transform applied to the same inner function: a
loop over the batch for vmap, central differences in float64 for the
derivatives, the composition without jit for jit."""

from __future__ import annotations

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.func import grad, hessian, jacfwd, jacrev, jvp, vjp, vmap


def f(x):
    """Rows of x coupled within a row only, so vmap over rows is f itself."""
    return fg.sin(x) * (x * x).sum(-1, keepdim=True) + x


def _pattern(shape):
    """A fixed direction (tangent, cotangent) of ``shape``."""
    count = int(np.prod(shape))
    return fg.linspace(0.5, 1.5, count, dtype=fg.float64).reshape(tuple(shape))


TRANSFORMS = {
    "jit": fg.jit,
    "grad": lambda g: grad(lambda x: g(x).sum()),
    "vjp": lambda g: lambda x: vjp(g, x)[1](_pattern(g(x).shape))[0],
    "jvp": lambda g: lambda x: jvp(g, (x,), (_pattern(x.shape),))[1],
    "vmap": vmap,
    "jacrev": jacrev,
    "jacfwd": jacfwd,
    "hessian": lambda g: hessian(lambda x: g(x).sum()),
}


def _jacobian_by_differences(g, x, eps=1e-4):
    base = g(x).numpy()
    flat = x.numpy().ravel()
    columns = []
    for k in range(flat.size):
        step = np.zeros_like(flat)
        step[k] = eps
        plus = g(fg.tensor((flat + step).reshape(x.shape))).numpy()
        minus = g(fg.tensor((flat - step).reshape(x.shape))).numpy()
        columns.append((plus - minus) / (2 * eps))
    return np.stack(columns, -1).reshape(base.shape + tuple(x.shape))


def _reference(outer: str, g, x) -> np.ndarray:
    """``outer`` applied to ``g`` at ``x``, by loops and differences."""
    if outer == "jit":
        return g(x).numpy()
    if outer == "vmap":
        return np.stack([g(x[k]).numpy() for k in range(x.shape[0])])
    if outer in ("jacrev", "jacfwd"):
        return _jacobian_by_differences(g, x)
    if outer == "grad":
        return _jacobian_by_differences(lambda y: g(y).sum(), x)
    if outer == "vjp":
        jacobian = _jacobian_by_differences(g, x)
        cotangent = _pattern(g(x).shape).numpy()
        axes = cotangent.ndim
        return np.tensordot(cotangent, jacobian, axes=(list(range(axes)), list(range(axes))))
    if outer == "jvp":
        jacobian = _jacobian_by_differences(g, x)
        tangent = _pattern(x.shape).numpy()
        return np.tensordot(jacobian, tangent, axes=tangent.ndim)
    assert outer == "hessian"
    gradient = lambda y: fg.tensor(_jacobian_by_differences(lambda z: g(z).sum(), y))  # noqa: E731
    return _jacobian_by_differences(gradient, x, eps=1e-3)


X = np.array([[0.3, -0.7, 1.1], [0.9, 0.2, -0.4]])


@pytest.mark.parametrize("inner", ["none", *TRANSFORMS])
@pytest.mark.parametrize("outer", TRANSFORMS)
def test_each_transform_of_each_matches_its_reference(outer, inner):
    g = f if inner == "none" else TRANSFORMS[inner](f)
    composed = TRANSFORMS[outer](g)
    x = fg.tensor(X)
    if inner == "jit" or outer == "jit":
        # against the eager composition, on calls 1, 2 and 3 (each another path)
        plain = TRANSFORMS[outer](f) if inner == "jit" else g
        for scale in (1.0, 0.5, -1.5):
            xs = fg.tensor(X * scale)
            np.testing.assert_allclose(
                composed(xs).numpy(), plain(xs).numpy(), rtol=1e-10, atol=1e-12
            )
        return
    tolerance = 2e-4 if outer == "hessian" else 1e-6
    np.testing.assert_allclose(
        composed(x).numpy(), _reference(outer, g, x), rtol=tolerance, atol=tolerance
    )
