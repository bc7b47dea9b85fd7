"""Every op, listed once with sample inputs and a numpy reference.

``OPS`` drives tests/test_ops.py: values against numpy (float32, float64),
gradients and second derivatives against finite differences (float64), and
the capability flags in both directions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

import fusegrad as fg
import fusegrad.nn.functional as F
from fusegrad.ir import dtypes

_rng = np.random.default_rng(1234)
_erf = np.vectorize(math.erf)


def r(*shape, lo=-2.0, hi=2.0):
    """A random float64 array, away from 0 where lo > 0."""
    return _rng.uniform(lo, hi, size=shape)


def pos(*shape):
    return r(*shape, lo=0.2, hi=2.0)


def _erfinv_by_bisection(y):
    low, high = -10.0, 10.0
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if math.erf(middle) < y else (low, middle)
    return (low + high) / 2


def _scatter_reduce_ref(x, v, ufunc, mean=False, include_self=True):
    """scatter_reduce along dim 0 with the index of the table's samples."""
    index = np.array([[0, 1, 3], [2, 1, 3], [0, 0, 3]])
    columns = np.broadcast_to(np.arange(3), index.shape)
    out = x.copy()
    hit = np.zeros(x.shape, bool)
    hit[index, columns] = True
    if not include_self:
        out[hit] = -np.inf if ufunc is np.maximum else 0.0
    ufunc.at(out, (index, columns), v)
    if mean:
        counts = np.ones(x.shape)
        np.add.at(counts, (index, columns), 1.0)
        out = out / counts
    return out


def _placed_in_order(mask, values):
    out = np.zeros(mask.shape)
    out[mask] = values[: mask.sum()]
    return out


def _bfloat16(x):
    """x rounded to bfloat16 (held in float32)."""
    return dtypes.bfloat16.round(np.asarray(x, np.float32))


def _group_norm_ref(x, groups):
    grouped = x.reshape(x.shape[0], groups, -1)
    centered = grouped - grouped.mean(-1, keepdims=True)
    return (centered / np.sqrt((centered**2).mean(-1, keepdims=True) + 1e-5)).reshape(x.shape)


def _window_coverage(size, kernel, padding):
    """How many k x k windows (stride 1, padded) cover each pixel."""
    covered = np.zeros([s + 2 * padding for s in size])
    for i in range(covered.shape[0] - kernel + 1):
        for j in range(covered.shape[1] - kernel + 1):
            covered[i : i + kernel, j : j + kernel] += 1
    return covered[padding : padding + size[0], padding : padding + size[1]]


def _conv_transpose_ref(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Each input pixel's kernel, weighted, added where its window lies; then cropped."""
    pair = lambda v: (v, v) if isinstance(v, int) else tuple(v)  # noqa: E731
    (sh, sw), (ph, pw), (oh, ow), (dh, dw) = map(pair, (stride, padding, output_padding, dilation))
    n, c_in, h, wd = x.shape
    per_in, per_out, kh, kw = c_in // groups, w.shape[1], w.shape[2], w.shape[3]
    full = np.zeros(
        (
            n,
            per_out * groups,
            (h - 1) * sh + dh * (kh - 1) + 1 + oh,
            (wd - 1) * sw + dw * (kw - 1) + 1 + ow,
        )
    )
    for c in range(c_in):
        g = c // per_in
        for i in range(h):
            for j in range(wd):
                for a in range(kh):
                    for e in range(kw):
                        full[
                            :, g * per_out : (g + 1) * per_out, i * sh + a * dh, j * sw + e * dw
                        ] += x[:, c, i, j][:, None] * w[c, :, a, e][None, :]
    out = full[:, :, ph : full.shape[2] - ph, pw : full.shape[3] - pw]
    return out if b is None else out + b[None, :, None, None]


def _conv_transpose3d_ref(x, w, b=None, stride=1, padding=0, output_padding=0, dilation=1):
    """Each input voxel's kernel, weighted, added where its window lies; then cropped."""
    (n, _, *spatial), (_, c_out, *kernel) = x.shape, w.shape
    full = [(s - 1) * stride + dilation * (k - 1) + 1 for s, k in zip(spatial, kernel)]
    out = np.zeros((n, c_out, *(f + output_padding for f in full)))
    for position in np.ndindex(*spatial):
        for tap in np.ndindex(*kernel):
            at = tuple(p * stride + t * dilation for p, t in zip(position, tap))
            out[(..., *at)] += x[(..., *position)] @ w[(..., *tap)]
    end = [f - padding + output_padding for f in full]
    out = out[:, :, padding : end[0], padding : end[1], padding : end[2]]
    return out if b is None else out + b[None, :, None, None, None]


def _ctc_ref(x, targets, input_lengths, target_lengths, blank=0):
    """Minus the log-probability of each target over its alignments, by the
    forward recursion over the targets with blanks around them (probabilities
    in float64, per sequence), of log_softmax(x)."""
    log_probs = x - np.log(np.exp(x).sum(-1, keepdims=True))
    losses = []
    for n, (steps, length) in enumerate(zip(input_lengths, target_lengths)):
        labels = [blank]
        for label in targets[n, :length]:
            labels += [label, blank]
        p = np.exp(log_probs[:steps, n])
        alpha = np.zeros(len(labels))
        alpha[:2] = p[0, labels[:2]]
        for t in range(1, steps):
            previous = alpha.copy()
            for s, label in enumerate(labels):
                reach = previous[s] + (previous[s - 1] if s else 0.0)
                if s >= 2 and s % 2 and labels[s] != labels[s - 2]:
                    reach += previous[s - 2]
                alpha[s] = reach * p[t, label]
        losses.append(-np.log(alpha[-1] + (alpha[-2] if len(labels) > 1 else 0.0)))
    return np.array(losses)


def _householder_ref(h, tau):
    """The first columns of the product of the reflectors I - tau_i v_i v_i^T."""
    m, n = h.shape[-2:]
    out = np.empty(h.shape)
    for batch in np.ndindex(*h.shape[:-2]):
        q = np.eye(m)
        for i, t in enumerate(tau[batch]):
            v = np.where(np.arange(m) > i, h[batch][:, i], np.arange(m) == i)
            q = q @ (np.eye(m) - t * np.outer(v, v))
        out[batch] = q[:, :n]
    return out


def _ctc_of_logits(x, targets, input_lengths, target_lengths, **kwargs):
    """F.ctc_loss of log_softmax(x): of log-probabilities PyTorch's gradient is
    no true one. float16 and bfloat16, which PyTorch's CTC refuses, in float32
    (as autocast would)."""
    log_probs = x.log_softmax(2)
    log_probs = log_probs.float() if x.dtype.reduced else log_probs
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, reduction="none", **kwargs)


def _flat(tensors):
    """A list of tensors (a _foreach op's) as one: their elements in order."""
    return fg.cat([t.reshape(-1) for t in tensors])


def _np_flat(arrays):
    return np.concatenate([np.reshape(a, -1) for a in arrays])


def _updated(update, *tensors):
    """Clones of ``tensors`` after ``update`` (a _foreach op in place) of their list."""
    clones = [t.clone() for t in tensors]
    update(clones)
    return clones


def _bilinear_ref(x, axis):
    """Doubles ``axis`` by linear interpolation, half-pixel centres (align_corners=False)."""
    n = x.shape[axis]
    source = np.maximum((np.arange(2 * n) + 0.5) / 2 - 0.5, 0)
    low = np.floor(source).astype(int)
    high = np.minimum(low + 1, n - 1)
    weight = (source - low).reshape((-1,) + (1,) * (x.ndim - 1 - axis))
    return np.take(x, low, axis) * (1 - weight) + np.take(x, high, axis) * weight


def _digamma(x):
    """Digamma from its series sum_k 1/(k+1) - 1/(k+x) - Euler's gamma, summed
    far enough (with the tail's integral) for double precision; x > 0 shifted
    down by the recurrence where negative."""
    x = np.asarray(x, np.float64)
    shift = np.where(x < 1, np.ceil(1 - x), 0.0)
    z = x + shift
    k = np.arange(200000.0)[:, None]
    total = (1 / (k + 1) - 1 / (k + z.ravel())).sum(0) - np.euler_gamma
    # the tail beyond the sum: its integral and half its first term (Euler-Maclaurin)
    total += np.log((200000 + z.ravel()) / 200001) + 0.5 * (1 / 200001 - 1 / (200000 + z.ravel()))
    out = total.reshape(z.shape)
    for step in range(int(shift.max()) if shift.size else 0):
        below = step < shift
        out = np.where(below, out - 1 / (z - step - 1), out)
    return out


def _polygamma_by_differences(x, n):
    """psi^(n) as the n-th derivative of math.lgamma's derivative, by series."""
    x = np.asarray(x, np.float64)
    k = np.arange(100000.0)[:, None]
    total = ((k + x.ravel()) ** -(n + 1)).sum(0)
    tail = (100000 + x.ravel()) ** -n / n + 0.5 * (100000 + x.ravel()) ** -(n + 1)
    return ((-1) ** (n + 1) * math.factorial(n) * (total + tail)).reshape(x.shape)


def _well_conditioned(*sizes):
    """n by n matrices (a stack of them for more sizes) whose diagonal
    dominates: far from singular."""
    n = sizes[-1]
    return r(*sizes, n) + 5.0 * np.eye(n)


def ints(values):
    return np.array(values, dtype=np.int64)


@dataclass
class Sample:
    args: tuple
    kwargs: dict = field(default_factory=dict)

    def __repr__(self):
        shapes = ",".join(str(list(np.shape(a))) for a in self.args)
        return f"{shapes}{self.kwargs or ''}"


def S(*args, **kwargs):
    return Sample(args, kwargs)


@dataclass
class OpInfo:
    name: str
    op: object  # fusegrad function of tensors (and kwargs)
    ref: object  # numpy function of float64 arrays
    samples: list
    differentiable: bool = True  # outputs require grad when a float input does
    second_order: bool = True
    # gradients checked against finite differences: not where a sample sits
    # on a jump of a piecewise constant op (round's halves), whose derivative
    # is 0 there as elsewhere while finite differences straddle the jump
    finite_differences: bool = True
    float_inputs: tuple | None = None  # positions of float args (default: all float arrays)
    rtol32: float = 1e-5
    jit: bool = True  # compiles under fusegrad.jit (a mask's result shape depends on values)
    vmap: bool = True  # vmap takes it (it reads no number out of a tensor: .item())


def _reduction(name, numpy_name, samples):
    """A Tensor method reducing over ``dim`` and its numpy counterpart over ``axis``."""
    return OpInfo(
        name,
        lambda x, **k: getattr(x, name)(**k),
        lambda x, dim=None, keepdim=False: getattr(x, numpy_name)(axis=dim, keepdims=keepdim),
        samples,
    )


def _split(name, samples):
    """A split's pieces, stacked into one tensor (array) to compare."""
    fg_split, np_split = getattr(fg, name), getattr(np, name)
    return OpInfo(
        name,
        lambda x, sections: fg.stack(fg_split(x, sections)),
        lambda x, sections: np.stack(np_split(x, sections)),
        samples,
    )


def _narrow(name):
    op = getattr(fg, name)
    return OpInfo(
        name,
        lambda x, **k: op(x, **k),
        # a negative start counts from the end, as an index does
        lambda x, dim, start, length: np.take(
            x, np.arange(start, start + length) % x.shape[dim], dim
        ),
        [S(r(3, 4), dim=1, start=1, length=2), S(r(4, 3), dim=0, start=-3, length=3)],
    )


def _triangle_indices(name):
    """A creation from sizes alone: the samples are all keywords, so no tensor goes in."""
    op, numpy_indices = getattr(fg, name), getattr(np, name)
    return OpInfo(
        name,
        lambda **k: op(**k),
        lambda row, col, offset=0: np.stack(numpy_indices(row, offset, col)),
        [S(row=3, col=4), S(row=4, col=3, offset=-1), S(row=3, col=3, offset=1)],
        differentiable=False,
    )


def _softmax(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True, initial=-np.inf))
    return e / e.sum(axis=dim, keepdims=True)


def _logsumexp(x, dim, keepdim=False):
    m = x.max(axis=dim, keepdims=True)
    out = np.log(np.exp(x - m).sum(axis=dim, keepdims=True)) + m
    return out if keepdim else np.squeeze(out, axis=dim)


def _layer_norm(x, w, b):
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def _cross_entropy(x, target):
    logp = x - _logsumexp(x, 1, keepdim=True)
    return -logp[np.arange(len(target)), target].mean()


def _setitem(x, v):
    y = x.clone()
    y[1, ::2] = v
    return y


def _setitem_ref(x, v):
    y = x.copy()
    y[1, ::2] = v
    return y


def _mask(x):
    return x[x > 0.5]


def _sort_ref(x, dim=-1, descending=False):
    if np.ndim(x) == 0:
        return x
    order = _argsort_ref(x, dim, descending)
    return np.take_along_axis(x, order, dim)


def _argsort_ref(x, dim=-1, descending=False):
    if descending:  # stable: of equal elements, the first comes first
        return np.flip(x.shape[dim] - 1 - np.argsort(np.flip(x, dim), dim, kind="stable"), dim)
    return np.argsort(x, dim, kind="stable")


def _topk_ref(x, k, dim=-1, largest=True, indices=False):
    order = np.take(_argsort_ref(x, dim, largest), np.arange(k), axis=dim)
    return order if indices else np.take_along_axis(x, order, dim)


def _grids(index, dim):
    return tuple(
        index
        if d == dim
        else np.arange(n).reshape([-1 if e == d else 1 for e in range(index.ndim)])
        for d, n in enumerate(index.shape)
    )


def _scatter_ref(x, index, src, dim):
    out = x.copy()
    out[_grids(index, dim)] = src[tuple(slice(0, n) for n in index.shape)]
    return out


def _scatter_add_ref(x, index, src, dim):
    out = x.copy()
    np.add.at(out, _grids(index, dim), src[tuple(slice(0, n) for n in index.shape)])
    return out


def _index_add_ref(x, index, source, dim, alpha=1):
    out = x.copy()
    np.add.at(out, (slice(None),) * dim + (index,), alpha * source)
    return out


def _diag_embed_ref(x, offset=0):
    n = x.shape[-1] + abs(offset)
    out = np.zeros(x.shape[:-1] + (n, n))
    rows = np.arange(x.shape[-1]) + max(-offset, 0)
    out[..., rows, rows + offset] = x
    return out


def _roll_ref(x, shifts, dims=None):
    return np.roll(x, shifts, dims)


ZEROS_IN_SLICES = np.array([[1.5, 0.0, 2.0, -1.0], [0.5, -1.0, 3.0, 0.0], [0.0, 2.0, 0.5, 1.5]])


BINARY_SAMPLES = [
    S(r(3, 4), r(3, 4)),
    S(r(3, 4), r(4)),
    S(r(2, 1, 3), r(4, 1)),
    S(r(), r(3)),
    S(r(3), 1.5),
]
UNARY_SAMPLES = [S(r(3, 4)), S(r()), S(r(1, 5, 1))]
# no quotient near an integer, where a remainder jumps by the divisor
_DIVIDENDS = np.array([[-1.9, -0.45, 0.3, 1.75], [0.85, -1.2, 1.6, -0.1], [2.45, 0.55, -2.2, 0.95]])
DIVISION_SAMPLES = [
    S(_DIVIDENDS, np.array([0.7, -0.9, 1.3, -1.7])),
    S(_DIVIDENDS, 0.75),
    S(1.25, np.array([0.7, -0.9, 1.3, -1.7])),
    S(np.array(-1.3), _DIVIDENDS + 3.0),
]

OPS = [
    # elementwise arithmetic
    OpInfo("add", lambda a, b: a + b, np.add, BINARY_SAMPLES),
    OpInfo("sub", lambda a, b: a - b, np.subtract, BINARY_SAMPLES),
    OpInfo("rsub", lambda a: 2.0 - a, lambda a: 2.0 - a, UNARY_SAMPLES),
    OpInfo("mul", lambda a, b: a * b, np.multiply, BINARY_SAMPLES),
    OpInfo(
        "div",
        lambda a, b: a / b,
        np.divide,
        [S(r(3, 4), pos(3, 4)), S(r(3, 4), pos(4)), S(r(3), 1.5), S(2.0, pos(3))],
    ),
    OpInfo(
        "pow",
        lambda a, b: a**b,
        np.power,
        [S(pos(3, 4), r(3, 4)), S(pos(3, 4), 2.0), S(pos(3), 0.5), S(3.0, r(3))],
    ),
    OpInfo("neg", lambda a: -a, np.negative, UNARY_SAMPLES),
    OpInfo("matmul_op", lambda a, b: a @ b, np.matmul, [S(r(3, 4), r(4, 2))]),
    # unary math
    OpInfo("abs", fg.abs, np.abs, UNARY_SAMPLES),
    OpInfo("exp", fg.exp, np.exp, UNARY_SAMPLES),
    OpInfo("log", fg.log, np.log, [S(pos(3, 4)), S(pos())]),
    OpInfo("log1p", fg.log1p, np.log1p, [S(r(3, 4, lo=-0.5))]),
    OpInfo("expm1", fg.expm1, np.expm1, UNARY_SAMPLES),
    OpInfo("sqrt", fg.sqrt, np.sqrt, [S(pos(3, 4)), S(pos())]),
    OpInfo("log2", fg.log2, np.log2, [S(pos(3, 4)), S(pos())]),
    OpInfo("log10", fg.log10, np.log10, [S(pos(3, 4)), S(pos())]),
    OpInfo("exp2", fg.exp2, np.exp2, UNARY_SAMPLES),
    OpInfo("square", fg.square, np.square, UNARY_SAMPLES),
    OpInfo("reciprocal", fg.reciprocal, np.reciprocal, [S(pos(3, 4)), S(-pos(3))]),
    OpInfo(
        "atan2",
        fg.atan2,
        np.arctan2,
        [S(r(3, 4), r(3, 4)), S(r(3, 4), pos(4)), S(r(3), -1.5), S(r(), r(2, 3))],
    ),
    OpInfo("fmod", fg.fmod, np.fmod, DIVISION_SAMPLES),
    OpInfo("remainder", lambda a, b: a % b, np.remainder, DIVISION_SAMPLES),
    OpInfo("remainder_fn", fg.remainder, np.remainder, DIVISION_SAMPLES[:1]),
    # the quotients are piecewise constant: zero gradients (samples away from the jumps)
    OpInfo("floor_divide", lambda a, b: a // b, np.floor_divide, DIVISION_SAMPLES),
    OpInfo(
        "div_floor",
        lambda a, b: fg.div(a, b, rounding_mode="floor"),
        np.floor_divide,
        DIVISION_SAMPLES[:1],
    ),
    OpInfo(
        "div_trunc",
        lambda a, b: a.div(b, rounding_mode="trunc"),
        lambda a, b: np.trunc(a / b),
        DIVISION_SAMPLES[:2],
    ),
    OpInfo(
        "integer_division",
        lambda a, b: fg.stack([a // b, a % b, fg.fmod(a, b), fg.div(a, b, rounding_mode="trunc")]),
        lambda a, b: np.stack([a // b, a % b, np.fmod(a, b), (a - np.fmod(a, b)) // b]),
        [S(ints([[-7, 7, 0, 6], [9, -9, 5, -1]]), ints([2, -2, 3, -4])), S(ints([-7, 8]), 3)],
        differentiable=False,
    ),
    OpInfo("rsqrt", fg.rsqrt, lambda x: 1 / np.sqrt(x), [S(pos(3, 4))]),
    OpInfo("sin", fg.sin, np.sin, UNARY_SAMPLES),
    OpInfo("cos", fg.cos, np.cos, UNARY_SAMPLES),
    OpInfo("tan", fg.tan, np.tan, [S(r(3, 4, lo=-1.2, hi=1.2))]),
    OpInfo(
        "lgamma",
        fg.lgamma,
        np.vectorize(math.lgamma),
        [S(r(3, 4, lo=0.2, hi=20.0)), S(np.array([-2.5, -0.3, 0.7, 3.5]))],
    ),
    OpInfo(
        "digamma",
        fg.digamma,
        _digamma,
        [S(r(3, 4, lo=0.2, hi=20.0)), S(np.array([-2.5, -0.3, 0.7, 3.5]))],
    ),
    OpInfo(
        "polygamma",
        lambda x: fg.polygamma(2, x),
        lambda x: _polygamma_by_differences(x, 2),
        [S(r(3, 4, lo=0.5, hi=5.0))],
        rtol32=1e-4,
    ),
    OpInfo(
        "mvlgamma",
        lambda x: fg.mvlgamma(x, 3),
        lambda x: (
            sum(np.vectorize(math.lgamma)(x - k / 2) for k in range(3)) + 1.5 * math.log(math.pi)
        ),
        [S(r(3, 4, lo=1.5, hi=6.0))],
    ),
    OpInfo("entr", fg.special.entr, lambda x: -x * np.log(x), [S(pos(3, 4))]),
    OpInfo(
        "ndtr",
        fg.special.ndtr,
        lambda x: 0.5 * np.vectorize(math.erfc)(-x / math.sqrt(2)),
        UNARY_SAMPLES,
    ),
    OpInfo(
        "xlog1py",
        fg.special.xlog1py,
        lambda x, y: x * np.log1p(y),
        [S(r(3, 4), pos(3, 4)), S(r(3), 2.5)],
    ),
    OpInfo(
        "erfinv",
        fg.erfinv,
        np.vectorize(_erfinv_by_bisection),
        [S(r(3, 4, lo=-0.99, hi=0.99)), S(np.array([0.0, 1e-9, -0.9, 0.95]))],
    ),
    OpInfo("sinh", fg.sinh, np.sinh, UNARY_SAMPLES),
    OpInfo("cosh", fg.cosh, np.cosh, UNARY_SAMPLES),
    OpInfo("asin", fg.asin, np.arcsin, [S(r(3, 4, lo=-0.9, hi=0.9)), S(r(lo=-0.9, hi=0.9))]),
    OpInfo("acos", fg.acos, np.arccos, [S(r(3, 4, lo=-0.9, hi=0.9))]),
    OpInfo("atan", fg.atan, np.arctan, UNARY_SAMPLES),
    OpInfo("asinh", fg.asinh, np.arcsinh, UNARY_SAMPLES),
    OpInfo("acosh", fg.acosh, np.arccosh, [S(r(3, 4, lo=1.2, hi=3.0))]),
    OpInfo("atanh", fg.atanh, np.arctanh, [S(r(3, 4, lo=-0.9, hi=0.9))]),
    OpInfo("erfc", fg.erfc, np.vectorize(math.erfc), [S(r(3, 4, lo=-3.0, hi=5.0))]),
    OpInfo("tanh", fg.tanh, np.tanh, UNARY_SAMPLES),
    OpInfo("sigmoid", fg.sigmoid, lambda x: 1 / (1 + np.exp(-x)), UNARY_SAMPLES),
    OpInfo("relu", fg.relu, lambda x: np.maximum(x, 0), UNARY_SAMPLES),
    OpInfo("gelu", F.gelu, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), UNARY_SAMPLES),
    OpInfo(
        "gelu_tanh",
        lambda x: F.gelu(x, approximate="tanh"),
        lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
        UNARY_SAMPLES,
    ),
    OpInfo("softplus", F.softplus, lambda x: np.log1p(np.exp(x)), UNARY_SAMPLES),
    OpInfo(
        "softplus_beta",
        lambda x: F.softplus(x, beta=2.0, threshold=3.0),
        lambda x: np.where(2 * x > 3.0, x, np.log1p(np.exp(2 * x)) / 2),
        [S(r(4, 5, lo=-3))],
    ),
    OpInfo("erf", fg.erf, _erf, UNARY_SAMPLES),
    OpInfo(
        "clamp", lambda x: fg.clamp(x, -0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7), UNARY_SAMPLES
    ),
    OpInfo("clamp_min", lambda x: x.clamp(min=0.1), lambda x: np.maximum(x, 0.1), UNARY_SAMPLES),
    OpInfo(
        "clamp_min_fn",
        lambda x: fg.clamp_min(x, 0.1),
        lambda x: np.maximum(x, 0.1),
        UNARY_SAMPLES,
    ),
    OpInfo("clamp_max", lambda x: x.clamp_max(-0.2), lambda x: np.minimum(x, -0.2), UNARY_SAMPLES),
    OpInfo("maximum", fg.maximum, np.maximum, BINARY_SAMPLES[:3]),
    OpInfo("minimum", fg.minimum, np.minimum, BINARY_SAMPLES[:3]),
    OpInfo(
        "where",
        lambda c, a, b: fg.where(c > 0, a, b),
        lambda c, a, b: np.where(c > 0, a, b),
        [S(r(3, 4), r(3, 4), r(3, 4)), S(r(3, 1), r(4), r(3, 4))],
        float_inputs=(1, 2),
    ),
    # comparisons: no gradient
    OpInfo("lt", lambda a, b: a < b, np.less, BINARY_SAMPLES, differentiable=False),
    OpInfo("le", lambda a, b: a <= b, np.less_equal, BINARY_SAMPLES, differentiable=False),
    OpInfo("gt", lambda a, b: a > b, np.greater, BINARY_SAMPLES, differentiable=False),
    OpInfo("ge", lambda a, b: a >= b, np.greater_equal, BINARY_SAMPLES, differentiable=False),
    OpInfo("eq", lambda a, b: a == b, np.equal, [S(r(3), r(3))], differentiable=False),
    OpInfo("ne", lambda a, b: a != b, np.not_equal, [S(r(3), r(3))], differentiable=False),
    # piecewise constant: zero gradients (the samples are away from the jumps)
    OpInfo("sign", fg.sign, np.sign, UNARY_SAMPLES),
    OpInfo("floor", fg.floor, np.floor, UNARY_SAMPLES),
    OpInfo("ceil", fg.ceil, np.ceil, UNARY_SAMPLES),
    OpInfo("trunc", fg.trunc, np.trunc, UNARY_SAMPLES),
    OpInfo("round", fg.round, np.round, UNARY_SAMPLES),
    OpInfo(  # halves go to even; on these jumps only finite differences see a slope
        "round_halves",
        fg.round,
        np.round,
        [S(np.arange(-3, 3) + 0.5)],
        finite_differences=False,
    ),
    OpInfo(  # a number input of a program beside a bfloat16 tensor stays float32 (unrounded)
        "number_beside_bfloat16",
        lambda x: (x.to(fg.bfloat16) * x.max().item()).to(x.dtype),
        lambda x: _bfloat16(_bfloat16(x) * np.float32(x.max())),
        # fixed values: a draw from r() would move every later row's samples
        [S(np.array([[0.3, -1.7, 2.5, 0.05], [1.25, -0.6, 3.1, -2.2]]))],
        finite_differences=False,
        vmap=False,
    ),
    OpInfo(  # scaled, rounded and scaled back, as PyTorch: 2.5 and 250 go to even
        "round_decimals",
        lambda x: fg.stack([fg.round(x, decimals=1), x.round(decimals=-2), x.fix()]),
        lambda x: np.stack([np.round(x * 10) / 10, np.round(x / 100) * 100, np.trunc(x)]),
        [S(np.array([0.25, -1.25, 250.0, 349.0, 1.234])), S(r(3, 4))],
        finite_differences=False,
    ),
    # reductions
    _reduction(
        "sum",
        "sum",
        [S(r(3, 4)), S(r(3, 4), dim=1), S(r(2, 3, 4), dim=(0, 2), keepdim=True), S(r())],
    ),
    _reduction("mean", "mean", [S(r(3, 4)), S(r(3, 4), dim=0, keepdim=True)]),
    _reduction(
        "prod",
        "prod",
        [
            S(r(3, 4)),
            S(r(3, 4), dim=1),
            S(np.array([[1.5, 0.0, 2.0], [0.5, -1.0, 3.0]]), dim=1),
            S(ZEROS_IN_SLICES, dim=0),
            S(np.array([[1.5, 0.0, 2.0, 0.0], [0.5, 0.0, 3.0, 2.0]])),
        ],
    ),
    _reduction("amax", "max", [S(r(3, 4)), S(r(3, 4), dim=1, keepdim=True)]),
    _reduction("amin", "min", [S(r(3, 4)), S(r(3, 4), dim=0)]),
    OpInfo("max", lambda x: x.max(), lambda x: x.max(), [S(r(3, 4))]),
    OpInfo(
        "max_dim",
        lambda x, **k: x.max(**k).values,
        lambda x, dim, keepdim=False: x.max(axis=dim, keepdims=keepdim),
        [S(r(3, 4), dim=1), S(r(3, 4), dim=0, keepdim=True)],
    ),
    OpInfo("min", lambda x: x.min(), lambda x: x.min(), [S(r(3, 4))]),
    OpInfo(
        "min_dim",
        lambda x, **k: x.min(**k).values,
        lambda x, dim, keepdim=False: x.min(axis=dim, keepdims=keepdim),
        [S(r(3, 4), dim=1)],
    ),
    OpInfo(
        "argmax",
        lambda x, **k: x.argmax(**k),
        lambda x, dim=None: np.argmax(x, axis=dim),
        [S(r(3, 4)), S(r(3, 4), dim=1)],
        differentiable=False,
    ),
    OpInfo(
        "argmin",
        lambda x, **k: x.argmin(**k),
        lambda x, dim=None: np.argmin(x, axis=dim),
        [S(r(3, 4)), S(r(3, 4), dim=0)],
        differentiable=False,
    ),
    OpInfo(
        "norm",
        lambda x, **k: x.norm(**k),
        lambda x, p=2, dim=None, keepdim=False: np.linalg.norm(
            x.reshape(-1) if dim is None else x, ord=p, axis=dim, keepdims=keepdim
        ),
        [S(r(3, 4)), S(r(3, 4), dim=1), S(r(3, 4), p=1, dim=0)],
    ),
    OpInfo(
        "var",
        lambda x, **k: x.var(**k),
        lambda x, dim=None, keepdim=False, correction=1: x.var(
            axis=dim, ddof=correction, keepdims=keepdim
        ),
        [S(r(3, 4)), S(r(3, 4), dim=1, keepdim=True), S(r(5), correction=0)],
    ),
    OpInfo(
        "std",
        lambda x, **k: x.std(**k),
        lambda x, dim=None: x.std(axis=dim, ddof=1),
        [S(r(3, 4)), S(r(3, 4), dim=0)],
    ),
    OpInfo(
        "logsumexp",
        lambda x, **k: x.logsumexp(**k),
        _logsumexp,
        [S(r(3, 4), dim=1), S(r(3, 4) * 30, dim=0)],
    ),
    OpInfo(
        "all",
        lambda x, **k: (x > 0).all(**k),
        lambda x, dim=None: (x > 0).all(axis=dim),
        [S(r(3, 4)), S(r(3, 4), dim=1), S(r(0, 4), dim=0), S(r(2, 0), dim=0)],
        differentiable=False,
    ),
    OpInfo(
        "any",
        lambda x, **k: (x > 0).any(**k),
        lambda x, dim=None: (x > 0).any(axis=dim),
        [S(r(3, 4)), S(r(3, 4), dim=0), S(r(0, 4), dim=-2), S(r(2, 0), dim=0)],
        differentiable=False,
    ),
    # scans and sorting
    OpInfo(
        "cumsum",
        lambda x, **k: x.cumsum(**k),
        lambda x, dim: np.cumsum(x, axis=dim if np.ndim(x) else None).reshape(np.shape(x)),
        [S(r(3, 4), dim=1), S(r(3, 4), dim=0), S(r(2, 3, 4), dim=-2), S(r(), dim=0)],
    ),
    OpInfo(
        "cumprod",
        lambda x, **k: fg.cumprod(x, **k),
        lambda x, dim: np.cumprod(x, axis=dim),
        [S(r(3, 4), dim=1), S(r(2, 3, 4), dim=0), S(ZEROS_IN_SLICES, dim=1)],
    ),
    OpInfo(
        "cumprod_zeros",  # slices with two and three zeros
        lambda x, **k: fg.cumprod(x, **k),
        lambda x, dim: np.cumprod(x, axis=dim),
        [S(ZEROS_IN_SLICES, dim=0), S(np.array([2.0, 0.0, 1.5, 0.0, 3.0, 0.0, 0.5]), dim=0)],
    ),
    OpInfo(
        "sort",
        lambda x, **k: fg.sort(x, **k).values,
        _sort_ref,
        [S(r(3, 5)), S(r(3, 5), dim=0, descending=True), S(r(4), descending=True), S(r())],
    ),
    OpInfo(
        "sort_indices",
        lambda x, **k: x.sort(**k).indices,
        _argsort_ref,
        [
            S(np.array([[2.0, 1.0, 2.0, 0.5, 1.0]])),
            S(np.array([2.0, 1.0, 2.0, 1.0]), descending=True),
        ],
        differentiable=False,
    ),
    OpInfo(
        "argsort",
        lambda x, **k: x.argsort(**k),
        _argsort_ref,
        [S(r(3, 5), dim=0), S(np.array([1.0, 3.0, 1.0, 3.0]), descending=True)],
        differentiable=False,
    ),
    OpInfo(
        "topk",
        lambda x, k, **kw: fg.topk(x, k, **kw).values,
        _topk_ref,
        [S(r(3, 6), 2), S(r(3, 6), 3, dim=0, largest=False), S(r(5), 5), S(r(4, 2), 0)],
    ),
    OpInfo(
        "topk_indices",
        lambda x, k, **kw: x.topk(k, **kw).indices,
        lambda x, k, **kw: _topk_ref(x, k, **kw, indices=True),
        [
            S(np.array([[1.0, 3.0, 2.0, 3.0, 1.0]]), 3),
            S(np.array([1.0, 0.0, 1.0, 0.0]), 3, largest=False),
        ],
        differentiable=False,
    ),
    OpInfo(
        "softmax",
        lambda x, dim: fg.softmax(x, dim),
        _softmax,
        [S(r(3, 4), dim=1), S(r(3, 4), dim=0), S(r(2, 0), dim=1), S(r(0, 3), dim=1)],
    ),
    OpInfo(
        "log_softmax",
        lambda x, dim: fg.log_softmax(x, dim),
        lambda x, dim: np.log(_softmax(x, dim)),
        [S(r(3, 4), dim=1), S(r(2, 0), dim=1)],
    ),
    # matrix products
    OpInfo(
        "matmul",
        fg.matmul,
        np.matmul,
        [
            S(r(3, 4), r(4, 2)),
            S(r(4), r(4)),
            S(r(3, 4), r(4)),
            S(r(4), r(4, 2)),
            S(r(2, 3, 4), r(4, 5)),
            S(r(2, 3, 4), r(2, 4, 5)),
        ],
    ),
    OpInfo("mm", fg.mm, np.matmul, [S(r(3, 4), r(4, 2))]),
    OpInfo("bmm", fg.bmm, np.matmul, [S(r(2, 3, 4), r(2, 4, 5))]),
    OpInfo("dot", fg.dot, np.dot, [S(r(5), r(5))]),
    # shape ops
    OpInfo("reshape", lambda x: x.reshape(4, -1), lambda x: x.reshape(4, -1), [S(r(2, 6))]),
    OpInfo("view", lambda x: x.view(3, 4), lambda x: x.reshape(3, 4), [S(r(12))]),
    OpInfo("flatten", lambda x: x.flatten(1), lambda x: x.reshape(x.shape[0], -1), [S(r(2, 3, 4))]),
    OpInfo(
        "permute", lambda x: x.permute(2, 0, 1), lambda x: x.transpose(2, 0, 1), [S(r(2, 3, 4))]
    ),
    OpInfo("transpose", lambda x: x.transpose(0, 2), lambda x: x.swapaxes(0, 2), [S(r(2, 3, 4))]),
    OpInfo("t", lambda x: x.t(), lambda x: x.T, [S(r(3, 4)), S(r(3))]),
    OpInfo("T", lambda x: x.T, lambda x: x.T, [S(r(3, 4))]),
    OpInfo("unsqueeze", lambda x: x.unsqueeze(1), lambda x: np.expand_dims(x, 1), [S(r(3, 4))]),
    OpInfo("squeeze", lambda x: x.squeeze(), np.squeeze, [S(r(1, 3, 1, 4))]),
    OpInfo("squeeze_dim", lambda x: x.squeeze(0), lambda x: np.squeeze(x, 0), [S(r(1, 3))]),
    OpInfo(
        "expand",
        lambda x: x.expand(2, 3, 4),
        lambda x: np.broadcast_to(x, (2, 3, 4)),
        [S(r(3, 1)), S(r(4))],
    ),
    OpInfo(
        "broadcast_to",
        lambda x: fg.broadcast_to(x, (3, 4)),
        lambda x: np.broadcast_to(x, (3, 4)),
        [S(r(1, 4))],
    ),
    OpInfo(
        "cat",
        lambda a, b: fg.cat([a, b], dim=1),
        lambda a, b: np.concatenate([a, b], 1),
        [S(r(3, 2), r(3, 4))],
    ),
    OpInfo(
        "stack",
        lambda a, b: fg.stack([a, b], dim=1),
        lambda a, b: np.stack([a, b], 1),
        [S(r(3, 4), r(3, 4))],
    ),
    OpInfo(
        "repeat",
        lambda x: x.repeat(2, 1, 3),
        lambda x: np.tile(x, (2, 1, 3)),
        [S(r(3, 2)), S(r(2, 3, 1)), S(r())],
    ),
    OpInfo(
        "repeat_interleave",
        lambda x, **k: x.repeat_interleave(**k),
        lambda x, repeats, dim=None: np.repeat(x, repeats, axis=dim),
        [S(r(3, 2), repeats=2), S(r(3, 2), repeats=3, dim=1), S(r(2, 3), repeats=0, dim=0)],
    ),
    OpInfo(
        "repeat_interleave_counts",
        lambda x, counts: fg.repeat_interleave(x, counts, dim=0),
        lambda x, counts: np.repeat(x, counts, axis=0),
        [S(r(3, 2), ints([2, 0, 1])), S(r(3), ints([3]))],
    ),
    OpInfo("flip", lambda x: x.flip((0, 2)), lambda x: np.flip(x, (0, 2)), [S(r(2, 3, 4))]),
    OpInfo("fliplr", fg.fliplr, np.fliplr, [S(r(3, 4))]),
    OpInfo("flipud", fg.flipud, np.flipud, [S(r(3, 4))]),
    OpInfo(
        "roll",
        lambda x, *a, **k: fg.roll(x, *a, **k),
        _roll_ref,
        [S(r(3, 4), 1), S(r(3, 4), (1, -3), (0, 1)), S(r(3, 4), -5, dims=1)],
    ),
    OpInfo(
        "tril",
        lambda x, **k: x.tril(**k),
        lambda x, diagonal=0: np.tril(x, diagonal),
        [S(r(4, 3)), S(r(2, 3, 4), diagonal=1), S(r(3, 3), diagonal=-1)],
    ),
    OpInfo(
        "triu",
        lambda x, **k: fg.triu(x, **k),
        lambda x, diagonal=0: np.triu(x, diagonal),
        [S(r(4, 3)), S(r(2, 3, 4), diagonal=-2)],
    ),
    OpInfo(
        "diagonal",
        lambda x, **k: x.diagonal(**k),
        lambda x, offset=0, dim1=0, dim2=1: np.diagonal(x, offset, dim1, dim2),
        [
            S(r(3, 4)),
            S(r(3, 4), offset=1),
            S(r(4, 3), offset=-2),
            S(r(2, 3, 4), offset=1, dim1=2, dim2=0),
            S(r(2, 3), offset=5),
        ],
    ),
    OpInfo(
        "diag",
        lambda x, *a: fg.diag(x, *a),
        lambda x, *a: np.diag(x, *a),
        [S(r(3)), S(r(2), -1), S(r(3, 4)), S(r(3, 4), 2)],
    ),
    OpInfo(
        "diag_embed",
        lambda x, *a: fg.diag_embed(x, *a),
        _diag_embed_ref,
        [S(r(3)), S(r(2, 3), 1), S(r(2, 3), -2)],
    ),
    OpInfo("trace", fg.trace, np.trace, [S(r(3, 4))]),
    OpInfo(
        "masked_fill",
        lambda x, m: x.masked_fill(m > 0, 0.5),
        lambda x, m: np.where(m > 0, 0.5, x),
        [S(r(3, 4), r(3, 4)), S(r(3, 4), r(4)), S(r(4), r(3, 1))],
        float_inputs=(0,),
    ),
    OpInfo(
        "masked_fill_tensor",
        lambda x, v: x.masked_fill(x > 0, v),
        lambda x, v: np.where(x > 0, v, x),
        [S(r(3, 4), r())],
    ),
    OpInfo(
        "einsum",
        lambda *xs, equation: fg.einsum(equation, *xs),
        lambda *xs, equation: np.einsum(equation, *xs),
        [
            S(r(3, 4), r(4, 5), equation="ij,jk->ik"),
            S(r(3, 4), r(5, 4), equation="ij,kj"),
            S(r(2, 3, 4), r(2, 4, 5), equation="bij,bjk->bik"),
            S(r(3, 3), equation="ii->i"),
            S(r(3, 3, 2), equation="iij"),
            S(r(2, 3, 4), r(4, 5), equation="...ij,...jk->...ik"),
            S(r(3), r(4), equation="i,j->ij"),
            S(r(2, 3), r(3, 4), r(4), equation="ij,jk,k->i"),
            S(r(2, 3, 4), r(3, 2, 5), equation="ijk,jil->kl"),
            S(r(3, 4), equation="ij->"),
        ],
    ),
    OpInfo("split", lambda x: fg.split(x, 2, dim=1)[1], lambda x: x[:, 2:4], [S(r(3, 5))]),
    OpInfo("split_sizes", lambda x: x.split([1, 3], 1)[1], lambda x: x[:, 1:], [S(r(3, 4))]),
    OpInfo("chunk", lambda x: fg.chunk(x, 2, 0)[1], lambda x: x[2:], [S(r(4, 3))]),
    # indexing
    OpInfo("getitem_basic", lambda x: x[1:, ::2, 0], lambda x: x[1:, ::2, 0], [S(r(3, 4, 2))]),
    OpInfo("getitem_int", lambda x: x[-1], lambda x: x[-1], [S(r(3, 4))]),
    OpInfo(
        "getitem_none_ellipsis", lambda x: x[None, ..., 1], lambda x: x[None, ..., 1], [S(r(3, 4))]
    ),
    OpInfo(
        "getitem_array", lambda x: x[fg.tensor([2, 0, 2])], lambda x: x[[2, 0, 2]], [S(r(3, 4))]
    ),
    OpInfo(
        "getitem_arrays",
        lambda x: x[fg.tensor([0, 2]), :, fg.tensor([1, 1])],
        lambda x: x[[0, 2], :, [1, 1]],
        [S(r(3, 4, 2))],
    ),
    OpInfo("getitem_mask", _mask, lambda x: x[x > 0.5], [S(r(3, 4))], jit=False),
    OpInfo("setitem", _setitem, _setitem_ref, [S(r(3, 4), r(2)), S(r(3, 4), 0.25)]),
    OpInfo(
        "index_select",
        lambda x, i: fg.index_select(x, 1, i),
        lambda x, i: np.take(x, i, axis=1),
        [S(r(3, 4), ints([3, 0, 3]))],
    ),
    OpInfo(
        "scatter",
        lambda x, i, src: fg.scatter(x, 1, i, src),
        lambda x, i, src: _scatter_ref(x, i, src, 1),
        [S(r(3, 4), ints([[0, 3], [1, 2], [2, 0]]), r(3, 3))],
    ),
    OpInfo(
        "scatter_value",
        lambda x, i: x.scatter(0, i, -1.5),
        lambda x, i: _scatter_ref(x, i, np.full(i.shape, -1.5), 0),
        [S(r(3, 4), ints([[2, 0, 1, 2]]))],
    ),
    OpInfo(
        "scatter_add",
        lambda x, i, src: x.scatter_add(0, i, src),
        lambda x, i, src: _scatter_add_ref(x, i, src, 0),
        [S(r(3, 4), ints([[2, 0, 2, 1], [2, 2, 0, 1]]), r(2, 4))],
    ),
    OpInfo(
        "index_add",
        lambda x, i, source, **k: fg.index_add(x, 1, i, source, **k),
        lambda x, i, source, **k: _index_add_ref(x, i, source, 1, **k),
        [S(r(3, 4), ints([3, 0, 3]), r(3, 3)), S(r(3, 4), ints([1, 1]), r(3, 2), alpha=2.5)],
    ),
    OpInfo(
        "nonzero",
        lambda x: fg.nonzero(x > 0.5),
        lambda x: np.argwhere(x > 0.5),
        [S(r(3, 4)), S(r(5))],
        differentiable=False,
        jit=False,
    ),
    OpInfo(
        "where_condition",
        lambda x: fg.where(x > 0.5)[-1],
        lambda x: np.nonzero(x > 0.5)[-1],
        [S(r(3, 4))],
        differentiable=False,
        jit=False,
    ),
    OpInfo(
        "gather",
        lambda x, i: fg.gather(x, 1, i),
        lambda x, i: np.take_along_axis(x, i, 1),
        [S(r(3, 4), ints([[0, 3], [1, 1], [2, 0]]))],
    ),
    # nn.functional
    OpInfo("mse_loss", F.mse_loss, lambda a, b: ((a - b) ** 2).mean(), [S(r(3, 4), r(3, 4))]),
    OpInfo("cross_entropy", F.cross_entropy, _cross_entropy, [S(r(4, 5), ints([0, 4, 2, 2]))]),
    OpInfo("linear", F.linear, lambda x, w, b: x @ w.T + b, [S(r(3, 4), r(5, 4), r(5))]),
    OpInfo(
        "layer_norm",
        lambda x, w, b: F.layer_norm(x, (4,), w, b),
        _layer_norm,
        [S(r(3, 4), r(4), r(4))],
    ),
    OpInfo("dropout_eval", lambda x: F.dropout(x, 0.5, training=False), lambda x: x, [S(r(3, 4))]),
    # composed of the ops above
    OpInfo("frac", fg.frac, lambda x: x - np.trunc(x), [S(r(3, 4, lo=0.1, hi=0.9) * 5 - 2.5)]),
    OpInfo("deg2rad", fg.deg2rad, np.deg2rad, UNARY_SAMPLES),
    OpInfo("logit", fg.logit, lambda x: np.log(x / (1 - x)), [S(r(3, 4, lo=0.1, hi=0.9))]),
    OpInfo(
        "logit_eps",
        lambda x: fg.logit(x, eps=0.2),
        lambda x: np.log(np.clip(x, 0.2, 0.8) / (1 - np.clip(x, 0.2, 0.8))),
        [S(np.array([0.05, 0.3, 0.5, 0.7, 0.95]))],
    ),
    OpInfo("sinc", fg.sinc, np.sinc, [S(r(3, 4)), S(np.array([0.0, 0.5]))]),
    OpInfo(
        "xlogy",
        fg.xlogy,
        lambda x, y: x * np.log(y),
        [S(r(3, 4), pos(3, 4)), S(np.array([0.0, 0.5, 2.0]), pos(3)), S(pos(3), 2.5)],
    ),
    OpInfo("hypot", fg.hypot, np.hypot, [S(pos(3, 4), r(3, 4)), S(r(3, 4), pos(4))]),
    OpInfo("logaddexp", fg.logaddexp, np.logaddexp, BINARY_SAMPLES[1:3]),
    OpInfo("logaddexp2", fg.logaddexp2, np.logaddexp2, BINARY_SAMPLES[1:3]),
    OpInfo(
        "nan_to_num",
        lambda x: fg.nan_to_num(x, posinf=3.0),
        lambda x: np.nan_to_num(x, posinf=3.0),
        [S(r(3, 4))],
    ),
    OpInfo(
        "addcmul",
        lambda a, b, c: fg.addcmul(a, b, c, value=0.5),
        lambda a, b, c: a + 0.5 * b * c,
        [S(r(3, 4), r(3, 4), r(4))],
    ),
    OpInfo("addcdiv", fg.addcdiv, lambda a, b, c: a + b / c, [S(r(3, 4), r(3, 4), pos(4))]),
    OpInfo("lerp", fg.lerp, lambda a, b, w: a + w * (b - a), [S(r(3, 4), r(3, 4), 0.7)]),
    OpInfo(
        "lerp_tensor",
        fg.lerp,
        lambda a, b, w: a + w * (b - a),
        [S(r(3, 4), r(3, 4), r(3, 4, lo=0.0, hi=1.0))],
    ),
    # torch._foreach_<op> of a list [a, b], and _foreach_<op>_ of clones of it
    OpInfo(
        "_foreach_add",
        lambda a, b, c, d: _flat(
            [
                *fg._foreach_add([a, b], [c, d], alpha=2),
                *fg._foreach_add((a, b), 1.5),
                *_updated(lambda xs: fg._foreach_add_(xs, [0.5, -2]), a, b),
                *_updated(lambda xs: fg._foreach_add_(xs, fg.tensor(3.0, dtype=a.dtype)), a, b),
            ]
        ),
        lambda a, b, c, d: _np_flat(
            [a + 2 * c, b + 2 * d, a + 1.5, b + 1.5, a + 0.5, b - 2, a + 3, b + 3]
        ),
        [S(r(3, 4), r(5), r(3, 4), r(5))],
    ),
    OpInfo(
        "_foreach_sub",
        lambda a, b, c, d: _flat(
            [
                *fg._foreach_sub([a, b], [c, d]),
                *_updated(lambda xs: fg._foreach_sub_(xs, [c, d], alpha=0.5), a, b),
            ]
        ),
        lambda a, b, c, d: _np_flat([a - c, b - d, a - 0.5 * c, b - 0.5 * d]),
        [S(r(3, 4), r(5), r(3, 4), r(5))],
    ),
    OpInfo(
        "_foreach_mul",
        lambda a, b, c, d: _flat(
            [
                *fg._foreach_mul([a, b], [c, d]),
                *_updated(lambda xs: fg._foreach_mul_(xs, [2, 0.5]), a, b),
            ]
        ),
        lambda a, b, c, d: _np_flat([a * c, b * d, a * 2, b * 0.5]),
        [S(r(3, 4), r(5), r(3, 4), r(5))],
    ),
    OpInfo(
        "_foreach_div",
        lambda a, b, c, d: _flat(
            [*fg._foreach_div([a, b], [c, d]), *_updated(lambda xs: fg._foreach_div_(xs, 4), a, b)]
        ),
        lambda a, b, c, d: _np_flat([a / c, b / d, a / 4, b / 4]),
        [S(r(3, 4), r(5), pos(3, 4), pos(5))],
    ),
    OpInfo(
        "_foreach_maximum",
        lambda a, b, c, d: _flat(
            [
                *fg._foreach_maximum([a, b], [c, d]),
                *_updated(lambda xs: fg._foreach_maximum_(xs, 0.3), a, b),
            ]
        ),
        lambda a, b, c, d: _np_flat(
            [np.maximum(a, c), np.maximum(b, d), np.maximum(a, 0.3), np.maximum(b, 0.3)]
        ),
        [S(r(3, 4), r(5), r(3, 4), r(5))],
    ),
    OpInfo(
        "_foreach_minimum",
        lambda a, b, c, d: _flat(
            [
                *fg._foreach_minimum([a, b], 0.3),
                *_updated(lambda xs: fg._foreach_minimum_(xs, [c, d]), a, b),
            ]
        ),
        lambda a, b, c, d: _np_flat(
            [np.minimum(a, 0.3), np.minimum(b, 0.3), np.minimum(a, c), np.minimum(b, d)]
        ),
        [S(r(3, 4), r(5), r(3, 4), r(5))],
    ),
    OpInfo(
        "_foreach_lerp",
        lambda a, b, c, d: _flat(
            [
                *fg._foreach_lerp([a, b], [c, d], 0.3),
                *_updated(
                    lambda xs: fg._foreach_lerp_(xs, [c, d], [c * 0 + 0.25, d * 0 + 0.75]), a, b
                ),
            ]
        ),
        lambda a, b, c, d: _np_flat(
            [a + 0.3 * (c - a), b + 0.3 * (d - b), a + 0.25 * (c - a), b + 0.75 * (d - b)]
        ),
        [S(r(3, 4), r(5), r(3, 4), r(5))],
    ),
    OpInfo(
        "_foreach_addcmul",
        lambda a, b, c, d: _flat(
            [
                *fg._foreach_addcmul([a, b], [c, d], [d[:1], c[0, :1]], value=0.5),
                *_updated(lambda xs: fg._foreach_addcmul_(xs, [c, d], [c, d], [2, 3]), a, b),
            ]
        ),
        lambda a, b, c, d: _np_flat(
            [a + 0.5 * c * d[:1], b + 0.5 * d * c[0, :1], a + 2 * c * c, b + 3 * d * d]
        ),
        [S(r(3, 4), r(5), r(3, 4), r(5))],
    ),
    OpInfo(
        "_foreach_addcdiv",
        lambda a, b, c, d: _flat(
            [
                *fg._foreach_addcdiv([a, b], [a, b], [c, d]),
                *_updated(
                    lambda xs: fg._foreach_addcdiv_(xs, [a, b], [c, d], fg.tensor([2.0, 0.5])),
                    a,
                    b,
                ),
            ]
        ),
        lambda a, b, c, d: _np_flat([a + a / c, b + b / d, a + 2 * a / c, b + 0.5 * b / d]),
        [S(r(3, 4), r(5), pos(3, 4), pos(5))],
    ),
    OpInfo(
        "_foreach_unary",
        lambda a, b: _flat(
            [
                *fg._foreach_neg([a, b]),
                *fg._foreach_sqrt([a, b]),
                *fg._foreach_exp([a, b]),
                *fg._foreach_reciprocal([a, b]),
                *_updated(fg._foreach_neg_, a, b),
                *_updated(fg._foreach_sqrt_, a, b),
                *_updated(fg._foreach_exp_, a, b),
                *_updated(fg._foreach_reciprocal_, a, b),
            ]
        ),
        lambda a, b: _np_flat(
            [-a, -b, np.sqrt(a), np.sqrt(b), np.exp(a), np.exp(b), 1 / a, 1 / b] * 2
        ),
        [S(pos(3, 4), pos(5))],
    ),
    OpInfo(
        "_foreach_copy_",
        lambda a, b, c, d: _flat(
            [
                *_updated(lambda xs: fg._foreach_copy_(xs, [c, d]), a, b),
                *_updated(fg._foreach_zero_, a, b),
            ]
        ),
        lambda a, b, c, d: _np_flat([c, d, 0 * a, 0 * b]),
        [S(r(3, 4), r(5), r(3, 4), r(5))],
    ),
    OpInfo(
        "_foreach_norm",
        lambda a, b: fg.stack([*fg._foreach_norm([a, b]), *fg._foreach_norm([a, b], 3)]),
        lambda a, b: np.array(
            [
                np.linalg.norm(a),
                np.linalg.norm(b),
                *(np.sum(np.abs(v) ** 3) ** (1 / 3) for v in (a, b)),
            ]
        ),
        [S(r(3, 4), r(5))],
    ),
    OpInfo(
        "addmm",
        lambda a, b, c: fg.addmm(a, b, c, beta=0.5, alpha=2.0),
        lambda a, b, c: 0.5 * a + 2.0 * b @ c,
        [S(r(4), r(3, 5), r(5, 4)), S(r(3, 4), r(3, 5), r(5, 4))],
    ),
    OpInfo("addmv", fg.addmv, lambda a, m, v: a + m @ v, [S(r(3), r(3, 5), r(5))]),
    OpInfo("addr", fg.addr, lambda a, u, v: a + np.outer(u, v), [S(r(3, 4), r(3), r(4))]),
    OpInfo("baddbmm", fg.baddbmm, lambda a, b, c: a + b @ c, [S(r(3, 4), r(2, 3, 5), r(2, 5, 4))]),
    OpInfo(
        "addbmm",
        fg.addbmm,
        lambda a, b, c: a + (b @ c).sum(0),
        [S(r(3, 4), r(2, 3, 5), r(2, 5, 4))],
    ),
    OpInfo("select", lambda x: fg.select(x, 1, -1), lambda x: x[:, -1], [S(r(2, 3, 4))]),
    OpInfo(
        "movedim",
        lambda x: fg.movedim(x, (0, 1), (2, 0)),
        lambda x: np.moveaxis(x, (0, 1), (2, 0)),
        [S(r(2, 3, 4))],
    ),
    OpInfo(
        "unfold",
        lambda x: x.unfold(1, 2, 1),
        lambda x: np.moveaxis(np.lib.stride_tricks.sliding_window_view(x, 2, axis=1), 1, 1),
        [S(r(2, 4, 3))],
    ),
    OpInfo("tile", lambda x: fg.tile(x, (2, 1, 2)), lambda x: np.tile(x, (2, 1, 2)), [S(r(3, 2))]),
    OpInfo(
        "hstack", lambda a, b: fg.hstack([a, b]), lambda a, b: np.hstack([a, b]), [S(r(3), r(2))]
    ),
    OpInfo(
        "vstack", lambda a, b: fg.vstack([a, b]), lambda a, b: np.vstack([a, b]), [S(r(4), r(2, 4))]
    ),
    OpInfo(
        "dstack",
        lambda a, b: fg.dstack([a, b]),
        lambda a, b: np.dstack([a, b]),
        [S(r(3, 4), r(3, 4))],
    ),
    OpInfo(
        "column_stack",
        lambda a, b: fg.column_stack([a, b]),
        lambda a, b: np.column_stack([a, b]),
        [S(r(3), r(3, 2))],
    ),
    OpInfo(
        "meshgrid_xy",
        lambda a, b: fg.meshgrid(a, b, indexing="xy")[0] * fg.meshgrid(a, b, indexing="xy")[1],
        lambda a, b: np.prod(np.meshgrid(a, b, indexing="xy"), axis=0),
        [S(r(3), r(2))],
    ),
    OpInfo(
        "rot90", lambda x: fg.rot90(x, 1, (1, 2)), lambda x: np.rot90(x, 1, (1, 2)), [S(r(2, 3, 4))]
    ),
    OpInfo(
        "diff",
        lambda x, p: fg.diff(x, n=2, dim=0, prepend=p),
        lambda x, p: np.diff(x, n=2, axis=0, prepend=p),
        [S(r(3, 4), r(1, 4))],
    ),
    OpInfo("take", fg.take, np.take, [S(r(3, 4), ints([[0, 5], [-1, 11]]))]),
    OpInfo("inner", fg.inner, np.inner, [S(r(3, 4), r(2, 4)), S(r(4), r(4))]),
    OpInfo(
        "tensordot",
        lambda a, b: fg.tensordot(a, b, dims=([1, 2], [0, 1])),
        lambda a, b: np.tensordot(a, b, axes=([1, 2], [0, 1])),
        [S(r(2, 3, 4), r(3, 4, 2))],
    ),
    OpInfo("median", fg.median, lambda x: np.sort(x.ravel())[(x.size - 1) // 2], [S(r(3, 4))]),
    OpInfo(
        "median_dim",
        lambda x: fg.median(x, 1).values,
        lambda x: np.sort(x, 1)[:, (x.shape[1] - 1) // 2],
        [S(r(3, 4)), S(r(3, 5))],
    ),
    OpInfo(
        "nanmedian",
        lambda x: fg.nanmedian(fg.where(x > 1.5, float("nan"), x), 0).values,
        lambda x: np.array([np.sort(c[c <= 1.5])[(np.sum(c <= 1.5) - 1) // 2] for c in x.T]),
        [S(np.array([[0.3, 1.9, -1.0], [1.7, 0.2, 0.5], [-0.4, 0.1, 1.2], [0.9, -1.1, 1.6]]))],
    ),
    OpInfo(
        "nansum",
        lambda x: fg.nansum(fg.where(x > 1.5, float("nan"), x), 1),
        lambda x: np.nansum(np.where(x > 1.5, np.nan, x), 1),
        [S(r(3, 4))],
    ),
    OpInfo(
        "nanmean",
        lambda x: fg.nanmean(fg.where(x > 1.5, float("nan"), x)),
        lambda x: np.nanmean(np.where(x > 1.5, np.nan, x)),
        [S(r(3, 4))],
    ),
    OpInfo(
        "var_mean",
        lambda x: fg.var_mean(x, 1)[0] * fg.var_mean(x, 1)[1],
        lambda x: x.var(1, ddof=1) * x.mean(1),
        [S(r(3, 4))],
    ),
    OpInfo("fmax", fg.fmax, np.fmax, BINARY_SAMPLES[1:3]),
    OpInfo("fmin", fg.fmin, np.fmin, BINARY_SAMPLES[1:3]),
    OpInfo("copysign", fg.copysign, np.copysign, BINARY_SAMPLES[1:3]),
    OpInfo(
        "index_fill",
        lambda x: fg.index_fill(x, 1, fg.tensor([0, -1]), -2.0),
        lambda x: np.concatenate([np.full((3, 1), -2.0), x[:, 1:3], np.full((3, 1), -2.0)], 1),
        [S(r(3, 4))],
    ),
    OpInfo(
        "index_copy",
        lambda x, y: fg.index_copy(x, 1, fg.tensor([3, 0]), y),
        lambda x, y: np.concatenate([y[:, 1:], x[:, 1:3], y[:, :1]], 1),
        [S(r(3, 4), r(3, 2))],
    ),
    OpInfo(
        "block_diag",
        lambda a, b: fg.block_diag(a, b),
        lambda a, b: np.block([[a, np.zeros((2, 1))], [np.zeros((1, 3)), b[None]]]),
        [S(r(2, 3), r(1))],
    ),
    OpInfo(
        "cartesian_prod",
        fg.cartesian_prod,
        lambda a, b: np.stack(np.meshgrid(a, b, indexing="ij"), -1).reshape(-1, 2),
        [S(r(3), r(2))],
    ),
    OpInfo("kron", fg.kron, np.kron, [S(r(2, 3), r(3, 2)), S(r(2), r(2, 2))]),
    OpInfo(
        "cdist",
        fg.cdist,
        lambda a, b: np.sqrt(((a[..., :, None, :] - b[..., None, :, :]) ** 2).sum(-1)),
        [S(r(3, 4), r(2, 4)), S(r(2, 3, 4), r(2, 2, 4))],
    ),
    OpInfo("dist", fg.dist, lambda a, b: np.sqrt(((a - b) ** 2).sum()), [S(r(3, 4), r(4))]),
    OpInfo(
        "tensor_split",
        lambda x: fg.tensor_split(x, 3, dim=1)[0],
        lambda x: x[:, :2],
        [S(r(3, 4))],
    ),
    OpInfo("trapezoid", fg.trapezoid, lambda y: np.trapezoid(y, axis=-1), [S(r(3, 4))]),
    OpInfo("cov", fg.cov, np.cov, [S(r(3, 5))]),
    OpInfo("corrcoef", fg.corrcoef, np.corrcoef, [S(r(3, 5))]),
    OpInfo(
        "searchsorted",
        lambda s, v: fg.searchsorted(s, v),
        lambda s, v: np.searchsorted(s, v),
        [S(np.sort(r(6)), r(3, 4))],
        differentiable=False,
    ),
    OpInfo(
        "masked_select",
        lambda x: fg.masked_select(x, x > 0.5),
        lambda x: x[x > 0.5],
        [S(r(3, 4))],
        jit=False,
    ),
    OpInfo(
        "kthvalue",
        lambda x: fg.kthvalue(x, 2, 0).values,
        lambda x: np.sort(x, 0)[1],
        [S(r(3, 4))],
    ),
    OpInfo(
        "quantile",
        lambda x: fg.quantile(x, fg.tensor([0.2, 0.5], dtype=x.dtype), dim=1, keepdim=True),
        lambda x: np.quantile(x, [0.2, 0.5], axis=1, keepdims=True),
        [S(r(3, 5))],
    ),
    OpInfo(
        "quantile_midpoint",
        lambda x: fg.quantile(x, 0.3, interpolation="midpoint"),
        lambda x: np.quantile(x, 0.3, method="midpoint"),
        [S(r(3, 5))],
    ),
    OpInfo(
        "nanquantile",
        lambda x: fg.nanquantile(fg.where(x > 1.5, float("nan"), x), 0.4, dim=0),
        lambda x: np.nanquantile(np.where(x > 1.5, np.nan, x), 0.4, axis=0),
        [S(np.array([[0.3, 1.9, -1.0], [1.7, 0.2, 0.5], [-0.4, 0.1, 1.2], [0.9, -1.1, 1.6]]))],
    ),
    OpInfo("msort", fg.msort, lambda x: np.sort(x, 0), [S(r(3, 4))]),
    OpInfo(  # computed in float64 (tests/test_tensor_ops.py), compared in the input's dtype
        "float_power", lambda x: fg.float_power(x, 3).to(x.dtype), lambda x: x**3, [S(r(3, 4))]
    ),
    OpInfo(
        "ldexp",
        lambda x: fg.ldexp(x, fg.tensor([1, -2, 0, 3])),
        lambda x: np.ldexp(x, [1, -2, 0, 3]),
        [S(r(3, 4))],
    ),
    OpInfo(
        "isin",
        lambda x: fg.isin(fg.round(x), fg.tensor([-1.0, 1.0], dtype=x.dtype)),
        lambda x: np.isin(np.round(x), [-1.0, 1.0]),
        [S(r(3, 4))],
        differentiable=False,
    ),
    OpInfo(
        "cummax",
        lambda x: fg.cummax(x, 1).values,
        lambda x: np.maximum.accumulate(x, 1),
        [S(r(3, 5))],
    ),
    OpInfo(
        "cummin",
        lambda x: fg.cummin(x, 0).values,
        lambda x: np.minimum.accumulate(x, 0),
        [S(r(4, 3))],
    ),
    OpInfo(
        "logcumsumexp",
        lambda x: fg.logcumsumexp(x, 1),
        lambda x: np.logaddexp.accumulate(x, 1),
        [S(r(3, 5)), S(r(2, 3) * 300)],
    ),
    OpInfo(
        "index_put_accumulate",
        lambda x, v: fg.index_put(x, (fg.tensor([0, 2, 0]), fg.tensor([1, 3, 1])), v, True),
        lambda x, v: (
            x + np.array([[0, v[0] + v[2], 0, 0], [0, 0, 0, 0], [0, 0, 0, v[1]]], dtype=np.float64)
        ),
        [S(r(3, 4), r(3))],
    ),
    OpInfo(
        "put",
        lambda x, v: fg.put(x, fg.tensor([0, 5, 11]), v),
        lambda x, v: (
            np.where(np.isin(np.arange(12), [0, 5, 11]).reshape(3, 4), 0, x)
            + np.bincount([0, 5, 11], v, 12).reshape(3, 4)
        ),
        [S(r(3, 4), r(3))],
    ),
    OpInfo(
        "bitwise",
        lambda a, b: ((a & b) | (a ^ 6)) + (~a) + (a << b % 70) + (a >> (b - 3)),
        lambda a, b: ((a & b) | (a ^ 6)) + ~a + np.left_shift(a, b % 70) + np.right_shift(a, b - 3),
        [S(ints([[5, -5, 1, 7], [0, -1, 2**40, 3]]), ints([[64, 3, 0, 1], [2, 65, 3, -7]]))],
        differentiable=False,
    ),
    OpInfo(
        "bitwise_bool",
        lambda a, b: (a > 0) & (b > 0) | ~(a > 1) ^ (b > 2),
        lambda a, b: (a > 0) & (b > 0) | ~(a > 1) ^ (b > 2),
        [S(ints([[5, -5, 1, 7]]), ints([[1, 3, 0, 4]]))],
        differentiable=False,
    ),
    OpInfo(
        "select_scatter",
        lambda x, v: fg.select_scatter(x, v, 0, -1),
        lambda x, v: np.concatenate([x[:-1], v[None]]),
        [S(r(3, 4), r(4))],
    ),
    OpInfo(
        "slice_scatter",
        lambda x, v: fg.slice_scatter(x, v, 1, 1, 4, 2),
        lambda x, v: np.stack([x[:, 0], v[:, 0], x[:, 2], v[:, 1]], 1),
        [S(r(3, 4), r(3, 2))],
    ),
    OpInfo(
        "combinations",
        lambda x: fg.combinations(x, 2, with_replacement=True),
        lambda x: np.array([[x[i], x[j]] for i in range(3) for j in range(i, 3)]),
        [S(r(3))],
    ),
    OpInfo("vander", lambda x: fg.vander(x, 4), lambda x: np.vander(x, 4), [S(r(3))]),
    OpInfo(
        "unravel_index",
        lambda i: fg.stack(fg.unravel_index(i, (3, 4))),
        lambda i: np.stack(np.unravel_index(i % 12, (3, 4))),
        [S(ints([0, 5, 11, -1]))],
        differentiable=False,
    ),
    OpInfo(
        "gcd_lcm",
        lambda a, b: fg.gcd(a, b) * 1000 + fg.lcm(a, b),
        lambda a, b: np.gcd(a, b) * 1000 + np.lcm(a, b),
        [S(ints([12, -18, 0, 7]), ints([8, 12, 5, 0]))],
        differentiable=False,
    ),
    OpInfo(
        "scatter_reduce_mean",
        lambda x, v: fg.scatter_reduce(
            x, 0, fg.tensor([[0, 1, 3], [2, 1, 3], [0, 0, 3]]), v, "mean"
        ),
        lambda x, v: _scatter_reduce_ref(x, v, np.add, mean=True),
        [S(r(4, 3), r(3, 3))],
    ),
    OpInfo(
        "scatter_reduce_amax",
        lambda x, v: fg.scatter_reduce(
            x, 0, fg.tensor([[0, 1, 3], [2, 1, 3], [0, 0, 3]]), v, "amax", include_self=False
        ),
        lambda x, v: _scatter_reduce_ref(x, v, np.maximum, include_self=False),
        [S(r(4, 3), r(3, 3))],
    ),
    OpInfo(
        "renorm",
        lambda x: fg.renorm(x, 2, 0, 1.5),
        lambda x: (
            x * np.where((n := np.sqrt((x * x).sum(1, keepdims=True))) > 1.5, 1.5 / (n + 1e-7), 1.0)
        ),
        [S(r(3, 4))],
    ),
    OpInfo(
        "histc",
        lambda x: fg.histc(x, bins=4, min=-1, max=1),
        lambda x: np.histogram(x[(x >= -1) & (x <= 1)], 4, (-1, 1))[0].astype(x.dtype),
        [S(r(3, 4))],
        differentiable=False,
    ),
    OpInfo(  # the counts (weighted, or as densities), then the edges
        "histogram",
        lambda x, w, **k: fg.cat(fg.histogram(x, **k, weight=w)),
        lambda x, w, **k: np.concatenate(np.histogram(x, **k, weights=w)),
        [
            S(r(3, 4), pos(3, 4), bins=4, range=(-1.0, 1.5)),
            S(r(3, 4), None, bins=3, range=(-2.0, 2.0), density=True),
        ],
        differentiable=False,
    ),
    OpInfo(
        "histogram_edges",
        lambda x, edges: fg.cat(fg.histogram(x, edges)),
        lambda x, edges: np.concatenate(np.histogram(x, edges)),
        [S(r(12), np.array([-2.0, -0.5, 0.0, 2.0]))],
        differentiable=False,
    ),
    OpInfo("nextafter", fg.nextafter, np.nextafter, [S(r(3, 4), r(3, 4))]),
    OpInfo("angle", fg.angle, np.angle, [S(r(3, 4))]),
    OpInfo(
        "masked_scatter",
        lambda x, v: x.masked_scatter(x > 0.5, v),
        lambda x, v: (
            np.where(x > 0.5, np.cumsum(x > 0.5).reshape(x.shape) * 0, x)
            + _placed_in_order(x > 0.5, v)
        ),
        [S(r(3, 4), r(12))],
        jit=False,
    ),
    # linear algebra
    OpInfo(
        "inv", fg.linalg.inv, np.linalg.inv, [S(_well_conditioned(3)), S(_well_conditioned(2, 3))]
    ),
    OpInfo(
        "det", fg.linalg.det, np.linalg.det, [S(_well_conditioned(3)), S(_well_conditioned(2, 3))]
    ),
    OpInfo(
        "slogdet",
        lambda a: fg.linalg.slogdet(a).logabsdet * fg.linalg.slogdet(a).sign,
        lambda a: np.linalg.slogdet(a)[1] * np.linalg.slogdet(a)[0],
        [S(-_well_conditioned(3)), S(_well_conditioned(2, 3))],
    ),
    OpInfo("logdet", fg.logdet, lambda a: np.log(np.linalg.det(a)), [S(_well_conditioned(2, 3))]),
    OpInfo(
        "solve",
        fg.linalg.solve,
        np.linalg.solve,
        [S(_well_conditioned(3), r(3, 2)), S(_well_conditioned(2, 3), r(3, 1))],
    ),
    OpInfo(
        "solve_vector",
        fg.linalg.solve,
        lambda a, b: np.linalg.solve(a, b[..., None])[..., 0],
        [S(_well_conditioned(3), r(3)), S(_well_conditioned(2, 3), r(2, 3))],
    ),
    OpInfo(
        "cholesky",
        lambda a: fg.linalg.cholesky(a @ a.mT + fg.eye(3, dtype=a.dtype)),
        lambda a: np.linalg.cholesky(a @ np.swapaxes(a, -1, -2) + np.eye(3)),
        [S(r(3, 3)), S(r(2, 3, 3))],
    ),
    OpInfo(  # Q's and R's entries, one after the other
        "linalg_qr",
        lambda a, **k: _flat(fg.linalg.qr(a, **k)),
        lambda a, mode="reduced": _np_flat(np.linalg.qr(a, mode=mode)),
        [S(r(4, 3)), S(r(2, 3, 3), mode="complete"), S(r(3, 5)), S(r(3, 5), mode="complete")],
    ),
    OpInfo(
        "qr",
        lambda a, **k: _flat(fg.qr(a, **k)),
        lambda a, some=True: _np_flat(np.linalg.qr(a, mode="reduced" if some else "complete")),
        [S(r(4, 3)), S(r(2, 3, 5), some=False)],
    ),
    OpInfo(  # Q from LAPACK's reflectors: geqrf's of a are (h, tau)
        "householder_product",
        fg.linalg.householder_product,
        lambda h, tau: _householder_ref(h, tau),
        [S(r(4, 3), r(2)), S(r(2, 3, 3), r(2, 3))],
    ),
    OpInfo("orgqr", fg.orgqr, lambda h, tau: _householder_ref(h, tau), [S(r(5, 2), r(2))]),
    OpInfo(  # eigenvalues, and the squares of the vectors' entries (their signs are arbitrary)
        "eigh",
        lambda a: (lambda w, v: w.unsqueeze(-2) + v * v)(*fg.linalg.eigh(a + a.mT)),
        lambda a: (lambda w, v: w[..., None, :] + v * v)(
            *np.linalg.eigh(a + np.swapaxes(a, -1, -2))
        ),
        [S(r(3, 3)), S(r(2, 4, 4))],
    ),
    OpInfo(  # the values, and products that do not see the factors' arbitrary signs
        "svd",
        lambda a: (lambda u, s, vh: fg.cat([s, (u @ vh).flatten(), (u * u).flatten()]))(
            *fg.linalg.svd(a, full_matrices=False)
        ),
        lambda a: (lambda u, s, vh: np.concatenate([s, (u @ vh).ravel(), (u * u).ravel()]))(
            *np.linalg.svd(a, full_matrices=False)
        ),
        [S(r(4, 2)), S(r(2, 4))],
    ),
    OpInfo("pinv", fg.linalg.pinv, np.linalg.pinv, [S(r(2, 3, 5))]),
    OpInfo(
        "matrix_norm_spectral",
        lambda a: fg.linalg.matrix_norm(a, 2) + fg.linalg.matrix_norm(a, "nuc"),
        lambda a: np.linalg.norm(a, 2, axis=(-2, -1)) + np.linalg.norm(a, "nuc", axis=(-2, -1)),
        [S(r(2, 3, 4))],
    ),
    OpInfo(
        "matrix_power",
        lambda a: fg.linalg.matrix_power(a, -3),
        lambda a: np.linalg.matrix_power(a, -3),
        [S(_well_conditioned(3))],
    ),
    OpInfo(
        "matrix_norm",
        lambda a: fg.linalg.matrix_norm(a) + fg.linalg.matrix_norm(a, 1),
        lambda a: np.linalg.norm(a, axis=(-2, -1)) + np.linalg.norm(a, 1, axis=(-2, -1)),
        [S(r(2, 3, 4))],
    ),
    OpInfo(
        "vector_norm",
        lambda a: fg.linalg.vector_norm(a, 3, dim=1),
        lambda a: np.linalg.norm(a, 3, axis=1),
        [S(r(2, 3, 4))],
    ),
    OpInfo("cross", fg.linalg.cross, np.cross, [S(r(2, 3), r(2, 3))]),
    OpInfo(
        "multi_dot",
        lambda a, b, c: fg.linalg.multi_dot([a, b, c]),
        lambda a, b, c: a @ b @ c,
        [S(r(3), r(3, 4), r(4, 2))],
    ),
    OpInfo(
        "isclose",
        lambda a, b: fg.isclose(a, b, rtol=0.1),
        lambda a, b: np.isclose(a, b, rtol=0.1),
        [S(r(3, 4), r(3, 4))],
        differentiable=False,
    ),
    OpInfo(
        "signbit",
        fg.signbit,
        np.signbit,
        [S(np.array([-1.0, -0.0, 0.0, 2.0]))],
        differentiable=False,
    ),
    OpInfo(
        "count_nonzero",
        lambda x: fg.count_nonzero(x > 0, dim=0),
        lambda x: np.count_nonzero(x > 0, axis=0),
        [S(r(3, 4))],
        differentiable=False,
    ),
]


# ------------------------------------------------- nn.functional references in numpy


def _taps(x, kernel, stride, dilation):
    """Per kernel tap, the strided slice of x's trailing axes it reads: {tap: array}."""
    dims = len(kernel)
    counts = [
        (size - d * (k - 1) - 1) // s + 1
        for size, k, s, d in zip(x.shape[-dims:], kernel, stride, dilation)
    ]
    return {
        tap: x[
            (Ellipsis,)
            + tuple(
                slice(t * d, t * d + s * (c - 1) + 1, s)
                for t, d, s, c in zip(tap, dilation, stride, counts)
            )
        ]
        for tap in np.ndindex(*kernel)
    }


def _conv(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """A direct convolution: for each tap, the weight's slice times the shifted input."""
    dims = w.ndim - 2
    if x.ndim == dims + 1:  # unbatched
        return _conv(x[None], w, b, stride, padding, dilation, groups)[0]
    stride = (stride,) * dims if isinstance(stride, int) else stride
    dilation = (dilation,) * dims if isinstance(dilation, int) else dilation
    if padding == "same":
        totals = [d * (k - 1) for k, d in zip(w.shape[2:], dilation)]
        pads = [(t // 2, t - t // 2) for t in totals]
    else:
        pads = (
            [(padding, padding)] * dims if isinstance(padding, int) else [(p, p) for p in padding]
        )
    x = np.pad(x, [(0, 0), (0, 0), *pads])
    per_group_in, per_group_out = w.shape[1], w.shape[0] // groups
    out = 0
    for tap, shifted in _taps(x, w.shape[2:], stride, dilation).items():
        parts = [
            np.einsum(
                "oc,nc...->no...",
                w[(slice(g * per_group_out, (g + 1) * per_group_out), slice(None), *tap)],
                shifted[:, g * per_group_in : (g + 1) * per_group_in],
            )
            for g in range(groups)
        ]
        out = out + np.concatenate(parts, axis=1)
    if b is not None:
        out = out + b.reshape((-1,) + (1,) * dims)
    return out


def _pool_ref(x, kernel, stride, padding, reduce, fill, ceil_mode=False):
    """Pooling by brute force: every window cut out of the padded input and reduced."""
    dims = len(kernel)
    counts = []
    for size, k, s, p in zip(x.shape[-dims:], kernel, stride, padding):
        n = (size + 2 * p - k + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (n - 1) * s >= size + p:
            n -= 1
        counts.append(n)
    padded = np.pad(
        x,
        [(0, 0)] * (x.ndim - dims) + [(p, p + k) for p, k in zip(padding, kernel)],
        constant_values=fill,
    )
    out = np.empty(x.shape[:-dims] + tuple(counts))
    for position in np.ndindex(*counts):
        window = tuple(slice(i * s, i * s + k) for i, s, k in zip(position, stride, kernel))
        starts = [i * s - p for i, s, p in zip(position, stride, padding)]
        out[(Ellipsis, *position)] = reduce(padded[(Ellipsis, *window)], starts, x.shape[-dims:])
    return out


def _max_pool(x, kernel_size, stride=None, padding=0, ceil_mode=False):
    dims = 2
    kernel = (kernel_size,) * dims
    stride = kernel if stride is None else (stride,) * dims
    padding = (padding,) * dims
    return _pool_ref(
        x, kernel, stride, padding, lambda w, *_: w.max(axis=(-2, -1)), -np.inf, ceil_mode
    )


def _avg_pool(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    dims = 2
    kernel = (kernel_size,) * dims
    stride = kernel if stride is None else (stride,) * dims
    padding = (padding,) * dims

    def mean(window, starts, sizes):
        count = 1
        for start, k, p, size in zip(starts, kernel, padding, sizes):
            end = min(start + k, size + p)
            if not count_include_pad:
                start, end = max(start, 0), min(end, size)
            count *= end - start
        return window.sum(axis=(-2, -1)) / count

    return _pool_ref(x, kernel, stride, padding, mean, 0.0, ceil_mode)


def _adaptive_avg_pool(x, output_size):
    out = np.empty(x.shape[:-2] + tuple(output_size))
    (h, w), (oh, ow) = x.shape[-2:], output_size
    for i in range(oh):
        for j in range(ow):
            rows = slice(i * h // oh, -(-(i + 1) * h // oh))
            columns = slice(j * w // ow, -(-(j + 1) * w // ow))
            out[..., i, j] = x[..., rows, columns].mean(axis=(-2, -1))
    return out


def _triple(value):
    return (value,) * 3 if isinstance(value, int) else tuple(value)


def _max_pool3d(x, kernel_size, stride=None, padding=0, ceil_mode=False):
    kernel = _triple(kernel_size)
    stride = kernel if stride is None else _triple(stride)
    return _pool_ref(
        x,
        kernel,
        stride,
        _triple(padding),
        lambda w, *_: w.max(axis=(-3, -2, -1)),
        -np.inf,
        ceil_mode,
    )


def _avg_pool3d(x, kernel_size, stride=None, padding=0, count_include_pad=True, divisor=None):
    kernel, padding = _triple(kernel_size), _triple(padding)
    stride = kernel if stride is None else _triple(stride)

    def mean(window, starts, sizes):
        count = 1
        for start, k, p, size in zip(starts, kernel, padding, sizes):
            end = min(start + k, size + p)
            if not count_include_pad:
                start, end = max(start, 0), min(end, size)
            count *= end - start
        return window.sum(axis=(-3, -2, -1)) / (divisor or count)

    return _pool_ref(x, kernel, stride, padding, mean, 0.0)


def _adaptive_pool_ref(x, output_size, how="max"):
    """Adaptive pooling window by window: each window's "max", "mean", or
    "index" (the flat position of its first maximum in the trailing axes)."""
    dims = len(output_size)
    sizes = x.shape[-dims:]
    out = np.empty(x.shape[:-dims] + tuple(output_size), np.int64 if how == "index" else x.dtype)
    for position in np.ndindex(*output_size):
        starts = [i * n // o for i, n, o in zip(position, sizes, output_size)]
        ends = [-(-(i + 1) * n // o) for i, n, o in zip(position, sizes, output_size)]
        window = x[(Ellipsis, *(slice(s, e) for s, e in zip(starts, ends)))]
        flat = window.reshape(x.shape[:-dims] + (-1,))
        if how == "index":
            local = np.unravel_index(flat.argmax(-1), [e - s for s, e in zip(starts, ends)])
            value = np.ravel_multi_index([c + s for c, s in zip(local, starts)], sizes)
        else:
            value = getattr(flat, how)(-1)
        out[(Ellipsis, *position)] = value
    return out


def _lp_pool2d(x, norm_type, kernel_size, stride=None):
    powers = _pool_ref(
        x**norm_type,
        (kernel_size,) * 2,
        (stride or kernel_size,) * 2,
        (0, 0),
        lambda w, *_: w.sum(axis=(-2, -1)),
        0.0,
    )
    return powers ** (1 / norm_type)


def _grid_sample_ref(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    """grid_sample point by point: each point's source position, its taps
    (moved by the padding mode) and their weights, summed where they fall
    inside the input."""
    sizes = x.shape[2:]

    def source(g, n):
        return (g + 1) / 2 * (n - 1) if align_corners else ((g + 1) * n - 1) / 2

    def padded(p, n):
        if padding_mode == "reflection":
            low, high = (0.0, n - 1.0) if align_corners else (-0.5, n - 0.5)
            span = high - low
            distance = abs(p - low)
            flips = math.floor(distance / span) if span else 0
            extra = distance - flips * span
            p = low + extra if flips % 2 == 0 else high - extra
        if padding_mode in ("border", "reflection"):
            p = min(max(p, 0.0), n - 1.0)
        return p

    def cubic(d):  # the weight of a tap d away (a = -0.75)
        d, a = abs(d), -0.75
        if d <= 1:
            return (a + 2) * d**3 - (a + 3) * d**2 + 1
        return a * d**3 - 5 * a * d**2 + 8 * a * d - 4 * a

    out = np.zeros(x.shape[:2] + grid.shape[1:-1])
    for n in range(x.shape[0]):
        for point in np.ndindex(*grid.shape[1:-1]):
            positions = [source(g, s) for g, s in zip(grid[(n, *point)][::-1], sizes)]
            if mode == "bicubic":
                taps = [
                    [
                        (padded(math.floor(p) + k, s), cubic(p - math.floor(p) - k))
                        for k in range(-1, 3)
                    ]
                    for p, s in zip(positions, sizes)
                ]
            else:
                positions = [padded(p, s) for p, s in zip(positions, sizes)]
                if mode == "nearest":
                    taps = [[(np.rint(p), 1.0)] for p in positions]
                else:
                    taps = [
                        [
                            (math.floor(p), math.floor(p) + 1 - p),
                            (math.floor(p) + 1, p - math.floor(p)),
                        ]
                        for p in positions
                    ]
            for choice in np.ndindex(*(len(t) for t in taps)):
                combination = [t[c] for t, c in zip(taps, choice)]
                where = [int(p) for p, _ in combination]
                if all(0 <= w < s for w, s in zip(where, sizes)):
                    weight = math.prod(w for _, w in combination)
                    out[(n, slice(None), *point)] += weight * x[(n, slice(None), *where)]
    return out


def _affine_grid_ref(theta, size, align_corners=False):
    """Each output pixel's (x, y[, z], 1) in normalized coordinates, mapped by theta."""

    def axis(n):
        if n == 1:
            return np.zeros(1)
        i = np.arange(n)
        return 2 * i / (n - 1) - 1 if align_corners else (2 * i + 1) / n - 1

    spatial = size[2:]
    mesh = np.meshgrid(*(axis(n) for n in spatial), indexing="ij")
    base = np.stack([*mesh[::-1], np.ones(spatial)], axis=-1)
    return np.einsum("...k,njk->n...j", base, theta)


def _batch_norm(x, w, b, eps=1e-5):
    axes = (0, *range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean, var = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w.reshape(shape) + b.reshape(shape)


def _bce(x, t):
    return -(t * np.log(x) + (1 - t) * np.log(1 - x)).mean()


def _bce_logits(x, t, pos_weight):
    # -log(sigmoid(x)) = log(1 + exp(-x)), -log(1 - sigmoid(x)) = log(1 + exp(x))
    return (pos_weight * t * np.logaddexp(0, -x) + (1 - t) * np.logaddexp(0, x)).mean()


def _sdpa(q, k, v, mask=None, is_causal=False):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if is_causal:
        mask = np.tril(np.ones(scores.shape[-2:], bool))
    if mask is not None and mask.dtype == bool:
        scores = np.where(mask, scores, -np.inf)
    elif mask is not None:
        scores = scores + mask
    return _softmax(scores, -1) @ v


def _pad_ref(x, pad, mode="constant", value=0.0):
    widths = [(0, 0)] * (x.ndim - len(pad) // 2) + [
        (pad[2 * k], pad[2 * k + 1]) for k in reversed(range(len(pad) // 2))
    ]
    x = x[tuple(slice(max(-lo, 0), x.shape[i] - max(-hi, 0)) for i, (lo, hi) in enumerate(widths))]
    widths = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
    numpy_mode = {"replicate": "edge", "circular": "wrap"}.get(mode, mode)
    extra = {"constant_values": value} if mode == "constant" else {}
    return np.pad(x, widths, mode=numpy_mode, **extra)


_MASK = np.array([[True, False, True, True, False], [True, True, True, False, False]])
_PROBS = _rng.uniform(0.05, 0.95, size=(3, 4))
_TARGETS = _rng.uniform(0.0, 1.0, size=(3, 4))

NN_OPS = [
    OpInfo(
        "conv2d",
        F.conv2d,
        _conv,
        [
            S(r(2, 3, 7, 6), r(4, 3, 3, 2), r(4)),
            S(r(2, 3, 7, 6), r(4, 3, 3, 3), r(4), stride=2, padding=1),
            S(r(1, 2, 8, 7), r(3, 2, 2, 3), r(3), stride=(2, 1), dilation=(2, 1)),
            S(r(2, 4, 5, 5), r(6, 2, 3, 3), r(6), padding="same", groups=2),
            S(r(3, 5, 6), r(2, 3, 2, 2)),
            S(r(2, 2, 6, 5), r(4, 2, 3, 3), r(4), padding=2),  # windows read in place, padded
            S(r(1, 2, 5, 6), r(2, 2, 2, 4), padding="same"),  # padding before and after differ
        ],
        rtol32=1e-4,
    ),
    OpInfo(
        "conv1d",
        F.conv1d,
        _conv,
        [
            S(r(2, 3, 9), r(4, 3, 3), r(4), padding="same", dilation=2),
            S(r(2, 2, 7), r(4, 1, 2), groups=2, stride=3),
            S(r(2, 3, 8), r(2, 3, 3), r(2), padding=1),
        ],
        rtol32=1e-4,
    ),
    OpInfo(
        "max_pool2d",
        F.max_pool2d,
        _max_pool,
        [
            S(r(2, 3, 6, 6), 2),
            S(r(1, 2, 7, 7), 3, stride=2, padding=1),
            S(r(2, 5, 5), 2, ceil_mode=True),
        ],
    ),
    OpInfo(
        "avg_pool2d",
        F.avg_pool2d,
        _avg_pool,
        [
            S(r(2, 3, 6, 6), 2),
            S(r(1, 2, 7, 7), 3, stride=2, padding=1),
            S(r(1, 2, 7, 7), 3, stride=2, padding=1, count_include_pad=False, ceil_mode=True),
        ],
    ),
    OpInfo(
        "adaptive_avg_pool2d",
        F.adaptive_avg_pool2d,
        _adaptive_avg_pool,
        [S(r(2, 3, 6, 4), (3, 2)), S(r(2, 3, 7, 5), (3, 2))],
    ),
    OpInfo(
        "max_pool3d",
        F.max_pool3d,
        _max_pool3d,
        [
            S(r(2, 2, 4, 4, 4), 2),
            S(r(1, 2, 5, 4, 5), 3, stride=2, padding=1),
            S(r(2, 3, 4, 5), (2, 1, 2), ceil_mode=True),  # unbatched
        ],
    ),
    OpInfo(
        "avg_pool3d",
        F.avg_pool3d,
        lambda x, *args, divisor_override=None, **kwargs: _avg_pool3d(
            x, *args, divisor=divisor_override, **kwargs
        ),
        [
            S(r(2, 2, 4, 4, 4), 2),
            S(r(1, 2, 5, 4, 5), 3, stride=2, padding=1, count_include_pad=False),
            S(r(2, 3, 4, 5), 2, divisor_override=3),
        ],
    ),
    OpInfo(
        "adaptive_avg_pool3d",
        F.adaptive_avg_pool3d,
        lambda x, size: _adaptive_pool_ref(x, size, "mean"),
        [S(r(1, 2, 4, 6, 3), (2, 3, 3)), S(r(2, 5, 4, 3), (2, 3, 2))],
    ),
    OpInfo(
        "adaptive_max_pool1d",
        F.adaptive_max_pool1d,
        _adaptive_pool_ref,
        [S(r(2, 3, 7), (3,)), S(r(3, 8), (4,))],
    ),
    OpInfo(
        "adaptive_max_pool2d",
        F.adaptive_max_pool2d,
        _adaptive_pool_ref,
        [S(r(2, 3, 7, 5), (3, 2)), S(r(2, 6, 4), (3, 2)), S(r(2, 3, 6, 4), (3, 2))],
    ),
    OpInfo(
        "adaptive_max_pool3d",
        F.adaptive_max_pool3d,
        _adaptive_pool_ref,
        [S(r(1, 2, 5, 4, 3), (2, 3, 2)), S(r(2, 4, 4, 2), (2, 2, 1))],
    ),
    OpInfo(
        "adaptive_max_pool2d_indices",
        lambda x, size: F.adaptive_max_pool2d(x, size, return_indices=True)[1],
        lambda x, size: _adaptive_pool_ref(x, size, "index"),
        [S(r(2, 3, 7, 5), (3, 2)), S(r(2, 3, 6, 4), (3, 2))],
        differentiable=False,
    ),
    OpInfo(
        "lp_pool2d",
        F.lp_pool2d,
        _lp_pool2d,
        [S(pos(2, 3, 6, 5), 2, 2), S(pos(1, 2, 5, 5), 3, 3, stride=1)],
    ),
    OpInfo(
        "grid_sample",
        F.grid_sample,
        _grid_sample_ref,
        [
            S(r(2, 3, 5, 6), r(2, 4, 3, 2, lo=-1.2, hi=1.2), align_corners=False),
            S(
                r(1, 2, 4, 5),
                r(1, 3, 3, 2, lo=-1.3, hi=1.3),
                padding_mode="border",
                align_corners=True,
            ),
            S(
                r(1, 2, 4, 5),
                r(1, 3, 3, 2, lo=-1.6, hi=1.6),
                padding_mode="reflection",
                align_corners=False,
            ),
            S(r(1, 2, 5, 4), r(1, 3, 2, 2), mode="bicubic", align_corners=False),
            S(
                r(1, 2, 5, 4),
                r(1, 2, 2, 2, lo=-1.4, hi=1.4),
                mode="bicubic",
                padding_mode="reflection",
                align_corners=True,
            ),
            # trilinear
            S(r(1, 2, 3, 4, 5), r(1, 2, 3, 2, 3, lo=-1.1, hi=1.1), align_corners=False),
        ],
    ),
    OpInfo(
        "grid_sample_nearest",
        lambda x, grid, **k: F.grid_sample(x, grid.to(x.dtype), mode="nearest", **k),
        lambda x, grid, **k: _grid_sample_ref(x, grid, mode="nearest", **k),
        [
            S(r(1, 2, 4, 5), r(1, 3, 3, 2, lo=-1.2, hi=1.2), align_corners=False),
            S(
                r(1, 2, 3, 4, 5),
                r(1, 2, 2, 2, 3, lo=-1.5, hi=1.5),
                padding_mode="reflection",
                align_corners=True,
            ),
        ],
        float_inputs=(0,),  # the grid only picks the pixels: no gradient
    ),
    OpInfo(
        "affine_grid",
        F.affine_grid,
        _affine_grid_ref,
        [
            S(r(2, 2, 3), (2, 3, 4, 5), align_corners=False),
            S(r(1, 3, 4), (1, 2, 3, 2, 4), align_corners=True),
        ],
    ),
    OpInfo(
        "pad",
        F.pad,
        _pad_ref,
        [
            S(r(2, 3, 4), (1, 2, 0, 1)),
            S(r(2, 3, 4), (2, -1), value=0.5),
            S(r(2, 3, 4), (2, 1, 1, 2), mode="reflect"),
            S(r(2, 3, 4), (2, 3), mode="replicate"),
            S(r(1, 2, 3, 4), (1, 2, 2, 0), mode="circular"),
        ],
    ),
    OpInfo(
        "embedding",
        lambda w, i: F.embedding(i, w),
        lambda w, i: w[i],
        [S(r(5, 3), ints([[0, 4], [2, 2]])), S(r(5, 3), ints([1, 3, 1]))],
    ),
    OpInfo(
        "batch_norm",
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        _batch_norm,
        [S(r(4, 3), r(3), r(3)), S(r(2, 3, 4, 2), r(3), r(3))],
        rtol32=1e-4,
    ),
    OpInfo(
        "batch_norm_eval",
        lambda x, w, b: F.batch_norm(
            x,
            fg.tensor([0.5, -0.2, 1.0], dtype=x.dtype),
            fg.tensor([1.5, 0.3, 2.0], dtype=x.dtype),
            w,
            b,
        ),
        lambda x, w, b: (
            (x - np.array([0.5, -0.2, 1.0]).reshape(1, 3, 1))
            / np.sqrt(np.array([1.5, 0.3, 2.0]).reshape(1, 3, 1) + 1e-5)
            * w.reshape(1, 3, 1)
            + b.reshape(1, 3, 1)
        ),
        [S(r(2, 3, 4), r(3), r(3))],
    ),
    OpInfo("binary_cross_entropy", F.binary_cross_entropy, _bce, [S(_PROBS, _TARGETS)]),
    OpInfo(
        "binary_cross_entropy_with_logits",
        lambda x, t, w: F.binary_cross_entropy_with_logits(x, t, pos_weight=w),
        _bce_logits,
        [S(r(3, 4), _TARGETS, pos(4))],
    ),
    OpInfo(
        "binary_cross_entropy_with_logits_plain",
        F.binary_cross_entropy_with_logits,
        lambda x, t: _bce_logits(x, t, 1.0),
        [S(r(3, 4) * 10, _TARGETS)],
    ),
    OpInfo("l1_loss", F.l1_loss, lambda a, b: np.abs(a - b).mean(), [S(r(3, 4), r(3, 4))]),
    OpInfo(
        "smooth_l1_loss",
        lambda a, b: F.smooth_l1_loss(a, b, beta=0.5, reduction="sum"),
        lambda a, b: np.where(
            np.abs(a - b) < 0.5, 0.5 * (a - b) ** 2 / 0.5, np.abs(a - b) - 0.25
        ).sum(),
        [S(r(3, 4), r(3, 4))],
    ),
    OpInfo(
        "huber_loss",
        lambda a, b: F.huber_loss(a, b, delta=0.7, reduction="none"),
        lambda a, b: np.where(
            np.abs(a - b) < 0.7, 0.5 * (a - b) ** 2, 0.7 * (np.abs(a - b) - 0.35)
        ),
        [S(r(3, 4), r(3, 4))],
    ),
    OpInfo(
        "kl_div",
        lambda x, t: F.kl_div(x, t, reduction="batchmean"),
        lambda x, t: (t * (np.log(t) - x)).sum() / x.shape[0],
        [S(r(3, 4), pos(3, 4))],
    ),
    OpInfo(
        "kl_div_log_target",
        lambda x, t: F.kl_div(x, t, reduction="sum", log_target=True),
        lambda x, t: (np.exp(t) * (t - x)).sum(),
        [S(r(3, 4), r(3, 4))],
    ),
    OpInfo(
        "nll_loss",
        lambda x, t: F.nll_loss(x, t, reduction="sum"),
        lambda x, t: -x[np.arange(len(t)), t].sum(),
        [S(r(4, 5), ints([0, 4, 2, 2]))],
    ),
    OpInfo(
        "ctc_loss",
        _ctc_of_logits,
        _ctc_ref,
        [
            S(
                r(6, 3, 4),
                ints([[1, 2, 2], [3, 1, 1], [2, 2, 2]]),
                ints([6, 5, 4]),
                ints([3, 2, 0]),
            ),
            S(r(5, 2, 3), ints([[1, 1], [0, 2]]), ints([5, 4]), ints([2, 1]), blank=2),
        ],
        second_order=False,
    ),
    OpInfo(
        "leaky_relu",
        lambda x: F.leaky_relu(x, 0.2),
        lambda x: np.where(x > 0, x, 0.2 * x),
        UNARY_SAMPLES,
    ),
    OpInfo("elu", F.elu, lambda x: np.where(x > 0, x, np.exp(x) - 1), UNARY_SAMPLES),
    OpInfo(
        "selu",
        F.selu,
        lambda x: np.where(x > 0, x * 1.0507009873554805, (np.exp(x) - 1) * 1.7580993408473766),
        UNARY_SAMPLES,
    ),
    OpInfo("silu", F.silu, lambda x: x / (1 + np.exp(-x)), UNARY_SAMPLES),
    OpInfo("mish", F.mish, lambda x: x * np.tanh(np.log1p(np.exp(x))), UNARY_SAMPLES),
    OpInfo(
        "hardtanh",
        lambda x: F.hardtanh(x, -0.5, 1.2),
        lambda x: np.clip(x, -0.5, 1.2),
        UNARY_SAMPLES,
    ),
    OpInfo("relu6", lambda x: F.relu6(x * 4), lambda x: np.clip(x * 4, 0, 6), UNARY_SAMPLES),
    OpInfo("logsigmoid", F.logsigmoid, lambda x: -np.log1p(np.exp(-x)), UNARY_SAMPLES),
    OpInfo(
        "scaled_dot_product_attention",
        F.scaled_dot_product_attention,
        _sdpa,
        [
            S(r(2, 3, 4), r(2, 5, 4), r(2, 5, 6)),
            S(r(2, 4, 3), r(2, 4, 3), r(2, 4, 2), is_causal=True),
        ],
    ),
    OpInfo(
        "scaled_dot_product_attention_bool_mask",
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        lambda q, k, v, m: _sdpa(q, k, v, m),
        [S(r(2, 2, 4), r(2, 5, 4), r(2, 5, 3), _MASK)],
        float_inputs=(0, 1, 2),
    ),
    OpInfo(
        "scaled_dot_product_attention_float_mask",
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        lambda q, k, v, m: _sdpa(q, k, v, m),
        [S(r(2, 2, 4), r(2, 5, 4), r(2, 5, 3), r(2, 5))],
    ),
    OpInfo(
        "hardswish_hardsigmoid",
        lambda x: F.hardswish(x) + F.hardsigmoid(x * 2),
        lambda x: x * np.clip(x + 3, 0, 6) / 6 + np.clip(2 * x / 6 + 0.5, 0, 1),
        [S(r(3, 4) * 2.5)],
    ),
    OpInfo(
        "celu",
        lambda x: F.celu(x, 1.5),
        lambda x: np.where(x > 0, x, 1.5 * np.expm1(x / 1.5)),
        UNARY_SAMPLES,
    ),
    OpInfo(
        "glu",
        lambda x: F.glu(x, 1),
        lambda x: x[:, :2] / (1 + np.exp(-x[:, 2:])),
        [S(r(3, 4))],
    ),
    OpInfo(
        "prelu",
        F.prelu,
        lambda x, w: np.where(x > 0, x, x * w.reshape(-1, 1)),
        [S(r(2, 3, 4), r(3))],
    ),
    OpInfo(
        "group_norm",
        lambda x, w, b: F.group_norm(x, 2, w, b),
        lambda x, w, b: _group_norm_ref(x, 2) * w[:, None] + b[:, None],
        [S(r(2, 4, 5), r(4), r(4))],
    ),
    OpInfo(
        "rms_norm",
        lambda x, w: F.rms_norm(x, (4,), w, 1e-6),
        lambda x, w: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w,
        [S(r(3, 4), r(4))],
    ),
    OpInfo(
        "cosine_similarity",
        F.cosine_similarity,
        lambda a, b: (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1),
        [S(r(3, 4), r(3, 4))],
    ),
    OpInfo(
        "pixel_shuffle",
        lambda x: F.pixel_shuffle(x, 2),
        lambda x: x.reshape(1, 2, 2, 2, 3, 2).transpose(0, 1, 4, 2, 5, 3).reshape(1, 2, 6, 4),
        [S(r(1, 8, 3, 2))],
    ),
    OpInfo(
        "fold_unfold",
        lambda x: F.fold(F.unfold(x, 2, padding=1) * 2.0, (3, 4), 2, padding=1),
        lambda x: x * 2.0 * _window_coverage((3, 4), 2, 1),
        [S(r(2, 2, 3, 4))],
    ),
    OpInfo(
        "conv_transpose2d",
        F.conv_transpose2d,
        _conv_transpose_ref,
        [
            S(r(2, 4, 3, 4), r(4, 3, 3, 2), r(3), stride=2, padding=1, output_padding=1),
            S(r(1, 4, 3, 3), r(4, 1, 2, 2), groups=2, dilation=2),
        ],
        rtol32=1e-4,
    ),
    OpInfo(
        "conv_transpose3d",
        F.conv_transpose3d,
        _conv_transpose3d_ref,
        [
            S(r(2, 3, 2, 3, 2), r(3, 2, 2, 2, 3), r(2), stride=2, padding=1, output_padding=1),
            S(r(1, 2, 2, 2, 2), r(2, 3, 2, 1, 2), dilation=2),
        ],
        rtol32=1e-4,
    ),
    OpInfo(
        "interpolate_nearest",
        lambda x: F.interpolate(x, size=(5, 3)),
        lambda x: x[:, :, [0, 0, 1, 1, 2]][:, :, :, [0, 1, 2]],
        [S(r(2, 2, 3, 4))],
    ),
    OpInfo(
        "interpolate_bilinear",
        lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
        lambda x: _bilinear_ref(_bilinear_ref(x, 2), 3),
        [S(r(1, 2, 3, 4))],
    ),
]

OPS += NN_OPS

# every class of float the predicates tell apart, signed zeros too
SPECIAL_FLOATS = np.array([[-np.inf, -2.5, -0.0, 0.0], [1.5, np.nan, 3.0, np.inf]])

# More public functions, in a list of their own after the others: their
# samples are drawn from the generator after those rows', so adding them
# changed no earlier row's samples.
MORE_OPS = [
    # several results, stacked into one tensor to compare
    OpInfo(
        "aminmax",
        lambda x, **k: fg.stack(list(fg.aminmax(x, **k))),
        lambda x, dim=None, keepdim=False: np.stack(
            [x.min(axis=dim, keepdims=keepdim), x.max(axis=dim, keepdims=keepdim)]
        ),
        [S(r(3, 4)), S(r(3, 4), dim=1), S(r(3, 4), dim=0, keepdim=True)],
    ),
    OpInfo(
        "std_mean",
        lambda x: fg.stack(list(fg.std_mean(x, 1))),
        lambda x: np.stack([x.std(1, ddof=1), x.mean(1)]),
        [S(r(3, 4))],
    ),
    OpInfo(
        "broadcast_tensors",
        lambda a, b: fg.stack(fg.broadcast_tensors(a, b)),
        lambda a, b: np.stack(np.broadcast_arrays(a, b)),
        BINARY_SAMPLES[:4],
    ),
    OpInfo(
        "unbind",
        lambda x, **k: fg.stack(fg.unbind(x, **k)[::-1]),
        lambda x, dim=0: np.moveaxis(x, dim, 0)[::-1],
        [S(r(3, 4)), S(r(2, 3, 4), dim=1)],
    ),
    _split("hsplit", [S(r(3, 4), sections=2), S(r(6), sections=3)]),
    _split("vsplit", [S(r(4, 3), sections=2)]),
    _split("dsplit", [S(r(2, 3, 4), sections=2)]),
    # shape ops
    *(
        OpInfo(f"atleast_{n}d", getattr(fg, f"atleast_{n}d"), getattr(np, f"atleast_{n}d"), samples)
        for n, samples in (
            (1, [S(r()), S(r(3))]),
            (2, [S(r()), S(r(3)), S(r(3, 4))]),
            (3, [S(r()), S(r(3)), S(r(3, 4)), S(r(2, 3, 4))]),
        )
    ),
    OpInfo("ravel", fg.ravel, np.ravel, [S(r(2, 3, 4)), S(r())]),
    OpInfo(
        "unflatten",
        lambda x: fg.unflatten(x, 1, (2, -1)),
        lambda x: x.reshape(x.shape[0], 2, -1, *x.shape[2:]),
        [S(r(3, 6)), S(r(2, 4, 3))],
    ),
    _narrow("narrow"),
    _narrow("narrow_copy"),
    OpInfo(
        "diagflat",
        lambda x, *a: fg.diagflat(x, *a),
        lambda x, *a: np.diagflat(x, *a),
        [S(r(3)), S(r(2, 2), 1), S(r(3), -2)],
    ),
    OpInfo(
        "take_along_dim",
        lambda x, i, **k: fg.take_along_dim(x, i, **k),
        lambda x, i, dim: np.take_along_axis(x, i, dim),
        [
            S(r(3, 4), ints([[0, 3], [1, 1], [2, 0]]), dim=1),
            S(r(3, 4), ints([[2, 0, 1, 2]]), dim=0),
        ],
    ),
    # the same values (for real tensors), under PyTorch's names; resolve_conj and
    # resolve_neg are the function real is, so real's row covers them
    OpInfo("real", fg.real, np.real, UNARY_SAMPLES),
    OpInfo("positive", fg.positive, np.positive, UNARY_SAMPLES),
    OpInfo("detach", fg.detach, lambda x: x, UNARY_SAMPLES, differentiable=False),
    # arithmetic and products
    OpInfo("rad2deg", fg.rad2deg, np.rad2deg, UNARY_SAMPLES),
    OpInfo(
        "true_divide",
        fg.true_divide,
        np.true_divide,
        [S(r(3, 4), pos(4)), S(r(3), 1.5), S(2.0, pos(3))],
    ),
    OpInfo(  # PyTorch's heaviside takes operands of one dtype: the integer steps are converted
        "heaviside",
        lambda x, values: fg.heaviside(x.to(values.dtype), values),
        np.heaviside,
        [S(ints([[-2, 0, 3], [0, 1, -1]]), r(3)), S(ints([0, 4, 0]), r())],
    ),
    OpInfo("mv", fg.mv, np.matmul, [S(r(3, 5), r(5))]),
    OpInfo("outer", fg.outer, np.outer, [S(r(3), r(4))]),
    OpInfo("vdot", fg.vdot, np.vdot, [S(r(5), r(5))]),
    OpInfo("inverse", fg.inverse, np.linalg.inv, [S(_well_conditioned(3))]),
    OpInfo("pinverse", fg.pinverse, np.linalg.pinv, [S(r(2, 3, 5))]),
    OpInfo("sgn", fg.sgn, np.sign, UNARY_SAMPLES),  # piecewise constant, as sign
    # no gradient: predicates, bits, counts, indices
    *(
        OpInfo(
            name,
            getattr(fg, name),
            getattr(np, name),
            [S(SPECIAL_FLOATS), S(r(3))],
            differentiable=False,
        )
        for name in ("isfinite", "isinf", "isnan", "isneginf", "isposinf", "isreal")
    ),
    *(
        OpInfo(
            name,
            getattr(fg, name),
            getattr(np, name),
            [
                S(ZEROS_IN_SLICES, np.fliplr(ZEROS_IN_SLICES)),
                S(ZEROS_IN_SLICES, np.array([0.0, 1.5, -2.0, 0.0])),
            ],
            differentiable=False,
        )
        for name in ("logical_and", "logical_or", "logical_xor")
    ),
    OpInfo(  # a number operand's NaN is true, as in numpy
        "logical_not",
        fg.logical_not,
        np.logical_not,
        [S(ZEROS_IN_SLICES), S(np.array([0.0, np.nan, -2.0, 0.0, 1e-30]))],
        differentiable=False,
    ),
    OpInfo(  # the operators' function spellings (the operators have the row "bitwise")
        "bitwise_functions",
        lambda a, b: fg.stack(
            [
                fg.bitwise_and(a, b),
                fg.bitwise_or(a, b),
                fg.bitwise_xor(a, b),
                fg.bitwise_left_shift(a, b % 5),
                fg.bitwise_right_shift(a, b % 5),
            ]
        ),
        lambda a, b: np.stack([a & b, a | b, a ^ b, a << b % 5, a >> b % 5]),
        [S(ints([[5, -5, 1, 7], [0, -1, 40, 3]]), ints([[6, 3, 0, 1], [2, 9, 3, -7]]))],
        differentiable=False,
    ),
    OpInfo(
        "bucketize",
        lambda v, b, **k: fg.bucketize(v, b, **k),
        # boundaries[i - 1] < v <= boundaries[i], or <= and < with right=True
        lambda v, b, right=False: np.searchsorted(b, v, side="right" if right else "left"),
        [
            S(r(3, 4), np.sort(r(5))),
            S(np.array([-1.0, 0.0, 0.5, 2.0]), np.array([-1.0, 0.5, 1.0]), right=True),
        ],
        differentiable=False,
    ),
    _triangle_indices("tril_indices"),
    _triangle_indices("triu_indices"),
    # results shaped by the values, which the jit refuses: eager only
    OpInfo(
        "argwhere",
        lambda x: fg.argwhere(x > 0.5),
        lambda x: np.argwhere(x > 0.5),
        [S(r(3, 4)), S(r(5))],
        differentiable=False,
        jit=False,
    ),
    OpInfo(
        "bincount",
        lambda i, *weights, **k: fg.bincount(i, *weights, **k),
        lambda i, *weights, **k: np.bincount(i, *weights, **k),
        [S(ints([1, 1, 3, 0, 5])), S(ints([1, 1, 3]), r(3), minlength=6)],
        differentiable=False,
        jit=False,
    ),
    OpInfo(
        "unique",
        fg.unique,
        np.unique,
        [S(np.array([2.0, -1.0, 2.0, 0.5, -1.0])), S(np.array([[1.5, 0.0], [0.0, 1.5]]))],
        differentiable=False,
        jit=False,
    ),
    OpInfo(
        "unique_consecutive",
        fg.unique_consecutive,
        lambda x: x[np.r_[True, x[1:] != x[:-1]]],
        [S(np.array([2.0, 2.0, -1.0, 2.0, 0.5, 0.5]))],
        differentiable=False,
        jit=False,
    ),
]

OPS += MORE_OPS


def _hessian_vector_product(x, v):
    """Forward over reverse: the jvp of a gradient (a transform's inputs are
    detached for reverse mode only, the forward_only primitive in a trace)."""
    gradient = fg.func.grad(lambda y: (y.sin() * y).sum())
    return fg.func.jvp(gradient, (x.to(v.dtype),), (v,))[1]


OPS.append(
    OpInfo(
        "func_jvp_of_grad",
        _hessian_vector_product,
        lambda x, v: (2 * np.cos(x) - x * np.sin(x)) * v,
        [S(r(5), r(5)), S(r(2, 3), r(2, 3))],
        # differentiated by the tangent only: the point, without a gradient,
        # is detached by the transform, which a trace records as forward_only
        float_inputs=(1,),
    )
)

OPS_BY_NAME = {op.name: op for op in OPS}
