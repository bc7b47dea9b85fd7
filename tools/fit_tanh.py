"""Derives the rational approximation of fusegrad/codegen/mathfns.py's
float32 tanh: tanh(x) = x * P(x*x) / Q(x*x) on |x| <= 9 (beyond, tanh rounds
to 1 in float32), P of degree 6 and Q of degree 3 with Q(0) = 1.

The relative error |P/Q / f - 1|, f(s) = tanh(sqrt s) / sqrt s, is made
minimax by Lawson's iteration over the linearized problem P - f*Q = 0
(each step a weighted least-squares fit in the Chebyshev basis, weighted by
1/(f*Q) of the step before, its weights then multiplied by each point's
error). In float64, which is far beyond what float32 needs:

    python tools/fit_tanh.py
"""

import numpy as np
from numpy.polynomial import chebyshev, polynomial

LIMIT = 9.0
DEGREES = (6, 3)  # of P and Q, in s = x*x


def fit(numerator: int, denominator: int, points: int = 6000, steps: int = 200):
    """(P, Q) as coefficients in s, lowest power first, and the relative error."""
    u = np.cos(np.pi * (np.arange(points) + 0.5) / points)  # Chebyshev points of [-1, 1]
    x = LIMIT * np.sqrt((u + 1) / 2)
    f = np.tanh(x) / np.where(x > 0, x, 1.0)
    f[x == 0] = 1.0
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
    return _in_s(p), _in_s(q), error.max()


def _in_s(coefficients) -> np.ndarray:
    """A Chebyshev series in u = 2 s / LIMIT**2 - 1 as powers of s."""
    in_u = chebyshev.cheb2poly(coefficients)
    in_s = np.zeros(1)
    for k, c in enumerate(in_u):
        in_s = polynomial.polyadd(in_s, c * polynomial.polypow([-1.0, 2.0 / LIMIT**2], k))
    return in_s


if __name__ == "__main__":
    p, q, error = fit(*DEGREES)
    p, q = p / q[0], q / q[0]
    print(f"relative error of the fit: {error:.2e}")
    for name, coefficients in (("TANH_P_F32", p), ("TANH_Q_F32", q)):
        print(f"{name} = [  # highest power first")
        for c in coefficients[::-1]:
            print(f"    {np.float32(c)!r},".replace("np.float32(", "").replace(")", ""))
        print("]")
