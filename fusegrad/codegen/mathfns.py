"""Transcendental functions for kernels, built only from arithmetic,
comparisons, selects and bitcasts, so the loop vectorizer can vectorize them
(LLVM does not vectorize calls to libm).

exp and log use the classic scheme (as in Cephes): reduce the argument with
the exponent (a Cody-Waite split of ln 2 keeps the reduction exact), evaluate
a polynomial (float32) or rational (float64) approximation on the reduced
range, and rebuild the result through the exponent bits. The others are
written with them: log1p with Goldberg's rounding-error correction, expm1
with Taylor's series near 0, sigmoid (and float64's tanh) through exp,
softplus as max(x, 0) + log1p(exp(-|x|)). float32's tanh and erf are each
one rational function (tools/fit_rational.py); float64's erf evaluates
Chebyshev series of erf(x)/x and erfc(x)*exp(x*x) (tools/fit_erf.py derives
them) with Clenshaw's recurrence. sin and cos reduce by pi/2 (Cody-Waite)
up to a limit beyond which the kernel falls back to numpy; pow goes through
exp and log, in double-double for float64.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from llvmlite import ir

I32, I64 = ir.IntType(32), ir.IntType(64)


class Emitter:
    """Builder helpers for one floating type, so the functions read as math."""

    def __init__(self, b: ir.IRBuilder, t):
        self.b, self.t = b, t
        self.f64 = isinstance(t, ir.DoubleType)
        self.int = I64 if self.f64 else I32

    def c(self, value):
        return ir.Constant(self.t, value)

    def i(self, value):
        return ir.Constant(self.int, value)

    def add(self, x, y):
        return self.b.fadd(x, y)

    def sub(self, x, y):
        return self.b.fsub(x, y)

    def mul(self, x, y):
        return self.b.fmul(x, y)

    def div(self, x, y):
        return self.b.fdiv(x, y)

    def lt(self, x, y):
        return self.b.fcmp_ordered("<", x, y)

    def gt(self, x, y):
        return self.b.fcmp_ordered(">", x, y)

    def eq(self, x, y):
        return self.b.fcmp_ordered("==", x, y)

    def isnan(self, x):
        return self.b.fcmp_unordered("uno", x, x)

    def select(self, cond, x, y):
        return self.b.select(cond, x, y)

    def call(self, name, x):
        return self.b.call(self.b.module.declare_intrinsic(name, [x.type]), [x])

    def muladd(self, x, y, z):
        """x*y + z, fused where that is faster."""
        signature = ir.FunctionType(self.t, [self.t] * 3)
        fn = self.b.module.declare_intrinsic("llvm.fmuladd", [self.t], signature)
        return self.b.call(fn, [x, y, z])

    def horner(self, x, coefficients):
        """c0*x^n + c1*x^(n-1) + ... + cn."""
        acc = self.c(coefficients[0])
        for coefficient in coefficients[1:]:
            acc = self.muladd(acc, x, self.c(coefficient))
        return acc

    def to_bits(self, x):
        return self.b.bitcast(x, self.int)

    def from_bits(self, n):
        return self.b.bitcast(n, self.t)

    def pow2(self, n):
        """2**n for an integer n in the normal exponent range."""
        mantissa_bits, bias = (52, 1023) if self.f64 else (23, 127)
        return self.from_bits(self.b.shl(self.b.add(n, self.i(bias)), self.i(mantissa_bits)))


# ---------------------------------------------------------------------- exp

EXP_F32 = [
    1.9875691500e-4,
    1.3981999507e-3,
    8.3334519073e-3,
    4.1665795894e-2,
    1.6666665459e-1,
    5.0000001201e-1,
]
EXP_P_F64 = [1.26177193074810590878e-4, 3.02994407707441961300e-2, 9.99999999999999999910e-1]
EXP_Q_F64 = [
    3.00198505138664455042e-6,
    2.52448340349684104192e-3,
    2.27265548208155028766e-1,
    2.00000000000000000009e0,
]
LOG2E = 1.4426950408889634


def exp(e: Emitter, x):
    # Clamping keeps every integer below in range; results above the clamp
    # overflow to inf through the two-step scaling. Below it the result is
    # 0, selected: computing it underflowed, which x86 cores finish in
    # microcode, and exp over causally masked attention scores (half -inf)
    # took 2.5x as long.
    low, high = (-746.0, 710.0) if e.f64 else (-104.0, 89.0)
    vanishing = e.lt(x, e.c(low))
    clamped = e.select(vanishing, e.c(0.0), e.select(e.gt(x, e.c(high)), e.c(high), x))
    n = e.call("llvm.floor", e.add(e.mul(clamped, e.c(LOG2E)), e.c(0.5)))
    if e.f64:
        c1, c2 = 6.93145751953125e-1, 1.42860682030941723212e-6
    else:
        c1, c2 = 0.693359375, -2.12194440e-4
    r = e.sub(e.sub(clamped, e.mul(n, e.c(c1))), e.mul(n, e.c(c2)))
    if e.f64:
        rr = e.mul(r, r)
        p = e.mul(r, e.horner(rr, EXP_P_F64))
        y = e.add(e.c(1.0), e.mul(e.c(2.0), e.div(p, e.sub(e.horner(rr, EXP_Q_F64), p))))
    else:
        y = e.add(e.add(e.mul(e.horner(r, EXP_F32), e.mul(r, r)), r), e.c(1.0))
    # y * 2**n in two factors, each a normal number: subnormal results round once
    k = e.b.fptosi(n, e.int)
    half = e.b.ashr(k, e.i(1))
    result = e.mul(e.mul(y, e.pow2(half)), e.pow2(e.b.sub(k, half)))
    return e.select(e.isnan(x), x, e.select(vanishing, e.c(0.0), result))


# ---------------------------------------------------------------------- log

LOG_F32 = [
    7.0376836292e-2,
    -1.1514610310e-1,
    1.1676998740e-1,
    -1.2420140846e-1,
    1.4249322787e-1,
    -1.6668057665e-1,
    2.0000714765e-1,
    -2.4999993993e-1,
    3.3333331174e-1,
]
LOG_P_F64 = [
    1.01875663804580931796e-4,
    4.97494994976747001425e-1,
    4.70579119878881725854e0,
    1.44989225341610930846e1,
    1.79368678507819816313e1,
    7.70838733755885391666e0,
]
LOG_Q_F64 = [
    1.0,
    1.12873587189167450590e1,
    4.52279145837532221105e1,
    8.29875266912776603211e1,
    7.11544750618563894466e1,
    2.31251620126765340583e1,
]
SQRT_HALF = 0.70710678118654752440


def log(e: Emitter, x):
    mantissa_bits, bias = (52, 1023) if e.f64 else (23, 127)
    # subnormal inputs are scaled into the normal range first
    subnormal = e.lt(x, e.c(2.0 ** (-1022 if e.f64 else -126)))
    scaled = e.select(subnormal, e.mul(x, e.c(2.0**mantissa_bits)), x)
    bits = e.to_bits(scaled)
    exponent = e.b.sub(e.b.lshr(bits, e.i(mantissa_bits)), e.i(bias - 1))
    exponent = e.select(subnormal, e.b.sub(exponent, e.i(mantissa_bits)), exponent)
    mantissa_mask = (1 << mantissa_bits) - 1
    # m in [0.5, 1): the mantissa with the exponent of 0.5
    m = e.from_bits(e.b.or_(e.b.and_(bits, e.i(mantissa_mask)), e.i((bias - 1) << mantissa_bits)))
    small = e.lt(m, e.c(SQRT_HALF))
    exponent = e.select(small, e.b.sub(exponent, e.i(1)), exponent)
    f = e.select(small, e.sub(e.add(m, m), e.c(1.0)), e.sub(m, e.c(1.0)))
    k = e.b.sitofp(exponent, e.t)
    z = e.mul(f, f)
    if e.f64:
        y = e.mul(f, e.div(e.mul(z, e.horner(f, LOG_P_F64)), e.horner(f, LOG_Q_F64)))
    else:
        y = e.mul(e.mul(f, z), e.horner(f, LOG_F32))
    y = e.add(y, e.mul(k, e.c(-2.121944400546905827679e-4)))
    y = e.sub(y, e.mul(e.c(0.5), z))
    result = e.add(e.add(f, y), e.mul(k, e.c(0.693359375)))
    inf = e.c(float("inf"))
    result = e.select(e.eq(x, inf), inf, result)
    result = e.select(e.eq(x, e.c(0.0)), e.c(float("-inf")), result)
    result = e.select(e.lt(x, e.c(0.0)), e.c(float("nan")), result)
    return e.select(e.isnan(x), x, result)


# ------------------------------------------------------------ built from them


def log1p(e: Emitter, x):
    """log(u) * x / (u - 1) with u = 1 + x: the ratio cancels u's rounding (Goldberg)."""
    u = e.add(x, e.c(1.0))
    corrected = e.mul(log(e, u), e.div(x, e.sub(u, e.c(1.0))))  # the ratio is near 1
    result = e.select(e.eq(u, e.c(1.0)), x, corrected)
    result = e.select(e.eq(u, e.c(0.0)), e.c(float("-inf")), result)
    inf = e.c(float("inf"))
    return e.select(e.eq(x, inf), inf, result)


def expm1(e: Emitter, x):
    """Taylor's series where |x| < 0.7 (no cancellation to fear there), exp(x)
    - 1 beyond, where the subtraction at most doubles exp's error."""
    terms = 17 if e.f64 else 10  # the first term left out is below half an ulp
    coefficients = [1.0 / math.factorial(n) for n in range(terms, 0, -1)]
    near = e.mul(x, e.horner(x, coefficients))
    far = e.sub(exp(e, x), e.c(1.0))
    return e.select(e.lt(e.call("llvm.fabs", x), e.c(0.7)), near, far)


# x * P(x*x) / Q(x*x), highest power first; from tools/fit_rational.py
TANH_P_F32 = [
    -8.544792e-14,
    5.297269e-11,
    -2.0260753e-08,
    1.1162272e-05,
    0.0031046835,
    0.13084655,
    1.0,
]
TANH_Q_F32 = [0.0002547222, 0.024498053, 0.4641798, 1.0]
TANH_LIMIT_F32 = 9.0  # beyond, tanh rounds to 1 in float32
TANH_P_F64 = [-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3]
TANH_Q_F64 = [1.0, 1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3]


def tanh(e: Emitter, x):
    if not e.f64:
        return _odd_rational(e, x, TANH_LIMIT_F32, TANH_P_F32, TANH_Q_F32)
    a = e.call("llvm.fabs", x)
    z = e.mul(x, x)
    small = e.add(x, e.mul(e.mul(x, z), e.div(e.horner(z, TANH_P_F64), e.horner(z, TANH_Q_F64))))
    # (1 - u) / (1 + u) with u = exp(-|x|)**2, and the sign of x: exp(-|x|)
    # is what sigmoid computes too, so a kernel holding both computes it
    # once (LLVM merges the identical code); u underflowing gives exactly 1
    t = exp(e, e.b.fneg(a))
    u = e.mul(t, t)
    large = _copysign(e, e.div(e.sub(e.c(1.0), u), e.add(e.c(1.0), u)), x)
    return _zero_keeps_its_sign(e, x, e.select(e.lt(a, e.c(0.625)), small, large))


def _odd_rational(e: Emitter, x, limit, numerator, denominator):
    """x * P(x*x) / Q(x*x) with x clamped to [-limit, limit] and the result to
    [-1, 1]: float32's tanh and erf, 2.7 and 2.9 times faster than their
    ways through exp, within 5.5 ulp rather than 2 (the float32 arithmetic
    of P and Q makes the error, not the fit: in float64 they gave 3 ulp at
    twice the cost)."""
    bound = e.c(limit)
    clamped = e.select(e.gt(x, bound), bound, x)  # NaN stays NaN
    clamped = e.select(e.lt(clamped, e.b.fneg(bound)), e.b.fneg(bound), clamped)
    z = e.mul(clamped, clamped)
    ratio = e.div(e.mul(clamped, e.horner(z, numerator)), e.horner(z, denominator))
    one = e.c(1.0)
    ratio = e.select(e.gt(ratio, one), one, ratio)
    return e.select(e.lt(ratio, e.b.fneg(one)), e.b.fneg(one), ratio)


def _zero_keeps_its_sign(e: Emitter, x, value):
    """An odd function's value, with f(-0) = -0 as numpy gives: the
    approximations' arithmetic (-0 - (-0) = +0) loses the sign of zero,
    and a division by the result would then give inf for -inf."""
    return e.select(e.b.fcmp_ordered("==", x, e.c(0.0)), x, value)


def _copysign(e: Emitter, magnitude, sign):
    fn = e.b.module.declare_intrinsic("llvm.copysign", [e.t], ir.FunctionType(e.t, [e.t, e.t]))
    return e.b.call(fn, [magnitude, sign])


def sigmoid(e: Emitter, x):
    """1 / (1 + exp(-x)) for x >= 0, exp(x) / (1 + exp(x)) below: exp never overflows."""
    t = exp(e, e.b.fneg(e.call("llvm.fabs", x)))
    numerator = e.select(e.lt(x, e.c(0.0)), t, e.c(1.0))
    return e.select(e.isnan(x), x, e.div(numerator, e.add(e.c(1.0), t)))


def softplus(e: Emitter, x):
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)): nothing overflows."""
    positive = e.select(e.gt(x, e.c(0.0)), x, e.c(0.0))
    tail = log1p(e, exp(e, e.b.fneg(e.call("llvm.fabs", x))))
    return e.select(e.isnan(x), x, e.add(positive, tail))


# ---------------------------------------------------------------------- erf
# (interval start, interval end, Chebyshev coefficients) of each piece, and
# how many terms float64 needs; from tools/fit_erf.py
ERF_SMALL = (
    0.0,
    0.765625,
    [
        1.0058696706838033,
        -0.11586435124792986,
        0.006352475024278402,
        -0.0002820205454094384,
        1.0321318596379593e-05,
        -3.1951881808095866e-07,
        8.551054553577366e-09,
        -2.0131325255450695e-10,
        4.2278810609072635e-12,
        -8.011292833655046e-14,
        1.3825519277117169e-15,
        -2.1901118494361946e-17,
    ],
)
ERF_MIDDLE = (
    0.875,
    3.0,
    [
        0.29077283955662686,
        -0.13636999424088622,
        0.029671109875076724,
        -0.006062152966098974,
        0.001173079750955083,
        -0.00021639317945980197,
        3.824432118849989e-05,
        -6.502161977617681e-06,
        1.0669927637547995e-06,
        -1.694677384763711e-07,
        2.611327017947898e-08,
        -3.911717660912691e-09,
        5.706555941575945e-10,
        -8.119993246447454e-11,
        1.1285209621953392e-11,
        -1.5338000680252943e-12,
        2.0408510562419379e-13,
        -2.6611486463353013e-14,
        3.403565760722009e-15,
        -4.273303328242231e-16,
        5.270904152465363e-17,
        -6.391446923754856e-18,
    ],
)
ERF_LARGE = (
    3.0,
    6.0,
    [
        0.12902689965474168,
        -0.0420426781395118,
        0.006698487121092753,
        -0.0010450916791743758,
        0.00015985899884949414,
        -2.3998261587238652e-05,
        3.53906410506357e-06,
        -5.131303200649095e-07,
        7.320268611264974e-08,
        -1.0282193129248155e-08,
        1.4229088707596404e-09,
        -1.9411157958365732e-10,
        2.611796346594898e-11,
        -3.4677962235781513e-12,
        4.5456029570973385e-13,
        -5.884864531875017e-14,
        7.527649782554211e-15,
        -9.51743765070785e-16,
        1.189783691087327e-16,
        -1.4711054785450403e-17,
        1.7996151024795913e-18,
    ],
)
ERF_PIECES_F64 = ((ERF_SMALL, 12), (ERF_MIDDLE, 22), (ERF_LARGE, 21))
ERF_P_F32 = [  # x * P(x*x) / Q(x*x), highest power first; from tools/fit_rational.py
    4.6795637e-11,
    -5.017823e-09,
    2.4466982e-07,
    -7.258412e-06,
    0.00016675719,
    8.29045e-05,
    0.0409115,
    0.09581311,
    1.1283792,
]
ERF_Q_F32 = [0.00033741398, 0.0072818524, 0.07567226, 0.41824546, 1.0]
ERF_LIMIT_F32 = 4.0  # beyond, erf rounds to 1 in float32


def _chebyshev(e: Emitter, x, piece, terms):
    """sum c_j T_j(s), j < terms, with s = x mapped from [a, b] to [-1, 1]
    (Clenshaw's recurrence, with fused multiply-adds where the CPU has them)."""
    a, b, coefficients = piece
    coefficients = coefficients[:terms]
    s = e.sub(e.mul(x, e.c(2.0 / (b - a))), e.c((a + b) / (b - a)))
    two_s = e.add(s, s)
    b1 = b2 = e.c(0.0)
    for c in reversed(coefficients[1:]):
        b1, b2 = e.muladd(two_s, b1, e.sub(e.c(c), b2)), b1
    return e.muladd(s, b1, e.sub(e.c(coefficients[0]), b2))


def erf(e: Emitter, x):
    """float64: x * S(x*x) near 0; 1 - exp(-x*x) * R(|x|) on the tail's
    pieces; 1 beyond them (with the sign of x)."""
    if not e.f64:
        return _odd_rational(e, x, ERF_LIMIT_F32, ERF_P_F32, ERF_Q_F32)
    (small_piece, small_terms), *tail_pieces = ERF_PIECES_F64
    a = e.call("llvm.fabs", x)
    # x*x, not a*a (the same number): then exp(-x*x) below is the very
    # expression erf's derivative evaluates, and a kernel holding both (gelu
    # and its gradient) computes it once
    t = e.mul(x, x)
    small = e.mul(a, _chebyshev(e, t, small_piece, small_terms))
    tail = _chebyshev(e, a, *tail_pieces[-1])
    for piece, terms in reversed(tail_pieces[:-1]):
        tail = e.select(e.lt(a, e.c(piece[1])), _chebyshev(e, a, piece, terms), tail)
    large = e.sub(e.c(1.0), e.mul(exp(e, e.b.fneg(t)), tail))
    magnitude = e.select(
        e.lt(a, e.c(small_piece[1] ** 0.5)),
        small,
        e.select(e.lt(a, e.c(tail_pieces[-1][0][1])), large, e.c(1.0)),
    )
    return e.select(e.isnan(x), x, _copysign(e, magnitude, x))


# ---------------------------------------------------------------------- pow


def pow(e: Emitter, x, y):
    """x**y: float32 as exp(y * log|x|) in float64, then rounded once (the
    float64 approximations' error is far below float32's resolution);
    float64 with the logarithm and the product in double-double. The special
    cases follow C's pow and powf (which numpy's power is)."""
    return _pow_float64(e, x, y) if e.f64 else _pow_float32(e, x, y)


def _pow_float32(e: Emitter, x, y):
    b = e.b
    wide = Emitter(b, ir.DoubleType())
    xd, yd = b.fpext(x, wide.t), b.fpext(y, wide.t)
    magnitude = b.fptrunc(exp(wide, wide.mul(yd, log(wide, wide.call("llvm.fabs", xd)))), x.type)
    return _signs_and_special_cases_of_pow(e, x, y, magnitude)


def _signs_and_special_cases_of_pow(e: Emitter, x, y, magnitude):
    """x**y from |x|**y, with C's rules: an odd integer power keeps the sign
    of x, a negative base to a finite non-integer power is nan, and 1**y,
    x**0 and (-1)**(+-inf) are 1."""
    b = e.b
    ax = e.call("llvm.fabs", x)
    integer = e.eq(e.call("llvm.floor", y), y)
    half = e.mul(y, e.c(0.5))
    odd = b.and_(integer, b.fcmp_ordered("!=", e.call("llvm.floor", half), half))
    negative = b.icmp_signed("<", e.to_bits(x), e.i(0))  # the sign bit, so -0.0 counts
    signed = e.select(b.and_(negative, odd), b.fneg(magnitude), magnitude)
    below_zero = e.lt(x, e.c(0.0))  # -0.0 has a real power; only x < 0 does not
    no_real_value = b.and_(below_zero, b.and_(b.not_(integer), e.lt(ax, e.c(float("inf")))))
    result = e.select(no_real_value, e.c(float("nan")), signed)
    one = e.c(1.0)
    unit_to_infinity = b.and_(e.eq(ax, one), e.eq(e.call("llvm.fabs", y), e.c(float("inf"))))
    result = e.select(unit_to_infinity, one, result)
    result = e.select(e.eq(x, one), one, result)
    return e.select(e.eq(y, e.c(0.0)), one, result)


# ------------------------------------------------------------- float64 pow

LN2_HI, LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10  # LN2_HI: 32 bits
ATANH_TAIL = [1.0 / (2 * n + 1) for n in range(11, 0, -1)]  # 1/23, ..., 1/3, in s*s


def _two_sum(e: Emitter, a, b):
    """a + b as an unevaluated (sum, rounding error) pair (Knuth)."""
    s = e.add(a, b)
    bb = e.sub(s, a)
    return s, e.add(e.sub(a, e.sub(s, bb)), e.sub(b, bb))


def _fma(e: Emitter, a, b, c):
    fn = e.b.module.declare_intrinsic("llvm.fma", [e.t], ir.FunctionType(e.t, [e.t] * 3))
    return e.b.call(fn, [a, b, c])


def _log_double_double(e: Emitter, x):
    """log(x) for positive finite float64 x as hi + lo, with about 1e-19
    relative error: x = 2**k * m, m in [sqrt(1/2), sqrt(2)), and
    log(m) = 2 atanh(s), s = f / (2 + f), f = m - 1, with 2s kept exactly."""
    subnormal = e.lt(x, e.c(2.0**-1022))
    scaled = e.select(subnormal, e.mul(x, e.c(2.0**52)), x)
    bits = e.to_bits(scaled)
    k = e.b.sub(e.b.lshr(bits, e.i(52)), e.i(1023))
    k = e.select(subnormal, e.b.sub(k, e.i(52)), k)
    m = e.from_bits(e.b.or_(e.b.and_(bits, e.i((1 << 52) - 1)), e.i(1023 << 52)))  # [1, 2)
    big = e.gt(m, e.c(math.sqrt(2.0)))
    m = e.select(big, e.mul(m, e.c(0.5)), m)
    k = e.select(big, e.b.add(k, e.i(1)), k)
    f = e.sub(m, e.c(1.0))  # exact
    d_hi = e.add(e.c(2.0), f)
    d_lo = e.sub(f, e.sub(d_hi, e.c(2.0)))  # 2 + f = d_hi + d_lo exactly
    s_hi = e.div(f, d_hi)
    residual = e.sub(_fma(e, e.b.fneg(s_hi), d_hi, f), e.mul(s_hi, d_lo))
    s_lo = e.div(residual, d_hi)  # s = s_hi + s_lo
    ss = e.mul(s_hi, s_hi)
    tail = e.mul(e.mul(e.c(2.0), s_hi), e.mul(ss, e.horner(ss, ATANH_TAIL)))
    kd = e.b.sitofp(k, e.t)
    hi, lo = _two_sum(e, e.mul(kd, e.c(LN2_HI)), e.mul(e.c(2.0), s_hi))  # k*LN2_HI is exact
    lo = e.add(lo, e.add(e.add(e.mul(e.c(2.0), s_lo), tail), e.mul(kd, e.c(LN2_LO))))
    return _two_sum(e, hi, lo)


def _pow_float64(e: Emitter, x, y):
    """exp(y * log|x|) with the logarithm and the product in double-double, so
    |y log x| up to ~709 costs no accuracy."""
    b = e.b
    ax = e.call("llvm.fabs", x)
    finite_positive = b.and_(e.gt(ax, e.c(0.0)), e.lt(ax, e.c(float("inf"))))
    log_hi, log_lo = _log_double_double(e, e.select(finite_positive, ax, e.c(1.0)))
    p_hi = e.mul(y, log_hi)
    p_lo = e.add(_fma(e, y, log_hi, e.b.fneg(p_hi)), e.mul(y, log_lo))
    grown = exp(e, p_hi)
    correction = e.mul(grown, p_lo)  # exp(hi + lo) = exp(hi) * (1 + lo)
    corrected = b.and_(e.lt(grown, e.c(float("inf"))), b.not_(e.isnan(correction)))
    magnitude = e.select(corrected, e.add(grown, correction), grown)
    # a zero or infinite base: 0 or inf by the sign of y (and of log|x|)
    shrinks = e.select(e.eq(ax, e.c(0.0)), e.gt(y, e.c(0.0)), e.lt(y, e.c(0.0)))
    limit = e.select(shrinks, e.c(0.0), e.c(float("inf")))
    magnitude = e.select(finite_positive, magnitude, limit)
    magnitude = e.select(b.or_(e.isnan(x), e.isnan(y)), e.c(float("nan")), magnitude)
    return _signs_and_special_cases_of_pow(e, x, y, magnitude)


# ------------------------------------------------------------------ sin, cos
#
# x = k*pi/2 + r with |r| <= pi/4 by a Cody-Waite reduction (pi/2 split into
# parts whose products with k are exact or nearly so, fused multiply-adds),
# then Taylor polynomials for sin(r) and cos(r) picked and signed by k mod 4.
# This holds while |x| <= SIN_COS_FAST_LIMIT (k below 2**20). A kernel holding
# sin or cos also computes whether any finite argument went beyond it, and if
# so is run again through numpy (see ``accurate_within`` in lowering.py): huge
# arguments need a long table of 2/pi (Payne-Hanek), which is slow in vector
# code and rare in practice.

SIN_COS_FAST_LIMIT = 2.0**20


def _pi_fixed(bits: int) -> int:
    """floor(pi * 2**bits), by Machin's formula in integers."""
    guard = bits + 20
    one = 1 << guard

    def arctan_inverse(n: int) -> int:
        total, term, k, sign = 0, one // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k += 2
            sign = -sign
        return total

    return (4 * (4 * arctan_inverse(5) - arctan_inverse(239))) >> 20


def _parts_of_pi_over_2(widths: list, to_float) -> tuple:
    """pi/2 as a sum of floats of the given significant bits, each the
    rounding of what the previous ones leave (remainders taken exactly: a
    float64 pi/2 is itself off by 6e-17, which k up to 2**20 would magnify)."""
    rest = Fraction(_pi_fixed(300), 2**301)
    parts = []
    for width in widths:
        exponent = math.floor(math.log2(abs(float(rest))))
        scale = Fraction(2) ** (width - 1 - exponent)
        part = to_float(float(round(rest * scale) / scale))
        parts.append(part)
        rest -= Fraction(part)
    return tuple(parts)


# float32, in fused multiply-adds: x - k*part[0] is exact below the limit
PIO2_F32 = _parts_of_pi_over_2([24, 24, 24], lambda v: float(np.float32(v)))
# float64: k*part[0] and k*part[1] are exact for k < 2**20
PIO2_F64 = _parts_of_pi_over_2([33, 33, 53, 53], float)
SIN_TAYLOR = {  # in r*r, without the leading r
    32: [(-1) ** n / math.factorial(2 * n + 1) for n in range(5, 0, -1)],
    64: [(-1) ** n / math.factorial(2 * n + 1) for n in range(8, 0, -1)],
}
COS_TAYLOR = {  # in r*r, without the leading 1
    32: [(-1) ** n / math.factorial(2 * n) for n in range(5, 0, -1)],
    64: [(-1) ** n / math.factorial(2 * n) for n in range(9, 0, -1)],
}


def _reduce_float32(e: Emitter, x, k):
    r = x
    for part in PIO2_F32:
        r = _fma(e, e.b.fneg(k), e.c(part), r)  # the later parts round once each
    return r


def _reduce_float64(e: Emitter, x, k):
    """r to a relative 1e-16 even when x is within 1e-17 of a multiple of
    pi/2: the large terms cancel exactly and the small ones keep their errors."""
    p1, p2, p3, p4 = (e.c(part) for part in PIO2_F64)
    r1 = e.sub(x, e.mul(k, p1))  # exact
    high, error = _two_sum(e, r1, e.b.fneg(e.mul(k, p2)))  # k*p2 exact
    product = e.mul(k, p3)
    product_error = _fma(e, k, p3, e.b.fneg(product))
    high = e.sub(high, product)  # exact when r is small: they nearly cancel
    return e.add(high, e.sub(e.sub(error, product_error), e.mul(k, p4)))


def sin(e: Emitter, x):
    """sin x for |x| <= SIN_COS_FAST_LIMIT; inf and nan give nan."""
    return _sin_cos(e, x, cosine=False)


def cos(e: Emitter, x):
    """cos x for |x| <= SIN_COS_FAST_LIMIT; inf and nan give nan."""
    return _sin_cos(e, x, cosine=True)


def _sin_cos(e: Emitter, x, cosine: bool):
    b = e.b
    k = e.call("llvm.rint", e.mul(x, e.c(2 / math.pi)))
    r = (_reduce_float64 if e.f64 else _reduce_float32)(e, x, k)
    width = 64 if e.f64 else 32
    rr = e.mul(r, r)
    sine = _fma(e, e.mul(r, rr), e.horner(rr, SIN_TAYLOR[width]), r)
    cosine_value = _fma(e, rr, e.horner(rr, COS_TAYLOR[width]), e.c(1.0))
    # k is below 2**20 here; the clamp keeps the conversion defined for inf and nan
    quadrant = b.fptosi(e.select(e.lt(e.call("llvm.fabs", k), e.c(2.0**21)), k, e.c(0.0)), I32)
    if cosine:
        quadrant = b.add(quadrant, ir.Constant(I32, 1))
    odd = b.icmp_signed("!=", b.and_(quadrant, ir.Constant(I32, 1)), ir.Constant(I32, 0))
    value = e.select(odd, cosine_value, sine)
    negative = b.icmp_signed("!=", b.and_(quadrant, ir.Constant(I32, 2)), ir.Constant(I32, 0))
    value = e.select(negative, b.fneg(value), value)
    return value if cosine else _zero_keeps_its_sign(e, x, value)
