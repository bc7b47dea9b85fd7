"""The reduced dtypes. float16 and bfloat16: stored in float32 holding only
values of the type, every op's result rounded once (ties to even), as PyTorch
computes them on the CPU. uint8, int8 and int16: stored in int32, every
result wrapped around into the type's range, as PyTorch's integer
arithmetic wraps."""

from __future__ import annotations

import copy
import io
import math
import operator
import pickle
import warnings

import numpy as np
import pytest

import fusegrad as fg


def _bfloat16(x: float) -> float:
    """x rounded to bfloat16 by hand: 8 significant bits, ties to even."""
    mantissa, exponent = math.frexp(x)
    scaled = mantissa * 2**8
    return math.ldexp(round(scaled), exponent - 8)  # round(): halves to even


@pytest.mark.parametrize(
    "value",
    [0.1, 1 / 3, 3.14159, 1 + 2**-8, 1 + 3 * 2**-8, -2.5e-3, 1e30, 255.5, 257.0, 2.0**-130],
)
def test_bfloat16_rounds_to_nearest_even(value):
    assert fg.tensor(value, dtype=fg.bfloat16).item() == _bfloat16(float(np.float32(value)))


def test_bfloat16_keeps_inf_and_nan_and_overflows_to_inf():
    values = fg.tensor([math.inf, -math.inf, math.nan, 3.4028235e38]).bfloat16().tolist()
    assert values[:2] == [math.inf, -math.inf] and math.isnan(values[2])
    assert values[3] == math.inf


def test_float16_values_are_numpys_float16():
    values = [0.1, 1 / 3, 65519.0, 65520.0, 6e-8, -1e-5, 2049.0]
    assert fg.tensor(values, dtype=fg.half).tolist() == np.array(values, np.float16).tolist()


@pytest.mark.parametrize("dtype", [fg.float16, fg.bfloat16])
def test_reduced_floats_from_float64_round_through_float32_as_pytorch(dtype):
    value = 1 + 2**-11 + 2**-40  # above a float16 tie in float64, exactly on it in float32
    expected = fg.tensor(float(np.float32(value))).to(dtype).item()
    assert fg.tensor(value, dtype=fg.float64).to(dtype).item() == expected


@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.truediv])
def test_float16_arithmetic_is_rounded_once_per_op(op):
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-4, 4, (2, 50)).astype(np.float16)
    got = op(fg.tensor(a), fg.tensor(b))
    assert got.dtype is fg.float16
    np.testing.assert_array_equal(got.numpy(), op(a, b))  # numpy's float16 ufuncs round once too


@pytest.mark.parametrize("dtype", [fg.float16, fg.bfloat16])
def test_a_truncated_division_truncates_the_quotient_rounded_to_the_type(dtype):
    """PyTorch's div(rounding_mode="trunc") truncates x / y as the type
    rounds it (2476 / 1.3 is 1904.6 in float32, 1905 in float16), not the
    float32 quotient: eagerly and in a kernel, on every call."""
    rng = np.random.default_rng(3)
    x = fg.tensor(rng.uniform(-3000, 3000, (64, 80))).to(dtype)
    y = fg.tensor(rng.uniform(0.3, 3.0, (64, 80))).to(dtype)
    expected = (x.float() / y.float()).to(dtype).float().trunc().to(dtype)
    truncated_in_float32 = fg.div(x.float(), y.float(), rounding_mode="trunc").to(dtype)
    assert (expected != truncated_in_float32).any()  # the samples tell the two apart
    compiled = fg.jit(lambda x, y: fg.div(x, y, rounding_mode="trunc"))
    for run in (lambda x, y: fg.div(x, y, rounding_mode="trunc"), compiled, compiled, compiled):
        got = run(x, y)
        assert got.dtype is dtype and got.tolist() == expected.tolist()
    assert compiled.cache_info().hits == 2


def test_a_python_number_operand_stays_float32_but_comparisons_round_it():
    x = fg.tensor([0.1, 3.0, 7.0], dtype=fg.half)
    expected = (x.float() * np.float32(0.1)).half()  # PyTorch: the scalar in float32
    assert (x * 0.1).tolist() == expected.tolist()
    assert (x >= 0.1).tolist() == [True, True, True]  # half(0.1) >= half(0.1)
    assert (fg.tensor(0.1, dtype=fg.bfloat16) == 0.1).item()


@pytest.mark.parametrize("dtype", [fg.float16, fg.bfloat16], ids=["f16", "bf16"])
def test_a_number_argument_or_item_stays_float32_in_a_compiled_call_as_eagerly(dtype):
    """A program's number input (a float argument, an .item()) beside a
    float16 or bfloat16 tensor was converted to the type, rounded, where
    eagerly the number stays float32: the compiled call differed in a sixth
    of a product's elements, on every call."""

    def step(x, scale, shift):
        y = x.to(dtype)
        return y * scale, y + shift.sum().item(), y > scale, y % scale

    x = fg.tensor(np.random.default_rng(0).standard_normal(500).astype(np.float32) * 10)
    compiled = fg.jit(step)
    for call in range(3):
        scale, shift = 0.7 + 0.013 * call, fg.tensor([0.3 + 0.011 * call])
        for got, want in zip(compiled(x, scale, shift), step(x, scale, shift)):
            assert got.dtype is want.dtype and got.tolist() == want.tolist()
    assert compiled.cache_info().hits == 2


@pytest.mark.parametrize(
    "op",
    [
        lambda x: x.mean(),
        lambda x: x.var(1),
        lambda x: x.softmax(1),
        lambda x: x.norm(),
        lambda x: x.logsumexp(0),
        lambda x: fg.nn.functional.layer_norm(x, (5,)),
        lambda x: fg.einsum("ij,kj->ik", x, x),
        lambda x: x @ x.t(),
        lambda x: x.cumsum(1),
        lambda x: x.sum(0),
    ],
)
@pytest.mark.parametrize("dtype", [fg.float16, fg.bfloat16])
def test_ops_compute_in_float32_and_round_their_result_once(op, dtype):
    x = fg.tensor(np.random.default_rng(1).uniform(-2, 2, (3, 5))).to(dtype)
    got = op(x)
    assert got.dtype is dtype
    assert got.tolist() == op(x.float()).to(dtype).tolist()


def test_promotion_between_reduced_floats_and_others():
    half, bf = fg.ones(2, dtype=fg.half), fg.ones(2, dtype=fg.bfloat16)
    assert (half + bf).dtype is fg.float32
    assert (half + fg.ones(2)).dtype is fg.float32
    assert (half + fg.tensor(1.0, dtype=fg.float64)).dtype is fg.float16
    assert (fg.ones(2, dtype=fg.int64) * bf).dtype is fg.bfloat16
    assert (half * 2.5).dtype is fg.float16 and fg.where(half > 0, half, 0.0).dtype is fg.float16


@pytest.mark.parametrize(
    "dtype,name,spelled",
    [(fg.float16, "HalfTensor", "float16"), (fg.bfloat16, "BFloat16Tensor", "bfloat16")],
)
def test_conversions_and_attributes(dtype, name, spelled):
    x = fg.tensor([1.0, 2.5])
    converted = x.half() if dtype is fg.float16 else x.bfloat16()
    assert converted.dtype is dtype and x.to(dtype).dtype is dtype
    assert converted.element_size() == 2 and converted.type() == f"fusegrad.{name}"
    assert converted.stride() == (1,) and converted.is_floating_point()
    assert repr(converted) == f"tensor([1.0000, 2.5000], dtype=fusegrad.{spelled})"
    assert converted.float().dtype is fg.float32 and converted.long().tolist() == [1, 2]
    assert fg.half is fg.float16
    clone = pickle.loads(pickle.dumps(converted))
    assert clone.dtype is dtype and copy.deepcopy(converted).dtype is dtype
    assert pickle.loads(pickle.dumps(dtype)) is dtype


def test_numpy_of_float16_is_float16_and_of_bfloat16_is_refused():
    assert fg.tensor([0.5], dtype=fg.half).numpy().dtype == np.float16
    assert fg.tensor(np.array([0.5, 2.0], np.float16)).dtype is fg.float16
    with pytest.raises(TypeError, match="Got unsupported ScalarType BFloat16"):
        fg.ones(2, dtype=fg.bfloat16).numpy()


def test_creation_rounds_to_the_type():
    assert fg.full((2,), 0.1, dtype=fg.bfloat16).tolist() == [_bfloat16(0.1)] * 2
    assert fg.arange(2049, 2052, dtype=fg.half).tolist() == [2048.0, 2050.0, 2052.0]
    sample = fg.rand(100, dtype=fg.half)
    assert sample.tolist() == sample.float().numpy().astype(np.float16).tolist()


def test_inplace_updates_and_accumulated_gradients_are_rounded():
    x = fg.zeros(1, dtype=fg.half)
    x.add_(fg.tensor([1 / 3], dtype=fg.float64))
    assert x.item() == float(np.float16(1 / 3))
    w = fg.tensor([1.0], dtype=fg.half, requires_grad=True)
    for _ in range(2):
        (w * fg.tensor([1 / 3], dtype=fg.half)).sum().backward()
    step = np.float16(1 / 3)
    assert w.grad.dtype is fg.float16 and w.grad.item() == float(np.float16(step + step))


def test_gradients_of_reduced_floats_come_back_in_their_type():
    x = fg.tensor([0.5, 1.5], dtype=fg.bfloat16, requires_grad=True)
    (x.exp() * x).sum().backward()
    assert x.grad.dtype is fg.bfloat16
    x32 = x.detach().float()
    expected = (x32.exp() + x32.exp() * x32).bfloat16()
    np.testing.assert_allclose(x.grad.float().numpy(), expected.float().numpy(), rtol=2**-7)


@pytest.mark.parametrize("dtype", [fg.float16, fg.bfloat16])
def test_jit_computes_reduced_floats_as_eager_code_does(dtype):
    """Each operation of a fused kernel computes in float32 and rounds its
    result once to the type, as eagerly; a training step's parameters then
    agree within the type's resolution (matrix products add in another order)."""

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = ((model(x).tanh() - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    rng = np.random.default_rng(5)
    x = fg.tensor(rng.standard_normal((16, 8)), dtype=dtype)
    y = fg.tensor(rng.standard_normal((16, 4)), dtype=dtype)
    runs, compiled = [], fg.jit(step)
    for run in (step, compiled):
        fg.manual_seed(0)
        model = fg.nn.Sequential(fg.nn.Linear(8, 16), fg.nn.ReLU(), fg.nn.Linear(16, 4)).to(dtype)
        opt = fg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        losses = [run(model, opt, x, y).item() for _ in range(4)]
        runs.append((losses, [p.detach().float().numpy() for p in model.parameters()]))
    (eager_losses, eager_params), (losses, params) = runs
    eps = fg.finfo(dtype).eps
    np.testing.assert_allclose(losses, eager_losses, rtol=4 * eps)
    for got, want in zip(params, eager_params):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=4 * eps, atol=4 * eps)
    assert all(p.dtype is dtype for p in model.parameters())
    assert compiled.cache_info().hits >= 2  # compiled, not run eagerly


def test_compiled_conversions_round_as_eager_ones_bit_for_bit():
    """Rounding to float16 and bfloat16 in kernels is integer work on the
    bits: every exponent, subnormals, ties, overflow to inf, NaN."""
    rng = np.random.default_rng(0)
    bits = np.concatenate(
        [
            rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32),
            np.arange(0x33000000, 0x47800000, 997, dtype=np.uint32),  # float16's range
            np.array([0x477FF000, 0x477FEFFF, 0x33000000, 0x33000001, 0x3F801000], np.uint32),
        ]
    )
    values = np.concatenate([bits, bits | 0x80000000]).view(np.float32)
    for dtype in (fg.float16, fg.bfloat16):
        got = fg.jit(lambda t, d=dtype: t.to(d).float())(fg.tensor(values)).numpy()
        want = dtype.round(values)
        same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
        assert same.all(), values[~same][:5]


# ------------------------------------------------------- narrow integer types

NARROW = [(fg.uint8, np.uint8), (fg.int8, np.int8), (fg.int16, np.int16)]


def _wrapped(value, narrow):
    """A Python int as PyTorch converts a scalar operand: wrapped around."""
    return np.asarray(value).astype(narrow)


def _from_float(x, narrow):
    """PyTorch's float to narrow integer conversion: truncated toward zero,
    then wrapped around (through int64)."""
    return x.astype(np.int64).astype(narrow)


# name, fusegrad function, numpy reference on numpy's own narrow types (whose
# arithmetic wraps as PyTorch's does); d is a divisor in 1..max
NARROW_OPS = [
    ("add", lambda a, b, d: a + b, None),
    ("sub", lambda a, b, d: a - b, None),
    ("mul", lambda a, b, d: a * b, None),
    ("neg", lambda a, b, d: -a, None),
    ("chain", lambda a, b, d: (a * b + a) * 3 - b, None),
    ("floor_divide", lambda a, b, d: a // d, None),
    ("remainder", lambda a, b, d: a % d, None),
    ("bitwise", lambda a, b, d: (a & b) | (~a ^ b), None),
    ("shifts", lambda a, b, d: (a << 3) + (b >> 2), None),
    ("abs", lambda a, b, d: abs(a), None),
    ("maximum", lambda a, b, d: fg.maximum(a, b), lambda a, b, d: np.maximum(a, b)),
    ("where", lambda a, b, d: fg.where(a > b, a - b, b), lambda a, b, d: np.where(a > b, a - b, b)),
    ("compare", lambda a, b, d: (a < b) | (a == d), None),
    ("scalar_add", lambda a, b, d: a + 300, lambda a, b, d: a + _wrapped(300, a.dtype)),
    ("scalar_floor_divide", lambda a, b, d: a // 300, lambda a, b, d: a // _wrapped(300, a.dtype)),
    (
        "trunc_divide",
        lambda a, b, d: fg.div(a, d, rounding_mode="trunc"),
        lambda a, b, d: (a - np.fmod(a, d)) // d,
    ),
    ("true_divide", lambda a, b, d: a / d, lambda a, b, d: a.astype(np.float32) / d),
    ("to_float", lambda a, b, d: a.float() * 1.5, lambda a, b, d: a.astype(np.float32) * 1.5),
    (
        "from_float",
        lambda a, b, d: (a.float() * 2.7 - 500.0).to(a.dtype),
        lambda a, b, d: _from_float(a.astype(np.float32) * np.float32(2.7) - 500, a.dtype),
    ),
    ("sum", lambda a, b, d: (a * b).sum(1), lambda a, b, d: (a * b).sum(1, dtype=np.int64)),
    ("sum_in_type", lambda a, b, d: a.sum(1, dtype=a.dtype), None),
    ("amax", lambda a, b, d: (a - b).amax(1), lambda a, b, d: (a - b).max(1)),
]


def _narrow_operands(narrow, seed):
    info = np.iinfo(narrow)
    rng = np.random.default_rng(seed)
    a, b = rng.integers(info.min, info.max + 1, (2, 64, 80)).astype(narrow)
    d = rng.integers(1, info.max + 1, (64, 80)).astype(narrow)
    return a, b, d


@pytest.mark.parametrize("name,op,reference", NARROW_OPS, ids=[row[0] for row in NARROW_OPS])
@pytest.mark.parametrize("dtype,narrow", NARROW, ids=[d.name for d, _ in NARROW])
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_narrow_integers_compute_as_pytorch_eager_and_compiled(
    name, op, reference, dtype, narrow, mode
):
    run = fg.jit(op) if mode == "jit" else op
    for call in range(3):  # a jit function's tracing call, its first and second plan runs
        arrays = _narrow_operands(narrow, call)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # numpy's own overflow notes
            want = (reference or op)(*arrays)
        got = run(*[fg.from_numpy(x) for x in arrays])
        assert got.dtype is fg.from_numpy(np.asarray(want)).dtype
        assert got.tolist() == want.tolist()  # the storage's values, wrapped
    if mode == "jit":
        assert run.cache_info().hits == 2  # compiled, not run eagerly


@pytest.mark.parametrize(
    "left,right,result,with_zero_dim",
    [
        (fg.uint8, fg.int8, fg.int16, fg.uint8),
        (fg.uint8, fg.int16, fg.int16, fg.uint8),
        (fg.int8, fg.int16, fg.int16, fg.int8),
        (fg.uint8, fg.int32, fg.int32, fg.uint8),
        (fg.int8, fg.int64, fg.int64, fg.int8),
        (fg.uint8, fg.bool, fg.uint8, fg.uint8),
        (fg.int16, fg.float16, fg.float16, fg.float16),
        (fg.uint8, fg.bfloat16, fg.bfloat16, fg.bfloat16),
        (fg.int8, fg.float32, fg.float32, fg.float32),
    ],
)
def test_narrow_integer_promotion(left, right, result, with_zero_dim):
    x = fg.ones(2, dtype=left)
    assert (x + fg.ones(2, dtype=right)).dtype is result
    assert (fg.ones(2, dtype=right) + x).dtype is result
    assert (x + fg.ones((), dtype=right)).dtype is with_zero_dim


def test_narrow_integers_with_python_numbers_and_division():
    x = fg.tensor([250, 1], dtype=fg.uint8)
    assert (x + 10).tolist() == [4, 11] and (x + 10).dtype is fg.uint8
    assert (x + 2.5).dtype is fg.float32 and (x / x).dtype is fg.float32
    assert (x < 3).dtype is fg.bool and (x == 300).tolist() == [False, False]
    assert (x + fg.tensor(1000)).tolist() == [226, 233]  # a 0-d int64 tensor, wrapped
    assert (fg.tensor([44], dtype=fg.uint8) == 300).item()  # 300 wraps to 44
    assert (fg.tensor([-128], dtype=fg.int8) // -1).tolist() == [-128]


@pytest.mark.parametrize("dtype,narrow", NARROW, ids=[d.name for d, _ in NARROW])
def test_narrow_integers_to_and_from_numpy_and_creation(dtype, narrow):
    array = np.array([0, 1, np.iinfo(narrow).max, np.iinfo(narrow).min], narrow)
    x = fg.from_numpy(array)
    assert x.dtype is dtype and x.numpy().dtype == narrow
    np.testing.assert_array_equal(x.numpy(), array)
    assert fg.tensor(array.tolist(), dtype=dtype).tolist() == array.tolist()
    assert fg.as_tensor(array).dtype is dtype and fg.tensor(array).dtype is dtype
    assert fg.zeros(2, dtype=dtype).dtype is dtype
    assert fg.randint(0, 9, (3,), dtype=dtype).dtype is dtype
    info = fg.iinfo(dtype)
    assert (info.min, info.max, info.bits) == (array[3], array[2], 8 * array.itemsize)
    with pytest.raises(RuntimeError, match=f"cannot be converted to type {dtype.name} without"):
        fg.tensor([info.max + 1], dtype=dtype)


def test_uint8_creation_takes_negative_integers_as_pytorch_does():
    assert fg.tensor([-1, -255], dtype=fg.uint8).tolist() == [255, 1]
    assert fg.full((2,), -1, dtype=fg.uint8).tolist() == [255, 255]
    assert fg.arange(254, 258, dtype=fg.uint8).tolist() == [254, 255, 0, 1]
    for refused in ([-256], [-0.5], [255.5]):
        with pytest.raises(RuntimeError, match="without overflow"):
            fg.tensor(refused, dtype=fg.uint8)


def test_float_to_narrow_integers_truncates_then_wraps():
    x = fg.tensor([-1.0, 300.0, 2.7, -2.7, -200.0])
    assert x.to(fg.uint8).tolist() == [255, 44, 2, 254, 56]
    assert x.to(fg.int8).tolist() == [-1, 44, 2, -2, 56]
    assert fg.tensor([50000], dtype=fg.int32).to(fg.int16).tolist() == [-15536]


@pytest.mark.parametrize(
    "dtype,convert,name,spelled",
    [
        (fg.uint8, "byte", "ByteTensor", "uint8"),
        (fg.int8, "char", "CharTensor", "int8"),
        (fg.int16, "short", "ShortTensor", "int16"),
    ],
)
def test_narrow_integer_conversions_and_attributes(dtype, convert, name, spelled):
    x = fg.tensor([1.7, 2.0])
    converted = getattr(x, convert)()
    assert converted.dtype is dtype and converted.tolist() == [1, 2]
    assert x.to(dtype).dtype is dtype and x.type(getattr(fg, name)).dtype is dtype
    assert x.type(f"torch.{name}").dtype is dtype and converted.type() == f"fusegrad.{name}"
    assert isinstance(converted, getattr(fg, name)) and not isinstance(x, getattr(fg, name))
    assert getattr(fg, name)([1, 2]).dtype is dtype and getattr(fg, name)(2, 3).shape == (2, 3)
    assert converted.element_size() == fg.iinfo(dtype).bits // 8
    assert repr(converted) == f"tensor([1, 2], dtype=fusegrad.{spelled})"
    assert not converted.is_floating_point() and converted.stride() == (1,)
    clone = pickle.loads(pickle.dumps(converted))
    assert clone.dtype is dtype and copy.deepcopy(converted).dtype is dtype
    assert pickle.loads(pickle.dumps(dtype)) is dtype
    assert fg.short is fg.int16
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require"):
        converted.requires_grad_()


@pytest.mark.parametrize("dtype", [fg.uint8, fg.int8, fg.int16, fg.float16, fg.bfloat16])
def test_reduced_dtypes_save_and_load(dtype):
    x = fg.tensor([[1, 2], [3, 100]], dtype=dtype)
    buffer = io.BytesIO()
    fg.save({"x": x, "dtype": dtype}, buffer)
    buffer.seek(0)
    loaded = fg.load(buffer)
    assert loaded["dtype"] is dtype and loaded["x"].dtype is dtype
    assert loaded["x"].tolist() == x.tolist()


def test_a_uint8_mask_indexes_as_a_deprecated_bool_mask():
    x = fg.arange(6.0).reshape(2, 3)
    with pytest.warns(UserWarning, match="indexing with dtype torch.uint8 is now deprecated"):
        assert x[fg.tensor([[1, 0, 1], [0, 0, 1]], dtype=fg.uint8)].tolist() == [0.0, 2.0, 5.0]
    with pytest.warns(UserWarning, match="deprecated"):
        assert x[np.array([0, 1], np.uint8)].tolist() == [[3.0, 4.0, 5.0]]
    with pytest.raises(IndexError, match="must be long, int, byte or bool tensors"):
        x[fg.tensor([1], dtype=fg.int8)]
    with pytest.raises(RuntimeError, match="masked_fill_ only supports boolean masks"):
        x[fg.ones(2, 3, dtype=fg.uint8)] = 0.0
