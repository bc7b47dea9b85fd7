"""Derives the rational approximations of fusegrad/codegen/mathfns.py's
float32 tanh and erf: g(x) = x * P(x*x) / Q(x*x) with Q(0) = 1, for |x| up
to where g rounds to 1 in float32 (9 for tanh, 4 for erf).

The relative error |P/Q / f - 1|, f(s) = g(sqrt s) / sqrt s, is made
minimax by Lawson's iteration over the linearized problem P - f*Q = 0
(each step a weighted least-squares fit in the Chebyshev basis, weighted by
1/(f*Q) of the step before, its weights then multiplied by each point's
error). In float64, which is far beyond what float32 needs:

    python tools/fit_rational.py
"""

import math

import numpy as np
from numpy.polynomial import chebyshev, polynomial

FUNCTIONS = {  # name: (g, g(x)/x at 0, limit, degrees of P and Q in s = x*x)
    "TANH": (np.tanh, 1.0, 9.0, (6, 3)),
    "ERF": (np.vectorize(math.erf), 2 / math.sqrt(math.pi), 4.0, (8, 4)),
}


def fit(g, at_zero, limit, numerator, denominator, points=6000, steps=200):
    """(P, Q) as coefficients in s, lowest power first, and the relative error."""
    u = np.cos(np.pi * (np.arange(points) + 0.5) / points)  # Chebyshev points of [-1, 1]
    x = limit * np.sqrt((u + 1) / 2)
    f = g(x) / np.where(x > 0, x, 1.0)
    f[x == 0] = at_zero
    p_basis, q_basis = chebyshev.chebvander(u, numerator), chebyshev.chebvander(u, denominator)
    weights, q_before = np.full(points, 1.0 / points), np.ones(points)
    for _ in range(steps):
        scale = (weights / (f * q_before))[:, None]
        system = np.hstack([p_basis, -f[:, None] * q_basis[:, 1:]]) * scale
        solution = np.linalg.lstsq(system, f * scale[:, 0], rcond=None)[0]
        p, q = solution[: numerator + 1], np.concatenate([[1.0], solution[numerator + 1 :]])
        q_before = chebyshev.chebval(u, q)
        error = np.abs(chebyshev.chebval(u, p) / q_before / f - 1)
        weights = np.maximum(weights * error, 1e-300)
        weights /= weights.sum()
    return _in_s(p, limit), _in_s(q, limit), error.max()


def _in_s(coefficients, limit) -> np.ndarray:
    """A Chebyshev series in u = 2 s / limit**2 - 1 as powers of s."""
    in_u = chebyshev.cheb2poly(coefficients)
    in_s = np.zeros(1)
    for k, c in enumerate(in_u):
        in_s = polynomial.polyadd(in_s, c * polynomial.polypow([-1.0, 2.0 / limit**2], k))
    return in_s


if __name__ == "__main__":
    for function, (g, at_zero, limit, degrees) in FUNCTIONS.items():
        p, q, error = fit(g, at_zero, limit, *degrees)
        p, q = p / q[0], q / q[0]
        print(f"# {function}: relative error of the fit {error:.2e}")
        for name, coefficients in ((f"{function}_P_F32", p), (f"{function}_Q_F32", q)):
            print(f"{name} = [  # highest power first")
            for c in coefficients[::-1]:
                print(f"    {np.float32(c)!r},".replace("np.float32(", "").replace(")", ""))
            print("]")
