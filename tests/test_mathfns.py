"""Accuracy of the kernels' transcendental functions over their whole range:
0, subnormals, huge values, +-inf and NaN included. float32 within 4 ulp of
the float64 truth (tanh and erf, each one rational function: 6); float64
within 1e-14 relative of numpy's libm."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.codegen import mathfns
from fusegrad.ir import primitives as P
from fusegrad.ir.dtypes import from_numpy_dtype
from fusegrad.ir.graph import Graph, GraphBuilder, Var, building
from fusegrad.runtime.executor import Executor
from fusegrad.runtime.launch import Launcher


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


def _executor(name, *arrays):
    """A graph of one primitive over the arrays, compiled as one kernel."""
    inputs = [Var(a.shape, from_numpy_dtype(a.dtype)) for a in arrays]
    builder = GraphBuilder()
    with building(builder):
        out = getattr(P, name)(*inputs)
    executor = Executor(Graph(inputs, builder.eqns, [out]))
    assert len(executor.kernels) == 1  # compiled, not run by numpy
    return executor


def _agree_on_specials(got, want):
    return (np.isnan(got) & np.isnan(want)) | (got == want)


BOUND = {np.float32: 4, np.float64: 1e-14}  # ulp; relative
# ulp: their largest errors over every float32 are 5.5 and 5.4
FLOAT32_BOUND = {"tanh": 6, "erf": 6}


def _assert_accurate(name, arrays, got, truth):
    """float32: ulp from the float64 truth; float64: relative error."""
    with np.errstate(all="ignore"):
        want = truth.astype(got.dtype)
        if got.dtype == np.float32:
            ulp = np.spacing(np.abs(want)).astype(np.float64)
            error = np.abs(got.astype(np.float64) - truth) / ulp
        else:
            error = np.abs(got - truth) / np.maximum(np.abs(truth), np.finfo(np.float64).tiny)
    error[_agree_on_specials(got, want)] = 0
    worst = int(np.argmax(error))
    inputs = ", ".join(repr(a[worst]) for a in arrays)
    bound = BOUND[got.dtype.type]
    if got.dtype == np.float32:
        bound = FLOAT32_BOUND.get(name, bound)
    assert error[worst] <= bound, f"{name}({inputs}) = {got[worst]!r}, want {want[worst]!r}"


def _check(name, truth, *arrays):
    got = _executor(name, *arrays).run(list(arrays))[0]
    with np.errstate(all="ignore"):
        expected = truth(*(a.astype(np.float64) for a in arrays))
    _assert_accurate(name, arrays, got, expected)


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(TRUTH))
def test_within_4_ulp_in_float32_and_1e_14_relative_in_float64(name, np_dtype):
    _check(name, TRUTH[name], _inputs(np_dtype))


def _every_float32(low, high):
    bits = np.arange(*np.array([low, high], np.float32).view(np.int32), dtype=np.int32)
    return bits.view(np.float32)


@pytest.mark.parametrize(
    "name, peak, limit", [("tanh", (7.2, 7.45), 9.0), ("erf", (3.8, 3.95), 4.0)]
)
def test_float32_rational_functions_where_their_error_peaks_and_at_their_limits(name, peak, limit):
    """Every float where the error is largest (P and Q largest, the value
    nearing 1) and around the clamp; beyond it exactly 1, never beyond 1."""
    xs = np.concatenate([_every_float32(*peak), _every_float32(limit - 0.1, limit + 0.2)])
    _check(name, TRUTH[name], np.concatenate([xs, -xs]))
    special = np.array([limit + 0.1, 20.0, 1e30, np.inf, -np.inf, -0.0], np.float32)
    got = _executor(name, special).run([special])[0]
    assert got[:5].tolist() == [1, 1, 1, 1, -1]
    assert got[5] == 0 and np.signbit(got[5])
    xs = _every_float32(0.5, 2 * limit)[::97]
    assert np.abs(_executor(name, xs).run([xs])[0]).max() <= 1


POW_EXTREMES = {
    np.float32: [1e-40, -1e-40, 3.4e38, -3.4e38],
    np.float64: [1e-310, -1e-310, 1.7e308, -1.7e308],
}


def _pow_grid(np_dtype):
    """Every pair of C's special cases (signed zeros, +-1, halves, odd and
    even integers, infinities, nan, subnormals, huge values)."""
    special = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 1.5, -1.5]
    special += [np.inf, -np.inf, np.nan, 0.1, 100.0] + POW_EXTREMES[np_dtype]
    return [
        a.ravel() for a in np.meshgrid(np.array(special, np_dtype), np.array(special, np_dtype))
    ]


def test_float32_pow_within_4_ulp_with_cs_special_cases():
    xs, ys = _pow_grid(np.float32)
    rng = np.random.default_rng(11)
    n = 100_000
    xs = np.concatenate(
        [xs, np.exp(rng.uniform(-20, 20, n)) * rng.choice([-1, 1], n), rng.standard_normal(n)]
    ).astype(np.float32)
    ys = np.concatenate([ys, rng.uniform(-10, 10, n), np.round(rng.uniform(-20, 20, n))]).astype(
        np.float32
    )
    _check("pow_", np.power, xs, ys)


def test_float64_pow_within_1e_14_with_cs_special_cases():
    xs, ys = _pow_grid(np.float64)
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
    _check("pow_", np.power, xs, ys)


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_and_cos_fast_path_up_to_its_limit(name, np_dtype, monkeypatch):
    """The worst cases of a Cody-Waite reduction are the arguments nearest to
    multiples of pi/2; none of these may fall back to numpy."""
    limit = mathfns.SIN_COS_FAST_LIMIT
    nearest = (np.arange(1, limit / (np.pi / 2), 7) * (np.pi / 2)).astype(np_dtype)
    xs = _inputs(np_dtype)
    xs = np.concatenate(
        [
            xs[np.abs(xs) <= limit],
            nearest,
            np.nextafter(nearest, np_dtype(0)),
            -np.nextafter(nearest, np_dtype(np.inf)),
            np.array([limit, -limit, np.inf, -np.inf, np.nan]),
        ]
    ).astype(np_dtype)
    monkeypatch.setattr(Launcher, "in_numpy", None)  # the fallback must not run
    _check(name, getattr(np, name), xs)


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_and_cos_beyond_the_fast_range_run_again_with_the_c_librarys(
    name, np_dtype, monkeypatch
):
    monkeypatch.setattr(Launcher, "in_numpy", None)  # not through numpy
    fallbacks = []
    prepared = Launcher.prepared

    def noting(launcher, layouts, precise=False):
        if precise:
            fallbacks.append(launcher.code)
        return prepared(launcher, layouts, precise)

    monkeypatch.setattr(Launcher, "prepared", noting)
    rng = np.random.default_rng(3)
    top = 127 if np_dtype is np.float32 else 1023
    xs = np.concatenate(
        [
            _inputs(np_dtype),
            (rng.uniform(-1, 1, 50000) * 2.0 ** rng.integers(-20, top, 50000)),
            np.array([np.pi, np.pi / 2, 1e22, 8.5e37]),
        ]
    ).astype(np_dtype)
    executor = _executor(name, xs)
    with np.errstate(invalid="ignore"):  # numpy's sin(inf)
        got = executor.run([xs])[0]
        truth = getattr(np, name)(xs.astype(np.float64))
    assert fallbacks == executor.kernels
    _assert_accurate(name, [xs], got, truth)


def test_a_kernel_with_a_huge_sin_argument_gives_every_result_again():
    """The fallback recomputes the elementwise outputs and every reduction."""
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


@pytest.mark.parametrize("name", ["erf", "erfc"])
@pytest.mark.parametrize("np_dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_eager_erf_on_large_arrays_runs_the_kernel(np_dtype, name):
    """numpy has no erf or erfc: on large arrays eager mode runs the compiled
    kernel (math.erf element by element took most of a GELU model's eager
    step); erfc's results down to the smallest normal number are checked."""
    rng = np.random.default_rng(7)
    base = (rng.standard_normal((96, 130)) * 3).astype(np_dtype)
    base[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    exact = getattr(math, name)
    for x in (base, base[:, ::2], base.T):  # contiguous, strided, transposed
        want = np.vectorize(exact)(x.astype(np.float64)).astype(np_dtype)
        first = getattr(fg.from_numpy(x), name)().numpy()
        again = getattr(fg.from_numpy(x * 0.5), name)().numpy()  # the same program again
        np.testing.assert_allclose(
            first, want, rtol=4 * np.finfo(np_dtype).eps, atol=np.finfo(np_dtype).tiny
        )
        assert not np.shares_memory(first, again)
    if name == "erf":
        assert np.signbit(fg.from_numpy(base).erf().numpy()[0, 3])  # erf(-0.0) is -0.0
    small = getattr(fg.tensor([0.5], dtype=fg.float32), name)()  # below the size: math's
    assert small.item() == np.float32(exact(0.5))


@pytest.mark.parametrize("name", ["sin", "tan", "tanh", "erf", "expm1", "log1p"])
@pytest.mark.parametrize("np_dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_odd_functions_keep_the_sign_of_zero(name, np_dtype):
    """f(-0) is -0, as numpy gives: the kernels' sin and tanh gave +0, so
    x / sin(x) was inf where numpy has -inf (a fuzzer find)."""
    x = np.array([-0.0, 0.0, -1e-30, 1e-30] * 64, np_dtype)
    got = fg.jit(lambda t: getattr(fg, name)(t))(fg.from_numpy(x)).numpy()
    np.testing.assert_array_equal(np.signbit(got), np.signbit(x))
    assert (got[:2] == 0).all()
