"""The packed GEMM (codegen/packed_gemm.py, runtime/packed_gemm.py): products
of every layout against numpy's in float64, and the op table's ops that
reach a matrix product (values, gradients, second derivatives, compiled
against eager) with every product run packed and split across three
threads, however small."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.codegen import packed_gemm as codegen_packed
from fusegrad.codegen import vectors
from fusegrad.runtime import packed_gemm, routines, threads

import test_jit
import test_ops
from op_table import OPS_BY_NAME


@pytest.fixture
def every_product_packed(monkeypatch):
    """Every product of two matrices or more runs packed, in parts on three threads."""
    monkeypatch.setattr(packed_gemm, "MIN_WORK", 0)
    monkeypatch.setattr(packed_gemm, "MIN_SIDE", 1)
    monkeypatch.setattr(packed_gemm, "SPLIT_WORK", 0)
    monkeypatch.setattr(packed_gemm, "_calls", {})
    monkeypatch.setattr(routines, "_calls", {})
    monkeypatch.setattr(routines, "MIN_WORK", 1 << 62)  # not the small-matrix routine
    monkeypatch.setattr(routines, "_unpacked_call", lambda x, y: None)  # nor unpacked
    monkeypatch.setenv("FUSEGRAD_NUM_THREADS", "3")
    ran = []
    original = packed_gemm.product

    def product(x, y, pairs=False, rounded=False):
        out = original(x, y, pairs, rounded)
        ran.append(out is not None)
        return out

    monkeypatch.setattr(packed_gemm, "product", product)
    return ran


def _operand(rng, shape, dtype, layout):
    """An operand of ``shape`` laid out as ``layout`` says: C order,
    transposed (its last two axes swapped in memory), every other element
    of a larger array, or reversed along its rows."""
    if layout == "transposed":
        base = rng.standard_normal(shape[:-2] + shape[-2:][::-1]).astype(dtype)
        return np.swapaxes(base, -1, -2)
    if layout == "strided":
        base = rng.standard_normal(shape[:-1] + (2 * shape[-1],)).astype(dtype)
        return base[..., ::2]
    if layout == "reversed":
        return rng.standard_normal(shape).astype(dtype)[..., ::-1, :]
    return rng.standard_normal(shape).astype(dtype)


# (m, k, n): one element; primes around the micro-kernel's and the cache
# blocks' sizes (6 or 12 rows, 2 vectors of columns; 144 rows, 256 deep,
# 4096 wide), so every tile and block has a partial one after it
SHAPES = [
    (1, 1, 1),
    (1, 7, 1),
    (5, 3, 2),
    (6, 1, 16),
    (13, 17, 19),
    (37, 5, 67),
    (151, 263, 41),
    (7, 521, 11),
    (3, 2, 12301),
]
LAYOUTS = ["c", "transposed", "strided", "reversed"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_products_of_every_layout_match_numpy(shape, dtype, every_product_packed):
    m, k, n = shape
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    tolerance = 3e-6 if dtype == np.float32 else 1e-14
    for x_layout in LAYOUTS:
        for y_layout in LAYOUTS:
            x = _operand(rng, (m, k), dtype, x_layout)
            y = _operand(rng, (k, n), dtype, y_layout)
            got = routines.matmul(x, y)
            want = x.astype(np.float64) @ y.astype(np.float64)
            assert got.dtype == dtype and got.shape == want.shape
            scale = np.abs(x).max() * np.abs(y).max() * k
            np.testing.assert_allclose(got, want, rtol=0, atol=tolerance * scale)
    assert all(every_product_packed)


# Vector registers (bytes, count) of the machines the routine is generated
# for: AVX-512's and AVX2's. The routine built for either runs on any x86
# machine (LLVM splits vectors wider than the host's), so both block shapes
# (12x32 and 6x16 floats) are checked wherever the tests run.
MACHINES = [(64, 32), (32, 16)]


@pytest.mark.parametrize("registers", MACHINES, ids=lambda r: f"{r[1]}x{r[0]}B")
def test_the_block_shapes_of_other_machines_compute_the_same(registers, monkeypatch):
    monkeypatch.setattr(vectors, "vector_registers", lambda: registers)
    monkeypatch.setattr(codegen_packed, "vector_registers", lambda: registers)
    monkeypatch.setattr(packed_gemm, "_calls", {})
    monkeypatch.setattr(packed_gemm, "_workspaces", threading.local())
    monkeypatch.setattr(packed_gemm, "MIN_WORK", 0)
    monkeypatch.setattr(packed_gemm, "MIN_SIDE", 1)
    monkeypatch.setenv("FUSEGRAD_NUM_THREADS", "2")
    assert codegen_packed.blocking("float32").mr == (12 if registers[1] == 32 else 6)
    rng = np.random.default_rng(registers[1])
    for dtype in (np.float32, np.float64):
        tolerance = 3e-6 if dtype == np.float32 else 1e-14
        for m, k, n in SHAPES[:-1]:
            for x_layout, y_layout in [("c", "transposed"), ("transposed", "strided")]:
                x = _operand(rng, (m, k), dtype, x_layout)
                y = _operand(rng, (k, n), dtype, y_layout)
                want = x.astype(np.float64) @ y.astype(np.float64)
                scale = np.abs(x).max() * np.abs(y).max() * k
                got = packed_gemm.product(x, y)
                np.testing.assert_allclose(got, want, rtol=0, atol=tolerance * scale)
    monkeypatch.setattr(packed_gemm, "BFLOAT16_PAIRS", True)
    for dot in ["instruction", "emulated"] if codegen_packed.has_bfloat16_dot() else ["emulated"]:
        if dot == "emulated":
            monkeypatch.setattr(codegen_packed, "has_bfloat16_dot", lambda: False)
        packed_gemm._calls.clear()
        for m, k, n in SHAPES[:-1]:
            x = _bfloat16(_operand(rng, (m, k), np.float32, "transposed"))
            y = _bfloat16(_operand(rng, (k, n), np.float32, "c"))
            _assert_bfloat16_product(packed_gemm.product(x, y, pairs=True), x, y, False)
            _assert_bfloat16_product(packed_gemm.product(x, y, True, rounded=True), x, y, True)


STACKS = [
    ((4, 9, 30), (4, 30, 20)),  # one stack axis
    ((3, 4, 9, 30), (4, 30, 20)),  # y broadcast along the outer axis
    ((3, 1, 9, 30), (1, 4, 30, 20)),  # each broadcast along one
    ((2, 9, 30), (30, 20)),  # rows of every matrix at once
    ((2, 3, 9, 30), (30, 33)),
    ((5, 1, 30), (5, 30, 1)),  # one row and one column each
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("shapes", STACKS, ids=lambda s: f"{s[0]}@{s[1]}")
def test_stacked_and_broadcast_products_match_numpy(shapes, dtype, every_product_packed):
    rng = np.random.default_rng(len(shapes[0]) + shapes[1][-1])
    tolerance = 3e-6 if dtype == np.float32 else 1e-14
    for x_layout in LAYOUTS:
        for y_layout in LAYOUTS:
            x = _operand(rng, shapes[0], dtype, x_layout)
            y = _operand(rng, shapes[1], dtype, y_layout)
            want = np.matmul(x.astype(np.float64), y.astype(np.float64))
            got = routines.matmul(x, y)
            np.testing.assert_allclose(got, want, rtol=0, atol=tolerance * 30 * 16)
    assert any(every_product_packed)


def test_stacks_whose_axes_do_not_merge_and_empty_products_go_to_numpy(every_product_packed):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4, 5, 6)).astype(np.float32)[:, ::2, :, ::2]  # three stack axes
    y = rng.standard_normal((2, 2, 4, 6, 7)).astype(np.float32)[:, :, ::-1]
    assert packed_gemm._layout(x, y) is None
    np.testing.assert_allclose(routines.matmul(x, y), np.matmul(x, y), rtol=1e-5, atol=1e-5)
    for m, k, n in [(0, 3, 4), (3, 0, 4), (3, 4, 0)]:
        x, y = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
        assert packed_gemm._layout(x, y) is None
        np.testing.assert_array_equal(routines.matmul(x, y), np.matmul(x, y))


def test_products_carry_nan_and_inf_as_numpy(every_product_packed):
    x = np.ones((9, 20), np.float32)
    x[1, 4], x[7, 19] = np.inf, np.nan
    y = np.ones((20, 18), np.float32)
    y[4, 2] = 0.0  # inf * 0 is NaN
    np.testing.assert_array_equal(routines.matmul(x, y), x @ y)


def test_parts_cover_every_product_once():
    """However the cores split the products (whole products, else panels of
    columns or of rows), each element of the result lies in one part."""
    blocks = codegen_packed.blocking("float32")
    for items, m, n in [(1, 1, 1), (1, 5, 1000), (1, 1000, 5), (3, 7, 7), (5, 40, 40), (1, 13, 97)]:
        for cores in (1, 2, 3, 7):
            covered = np.zeros((items, m, n), int)
            for i0, i1, r0, r1, c0, c1 in packed_gemm._parts(items, m, n, cores, blocks):
                covered[i0:i1, r0:r1, c0:c1] += 1
            assert (covered == 1).all(), (items, m, n, cores)


@pytest.mark.parametrize("shape", [(700, 90), (90, 300)], ids=["by rows", "by columns"])
def test_a_product_has_the_same_bits_on_any_number_of_cores(shape, monkeypatch):
    """Each element's sum runs through the depth blocks in one order
    whichever part computes it, and whichever end of its row blocks and
    panels a part starts from (odd parts start from the last), so results
    do not depend on the cores (as OpenBLAS's last bits do)."""
    rng = np.random.default_rng(5)
    m, n = shape
    x = rng.standard_normal((m, 700)).astype(np.float32)  # by rows: blocks of A on each core
    y = rng.standard_normal((700, n)).astype(np.float32)
    results = []
    for cores in ("1", "2", "3"):
        monkeypatch.setenv("FUSEGRAD_NUM_THREADS", cores)
        results.append(packed_gemm.product(x, y))
        results.append(packed_gemm.product(x, y.T.copy().T))
    for result in results[1:]:
        np.testing.assert_array_equal(result, results[0])


def test_large_products_run_packed_in_parts_on_fusegrads_threads(monkeypatch):
    assert packed_gemm.runs_packed((256, 784), (784, 512))
    assert packed_gemm.runs_packed((16, 64, 128), (128, 384))
    assert not packed_gemm.runs_packed((8, 8), (8, 8))
    assert not packed_gemm.runs_packed((512,), (512, 512))
    assert not packed_gemm.runs_packed((4096, 512), (512, 1))  # matrix times vector
    monkeypatch.setenv("FUSEGRAD_NUM_THREADS", "2")
    handed = []
    original = threads.run

    def run(function, calls, **options):
        handed.append(len(calls))
        return original(function, calls, **options)

    monkeypatch.setattr(threads, "run", run)
    x = np.ones((256, 256), np.float32)
    np.testing.assert_array_equal(routines.matmul(x, x), x @ x)
    assert handed == [2]


# ------------------------------------------------------------ bfloat16 pairs

DOTS = [
    "emulated",
    pytest.param(
        "instruction",
        marks=pytest.mark.skipif(
            not codegen_packed.has_bfloat16_dot(), reason="this CPU has no AVX512-BF16"
        ),
    ),
]


@pytest.fixture(params=DOTS)
def bfloat16_pairs(request, monkeypatch):
    """bfloat16 products run as pairs, by the CPU's dot product instruction
    or (on any machine) by the routine that emulates it."""
    monkeypatch.setattr(packed_gemm, "BFLOAT16_PAIRS", True)
    if request.param == "emulated":
        monkeypatch.setattr(codegen_packed, "has_bfloat16_dot", lambda: False)
    monkeypatch.setattr(packed_gemm, "_calls", {})
    return request.param


def _bfloat16(a: np.ndarray) -> np.ndarray:
    """``a`` rounded to bfloat16 in place (its layout kept), as fusegrad holds them."""
    a[...] = fg.bfloat16.round(a)
    return a


def _assert_bfloat16_product(got, x, y, rounded: bool):
    """got is x @ y's float32 sums (``rounded``: rounded once to bfloat16,
    so bfloat16 values within half a bfloat16 step of the exact product)."""
    want = np.matmul(x.astype(np.float64), y.astype(np.float64))
    assert got.dtype == np.float32 and got.shape == want.shape
    scale = np.abs(x).max(initial=0) * np.abs(y).max(initial=0) * x.shape[-1]
    if rounded:
        np.testing.assert_array_equal(got, fg.bfloat16.round(got))
    np.testing.assert_allclose(got, want, rtol=2**-8 if rounded else 0, atol=3e-6 * scale)


@pytest.mark.parametrize("rounded", [False, True], ids=["sums", "rounded"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_bfloat16_products_of_every_layout(shape, rounded, bfloat16_pairs, every_product_packed):
    """Odd depths (a pair's second half past the end) and depths past one
    block (521 = 512 + 9) included."""
    m, k, n = shape
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    for x_layout in LAYOUTS:
        for y_layout in LAYOUTS:
            x = _bfloat16(_operand(rng, (m, k), np.float32, x_layout))
            y = _bfloat16(_operand(rng, (k, n), np.float32, y_layout))
            got = routines.matmul(x, y, operands=fg.bfloat16, rounded=rounded)
            _assert_bfloat16_product(got, x, y, rounded)
    assert all(every_product_packed)


@pytest.mark.parametrize("shapes", STACKS, ids=lambda s: f"{s[0]}@{s[1]}")
def test_bfloat16_stacked_products(shapes, bfloat16_pairs, every_product_packed):
    rng = np.random.default_rng(len(shapes[0]) + shapes[1][-1])
    for x_layout, y_layout in [("c", "c"), ("transposed", "reversed"), ("strided", "transposed")]:
        x = _bfloat16(_operand(rng, shapes[0], np.float32, x_layout))
        y = _bfloat16(_operand(rng, shapes[1], np.float32, y_layout))
        got = routines.matmul(x, y, operands=fg.bfloat16, rounded=True)
        _assert_bfloat16_product(got, x, y, True)


def test_bfloat16_products_round_nan_inf_and_overflow_as_the_dtype(
    bfloat16_pairs, every_product_packed
):
    x = np.ones((9, 20), np.float32)
    x[1, 4], x[7, 19], x[3] = np.inf, np.nan, 2.0**120  # row 3's sums pass bfloat16's largest
    y = np.ones((20, 18), np.float32)
    y[4, 2], y[5] = 0.0, -1.0
    got = routines.matmul(x, y, operands=fg.bfloat16, rounded=True)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got, fg.bfloat16.round(x @ y))


def test_the_emulated_dot_computes_the_instructions_bits(monkeypatch, every_product_packed):
    if not codegen_packed.has_bfloat16_dot():
        pytest.skip("this CPU has no AVX512-BF16")
    monkeypatch.setattr(packed_gemm, "BFLOAT16_PAIRS", True)
    rng = np.random.default_rng(8)
    scales = np.exp(3 * rng.standard_normal((151, 1100)))  # sums of products far apart
    x = _bfloat16((rng.standard_normal(scales.shape) * scales).astype(np.float32))
    y = _bfloat16(rng.standard_normal((1100, 70)).astype(np.float32))
    by_instruction = routines.matmul(x, y, operands=fg.bfloat16)
    monkeypatch.setattr(codegen_packed, "has_bfloat16_dot", lambda: False)
    packed_gemm._calls.clear()
    np.testing.assert_array_equal(routines.matmul(x, y, operands=fg.bfloat16), by_instruction)


def test_bfloat16_products_without_pairs_are_float32_products_rounded(monkeypatch):
    monkeypatch.setattr(packed_gemm, "BFLOAT16_PAIRS", False)
    monkeypatch.setattr(packed_gemm, "_calls", {})
    rng = np.random.default_rng(9)
    x = _bfloat16(rng.standard_normal((300, 400)).astype(np.float32))
    y = _bfloat16(rng.standard_normal((400, 200)).astype(np.float32))
    got = routines.matmul(x, y, operands=fg.bfloat16, rounded=True)
    np.testing.assert_array_equal(got, fg.bfloat16.round(routines.matmul(x, y)))
    np.testing.assert_array_equal(
        routines.matmul(x, y, operands=fg.bfloat16), routines.matmul(x, y)
    )


# ---------------------------------------------------------------- the op table

# the op table's ops whose values or gradients include a product of
# matrices (found by running every op with every product packed)
PRODUCT_OPS = [
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "addbmm",
    "addmm",
    "addmv",
    "affine_grid",
    "baddbmm",
    "bmm",
    "cholesky",
    "conv1d",
    "conv2d",
    "conv_transpose2d",
    "conv_transpose3d",
    "corrcoef",
    "cov",
    "eigh",
    "einsum",
    "inner",
    "inv",
    "inverse",
    "linalg_qr",
    "linear",
    "matmul",
    "matmul_op",
    "matrix_norm_spectral",
    "matrix_power",
    "mm",
    "multi_dot",
    "mv",
    "pinv",
    "pinverse",
    "qr",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_bool_mask",
    "scaled_dot_product_attention_float_mask",
    "solve",
    "solve_vector",
    "svd",
    "tensordot",
]
CASES = [
    pytest.param(OPS_BY_NAME[name], sample, id=f"{name}-{sample!r}")
    for name in PRODUCT_OPS
    for sample in OPS_BY_NAME[name].samples
]


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op,sample", CASES)
def test_op_table_values_match_numpy_packed(op, sample, dtype, every_product_packed):
    test_ops.test_values_match_numpy(op, sample, dtype)


# (a convolution's second derivatives take seconds by finite differences,
# through thousands of small products; its products are checked compiled)
@pytest.mark.parametrize(
    "op,sample", [c for c in CASES if not c.id.startswith(("conv", "adaptive"))]
)
def test_op_table_gradients_and_second_derivatives_packed(op, sample, every_product_packed):
    test_ops.test_gradients_match_finite_differences(op, sample)
    if op.second_order:
        test_ops.test_second_derivatives_match_finite_differences(op, sample)


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op,sample", [c for c in CASES if c.values[0].jit])
def test_op_table_compiled_agrees_with_eager_packed(op, sample, dtype, every_product_packed):
    test_jit.test_compiled_values_and_gradients_agree_with_eager(op, sample, dtype)


# bfloat16 tensors: each product's operands are converted to float32 and
# hold bfloat16 values, so products (and their gradients) run as pairs,
# eager and compiled alike
@pytest.mark.parametrize("op,sample", [c for c in CASES if c.values[0].jit])
def test_op_table_bfloat16_compiled_agrees_with_eager_as_pairs(
    op, sample, bfloat16_pairs, every_product_packed
):
    test_jit.test_compiled_values_and_gradients_agree_with_eager(op, sample, fg.bfloat16)
