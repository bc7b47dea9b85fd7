"""Hand-written native routines against their primitive's numpy implementation."""

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.codegen import convolution
from fusegrad.ir import primitives as P
from fusegrad.runtime import routines

# (windows' leading shape, image size, kernel, stride, dilation)
WINDOWS = [
    ((64, 6), (14, 14), (5, 5), (1, 1), (1, 1)),  # LeNet's second convolution
    ((2, 3), (9,), (3,), (2,), (1,)),
    ((2, 3), (9, 11), (3, 2), (2, 3), (2, 1)),  # gaps between windows
    ((1,), (5, 6, 7), (2, 2, 3), (1, 2, 1), (1, 1, 2)),
    ((), (4, 4), (4, 4), (1, 1), (1, 1)),  # one window, no leading axes
    ((3, 1), (1, 8), (1, 3), (1, 1), (1, 1)),  # size-1 axes
    ((0, 2), (5, 5), (2, 2), (1, 1), (1, 1)),  # no planes
    ((2, 3), (7, 37), (3, 4), (2, 1), (1, 3)),  # rows of several vectors, dilated along them
    ((1, 2), (6, 33), (2, 5), (1, 1), (2, 1)),
    ((2,), (3, 5, 17), (2, 1, 3), (2, 1, 1), (1, 2, 1)),
]


@pytest.mark.parametrize("case", WINDOWS, ids=str)
@pytest.mark.parametrize("np_dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("values", ["normal", "special"])
def test_fold_routine_matches_numpy_bit_for_bit(case, np_dtype, values):
    """The same taps in the same order: the same bits, -0.0 and infinities
    included; NaN where numpy has NaN (whose sign the order of an addition's
    operands picks, which LLVM may swap)."""
    lead, size, kernel, stride, dilation = case
    counts = tuple(map(P.window_count, size, kernel, stride, dilation))
    rng = np.random.default_rng(3)
    if values == "normal":
        cols = rng.standard_normal(lead + kernel + counts).astype(np_dtype)
    else:
        specials = np.array([-0.0, 0.0, 1.5, -np.inf, np.inf, np.nan], np_dtype)
        cols = rng.choice(specials, lead + kernel + counts, p=[0.5, 0.1, 0.1, 0.1, 0.1, 0.1])
    with np.errstate(invalid="ignore"):  # inf - inf
        want = P.fold.impl(cols, size=size, kernel=kernel, stride=stride, dilation=dilation)
    got = routines.fold(cols, size, kernel, stride, dilation)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    bits = np.uint32 if np_dtype == np.float32 else np.uint64
    numbers = ~np.isnan(want)
    np.testing.assert_array_equal(got.view(bits)[numbers], want.view(bits)[numbers])


@pytest.mark.parametrize("case", WINDOWS, ids=str)
@pytest.mark.parametrize("np_dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_windows_routine_matches_numpy(case, np_dtype):
    lead, size, kernel, stride, dilation = case
    x = np.random.default_rng(6).standard_normal(lead + size).astype(np_dtype)
    want = P.windows.impl(x, kernel=kernel, stride=stride, dilation=dilation)
    got = routines.windows(x, kernel, stride, dilation)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_windows_routine_reads_a_strided_image():
    stored = np.random.default_rng(7).standard_normal((3, 2, 9, 16)).astype(np.float32)
    x = stored[..., ::2].transpose(1, 0, 2, 3)  # (2, 3, 9, 8), strided
    want = P.windows.impl(x, kernel=(3, 2), stride=(2, 1), dilation=(1, 2))
    np.testing.assert_array_equal(routines.windows(x, (3, 2), (2, 1), (1, 2)), want)


def test_windows_routine_leaves_windows_that_do_not_fit_to_numpy():
    x = np.ones((2, 3, 4, 4), np.float32)
    counts_below_one = dict(kernel=(5, 5), stride=(1, 1), dilation=(1, 1))
    want = P.windows.impl(x, **counts_below_one)  # numpy makes an empty array
    np.testing.assert_array_equal(routines.windows(x, **counts_below_one), want)


# (images, channels, image size, filters, kernel)
UNIT_WINDOWS = [
    (64, 1, (32, 32), 6, (5, 5)),  # LeNet's first layer: a whole and a partial vector per row
    (8, 6, (14, 14), 16, (5, 5)),  # its second: one partial vector per row
    (2, 3, (9, 40), 5, (3, 3)),  # filters and rows left over after whole blocks
    (3, 2, (7, 20), 9, (2, 5)),
    (2, 3, (30,), 4, (3,)),  # 1-D
    (1, 1, (5, 5), 1, (5, 5)),  # one window
    (2, 2, (4, 17), 7, (1, 1)),
    (2, 3, (6, 33), 3, (4, 2)),
    (3, 2, (5, 16), 2, (1, 12)),  # a kernel row of more taps than a block's
    (0, 2, (6, 6), 3, (3, 3)),  # no images: the filters' gradient is zeros
    (4, 3, (8, 9), 40, (3, 3)),  # many filters, few positions: copied, products across filters
]


@pytest.fixture(params=[True, False], ids=["in_place", "copied"])
def windows_read(request, monkeypatch):
    """Both ways the convolution routines run, on any machine: reading the
    windows in place (chosen with AVX-512) or copying them out (otherwise)."""
    monkeypatch.setattr(convolution, "reads_windows_in_place", lambda: request.param)
    return request.param


@pytest.mark.parametrize("case", UNIT_WINDOWS, ids=str)
@pytest.mark.parametrize("np_dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_windows_products_match_numpy(case, np_dtype, windows_read):
    """A convolution of stride 1, its filters' gradient and its image's,
    read from the image (or the output gradient) in place or from copied
    windows, against the products of numpy's copied windows."""
    images, channels, size, filters, kernel = case
    rng = np.random.default_rng(14)
    x = rng.standard_normal((images, channels) + size).astype(np_dtype)
    w = rng.standard_normal((filters, channels * int(np.prod(kernel)))).astype(np_dtype)
    counts = tuple(n - k + 1 for n, k in zip(size, kernel))
    dy = rng.standard_normal((images, filters) + counts).astype(np_dtype)
    tolerance = 2e-5 if np_dtype == np.float32 else 1e-12
    wide = {"kernel": kernel}
    w64, x64, dy64 = w.astype(np.float64), x.astype(np.float64), dy.astype(np.float64)
    for got, expected, depth in [
        (
            routines.windows_matmul(w, x, kernel),
            P.windows_matmul.impl(w64, x64, **wide),
            w.shape[1],
        ),
        (
            routines.windows_dots(dy, x, kernel),
            P.windows_dots.impl(dy64, x64, **wide),
            images * np.prod(counts),
        ),
        (
            routines.fold_matmul(w, dy, size, kernel),
            P.fold_matmul.impl(w64, dy64, size=size, **wide),
            w.shape[0] * np.prod(kernel),
        ),
    ]:
        assert got.dtype == np_dtype and got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance * depth**0.5)


def test_windows_products_carry_nan_and_inf_and_leave_mismatches_to_numpy(windows_read):
    x = np.ones((2, 1, 6, 20), np.float32)
    x[0, 0, 2, 19], x[1, 0, 5, 0] = np.inf, np.nan
    w = np.ones((3, 9), np.float32)
    w[1, 4] = 0.0  # inf * 0 is NaN
    want = P.windows_matmul.impl(w, x, kernel=(3, 3))
    np.testing.assert_array_equal(routines.windows_matmul(w, x, (3, 3)), want)
    dy = np.ones((2, 3, 4, 18), np.float32)
    want = P.windows_dots.impl(dy, x, kernel=(3, 3))
    np.testing.assert_array_equal(routines.windows_dots(dy, x, (3, 3)), want)
    dy[0, 2, 1, 17], dy[1, 0, 0, 0] = -np.inf, np.nan
    want = P.fold_matmul.impl(w, dy, size=(6, 20), kernel=(3, 3))
    np.testing.assert_array_equal(routines.fold_matmul(w, dy, (6, 20), (3, 3)), want)
    strided = np.ones((2, 1, 6, 40), np.float32)[..., ::2]
    np.testing.assert_array_equal(
        routines.windows_matmul(w, strided, (3, 3)),
        P.windows_matmul.impl(w, strided, kernel=(3, 3)),
    )
    with pytest.raises(ValueError):  # filters of another width: numpy's product raises
        routines.windows_matmul(w[:, :8], x, (3, 3))


def test_image_gradient_takes_a_filters_inf_or_nan_only_where_its_tap_reaches(windows_read):
    """A filter's inf or NaN reaches the image's gradient only at the columns
    its tap reaches from dy: read in place, the lanes before and after a
    row's dy columns (masked off, loaded as 0) were multiplied by the filter
    too, and NaN came out at a row's first and last columns (the fuzzer's
    find, a convolution with padding="same" of a filter holding a NaN)."""
    rng = np.random.default_rng(15)
    w = rng.standard_normal((3, 2 * 3 * 3)).astype(np.float32)
    w[0, 2], w[2, 9 + 3] = np.nan, np.inf  # channel 0's tap (0, 2), channel 1's (1, 0)
    dy = rng.standard_normal((2, 3, 5, 20)).astype(np.float32)
    want = P.fold_matmul.impl(w, dy, size=(7, 22), kernel=(3, 3))
    got = routines.fold_matmul(w, dy, (7, 22), (3, 3))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("filters, width", [(3, 40), (40, 8)], ids=["along", "across"])
def test_filter_gradient_from_copied_windows_sums_the_images_a_group_at_a_time(
    filters, width, monkeypatch
):
    """Products along the positions, and (many filters, few positions)
    across the filters."""
    monkeypatch.setattr(convolution, "reads_windows_in_place", lambda: False)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, 2, 9, width))
    dy = rng.standard_normal((7, filters, 7, width - 2))
    want = P.windows_dots.impl(dy, x, kernel=(3, 3))
    three_images = 3 * filters * 18 * 8  # bytes of three images' products
    monkeypatch.setattr(routines, "PRODUCTS_HELD", three_images)
    got = routines.windows_dots(dy, x, (3, 3))
    assert got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("channels, filters", [(0, 3), (2, 0)])
def test_filter_gradient_from_copied_windows_of_no_channels_or_no_filters(
    channels, filters, monkeypatch
):
    """An image's products take no bytes: the group of images summed at once
    divided by zero (the fuzzer's find, a convolution of an image of no
    channels run by the executor)."""
    monkeypatch.setattr(convolution, "reads_windows_in_place", lambda: False)
    x, dy = np.ones((2, channels, 6, 6)), np.ones((2, filters, 4, 4))
    want = P.windows_dots.impl(dy, x, kernel=(3, 3))
    got = routines.windows_dots(dy, x, (3, 3))
    assert got.shape == want.shape == (filters, channels * 9)


# (leading shape, tiles along each spatial axis, kernel)
TILES = [
    ((64, 6), (14, 14), (2, 2)),  # LeNet's first pooling: a partial vector per row
    ((2, 3), (5, 40), (2, 2)),  # two whole vectors and a partial one
    ((2, 3), (3, 16), (3, 3)),  # one whole vector, taps three apart
    ((2,), (4, 7), (2, 1)),
    ((3,), (2, 33), (1, 3)),
    ((2, 3), (20,), (2,)),
    ((1, 2), (2, 3, 18), (2, 2, 2)),  # the tile rows of a depth
    ((), (1, 1), (4, 4)),  # one tile, no leading axes
    ((0, 3), (2, 2), (2, 2)),  # no planes
]


def _tiled_input(rng, lead, counts, kernel, np_dtype):
    """Values with ties (zeros, as after a ReLU), NaNs (two in some tiles)
    and negative zeros."""
    shape = lead + tuple(c * k for c, k in zip(counts, kernel))
    x = rng.standard_normal(shape).astype(np_dtype)
    x[x > 0.8] = 0.0
    x.flat[::7] = np.nan
    x.flat[1::11] = -0.0
    return x


@pytest.mark.parametrize("case", TILES, ids=str)
@pytest.mark.parametrize("np_dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_tile_max_routines_match_numpy_bit_for_bit(case, np_dtype):
    """Max pooling's routines pick the tap numpy's implementation picks (the
    first of equal values, the last NaN): the same bits, -0.0 and NaNs
    included, taking from x itself or another array, and putting back."""
    lead, counts, kernel = case
    rng = np.random.default_rng(12)
    x = _tiled_input(rng, lead, counts, kernel, np_dtype)
    source = rng.standard_normal(x.shape).astype(np_dtype)
    values = rng.standard_normal(lead + counts).astype(np_dtype)
    bits = np.uint32 if np_dtype == np.float32 else np.uint64
    for got, want in [
        (routines.take_at_tile_max(x, x, kernel), P.take_at_tile_max.impl(x, x, kernel=kernel)),
        (
            routines.take_at_tile_max(x, source, kernel),
            P.take_at_tile_max.impl(x, source, kernel=kernel),
        ),
        (
            routines.put_at_tile_max(x, values, kernel),
            P.put_at_tile_max.impl(x, values, kernel=kernel),
        ),
    ]:
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.view(bits), want.view(bits))


def test_tile_max_routines_read_strided_arrays_and_leave_mismatches_to_numpy():
    rng = np.random.default_rng(13)
    stored = rng.standard_normal((3, 2, 8, 12)).astype(np.float32)
    x = stored[..., ::2].transpose(1, 0, 2, 3)  # (2, 3, 8, 6), strided
    want = P.take_at_tile_max.impl(x, x, kernel=(2, 3))
    np.testing.assert_array_equal(routines.take_at_tile_max(x, x, (2, 3)), want)
    values = rng.standard_normal((3, 2, 2, 6)).astype(np.float32)[..., ::2].transpose(1, 0, 2, 3)
    want = P.put_at_tile_max.impl(x, np.ascontiguousarray(values), kernel=(4, 2))
    np.testing.assert_array_equal(routines.put_at_tile_max(x, values, (4, 2)), want)
    with pytest.raises(ValueError):  # not whole tiles: numpy's implementation raises
        routines.take_at_tile_max(x, x, (3, 4))
    with pytest.raises(ValueError):  # values of another shape
        routines.put_at_tile_max(x, values[..., :2], (4, 2))


def test_fold_routine_reads_strided_windows():
    rng = np.random.default_rng(4)
    stored = rng.standard_normal((5, 2, 3, 3, 3, 8)).astype(np.float32)
    cols = stored[..., ::2].transpose(1, 0, 2, 3, 4, 5)  # (2, 5, 3, 3, 3, 4), strided
    want = P.fold.impl(cols, size=(8, 6), kernel=(3, 3), stride=(2, 1), dilation=(1, 1))
    got = routines.fold(cols, (8, 6), (3, 3), (2, 1), (1, 1))
    np.testing.assert_array_equal(got, want)


def test_convolution_input_gradient_is_the_same_eager_and_compiled(windows_read):
    """Eager backward and the compiled plan both fold by the routine."""
    rng = np.random.default_rng(5)
    x = fg.tensor(rng.standard_normal((4, 3, 11, 11)).astype(np.float32), requires_grad=True)
    w = fg.tensor(rng.standard_normal((5, 3, 3, 3)).astype(np.float32))
    y = fg.tensor(rng.standard_normal((4, 5, 9, 9)).astype(np.float32))

    def input_gradient(x, w, y):
        (g,) = fg.autograd.grad((fg.nn.functional.conv2d(x, w) * y).sum(), [x])
        return g

    eager = input_gradient(x, w, y).numpy()
    compiled = fg.jit(input_gradient)
    for _ in range(3):  # calls 1, 2 and 3 take different paths
        np.testing.assert_array_equal(compiled(x, w, y).numpy(), eager)


def test_fold_routine_leaves_windows_of_another_image_to_numpy():
    """The routine writes where windows came from: windows that do not fit the
    image never reach it (numpy's implementation raises instead)."""
    cols = np.ones((2, 3, 3, 4, 4), np.float32)  # 4x4 windows: a 6x6 image, not 5x5
    with pytest.raises(ValueError):
        routines.fold(cols, (5, 5), (3, 3), (1, 1), (1, 1))
    np.testing.assert_array_equal(
        routines.fold(cols, (6, 6), (3, 3), (1, 1), (1, 1)),
        P.fold.impl(cols, size=(6, 6), kernel=(3, 3), stride=(1, 1), dilation=(1, 1)),
    )


# (index array, the scattered array's shape): rows added at row numbers
ROWS = [
    (np.array([3, 0, 3, 3, 1]), (5, 4)),  # repeated rows: their sums in order
    (np.array([[1, -1], [0, -5]]), (5, 2, 3)),  # negative rows, a 2-d index, 2-d rows
    (np.array([2], np.int32), (3,)),  # rows of one element
]


@pytest.mark.parametrize("case", ROWS, ids=str)
@pytest.mark.parametrize("np_dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_scatter_of_rows_matches_numpy_bit_for_bit(case, np_dtype):
    rows, shape = case
    v = np.random.default_rng(8).standard_normal(rows.shape + shape[1:]).astype(np_dtype)
    spec = (("array",),)
    want = P.scatter_add.impl(v, rows, spec=spec, shape=shape)
    got = routines.scatter_add(v, rows, spec=spec, shape=shape)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_scatter_of_rows_out_of_range_raises_as_numpy():
    v = np.ones((2, 3), np.float32)
    for rows in (np.array([0, 4]), np.array([-5, 0])):
        with pytest.raises(IndexError):
            routines.scatter_add(v, rows, spec=(("array",),), shape=(4, 3))


def test_embedding_gradient_is_the_same_eager_and_compiled():
    """Eager backward and the compiled plan both add the rows by the routine."""
    rng = np.random.default_rng(9)
    weight = fg.tensor(rng.standard_normal((7, 5)).astype(np.float32), requires_grad=True)
    tokens = fg.tensor(rng.integers(0, 7, (4, 6)))
    y = fg.tensor(rng.standard_normal((4, 6, 5)).astype(np.float32))

    def weight_gradient(weight, tokens, y):
        (g,) = fg.autograd.grad((fg.nn.functional.embedding(tokens, weight) * y).sum(), [weight])
        return g

    eager = weight_gradient(weight, tokens, y).numpy()
    want = np.zeros((7, 5))
    np.add.at(want, tokens.numpy(), y.numpy().astype(np.float64))
    np.testing.assert_array_equal(eager, want.astype(np.float32))
    compiled = fg.jit(weight_gradient)
    for _ in range(3):
        np.testing.assert_array_equal(compiled(weight, tokens, y).numpy(), eager)


@pytest.mark.parametrize(
    "count, seed, offset",
    [(10, 1234, 5), (4096, -(2**63), -3), (3, -5, -1), (0, 1, 1), (17, 0, 2**62)],
    ids=["partial-block", "counter-wraps", "one-partial-block", "empty", "large-offset"],
)
def test_random_bits_routine_matches_numpy_bit_for_bit(count, seed, offset):
    """Philox's words by the native routine are numpy's, whatever the seed and
    counter (negative int64s are their bit patterns), including the last
    block's first words."""
    state = (np.array(seed, np.int64), np.array(offset, np.int64))
    want = P.random_bits.impl(*state, shape=(count,))
    np.testing.assert_array_equal(routines.random_bits(*state, shape=(count,)), want)


def _stack(rng, shape, np_dtype, order=None, step=1):
    """A random array of ``shape``: stored with its axes in ``order`` (a
    transposed view) and every ``step``-th element of its last axis."""
    order = order or tuple(range(len(shape)))
    stored = [shape[a] for a in order]
    stored[-1] *= step
    a = rng.standard_normal(stored).astype(np_dtype)[..., ::step]
    return a.transpose(np.argsort(order))


# (what it is, x's and y's shape, x's and y's storage order, the routine's form)
PRODUCTS = [
    ("LeNet conv2: filters times windows", (16, 150), (64, 150, 100), None, None, "rows"),
    ("conv input gradient: filters transposed", (150, 16), (8, 16, 100), (1, 0), None, "rows"),
    ("weight gradient: depth tail", (8, 16, 100), (8, 100, 150), None, (0, 2, 1), "dots"),
    ("weight gradient: whole vectors", (4, 6, 784), (4, 784, 25), None, (0, 2, 1), "dots"),
    ("attention heads", (3, 4, 17, 9), (3, 4, 9, 33), None, None, "rows"),
    ("heads split from tokens", (2, 3, 40, 16), (2, 3, 16, 24), (0, 2, 1, 3), (0, 2, 1, 3), "rows"),
    ("broadcast stacks", (5, 1, 20, 16), (1, 3, 16, 24), None, None, "rows"),
    ("one deep", (60, 9, 1), (60, 1, 80), None, None, "rows"),
    ("three stack axes", (2, 3, 2, 4, 5), (2, 3, 2, 5, 6), (1, 0, 2, 3, 4), (2, 1, 0, 3, 4), None),
    ("columns strided, depth short", (4, 5, 6), (4, 6, 7), None, (0, 2, 1), None),
    ("too few columns", (4, 5, 6), (4, 6, 3), None, None, None),
    ("too little work", (2, 4, 4), (2, 4, 4), None, None, None),
    ("no stacks", (5, 6), (6, 7), None, None, None),
    ("empty stack", (0, 5, 6), (0, 6, 7), None, None, None),
]


@pytest.mark.parametrize("case", PRODUCTS, ids=lambda case: case[0])
@pytest.mark.parametrize("np_dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_stacked_products_match_numpy(case, np_dtype):
    """Products of stacked matrices run by the routine in the form their
    layout allows (or by numpy) and match numpy's."""
    _, x_shape, y_shape, x_order, y_order, form = case
    rng = np.random.default_rng(10)
    x = _stack(rng, x_shape, np_dtype, x_order)
    y = _stack(rng, y_shape, np_dtype, y_order)
    layout = routines._stacked_product(x, y)
    assert (layout and layout[0]) == form
    want = np.matmul(x.astype(np.float64), y.astype(np.float64))
    got = routines.matmul(x, y)
    assert got.dtype == np_dtype and got.shape == want.shape
    assert got.flags.c_contiguous or form is None
    tolerance = 2e-5 if np_dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance * x.shape[-1])


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_stacked_products_of_every_block_size_match_numpy(np_dtype, monkeypatch):
    """Every count of rows left after whole blocks, and every count of
    columns left after whole vectors, in both forms; strided and reversed
    stacks."""
    monkeypatch.setattr(routines, "MIN_WORK", 0)  # small products too
    monkeypatch.setattr(routines, "_calls", {})
    rng = np.random.default_rng(11)
    for rows in range(1, 26):
        for columns in (4, 13, 16, 20, 33, 48, 50, 64, 100):
            x = _stack(rng, (3, rows, 70), np_dtype, step=2)[::-1]
            y = _stack(rng, (3, 70, columns), np_dtype)[::-1]
            y_transposed = _stack(rng, (3, 70, columns), np_dtype, (0, 2, 1))
            deep = np.ascontiguousarray(x)
            tolerance = 2e-5 if np_dtype == np.float32 else 1e-12
            for a, b, form in ((x, y, "rows"), (deep, y_transposed, "dots")):
                assert routines._stacked_product(a, b)[0] == form
                want = np.matmul(a.astype(np.float64), b.astype(np.float64))
                got = routines.matmul(a, b)
                np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance * 70)


def test_stacked_products_carry_nan_and_inf_as_numpy():
    x = np.ones((2, 3, 20), np.float32)
    x[0, 1, 4], x[1, 2, 19] = np.inf, np.nan
    y = np.ones((2, 20, 5), np.float32)
    y[0, 4, 2] = 0.0  # inf * 0 is NaN
    want = np.matmul(x, y)
    np.testing.assert_array_equal(routines.matmul(x, y), want)
    y_transposed = np.ascontiguousarray(np.ones((2, 5, 64), np.float32)).transpose(0, 2, 1)
    x_deep = np.ones((2, 3, 64), np.float32)
    x_deep[1, 0, 63] = -np.inf
    want = np.matmul(x_deep, y_transposed)
    np.testing.assert_array_equal(routines.matmul(x_deep, y_transposed), want)


@pytest.mark.parametrize("np_dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_products_of_a_short_depth_copy_y_to_take_the_rows_form(np_dtype):
    """Attention's q @ k^T: y's columns strided, its depth contiguous and
    short. y is copied C-contiguous and the product taken along the
    columns; with a long depth (or few rows to share the copy) y is read
    where it is, along the depth."""
    rng = np.random.default_rng(16)
    lanes = routines.gemm.lanes(np.dtype(np_dtype).name)
    qkv = rng.standard_normal((3, 40, 3, 2, 4 * lanes)).astype(np_dtype)
    q, k = qkv[:, :, 0].transpose(0, 2, 1, 3), qkv[:, :, 1].transpose(0, 2, 1, 3)
    deep = rng.standard_normal((3, 2, 40, 40 * lanes)).astype(np_dtype)
    few = rng.standard_normal((3, 2, lanes, 4 * lanes)).astype(np_dtype)
    wide = rng.standard_normal((3, 2, 200, 4 * lanes)).astype(np_dtype)
    tolerance = 2e-5 if np_dtype == np.float32 else 1e-12
    for x, y, copied in [(q, k, True), (deep, deep, False), (few, wide, False)]:
        y = y.transpose(0, 1, 3, 2)
        assert routines._stacked_product(x, y)[0] == "dots"
        assert routines._product_call(x, y)[3] is copied
        want = np.matmul(x.astype(np.float64), y.astype(np.float64))
        got = routines.matmul(x, y)
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance * x.shape[-1])


# (what it is, x's and y's shape, x's and y's storage order, the routine's
# form where it runs unpacked): one product large enough to run packed. It
# runs unpacked where it is small (under the packed GEMM's split, x's rows
# contiguous) or thin (columns for half the packed micro-kernel's panel or
# fewer on this machine: 16 in float32 with AVX-512, 8 in float64; 8 and 4
# with AVX2), from 4 columns
SINGLE_PRODUCTS = [
    ("logits", (256, 512), (512, 8), None, None, "rows"),
    ("logits' weight gradient, x transposed", (512, 256), (256, 5), (1, 0), None, "rows"),
    ("y transposed", (300, 130), (130, 7), None, (1, 0), "dots"),
    ("rows of a stack", (4, 75, 300), (300, 7), None, None, "rows"),
    ("tall, split by rows", (1013, 300), (300, 4), None, None, "rows"),
    ("sixteen columns", (256, 512), (512, 16), None, None, "rows"),
    ("small", (64, 120), (120, 84), None, None, "rows"),
    ("small, x transposed", (120, 64), (64, 84), (1, 0), None, "rows"),
    ("wide", (256, 512), (512, 40), None, None, "rows"),
    ("too few columns", (256, 512), (512, 3), None, None, "rows"),
]


@pytest.mark.parametrize("case", SINGLE_PRODUCTS, ids=lambda case: case[0])
@pytest.mark.parametrize("np_dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_small_and_thin_products_run_unpacked_and_match_numpy(case, np_dtype, monkeypatch):
    """A product too small for packing to pay, or with too few columns to
    fill the packed micro-kernel's panel, runs in the register-blocked
    routine on the operands where they lie (its rows split across three
    threads where the packed GEMM would split); the same bits on one."""
    from fusegrad.codegen import packed_gemm as codegen_packed
    from fusegrad.runtime import packed_gemm, threads

    _, x_shape, y_shape, x_order, y_order, form = case
    dtype_name = np.dtype(np_dtype).name
    (depth, columns), rows = y_shape, int(np.prod(x_shape[:-1]))
    thin = columns <= codegen_packed.blocking(dtype_name).nr // 2
    small = rows * depth * columns < packed_gemm.SPLIT_WORK and x_order is None
    if columns < routines.MIN_COLUMNS or not (thin or small):
        form = None  # packed
    monkeypatch.setattr(routines, "_calls", {})
    rng = np.random.default_rng(17)
    x = _stack(rng, x_shape, np_dtype, x_order)
    x = x[::-1] if x.ndim == 2 else x  # rows reversed, too
    y = _stack(rng, y_shape, np_dtype, y_order)
    call = routines._unpacked_call(x, y)
    assert (call and call[0]) == (form and routines.gemm.matmul(form, dtype_name))
    want = np.matmul(x.astype(np.float64), y.astype(np.float64))
    monkeypatch.setattr(threads, "count", lambda: 3)
    got = routines.matmul(x, y)
    assert got.dtype == np_dtype and got.shape == want.shape and got.flags.c_contiguous
    tolerance = 2e-5 if np_dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance * x.shape[-1])
    monkeypatch.setattr(threads, "count", lambda: 1)
    np.testing.assert_array_equal(routines.matmul(x, y), got)


@pytest.mark.parametrize("stride", [1, 2], ids=["stride-1", "stride-2"])
def test_convolution_is_the_same_eager_and_compiled(stride, windows_read):
    """Eager mode and the compiled plan both run the same routines, forward
    and backward: of stride 1, products with the windows read in place or
    copied out (by the machine); of stride 2, with the windows copied out."""
    rng = np.random.default_rng(12)
    x = fg.tensor(rng.standard_normal((4, 3, 12, 12)).astype(np.float32), requires_grad=True)
    w = fg.tensor(rng.standard_normal((8, 3, 5, 5)).astype(np.float32), requires_grad=True)

    def step(x, w):
        y = fg.nn.functional.conv2d(x, w, stride=stride)
        return (y, *fg.autograd.grad((y * y).sum(), [x, w]))

    eager = [t.detach().numpy() for t in step(x, w)]
    compiled = fg.jit(step)
    for _ in range(3):
        for got, want in zip(compiled(x, w), eager):
            np.testing.assert_array_equal(got.detach().numpy(), want)


def test_routines_split_across_the_cores_give_the_bits_they_give_on_one(windows_read, monkeypatch):
    """While a program owns the cores each routine's items (images, planes,
    matrices, rows of tiles) split across threads, three here, odd counts
    too: the same bits as on one thread. The filter gradient read in place
    sums over the images: it is not split."""
    from fusegrad.runtime import threads

    rng = np.random.default_rng(15)
    x = rng.standard_normal((7, 3, 12, 12)).astype(np.float32)
    w = rng.standard_normal((5, 3 * 9)).astype(np.float32)
    dy = rng.standard_normal((7, 5, 10, 10)).astype(np.float32)
    a = rng.standard_normal((7, 6, 40)).astype(np.float32)
    b = rng.standard_normal((7, 40, 24)).astype(np.float32)
    tiles = rng.standard_normal((7, 3, 6, 6)).astype(np.float32)
    cols = routines.windows(x, (3, 3), (1, 1), (1, 1))
    calls = {
        "windows_matmul": lambda: routines.windows_matmul(w, x, (3, 3)),
        "windows_dots": lambda: routines.windows_dots(dy, x, (3, 3)),
        "fold_matmul": lambda: routines.fold_matmul(w, dy, (12, 12), (3, 3)),
        "windows": lambda: routines.windows(x, (3, 3), (2, 1), (1, 2)),
        "fold": lambda: routines.fold(cols, (12, 12), (3, 3), (1, 1), (1, 1)),
        "matmul": lambda: routines.matmul(a, b),
        "take": lambda: routines.take_at_tile_max(x, x, (2, 2)),
        "put": lambda: routines.put_at_tile_max(x, tiles, (2, 2)),
    }
    alone = {name: call() for name, call in calls.items()}
    monkeypatch.setattr(routines, "SPLIT_ELEMENTS", 0)
    monkeypatch.setenv("FUSEGRAD_NUM_THREADS", "3")
    run = threads.run
    for name, call in calls.items():
        parts = []
        monkeypatch.setattr(
            threads, "run", lambda fn, many, parts=parts: parts.append(len(many)) or run(fn, many)
        )
        with threads.own_cores():
            got = call()
        assert parts == ([] if name == "windows_dots" and windows_read else [3] * len(parts))
        assert parts or name == "windows_dots"
        np.testing.assert_array_equal(got.view(np.uint32), alone[name].view(np.uint32))


def test_a_program_of_convolutions_owns_the_cores_and_gives_blas_threads_back():
    """LeNet-shaped work (convolutions, small linear layers) runs OpenBLAS on
    one thread and splits the routines, as does an MLP's (its products run
    packed on fusegrad's threads); a program whose products BLAS computes
    (matrix times vector) keeps BLAS's threads. OpenBLAS's thread count is
    as before once a call returns."""
    from fusegrad.runtime import threads

    conv = fg.jit(lambda x, w, v: (fg.nn.functional.conv2d(x, w).flatten(1) @ v).sum())
    mlp = fg.jit(lambda x, v: (x @ v).relu().sum())
    vector_product = fg.jit(lambda x, v: (x @ v).relu().sum())
    x = fg.randn(8, 1, 16, 16)
    w, v = fg.randn(6, 1, 5, 5), fg.randn(6 * 12 * 12, 10)
    conv(x, w, v)
    assert conv.lower(x, w, v).program.forward_executor.owns_cores
    assert mlp.lower(fg.randn(512, 512), fg.randn(512, 512)).program.forward_executor.owns_cores
    matrix, vector = fg.randn(2048, 512), fg.randn(512)
    assert not vector_product.lower(matrix, vector).program.forward_executor.owns_cores
    blas = threads._openblas()
    before = blas[1]() if blas else None
    during = []
    if blas:
        original = routines.matmul
        routines.ROUTINES[P.matmul] = lambda *a: during.append(blas[1]()) or original(*a)
    try:
        for _ in range(3):
            conv(x, w, v)
    finally:
        routines.ROUTINES[P.matmul] = routines.matmul
    if blas:
        assert set(during) == {1} and blas[1]() == before
