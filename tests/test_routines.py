"""Hand-written native routines against their primitive's numpy implementation."""

import numpy as np
import pytest

import fusegrad as fg
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
]


@pytest.mark.parametrize("case", WINDOWS, ids=str)
@pytest.mark.parametrize("np_dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_fold_routine_matches_numpy_bit_for_bit(case, np_dtype):
    lead, size, kernel, stride, dilation = case
    counts = tuple(map(P.window_count, size, kernel, stride, dilation))
    rng = np.random.default_rng(3)
    cols = rng.standard_normal(lead + kernel + counts).astype(np_dtype)
    want = P.fold.impl(cols, size=size, kernel=kernel, stride=stride, dilation=dilation)
    got = routines.fold(cols, size, kernel, stride, dilation)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)  # same taps in the same order


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


def test_fold_routine_reads_strided_windows():
    rng = np.random.default_rng(4)
    stored = rng.standard_normal((5, 2, 3, 3, 3, 8)).astype(np.float32)
    cols = stored[..., ::2].transpose(1, 0, 2, 3, 4, 5)  # (2, 5, 3, 3, 3, 4), strided
    want = P.fold.impl(cols, size=(8, 6), kernel=(3, 3), stride=(2, 1), dilation=(1, 1))
    got = routines.fold(cols, (8, 6), (3, 3), (2, 1), (1, 1))
    np.testing.assert_array_equal(got, want)


def test_convolution_input_gradient_is_the_same_eager_and_compiled():
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
