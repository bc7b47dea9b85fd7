"""How each primitive becomes LLVM instructions: one entry per primitive.

An entry's ``emit`` takes the IR builder, the operands (LLVM values,
booleans as i1) and the equation, and returns the result value. Exact
entries compute bit for bit what numpy computes (they mirror numpy's NaN
and signed-zero behaviour where LLVM's defaults differ: maximum, minimum,
sign). Transcendental ones are approximations (mathfns.py), tens of
instructions each, some accurate only within a range of arguments. Which
primitives run in numpy instead, and why, is ``IN_NUMPY``; the reductions
kernels accumulate are ``FUSED_REDUCTIONS``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llvmlite import ir

from ..ir import dtypes
from ..ir import primitives as P
from ..ir.graph import Const
from . import mathfns

BOOL = ir.IntType(1)
LLVM_TYPES = {
    "float32": ir.FloatType(),
    "float64": ir.DoubleType(),
    # float16 and bfloat16 values are float32 holding only values they represent
    "float16": ir.FloatType(),
    "bfloat16": ir.FloatType(),
    "int64": ir.IntType(64),
    "int32": ir.IntType(32),
    # uint8, int8 and int16 values are int32 holding only values they represent
    "uint8": ir.IntType(32),
    "int8": ir.IntType(32),
    "int16": ir.IntType(32),
    "bool": BOOL,
}


def llvm_type(dtype):
    return LLVM_TYPES[dtype.name]


def _floating(eqn) -> bool:
    return eqn.inputs[-1].dtype.is_floating_point


def _intrinsic(b, name, value):
    fn = b.module.declare_intrinsic(name, [value.type])
    return b.call(fn, [value])


def _is_nan(b, x):
    return b.fcmp_unordered("uno", x, x)


def _max(b, x, y, eqn, pick_first):
    """numpy's maximum/minimum: NaN wins, and a tie gives the second operand
    (only -0 and +0 tie unequal: maximum(-0., 0.) is 0., maximum(0., -0.)
    is -0., in numpy and PyTorch alike)."""
    if not _floating(eqn):
        return b.select(b.icmp_signed(pick_first, x, y), x, y)
    ordered = b.select(b.fcmp_ordered(pick_first, x, y), x, y)
    return b.select(_is_nan(b, x), x, b.select(_is_nan(b, y), y, ordered))


def _compare(float_op, int_op):
    def lower(b, args, eqn):
        x, y = args
        if x.type == BOOL or not _floating(eqn):
            return b.icmp_signed(int_op, x, y)
        if float_op == "!=":  # true when either is NaN, as in numpy
            return b.fcmp_unordered("!=", x, y)
        return b.fcmp_ordered(float_op, x, y)

    return lower


def _arith(float_fn, int_fn):
    def lower(b, args, eqn):
        return (float_fn if _floating(eqn) else int_fn)(b, *args)

    return lower


def _logical_not(b, args, eqn):
    """Whether the operand is zero (a number operand is no bool: NaN is true)."""
    (x,) = args
    if x.type == BOOL:
        return b.xor(x, ir.Constant(BOOL, 1))
    zero = ir.Constant(x.type, 0)
    if _floating(eqn):
        return b.fcmp_ordered("==", x, zero)
    return b.icmp_signed("==", x, zero)


I32 = ir.IntType(32)
HALF_SMALLEST_NORMAL = 2.0**-14
HALF_OVERFLOW = 65520.0  # halfway from float16's largest value, 65504, to 2**16: rounds to inf


def round_to(b, x, dtype):
    """A value of ``dtype``'s storage rounded to ``dtype``, as ``DType.round``
    rounds eager values: an int32 wrapped around into uint8's, int8's or
    int16's range; a float32 rounded to the nearest float16 or bfloat16
    value, ties to even, by integer operations on the bits (no dependence on
    the CPU's conversion instructions)."""
    if not dtype.is_floating_point:
        narrow = b.trunc(x, ir.IntType(8 * dtype.itemsize))
        return b.zext(narrow, x.type) if dtype.exchanged_as.kind == "u" else b.sext(narrow, x.type)
    if dtype is dtypes.bfloat16:
        bits = b.bitcast(x, I32)
        odd = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
        carried = b.add(bits, b.add(ir.Constant(I32, 0x7FFF), odd))
        rounded = b.bitcast(b.and_(carried, ir.Constant(I32, 0xFFFF0000)), x.type)
        return b.select(_is_nan(b, x), x, rounded)
    magnitude = _intrinsic(b, "llvm.fabs", x)
    # normal float16 values: float32's mantissa rounded to 10 bits
    bits = b.bitcast(magnitude, I32)
    odd = b.and_(b.lshr(bits, ir.Constant(I32, 13)), ir.Constant(I32, 1))
    carried = b.add(bits, b.add(ir.Constant(I32, 0xFFF), odd))
    normal = b.bitcast(b.and_(carried, ir.Constant(I32, ~0x1FFF & 0xFFFFFFFF)), x.type)
    # subnormal ones are multiples of 2**-24: adding 0.5 (whose float32 unit
    # in the last place is 2**-24) rounds to one, and subtracting it is exact
    half = ir.Constant(x.type, 0.5)
    subnormal = b.fsub(b.fadd(magnitude, half), half)
    small = b.fcmp_ordered("<", magnitude, ir.Constant(x.type, HALF_SMALLEST_NORMAL))
    rounded = b.select(small, subnormal, normal)
    overflow = b.fcmp_ordered(">=", magnitude, ir.Constant(x.type, HALF_OVERFLOW))
    rounded = b.select(overflow, ir.Constant(x.type, float("inf")), rounded)
    copysign = b.module.declare_intrinsic(
        "llvm.copysign", [x.type], ir.FunctionType(x.type, [x.type, x.type])
    )
    signed = b.call(copysign, [rounded, x])
    return b.select(_is_nan(b, x), x, signed)


def _storage(dtype):
    return dtypes.from_numpy_dtype(dtype.np)


def _convert(b, args, eqn):
    (x,) = args
    source, target = eqn.inputs[0].dtype, eqn.out.dtype
    if source is target:
        return x
    converted = _convert_storage(b, x, _storage(source), _storage(target))
    return round_to(b, converted, target) if target.reduced else converted


def _convert_storage(b, x, source, target):
    to = llvm_type(target)
    if source is target:
        return x
    if target is dtypes.bool_:
        if source.is_floating_point:
            return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
        return b.icmp_signed("!=", x, ir.Constant(x.type, 0))
    if source is dtypes.bool_:
        return b.uitofp(x, to) if target.is_floating_point else b.zext(x, to)
    if source.is_floating_point and target.is_floating_point:
        return b.fpext(x, to) if target.itemsize > source.itemsize else b.fptrunc(x, to)
    if target.is_floating_point:
        return b.sitofp(x, to)
    if source.is_floating_point:
        return b.fptosi(x, to)
    return b.sext(x, to) if target.itemsize > source.itemsize else b.trunc(x, to)


def _sign(b, args, eqn):
    (x,) = args
    one, zero = ir.Constant(x.type, 1.0 if _floating(eqn) else 1), ir.Constant(x.type, 0)
    if not _floating(eqn):
        negative = b.select(b.icmp_signed("<", x, zero), ir.Constant(x.type, -1), zero)
        return b.select(b.icmp_signed(">", x, zero), one, negative)
    # NaN, 0. and -0. give 0., as PyTorch's sign (numpy's keeps NaN)
    rest = b.select(b.fcmp_unordered("==", x, zero), zero, x)
    negative = b.select(b.fcmp_ordered("<", x, zero), ir.Constant(x.type, -1.0), rest)
    return b.select(b.fcmp_ordered(">", x, zero), one, negative)


def _abs(b, args, eqn):
    (x,) = args
    if _floating(eqn):
        return _intrinsic(b, "llvm.fabs", x)
    return b.select(b.icmp_signed("<", x, ir.Constant(x.type, 0)), b.neg(x), x)


def _rounding(intrinsic):
    def lower(b, args, eqn):
        return _intrinsic(b, intrinsic, args[0]) if _floating(eqn) else args[0]

    return lower


def _signed_zero(b, sign_of):
    """0 with the sign bit of ``sign_of``."""
    t = sign_of.type
    fn = b.module.declare_intrinsic("llvm.copysign", [t], ir.FunctionType(t, [t, t]))
    return b.call(fn, [ir.Constant(sign_of.type, 0.0), sign_of])


def _floored_remainder(b, x, y):
    """numpy's division of floats with the quotient floored: fmod's exact
    remainder (the sign of x), moved by y where its sign differs from y's.
    Returns that remainder and whether it moved."""
    zero = ir.Constant(x.type, 0.0)
    mod = b.frem(x, y)
    nonzero = b.fcmp_unordered("!=", mod, zero)  # NaN counts as nonzero, as in C
    differs = b.xor(b.fcmp_ordered("<", y, zero), b.fcmp_ordered("<", mod, zero))
    moved = b.and_(nonzero, differs)
    remainder = b.select(nonzero, b.select(moved, b.fadd(mod, y), mod), _signed_zero(b, y))
    return mod, remainder, moved


def _remainder(b, args, eqn):
    return _floored_remainder(b, *args)[1]


def _floor_divide(b, args, eqn):
    """numpy's floor_divide of floats: (x - fmod(x, y)) / y is within
    rounding of an integer; one less where the remainder moved, then
    snapped to the nearest integer. A zero quotient keeps the sign of x / y,
    and a zero divisor gives x / y (inf or nan)."""
    x, y = args
    zero, one = ir.Constant(x.type, 0.0), ir.Constant(x.type, 1.0)
    mod, _, moved = _floored_remainder(b, x, y)
    quotient = b.fdiv(b.fsub(x, mod), y)
    quotient = b.select(moved, b.fsub(quotient, one), quotient)
    floored = _intrinsic(b, "llvm.floor", quotient)
    above_half = b.fcmp_ordered(">", b.fsub(quotient, floored), ir.Constant(x.type, 0.5))
    snapped = b.select(above_half, b.fadd(floored, one), floored)
    exact = b.fdiv(x, y)
    result = b.select(b.fcmp_unordered("!=", quotient, zero), snapped, _signed_zero(b, exact))
    return b.select(b.fcmp_ordered("==", y, zero), exact, result)


def _trunc_divide(b, args, eqn):
    """The quotient as the division rounds it to the type, truncated (a
    float16 or bfloat16 one rounded first, as eagerly)."""
    quotient = b.fdiv(*args)
    if eqn.out.dtype.reduced:
        quotient = round_to(b, quotient, eqn.out.dtype)
    return _intrinsic(b, "llvm.trunc", quotient)


def _relu(b, args, eqn):
    (x,) = args
    return _max(b, x, ir.Constant(x.type, 0.0 if _floating(eqn) else 0), eqn, ">")


@dataclass(frozen=True)
class Lowering:
    """``emit(builder, operands, eqn)``; ``approximated``: tens of
    instructions (a range reduction and a polynomial), not a few;
    ``accurate_within``: beyond this |argument| a kernel reports it and runs
    again with ``precise`` instead of ``emit`` (the C library's function:
    not vectorized, right everywhere); ``applies``: which equations of the
    primitive it lowers (all by default)."""

    emit: object
    approximated: bool = False
    accurate_within: float | None = None
    precise: object = None
    applies: object = None


def _shift(b, x, count, left):
    """x shifted by count bits. LLVM's shifts by the width or more (or by a
    negative count, unsigned a huge one) are poison: they give 0 here, or
    the sign for a right shift, as numpy's and PyTorch's."""
    width = ir.Constant(x.type, x.type.width)
    in_range = b.icmp_unsigned("<", count, width)
    if left:
        return b.select(in_range, b.shl(x, count), ir.Constant(x.type, 0))
    return b.ashr(x, b.select(in_range, count, ir.Constant(x.type, x.type.width - 1)))


_EXACT = {
    P.add: _arith(lambda b, x, y: b.fadd(x, y), lambda b, x, y: b.add(x, y)),
    P.sub: _arith(lambda b, x, y: b.fsub(x, y), lambda b, x, y: b.sub(x, y)),
    P.mul: _arith(lambda b, x, y: b.fmul(x, y), lambda b, x, y: b.mul(x, y)),
    P.div: lambda b, args, eqn: b.fdiv(*args),
    P.neg: _arith(lambda b, x: b.fneg(x), lambda b, x: b.neg(x)),
    P.abs_: _abs,
    P.sign: _sign,
    P.relu: _relu,
    P.floor: _rounding("llvm.floor"),
    P.ceil: _rounding("llvm.ceil"),
    P.trunc: _rounding("llvm.trunc"),
    P.round_: _rounding("llvm.roundeven"),
    P.sqrt: lambda b, args, eqn: _intrinsic(b, "llvm.sqrt", args[0]),
    P.maximum: lambda b, args, eqn: _max(b, *args, eqn, ">"),
    P.minimum: lambda b, args, eqn: _max(b, *args, eqn, "<"),
    P.eq: _compare("==", "=="),
    P.ne: _compare("!=", "!="),
    P.lt: _compare("<", "<"),
    P.le: _compare("<=", "<="),
    P.gt: _compare(">", ">"),
    P.ge: _compare(">=", ">="),
    P.logical_and: lambda b, args, eqn: b.and_(*args),
    P.logical_or: lambda b, args, eqn: b.or_(*args),
    P.logical_not: _logical_not,
    P.bitwise_and: lambda b, args, eqn: b.and_(*args),
    P.bitwise_or: lambda b, args, eqn: b.or_(*args),
    P.bitwise_xor: lambda b, args, eqn: b.xor(*args),
    P.bitwise_not: lambda b, args, eqn: b.xor(args[0], ir.Constant(args[0].type, -1)),
    P.left_shift: lambda b, args, eqn: _shift(b, *args, left=True),
    P.right_shift: lambda b, args, eqn: _shift(b, *args, left=False),
    P.where: lambda b, args, eqn: b.select(*args),
    P.convert: _convert,
    P.stop_gradient: lambda b, args, eqn: args[0],
    P.unrounded: lambda b, args, eqn: args[0],
    P.forward_only: lambda b, args, eqn: args[0],
    P.broadcast_to: lambda b, args, eqn: args[0],  # the load already broadcast it
}


def _math(function):
    """A function of mathfns.py (all take an Emitter of the operands' type)."""

    def lower(b, args, eqn):
        return function(mathfns.Emitter(b, args[0].type), *args)

    return lower


def _pow(b, args, eqn):
    """A constant small integer exponent is arithmetic (x*x is the correctly
    rounded square, 1/x the correctly rounded reciprocal); anything else goes
    through exp and log. An exponent of one value for every element (0-d)
    that is 0.5 is a square root, as numpy computes it then (sqrt(-inf) is
    nan, where C's pow gives inf)."""
    x, y = args
    exponent = eqn.inputs[1]
    if isinstance(exponent, Const) and exponent.value.size == 1:
        n = float(exponent.value.reshape(()))
        one = ir.Constant(x.type, 1.0)
        if n == 0.0:
            return one
        if n == 1.0:
            return x
        if n == -1.0:
            return b.fdiv(one, x)
        if n == 0.5:
            return _intrinsic(b, "llvm.sqrt", x)
        if n == 2.0:
            return b.fmul(x, x)
        if n == 3.0:
            return b.fmul(b.fmul(x, x), x)
    result = mathfns.pow(mathfns.Emitter(b, x.type), x, y)
    if exponent.ndim == 0:
        half = b.fcmp_ordered("==", y, ir.Constant(y.type, 0.5))
        result = b.select(half, _intrinsic(b, "llvm.sqrt", x), result)
    return result


def _libm(name):
    """A call to the C library's function, for functions with no inline
    approximation yet: right everywhere, not vectorized. Declared approximated
    as those are (its bits may differ from numpy's by an ulp), so a kernel
    holding it always runs natively and a value computed again is the same."""

    def lower(b, args, eqn):
        t = args[0].type
        symbol = name if isinstance(t, ir.DoubleType) else name + "f"
        fn = b.module.globals.get(symbol) or ir.Function(
            b.module, ir.FunctionType(t, [t] * len(args)), name=symbol
        )
        return b.call(fn, args)

    return lower


def _clamped_log(e: mathfns.Emitter, x):
    """max(log(x), -100); NaN compares false, so it passes through as in numpy."""
    value = mathfns.log(e, x)
    floor = e.c(-100.0)
    return e.select(e.lt(value, floor), floor, value)


def _binary_cross_entropy(b, args, eqn):
    x, t = args
    e = mathfns.Emitter(b, x.type)
    one = e.c(1.0)
    return e.sub(e.mul(e.sub(t, one), _clamped_log(e, e.sub(one, x))), e.mul(t, _clamped_log(e, x)))


def _binary_cross_entropy_with_logits(b, args, eqn):
    x, t, pos_weight = args
    e = mathfns.Emitter(b, x.type)
    one = e.c(1.0)
    log_weight = e.add(e.mul(e.sub(pos_weight, one), t), one)
    smooth = mathfns.softplus(e, b.fneg(x))
    return e.add(e.mul(e.sub(one, t), x), e.mul(log_weight, smooth))


def _log_add_exp(base_two):
    """max + log1p(exp(-|x - y|)) (in base 2 for ``base_two``); equal operands
    give max + log(2) directly, so two infinities of one sign are that
    infinity rather than inf - inf."""

    def lower(b, args, eqn):
        x, y = args
        e = mathfns.Emitter(b, x.type)
        larger = e.select(e.gt(x, y), x, y)
        distance = e.call("llvm.fabs", e.sub(x, y))
        if base_two:
            tail = e.mul(
                mathfns.log1p(e, mathfns.exp(e, e.mul(distance, e.c(-math.log(2.0))))),
                e.c(1.0 / math.log(2.0)),
            )
            doubled = e.add(x, e.c(1.0))
        else:
            tail = mathfns.log1p(e, mathfns.exp(e, b.fneg(distance)))
            doubled = e.add(x, e.c(math.log(2.0)))
        return e.select(e.eq(x, y), doubled, e.add(larger, tail))

    return lower


def _gelu(b, args, eqn):
    """x * 0.5 * (1 + erf(x / sqrt(2))), in the numpy implementation's order:
    its erf is the very code of the gradient's, which a kernel holding both
    computes once."""
    (x,) = args
    e = mathfns.Emitter(b, x.type)
    half_x = e.mul(x, e.c(0.5))
    return e.mul(half_x, e.add(e.c(1.0), mathfns.erf(e, e.mul(x, e.c(P.SQRT_HALF)))))


_APPROXIMATED = {
    P.exp: _math(mathfns.exp),
    P.log: _math(mathfns.log),
    P.log1p: _math(mathfns.log1p),
    P.expm1: _math(mathfns.expm1),
    P.tanh: _math(mathfns.tanh),
    P.sigmoid: _math(mathfns.sigmoid),
    P.softplus: _math(mathfns.softplus),
    P.erf: _math(mathfns.erf),
    P.gelu: _gelu,
    P.log2: _libm("log2"),
    P.log10: _libm("log10"),
    P.exp2: _libm("exp2"),
    P.atan2: _libm("atan2"),
    P.hypot: _libm("hypot"),
    P.nextafter: _libm("nextafter"),
    P.logaddexp: _log_add_exp(base_two=False),
    P.logaddexp2: _log_add_exp(base_two=True),
    **{prim: _libm(prim.name) for prim in (P.sinh, P.cosh, P.asin, P.acos, P.atan)},
    **{prim: _libm(prim.name) for prim in (P.asinh, P.acosh, P.atanh, P.erfc)},
    P.binary_cross_entropy: _binary_cross_entropy,
    P.binary_cross_entropy_with_logits: _binary_cross_entropy_with_logits,
}

LOWERINGS = {prim: Lowering(emit) for prim, emit in _EXACT.items()}
LOWERINGS.update((prim, Lowering(emit, approximated=True)) for prim, emit in _APPROXIMATED.items())
LOWERINGS[P.pow_] = Lowering(
    _pow, approximated=True, applies=lambda eqn: eqn.out.dtype.is_floating_point
)
for _prim, _function in ((P.sin, mathfns.sin), (P.cos, mathfns.cos)):
    LOWERINGS[_prim] = Lowering(
        _math(_function),
        approximated=True,
        accurate_within=mathfns.SIN_COS_FAST_LIMIT,
        precise=lambda b, args, eqn, name=_prim.name: _intrinsic(b, f"llvm.{name}", args[0]),
    )

# Integers divided by zero raise (as PyTorch does), which only numpy's step can.
for _prim, _emit in (
    (P.fmod, lambda b, args, eqn: b.frem(*args)),
    (P.remainder, _remainder),
    (P.floor_divide, _floor_divide),
    (P.trunc_divide, _trunc_divide),
):
    LOWERINGS[_prim] = Lowering(_emit, applies=lambda eqn: eqn.out.dtype.is_floating_point)

# Kernels accumulate these as they walk their operand (see ir/fusion.py).
FUSED_REDUCTIONS = frozenset([P.reduce_sum, P.reduce_max, P.reduce_min])
# Primitives that run through their numpy implementation, and why.
IN_NUMPY = {
    P.matmul: "BLAS",
    **dict.fromkeys(
        (P.inverse, P.solve, P.det, P.logabsdet, P.det_sign, P.cholesky, P.eigh, P.svd, P.qr),
        "LAPACK",
    ),
    P.lower_part: "a triangle of matrices, rare (the gradient of a Cholesky factor)",
    **dict.fromkeys((P.lgamma, P.digamma, P.polygamma, P.erfinv), "special functions, rare"),
    P.logcumsumexp: "a scan along an axis",
    **dict.fromkeys((P.gcd, P.lcm), "a loop per element (Euclid's), rare"),
    P.running_extreme: "a scan along an axis, to an index",
    P.reduce_prod: "rare; its gradient divides by each element",
    P.argmax: "an index, not a value to fuse",
    P.argmin: "an index, not a value to fuse",
    P.reshape: "a view (inside a kernel, a reshape of a row value is free)",
    P.transpose: "a view: kernels read it through strides",
    P.index: "gathers and views",
    P.scatter_add: "scatters",
    P.scatter_extreme: "scatters",
    P.index_put: "scatters",
    P.concatenate: "a copy numpy makes at memory speed",
    P.random_bits: "a routine (runtime/routines.py): Philox's rounds for each counter",
    P.cumsum: "a scan along an axis",
    P.cumprod: "a scan along an axis",
    P.argsort: "a sort",
    P.diagonal: "a view",
    P.windows: "a routine (runtime/routines.py): a strided copy (im2col), feeding a matrix product",
    P.fold: "a routine (runtime/routines.py): overlapping windows added back (col2im)",
    P.pad: "a copy into a larger buffer",
    P.windows_matmul: "a routine (runtime/routines.py): a convolution reading its windows in place",
    P.windows_dots: "a routine (runtime/routines.py): a convolution's filter gradient, in place",
    P.fold_matmul: "a routine (runtime/routines.py): a convolution's image gradient",
    P.take_at_tile_max: "a routine (runtime/routines.py): max pooling, taps compared in order",
    P.put_at_tile_max: "a routine (runtime/routines.py): max pooling's gradient",
    P.all_reduce: "a collective: MPI communicates, as a step of the plan between kernels",
    P.broadcast: "a collective: MPI communicates, as a step of the plan between kernels",
    P.all_gather: "a collective: MPI communicates, as a step of the plan between kernels",
}


def emit(b, operands: list, eqn, precise: bool = False):
    """The equation's result from its operands. A float16 or bfloat16 result
    is computed in float32 and rounded to its type, as eagerly; a comparison
    rounds its reduced operands (a Python number kept as float32 holds one
    unrounded; the others are rounded already) as PyTorch's comparisons do."""
    lowering = LOWERINGS[eqn.prim]
    fn = lowering.precise if precise and lowering.precise is not None else lowering.emit
    out = eqn.out.dtype
    if out is dtypes.bool_:
        operands = [
            round_to(b, x, v.dtype) if v.dtype.reduced else x for x, v in zip(operands, eqn.inputs)
        ]
    value = fn(b, operands, eqn)
    kept = eqn.prim is P.convert or eqn.prim is P.unrounded
    return round_to(b, value, out) if out.reduced and not kept else value


def can_lower(eqn) -> bool:
    lowering = LOWERINGS.get(eqn.prim)
    return lowering is not None and (lowering.applies is None or lowering.applies(eqn))


def can_lower_per_row(eqn) -> bool:
    """Equations on one value per row run between a kernel's passes, where no
    range guard watches them: lowerings accurate only within a range stay out."""
    return can_lower(eqn) and LOWERINGS[eqn.prim].accurate_within is None
