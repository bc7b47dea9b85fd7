"""Derives the Chebyshev coefficients of fusegrad/codegen/mathfns.py's
float64 erf (float32's is one rational function: tools/fit_rational.py).

erf(x) = x * S(x*x) for |x| < 0.875 and erf(x) = 1 - exp(-x*x) * R(x) above,
with S and R smooth; each is interpolated at Chebyshev points on its
interval, in 60-digit arithmetic, and the series is cut where its terms fall
below 2**-60. R is taken on two intervals up to 6, where erf rounds to 1.
Needs mpmath (a development tool, not a dependency):  python tools/fit_erf.py
"""

import mpmath

mpmath.mp.dps = 60
TOLERANCE = mpmath.mpf(2) ** -60
PIECES = {  # name: (function of the variable, interval)
    "small": (
        lambda t: mpmath.erf(mpmath.sqrt(t)) / mpmath.sqrt(t) if t else 2 / mpmath.sqrt(mpmath.pi),
        (0, mpmath.mpf("0.875") ** 2),
    ),
    "middle": (lambda x: mpmath.erfc(x) * mpmath.exp(x * x), (mpmath.mpf("0.875"), 3)),
    "large": (lambda x: mpmath.erfc(x) * mpmath.exp(x * x), (3, 6)),
}


def chebyshev(f, a, b, n=60):
    nodes = [mpmath.cos(mpmath.pi * (k + mpmath.mpf(1) / 2) / n) for k in range(n)]
    values = [f((b - a) / 2 * s + (b + a) / 2) for s in nodes]
    return [
        2
        * mpmath.fsum(
            v * mpmath.cos(mpmath.pi * j * (k + mpmath.mpf(1) / 2) / n)
            for k, v in enumerate(values)
        )
        / n
        for j in range(n)
    ]


terms = {}
for name, (f, (a, b)) in PIECES.items():
    c = chebyshev(f, a, b)
    c[0] /= 2
    terms[name] = max(j for j, v in enumerate(c) if abs(v) > TOLERANCE) + 1
    print(f"ERF_{name.upper()} = ({float(a)!r}, {float(b)!r}, [")
    print(",\n".join(f"    {float(v)!r}" for v in c[: terms[name]]) + "])")
pieces = ", ".join(f"(ERF_{name.upper()}, {count})" for name, count in terms.items())
print(f"ERF_PIECES_F64 = ({pieces})")
