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

_rng = np.random.default_rng(1234)
_erf = np.vectorize(math.erf)


def r(*shape, lo=-2.0, hi=2.0):
    """A random float64 array, away from 0 where lo > 0."""
    return _rng.uniform(lo, hi, size=shape)


def pos(*shape):
    return r(*shape, lo=0.2, hi=2.0)


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
    float_inputs: tuple | None = None  # positions of float args (default: all float arrays)
    rtol32: float = 1e-5
    jit: bool = True  # compiles under fusegrad.jit (a mask's result shape depends on values)


def _reduction(name, numpy_name, samples):
    """A Tensor method reducing over ``dim`` and its numpy counterpart over ``axis``."""
    return OpInfo(
        name,
        lambda x, **k: getattr(x, name)(**k),
        lambda x, dim=None, keepdim=False: getattr(x, numpy_name)(axis=dim, keepdims=keepdim),
        samples,
    )


def _softmax(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
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


BINARY_SAMPLES = [
    S(r(3, 4), r(3, 4)),
    S(r(3, 4), r(4)),
    S(r(2, 1, 3), r(4, 1)),
    S(r(), r(3)),
    S(r(3), 1.5),
]
UNARY_SAMPLES = [S(r(3, 4)), S(r()), S(r(1, 5, 1))]

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
    OpInfo("rsqrt", fg.rsqrt, lambda x: 1 / np.sqrt(x), [S(pos(3, 4))]),
    OpInfo("sin", fg.sin, np.sin, UNARY_SAMPLES),
    OpInfo("cos", fg.cos, np.cos, UNARY_SAMPLES),
    OpInfo("tan", fg.tan, np.tan, [S(r(3, 4, lo=-1.2, hi=1.2))]),
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
    OpInfo("sign", fg.sign, np.sign, UNARY_SAMPLES, differentiable=False),
    OpInfo("floor", fg.floor, np.floor, UNARY_SAMPLES, differentiable=False),
    OpInfo("ceil", fg.ceil, np.ceil, UNARY_SAMPLES, differentiable=False),
    OpInfo("trunc", fg.trunc, np.trunc, UNARY_SAMPLES, differentiable=False),
    OpInfo(
        "round",
        fg.round,
        np.round,
        [*UNARY_SAMPLES, S(np.arange(-3, 3) + 0.5)],
        differentiable=False,
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
        [S(r(3, 4)), S(r(3, 4), dim=1), S(np.array([[1.5, 0.0, 2.0], [0.5, -1.0, 3.0]]), dim=1)],
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
        [S(r(3, 4)), S(r(3, 4), dim=1)],
        differentiable=False,
    ),
    OpInfo(
        "any",
        lambda x, **k: (x > 0).any(**k),
        lambda x, dim=None: (x > 0).any(axis=dim),
        [S(r(3, 4)), S(r(3, 4), dim=0)],
        differentiable=False,
    ),
    OpInfo(
        "softmax",
        lambda x, dim: fg.softmax(x, dim),
        _softmax,
        [S(r(3, 4), dim=1), S(r(3, 4), dim=0)],
    ),
    OpInfo(
        "log_softmax",
        lambda x, dim: fg.log_softmax(x, dim),
        lambda x, dim: np.log(_softmax(x, dim)),
        [S(r(3, 4), dim=1)],
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
]

OPS_BY_NAME = {op.name: op for op in OPS}
