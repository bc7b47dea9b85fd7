"""Accuracy of the kernels' transcendental functions over their whole range:
0, subnormals, huge values, +-inf and NaN included. float32 within 4 ulp of
the float64 truth; float64 within 1e-14 relative of numpy's libm."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.codegen import mathfns
from fusegrad.ir import primitives as P
from fusegrad.ir.graph import Graph, GraphBuilder, Var, building
from fusegrad.runtime.executor import Executor


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


_erf = np.vectorize(math.erf)

TRUTH = {
    "erf": _erf,
    "exp": np.exp,
    "log": np.log,
    "log1p": np.log1p,
    "expm1": np.expm1,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "softplus": lambda x: np.logaddexp(x, 0),
}


def _inputs(np_dtype):
    rng = np.random.default_rng(7)
    info = np.finfo(np_dtype)
    scales = (1e-30, 1e-8, 1e-3, 0.1, 0.5, 1, 3, 10, 30, 100, 700)
    parts = [rng.standard_normal(4000) * s for s in scales]
    lowest = np.log(float(info.smallest_subnormal))
    parts.append(np.exp(rng.uniform(lowest, np.log(float(info.max)), 20000)))
    parts.append(-np.exp(rng.uniform(lowest, np.log(float(info.max)), 5000)))
    special = [
        0.0,
        -0.0,
        info.tiny,
        info.tiny / 8,
        info.smallest_subnormal,
        -info.tiny,
        1.0,
        -1.0,
        info.max,
        -info.max,
        np.inf,
        -np.inf,
        np.nan,
        0.625,
        -0.625,
        88.7,
        88.8,
        -87.3,
        -103.0,
        -104.0,
        709.7,
        710.0,
        -745.0,
        -746.0,
        1e30,
        -1e30,
    ]
    parts.append(np.array(special))
    return np.concatenate(parts).astype(np_dtype)


def _run(name, dtype, xs):
    x = Var(xs.shape, dtype)
    builder = GraphBuilder()
    with building(builder):
        out = getattr(P, name)(x)
    executor = Executor(Graph([x], builder.eqns, [out]))
    assert len(executor.kernels) == 1  # compiled, not run by numpy
    return executor.run([xs])[0]


def _agree_on_specials(got, want):
    return (np.isnan(got) & np.isnan(want)) | (got == want)


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_float32_within_4_ulp_of_the_float64_truth(name):
    xs = _inputs(np.float32)
    got = _run(name, fg.float32, xs)
    with np.errstate(all="ignore"):
        want = TRUTH[name](xs.astype(np.float64))
        rounded = want.astype(np.float32)
        ulp = np.spacing(np.abs(rounded)).astype(np.float64)
        error = np.abs(got.astype(np.float64) - want) / ulp
    error[_agree_on_specials(got, rounded)] = 0
    worst = int(np.argmax(error))
    assert error[worst] <= 4, f"{name}({xs[worst]!r}) = {got[worst]!r}, truth {want[worst]!r}"


@pytest.mark.parametrize("name", sorted(TRUTH))
def test_float64_within_1e_14_relative(name):
    xs = _inputs(np.float64)
    got = _run(name, fg.float64, xs)
    with np.errstate(all="ignore"):
        want = TRUTH[name](xs)
        error = np.abs(got - want) / np.maximum(np.abs(want), np.finfo(np.float64).tiny)
    error[_agree_on_specials(got, want)] = 0
    worst = int(np.argmax(error))
    assert error[worst] <= 1e-14, f"{name}({xs[worst]!r}) = {got[worst]!r}, want {want[worst]!r}"


def test_float32_pow_within_4_ulp_with_cs_special_cases():
    special = np.array(
        [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            -0.5,
            2.0,
            -2.0,
            3.0,
            -3.0,
            1.5,
            -1.5,
            np.inf,
            -np.inf,
            np.nan,
            1e-40,
            -1e-40,
            3.4e38,
            -3.4e38,
            0.1,
            100.0,
        ],
        np.float32,
    )
    xs, ys = (a.ravel() for a in np.meshgrid(special, special))
    rng = np.random.default_rng(11)
    n = 100_000
    xs = np.concatenate(
        [xs, np.exp(rng.uniform(-20, 20, n)) * rng.choice([-1, 1], n), rng.standard_normal(n)]
    ).astype(np.float32)
    ys = np.concatenate([ys, rng.uniform(-10, 10, n), np.round(rng.uniform(-20, 20, n))]).astype(
        np.float32
    )
    x, y = Var(xs.shape, fg.float32), Var(ys.shape, fg.float32)
    builder = GraphBuilder()
    with building(builder):
        out = P.pow_(x, y)
    executor = Executor(Graph([x, y], builder.eqns, [out]))
    assert len(executor.kernels) == 1
    got = executor.run([xs, ys])[0]
    with np.errstate(all="ignore"):
        truth = np.power(xs.astype(np.float64), ys.astype(np.float64))
        rounded = truth.astype(np.float32)
        error = np.abs(got.astype(np.float64) - truth) / np.spacing(np.abs(rounded)).astype(
            np.float64
        )
    error[_agree_on_specials(got, rounded)] = 0
    worst = int(np.argmax(error))
    assert error[worst] <= 4, f"pow({xs[worst]!r}, {ys[worst]!r}) = {got[worst]!r}"


def test_float64_pow_within_1e_14_with_cs_special_cases():
    special = np.array(
        [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            -0.5,
            2.0,
            -2.0,
            3.0,
            -3.0,
            1.5,
            -1.5,
            np.inf,
            -np.inf,
            np.nan,
            1e-310,
            -1e-310,
            1.7e308,
            -1.7e308,
            0.1,
            100.0,
        ]
    )
    xs, ys = (a.ravel() for a in np.meshgrid(special, special))
    rng = np.random.default_rng(12)
    n = 100_000
    xs = np.concatenate(
        [
            xs,
            np.exp(rng.uniform(-700, 700, n)) * rng.choice([-1, 1], n),
            np.exp(rng.uniform(-5, 5, n)),
            rng.standard_normal(n),
        ]
    )
    ys = np.concatenate(
        [ys, rng.uniform(-1, 1, n), rng.uniform(-140, 140, n), np.round(rng.uniform(-30, 30, n))]
    )
    x, y = Var(xs.shape, fg.float64), Var(ys.shape, fg.float64)
    builder = GraphBuilder()
    with building(builder):
        out = P.pow_(x, y)
    executor = Executor(Graph([x, y], builder.eqns, [out]))
    assert len(executor.kernels) == 1
    got = executor.run([xs, ys])[0]
    with np.errstate(all="ignore"):
        want = np.power(xs, ys)
        error = np.abs(got - want) / np.maximum(np.abs(want), np.finfo(np.float64).tiny)
    error[_agree_on_specials(got, want)] = 0
    worst = int(np.argmax(error))
    assert error[worst] <= 1e-14, f"pow({xs[worst]!r}, {ys[worst]!r}) = {got[worst]!r}"


def _ulp_error(name, xs, got):
    with np.errstate(all="ignore"):
        truth = getattr(np, name)(xs.astype(np.float64))
        rounded = truth.astype(np.float32)
        error = np.abs(got.astype(np.float64) - truth) / np.spacing(np.abs(rounded)).astype(
            np.float64
        )
    error[_agree_on_specials(got, rounded)] = 0
    return error, truth


def _sin_cos_executor(name, xs):
    x = Var(xs.shape, fg.float32)
    builder = GraphBuilder()
    with building(builder):
        out = getattr(P, name)(x)
    return Executor(Graph([x], builder.eqns, [out]))


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_float32_sin_and_cos_fast_path_up_to_its_limit(name):
    """Float32 lanes with a three-part Cody-Waite reduction; the worst cases
    are the arguments nearest to multiples of pi/2."""
    limit = mathfns.SIN_COS_FAST_LIMIT
    nearest = (np.arange(1, limit / (np.pi / 2), 7) * (np.pi / 2)).astype(np.float32)
    xs = _inputs(np.float32)
    xs = np.concatenate(
        [
            xs[np.abs(xs) <= limit],
            nearest,
            np.nextafter(nearest, np.float32(0)),
            -np.nextafter(nearest, np.float32(np.inf)),
            np.float32([limit, -limit, np.inf, -np.inf, np.nan]),
        ]
    ).astype(np.float32)
    executor = _sin_cos_executor(name, xs)
    got = executor.run([xs])[0]
    error, truth = _ulp_error(name, xs, got)
    worst = int(np.argmax(error))
    assert error[worst] <= 4, f"{name}({xs[worst]!r}) = {got[worst]!r}, truth {truth[worst]!r}"
    assert not any(exact for *_, exact in executor.kernels[0].variants)  # the exact one never ran


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_float32_sin_and_cos_over_the_whole_range(name):
    """An argument beyond the fast path's limit runs the kernel again with the
    exponent-indexed reduction, as accurate for 8.5e37 as for 1."""
    rng = np.random.default_rng(3)
    xs = np.concatenate(
        [
            _inputs(np.float32),
            (rng.uniform(-1, 1, 50000) * 2.0 ** rng.integers(-20, 128, 50000)),
            np.array([np.pi, np.pi / 2, 1e22, 8.5e37]),
        ]
    ).astype(np.float32)
    executor = _sin_cos_executor(name, xs)
    got = executor.run([xs])[0]
    error, truth = _ulp_error(name, xs, got)
    worst = int(np.argmax(error))
    assert error[worst] <= 4, f"{name}({xs[worst]!r}) = {got[worst]!r}, truth {truth[worst]!r}"
    assert any(exact for *_, exact in executor.kernels[0].variants)


def test_a_rerun_for_a_huge_sin_argument_starts_every_reduction_again():
    """Column sums add into accumulators: the exact rerun must not add twice."""
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((300, 40)).astype(np.float32)
    xs[17, 3] = 3e9
    x = Var(xs.shape, fg.float32)
    builder = GraphBuilder()
    with building(builder):
        y = P.mul(P.sin(x), x)
        outputs = [y, P.reduce_sum(y, axes=(0,)), P.reduce_sum(y, axes=(1,))]
        outputs.append(P.reduce_max(y, axes=(0, 1)))
    executor = Executor(Graph([x], builder.eqns, outputs))
    assert len(executor.kernels) == 1
    y64 = np.sin(xs.astype(np.float64)) * xs
    for got, want in zip(executor.run([xs]), [y64, y64.sum(0), y64.sum(1), y64.max()]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)
