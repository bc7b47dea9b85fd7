"""Random sampling: Philox against its known answers, the generator's state,
every sampler's signatures and distribution (fixed seeds, bounds of several
standard errors), and eager and compiled draws of the same stream."""

from __future__ import annotations

import math
import random as python_random
from itertools import permutations

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn
import fusegrad.nn.functional as F
from fusegrad.ir import primitives as P


def _chi_square(counts, expected) -> float:
    counts, expected = np.asarray(counts, float), np.asarray(expected, float)
    return float(((counts - expected) ** 2 / expected).sum())


def _chi_square_bound(bins: int) -> float:
    """Six standard deviations above the statistic's mean, bins - 1."""
    return bins - 1 + 6 * math.sqrt(2 * (bins - 1))


# ------------------------------------------------------------------ Philox

# Random123's kat_vectors: counter words, key words, the four output words.
PHILOX_KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    (
        (0xFFFFFFFF,) * 4,
        (0xFFFFFFFF,) * 2,
        (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD),
    ),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize("counter,key,expected", PHILOX_KNOWN_ANSWERS)
def test_philox_gives_random123s_known_answers(counter, key, expected):
    assert tuple(int(w) for w in P.philox4x32(counter, key)) == expected


def _bits(seed: int, offset: int, shape: tuple) -> np.ndarray:
    seed_t, offset_t = (fg.tensor(v, dtype=fg.int64) for v in (seed, offset))
    return P.random_bits(seed_t, offset_t, shape=shape).numpy()


@pytest.mark.parametrize("seed", [0, 12345, -1, 2**63 - 1])
@pytest.mark.parametrize("offset", [0, 7, 2**32 - 1])
def test_element_i_is_word_i_mod_4_of_philox_at_offset_plus_i_div_4(seed, offset):
    bits = _bits(seed, offset, (3, 5))
    key = seed % 2**64
    for i, word in enumerate(bits.reshape(-1)):
        counter = offset + i // 4
        words = P.philox4x32((counter % 2**32, counter >> 32, 0, 0), (key % 2**32, key >> 32))
        assert word == words[i % 4]
    assert bits.dtype == np.int64 and bits.min() >= 0 and bits.max() < 2**32


def test_a_draw_is_the_same_however_it_is_split_into_counters():
    whole = _bits(5, 10, (24,))
    parts = [_bits(5, 10, (8,)), _bits(5, 12, (12,)), _bits(5, 15, (4,))]
    np.testing.assert_array_equal(whole, np.concatenate(parts))
    np.testing.assert_array_equal(_bits(5, 10, (2, 3)).reshape(-1), whole[:6])


def test_each_draw_advances_the_offset_past_the_counters_it_used():
    g = fg.Generator().manual_seed(0)
    for size, counters in [(1, 1), (4, 1), (5, 2), (0, 0), (8, 2)]:
        before = g.get_state()[1].item()
        fg.randint(10, (size,), generator=g)  # a word per integer
        assert g.get_state()[1].item() - before == counters


# ---------------------------------------------------------------- the state


def test_a_seed_gives_the_same_stream_and_a_generator_its_own():
    fg.manual_seed(42)
    first = [fg.rand(5), fg.randn(3), fg.randint(0, 9, (4,))]
    g = fg.Generator().manual_seed(42)
    from_g = [
        fg.rand(5, generator=g),
        fg.randn(3, generator=g),
        fg.randint(0, 9, (4,), generator=g),
    ]
    fg.manual_seed(42)
    fg.rand(5, generator=fg.Generator())  # another generator leaves the default one alone
    again = [fg.rand(5), fg.randn(3), fg.randint(0, 9, (4,))]
    for a, b, c in zip(first, from_g, again):
        assert a.tolist() == b.tolist() == c.tolist()
    assert fg.rand(5).tolist() != first[0].tolist()


def test_get_state_and_set_state_round_trip():
    g = fg.Generator().manual_seed(3)
    fg.randn(7, generator=g)
    state = g.get_state()
    assert state.dtype is fg.int64 and state.tolist() == [3, state[1].item()]
    expected = fg.rand(6, generator=g).tolist()
    fg.rand(100, generator=g)
    assert g.set_state(state) is g
    assert fg.rand(6, generator=g).tolist() == expected
    saved = fg.get_rng_state()
    expected = fg.randn(4).tolist()
    fg.set_rng_state(saved)
    assert fg.randn(4).tolist() == expected


def test_generator_seeds_as_pytorch():
    g = fg.Generator()
    assert g.initial_seed() == 67280421310721 and g.device == "cpu"
    assert g.manual_seed(-1) is g and g.initial_seed() == 2**64 - 1
    assert g.manual_seed(2**64 - 1).get_state()[0].item() == -1
    seed = g.seed()
    assert g.initial_seed() == seed and 0 <= seed < 2**64
    assert fg.manual_seed(9) is fg.default_generator and fg.initial_seed() == 9
    assert isinstance(fg.seed(), int)


def test_python_and_numpy_global_generators_are_untouched():
    python_random.seed(1)
    np.random.seed(1)
    states = python_random.getstate(), np.random.get_state()[1].copy()
    fg.rand(10), fg.randn(10), fg.randperm(10), F.dropout(fg.ones(10))
    assert python_random.getstate() == states[0]
    np.testing.assert_array_equal(np.random.get_state()[1], states[1])


# ---------------------------------------------------------------- uniform


@pytest.mark.parametrize("dtype,step", [(fg.float32, 2.0**-24), (fg.float64, 2.0**-53)])
def test_uniform_floats_are_multiples_of_their_step_in_0_1(dtype, step):
    fg.manual_seed(0)
    u = fg.rand(200_000, dtype=dtype).numpy()
    assert u.dtype == dtype.np and u.min() >= 0 and u.max() < 1
    assert np.all(np.mod(u.astype(np.float64) / step, 1) == 0)
    n = u.size
    assert abs(u.mean() - 0.5) < 6 * math.sqrt(1 / 12 / n)
    assert abs(u.var() - 1 / 12) < 0.002
    counts = np.histogram(u, bins=100, range=(0, 1))[0]
    assert _chi_square(counts, np.full(100, n / 100)) < _chi_square_bound(100)


def test_sizes_dtypes_and_requires_grad_of_creation_samplers():
    for make in (fg.rand, fg.randn):
        assert make(2, 3).shape == make((2, 3)).shape == make(size=(2, 3)).shape == (2, 3)
        assert make(2).dtype is fg.float32 and make(2, dtype=fg.float64).dtype is fg.float64
        t = make(3, requires_grad=True)
        assert t.requires_grad and t.is_leaf and not make(3).requires_grad
        assert make(0).shape == (0,)
    x = fg.ones(2, 2, dtype=fg.float64)
    for like in (fg.rand_like, fg.randn_like):
        assert like(x).shape == (2, 2) and like(x).dtype is fg.float64
    assert fg.randint_like(x, 5).dtype is fg.float64
    assert set(fg.randint_like(x, 3, 5).flatten().tolist()) <= {3.0, 4.0}


# ----------------------------------------------------------------- normal


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64])
def test_normal_moments_and_tails(dtype):
    fg.manual_seed(1)
    n = 200_001  # odd: half a pair is left over
    z = fg.randn(n, dtype=dtype).numpy().astype(np.float64)
    assert abs(z.mean()) < 6 / math.sqrt(n)
    assert abs(z.var() - 1) < 6 * math.sqrt(2 / n)
    for k, tail in [(1, 0.3173), (2, 0.0455), (3, 0.0027)]:
        observed = np.mean(np.abs(z) > k)
        assert abs(observed - tail) < 6 * math.sqrt(tail * (1 - tail) / n)
    assert abs(np.mean(z**3)) < 0.03 and abs(np.mean(z**4) - 3) < 0.1


def test_normal_overloads():
    fg.manual_seed(2)
    assert fg.normal(2.0, 3.0, size=(4,)).shape == (4,)
    assert fg.normal(2.0, 3.0, (2, 2), dtype=fg.float64).dtype is fg.float64
    mean = fg.tensor([[0.0], [100.0]])
    std = fg.tensor([1.0, 0.0, 2.0], dtype=fg.float64)
    out = fg.normal(mean, std)
    assert out.shape == (2, 3) and out.dtype is fg.float64
    assert out[:, 1].tolist() == [0.0, 100.0]
    assert fg.normal(mean).shape == (2, 1) and fg.normal(0.5, std).shape == (3,)
    g = fg.Generator().manual_seed(5)
    z = fg.normal(10.0, 0.5, size=(100_000,), generator=g).numpy()
    assert abs(z.mean() - 10) < 0.01 and abs(z.std() - 0.5) < 0.01


def test_samplers_are_no_path_for_gradients():
    mean = fg.zeros(3, requires_grad=True)
    assert not fg.normal(mean, 1.0).requires_grad
    p = fg.full((3,), 0.5, requires_grad=True)
    assert not fg.bernoulli(p).requires_grad and not fg.multinomial(p, 2).requires_grad
    assert fg.normal(0.0, 1.0, (2,), requires_grad=True).requires_grad


# ---------------------------------------------------------------- integers


@pytest.mark.parametrize(
    "call,low,high,shape",
    [
        (lambda: fg.randint(10, (3,)), 0, 10, (3,)),
        (lambda: fg.randint(3, 10, (2, 2)), 3, 10, (2, 2)),
        (lambda: fg.randint(10, size=(5,)), 0, 10, (5,)),
        (lambda: fg.randint(-4, 4, size=(6,)), -4, 4, (6,)),
        (lambda: fg.randint(low=2, high=5, size=(7,)), 2, 5, (7,)),
        (lambda: fg.randint(high=3, size=[2]), 0, 3, (2,)),
        (lambda: fg.randint(0, 2**40, (4,)), 0, 2**40, (4,)),
    ],
)
def test_randint_signatures(call, low, high, shape):
    t = call()
    assert t.shape == shape and t.dtype is fg.int64
    assert low <= t.numpy().min() and t.numpy().max() < high


@pytest.mark.parametrize("span", [1, 7, 2**32, 2**32 + 1, 3 * 2**51, 2**63 - 1, 2**63])
def test_integers_are_the_words_scaled_or_a_63_bit_word_modulo_the_span(span):
    g = fg.Generator().manual_seed(span % 1000)
    seed, offset = g.get_state().tolist()
    drawn = fg.zeros(1000, dtype=fg.int64).random_(0, span, generator=g).numpy()
    if span <= 2**32:
        words = _bits(seed, offset, (1000,)).astype(object)
        expected = [w * span // 2**32 for w in words]
    else:
        high, low = _bits(seed, offset, (1000,)), _bits(seed, offset + 250, (1000,))
        expected = [(int(h) // 2 * 2**32 + int(lo)) % span for h, lo in zip(high, low)]
    assert drawn.tolist() == expected


def test_randint_frequencies_and_dtypes():
    fg.manual_seed(3)
    values = fg.randint(2, 9, (70_000,)).numpy()
    counts = np.bincount(values, minlength=9)[2:]
    assert counts.sum() == 70_000 and _chi_square(counts, np.full(7, 10_000)) < _chi_square_bound(7)
    assert fg.randint(0, 5, (3,), dtype=fg.float32).dtype is fg.float32
    assert fg.randint(0, 2, (3,), dtype=fg.bool).dtype is fg.bool
    assert fg.randint(0, 5, (3,), dtype=fg.float32, requires_grad=True).requires_grad


def test_randperm_is_a_uniform_permutation():
    fg.manual_seed(4)
    for n in (0, 1, 17, 1000):
        assert sorted(fg.randperm(n).tolist()) == list(range(n))
    counts = {p: 0 for p in permutations(range(4))}
    for _ in range(4800):
        counts[tuple(fg.randperm(4).tolist())] += 1
    assert _chi_square(list(counts.values()), [200] * 24) < _chi_square_bound(24)
    assert fg.randperm(5, dtype=fg.float64).dtype is fg.float64
    first = fg.randperm(50, generator=fg.Generator().manual_seed(1)).tolist()
    assert first == fg.randperm(50, generator=fg.Generator().manual_seed(1)).tolist()


# -------------------------------------------------------------- categories


def test_multinomial_with_replacement_follows_the_weights():
    fg.manual_seed(5)
    weights = fg.tensor([[1.0, 0.0, 3.0, 6.0], [5.0, 5.0, 0.0, 0.0]])
    samples = fg.multinomial(weights, 10_000, replacement=True)
    assert samples.shape == (2, 10_000) and samples.dtype is fg.int64
    for row, w in zip(samples.numpy(), weights.numpy()):
        counts = np.bincount(row, minlength=4)
        assert counts[w == 0].sum() == 0
        expected = w / w.sum() * row.size
        kept = w > 0
        assert _chi_square(counts[kept], expected[kept]) < _chi_square_bound(kept.sum())


def test_multinomial_without_replacement_draws_distinct_categories():
    fg.manual_seed(6)
    weights = fg.tensor([1.0, 2.0, 3.0, 4.0, 0.0], dtype=fg.float64)
    firsts = np.zeros(5)
    for _ in range(4000):
        draw = fg.multinomial(weights, 4).tolist()
        assert sorted(draw) == [0, 1, 2, 3]  # the zero weight comes last, never among four
        firsts[draw[0]] += 1
    assert _chi_square(firsts[:4], [400, 800, 1200, 1600]) < _chi_square_bound(4)
    assert fg.multinomial(weights, 5).tolist()[-1] == 4
    single = fg.multinomial(fg.tensor([0.0, 0.0, 1.0]), 1)
    assert single.shape == (1,) and single.item() == 2
    assert fg.tensor([[1.0, 1.0]]).multinomial(2).shape == (1, 2)


def test_bernoulli_frequencies():
    fg.manual_seed(7)
    p = fg.tensor([0.0, 0.2, 0.9, 1.0])
    draws = np.stack([fg.bernoulli(p).numpy() for _ in range(5000)])
    assert draws.dtype == np.float32
    np.testing.assert_array_equal(draws[:, [0, 3]].mean(0), [0.0, 1.0])
    for rate, column in zip((0.2, 0.9), draws[:, 1:3].T):
        assert abs(column.mean() - rate) < 6 * math.sqrt(rate * (1 - rate) / 5000)
    ints = fg.bernoulli(fg.zeros(1000, dtype=fg.int64), 0.3)
    assert ints.dtype is fg.int64 and abs(ints.numpy().mean() - 0.3) < 0.1
    assert p.bernoulli().shape == (4,)


# ------------------------------------------------------------- in place


def test_in_place_samplers_fill_in_the_tensors_dtype():
    fg.manual_seed(8)
    n = 100_000
    u = fg.empty(n, dtype=fg.float64).uniform_(-2, 3).numpy()
    assert -2 <= u.min() and u.max() < 3 and abs(u.mean() - 0.5) < 0.03
    z = fg.empty(n).normal_(5, 2).numpy()
    assert abs(z.mean() - 5) < 0.03 and abs(z.std() - 2) < 0.03
    e = fg.empty(n).exponential_(4).numpy()
    assert e.min() >= 0 and abs(e.mean() - 0.25) < 0.005
    k = fg.empty(n, dtype=fg.int64).geometric_(0.25).numpy()
    assert k.min() >= 1 and abs(k.mean() - 4) < 0.1
    b = fg.empty(n, dtype=fg.int32).bernoulli_(0.75).numpy()
    assert set(np.unique(b)) == {0, 1} and abs(b.mean() - 0.75) < 0.01
    t = fg.zeros(2, 3)
    assert t.bernoulli_(fg.tensor([0.0, 1.0, 0.0])) is t
    assert t.tolist() == [[0.0, 1.0, 0.0]] * 2


@pytest.mark.parametrize(
    "dtype,args,low,high",
    [
        (fg.float32, (), 0, 2**24 + 1),
        (fg.float64, (), 0, 2**53 + 1),
        (fg.int64, (), 0, 2**63),
        (fg.int32, (), 0, 2**31),
        (fg.bool, (), 0, 2),
        (fg.int64, (10,), 0, 10),
        (fg.int32, (-5, 5), -5, 5),
        (fg.float32, (3, None), 3, 2**24 + 1),
    ],
)
def test_random_fills_the_range_from_to(dtype, args, low, high):
    fg.manual_seed(9)
    values = fg.zeros(4000, dtype=dtype).random_(*args).numpy()
    assert low <= values.min() and values.max() < high
    span = high - low
    spread = (values.astype(np.float64) - low) / span
    assert abs(spread.mean() - (span - 1) / span / 2) < 0.03  # the whole range, not its start


def test_in_place_sampling_is_an_in_place_operation():
    w = fg.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.uniform_()
    with fg.no_grad():
        w.normal_()
    assert w.requires_grad and w._version == 1
    x = fg.ones(3, requires_grad=True)
    y = x * 2
    y.uniform_()
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]  # the sample replaced y: nothing flows to x


# ---------------------------------------------------------------- dropout


def test_dropout_keeps_a_one_minus_p_share_scaled():
    fg.manual_seed(10)
    x = fg.ones(100_000, dtype=fg.float64)
    out = F.dropout(x, 0.3).numpy()
    np.testing.assert_allclose(out[out != 0], 1 / 0.7)
    assert abs(np.mean(out != 0) - 0.7) < 6 * math.sqrt(0.21 / out.size)
    assert F.dropout(x, 0.0) is x and F.dropout(x, 0.5, training=False) is x
    assert F.dropout(fg.tensor([1.0, float("inf")]), 1.0).tolist()[0] == 0.0
    fg.manual_seed(10)
    layer_out = nn.Dropout(0.3)(x).numpy()
    np.testing.assert_array_equal(layer_out, out)


# ------------------------------------------------------------------- jit


def test_compiled_samplers_draw_the_eager_stream_call_after_call():
    def step(x):
        noise = fg.randn(x.shape) * 0.1 + fg.rand(x.shape)
        keep = F.dropout(x, 0.5)
        return noise + keep + fg.randint(0, 5, (3,)).sum() + fg.randperm(3).float().sum()

    compiled = fg.jit(step)
    x = fg.ones(4, 3)
    fg.manual_seed(11)
    eager = [step(x).numpy() for _ in range(3)]
    eager_state = fg.get_rng_state().tolist()
    fg.manual_seed(11)
    jitted = [compiled(x).numpy() for _ in range(3)]
    for e, j in zip(eager, jitted):
        np.testing.assert_allclose(j, e, rtol=1e-6)
    assert fg.get_rng_state().tolist() == eager_state
    assert compiled.cache_info().misses == 1
    assert "random_bits" in compiled.lower(x).forward_ir
    assert fg.get_rng_state().tolist() == eager_state  # lower() traces without drawing


@pytest.mark.parametrize("span", [10, 2**32 + 1, 3 * 2**51, 2**63])
def test_compiled_integers_are_the_eager_ones(span):
    def draw(x):
        return fg.zeros(64, dtype=fg.int64).random_(0, span) + x

    compiled = fg.jit(draw)
    x = fg.tensor(1)
    state = fg.get_rng_state()
    jitted = [compiled(x).tolist() for _ in range(3)]
    fg.set_rng_state(state)
    assert jitted == [draw(x).tolist() for _ in range(3)]


def test_compiled_dropout_gradients_use_the_mask_of_their_call():
    x = fg.randn(6, 5, requires_grad=True)

    def loss(x):
        return (F.dropout(x, 0.4) ** 2).sum()

    compiled = fg.jit(loss)
    for _ in range(3):
        state = fg.get_rng_state()
        x.grad = None
        compiled(x).backward()
        got = x.grad.numpy().copy()
        fg.set_rng_state(state)
        x.grad = None
        loss(x).backward()
        np.testing.assert_allclose(got, x.grad.numpy(), rtol=1e-6)


def test_generators_made_and_seeded_inside_a_compiled_function():
    def fresh(x):
        return x + fg.rand(4, generator=fg.Generator().manual_seed(3))

    def reseed(x):
        fg.manual_seed(7)
        return x + fg.randn(4)

    for fn in (fresh, reseed):
        compiled = fg.jit(fn)
        expected = fn(fg.zeros(4)).tolist()
        assert [compiled(fg.zeros(4)).tolist() for _ in range(3)] == [expected] * 3
    with pytest.raises(fg.TracingError, match=r"Generator.seed\(\)"):
        fg.jit(lambda x: x * fg.default_generator.seed())(fg.ones(1))


# ---------------------------------------------------------------- errors

BAD_CALLS = [
    (lambda: fg.rand(2, dtype=fg.int64), RuntimeError, '"check_uniform_bounds" not implemented'),
    (lambda: fg.randn(2, dtype=fg.int32), RuntimeError, '"normal_kernel_cpu" not implemented'),
    (lambda: fg.rand(2, generator=3), TypeError, "must be fusegrad.Generator, not int"),
    (lambda: fg.randint(5, 2, (3,)), RuntimeError, "from=5 >= to=2"),
    (lambda: fg.randint(10), TypeError, "size"),
    (lambda: fg.randint(0, 10, 3), TypeError, "tuple of ints"),
    (
        lambda: fg.randint(0, 2**31 + 1, (2,), dtype=fg.int32),
        RuntimeError,
        "to - 1 is out of bounds",
    ),
    (lambda: fg.zeros(2, dtype=fg.int64).random_(-1, None), RuntimeError, "wider than the 2**63"),
    (lambda: fg.randperm(-1), RuntimeError, "n must be non-negative"),
    (lambda: fg.normal(0.0, 1.0), RuntimeError, "either mean or std is a tensor"),
    (lambda: fg.normal(0.0, -1.0, (2,)), RuntimeError, "std >= 0.0, but found std -1.0"),
    (lambda: fg.normal(fg.zeros(2), fg.tensor([1.0, -1])), RuntimeError, "all elements of std"),
    (lambda: fg.normal(fg.zeros(2), 1.0, (2,)), TypeError, "only with a number mean"),
    (lambda: fg.bernoulli(fg.tensor([1.5])), RuntimeError, "p_in >= 0 && p_in <= 1"),
    (lambda: fg.bernoulli(fg.tensor([1])), RuntimeError, "not implemented for 'Long'"),
    (lambda: fg.ones(2).bernoulli_(2.0), RuntimeError, "p to be in [0, 1], but got p=2.0"),
    (lambda: fg.multinomial(fg.ones(2, 2, 2), 1), RuntimeError, "prob_dist must be 1 or 2 dim"),
    (lambda: fg.multinomial(fg.tensor([1, 2]), 1), RuntimeError, "floating-point dtypes"),
    (lambda: fg.multinomial(fg.ones(3), 0), RuntimeError, "n_sample <= 0"),
    (lambda: fg.multinomial(fg.ones(3), 4), RuntimeError, "without replacement"),
    (lambda: fg.multinomial(fg.tensor([1.0, -1.0]), 1), RuntimeError, "element < 0"),
    (lambda: fg.multinomial(fg.zeros(1, 3), 1, True), RuntimeError, "sum of probabilities"),
    (lambda: fg.ones(2).uniform_(1, 0), RuntimeError, "found from=1 > to=0"),
    (lambda: fg.ones(2).exponential_(0), RuntimeError, "lambda > 0.0"),
    (lambda: fg.ones(2).geometric_(1.0), RuntimeError, "p to be in (0, 1)"),
    (lambda: fg.ones(2, dtype=fg.int64).normal_(), RuntimeError, "not implemented for 'Long'"),
    (lambda: fg.manual_seed(2**64), RuntimeError, "Overflow when unpacking long"),
    (lambda: fg.set_rng_state(fg.zeros(2)), RuntimeError, "int64 tensor [seed, offset]"),
    (lambda: fg.Generator("cuda"), RuntimeError, "CPU only"),
]


@pytest.mark.parametrize("call,error,message", BAD_CALLS, ids=[m for _, _, m in BAD_CALLS])
def test_bad_arguments_raise_pytorchs_errors(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)
