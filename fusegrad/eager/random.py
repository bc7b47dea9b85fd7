"""Random sampling: ``fusegrad.Generator`` and the samplers built on it.

A generator is counter-based, Philox-4x32-10 as PyTorch's CUDA generator
(JAX's threefry is the same idea): its whole state is a 64-bit seed (the
Philox key) and a 64-bit offset (a counter position), and the bits at a
position are a pure function of the two, the primitive ``random_bits``. A
draw of n words reads the counters from the offset on, four words each, and
moves the offset past them, so consecutive draws never overlap. The state is
a pair of 0-d int64 tensors and every sampler a composition of primitives, so
jit needs nothing of its own: a trace records the equations eager mode runs,
the state tensors become inputs of the program (captured, read on every
call) and their advance an in-place update written back after the call, so
eager and compiled code draw the same stream. A generator made inside a
traced function is a constant of it.

How words become values (each sampler's draws in the order written):

- uniform floats in [0, 1): the top 24 bits of a word for float32, 53 bits
  of two words (32 + 21) for float64, scaled to multiples of 2**-24 (2**-53)
  as PyTorch and JAX build them;
- normals: Box-Muller on pairs of uniforms, two normals a pair, as PyTorch's
  CPU generator; JAX's inverse-erf route would need an erfinv primitive,
  while log, sqrt, cos and sin are primitives kernels compute;
- integers in [low, high): floor(w * (high - low) / 2**32) of a word w for
  ranges up to 2**32 wide, a 63-bit word modulo (high - low) for wider ones
  (the bias of PyTorch's 32- and 64-bit remainders);
- permutations: the argsort of 63-bit random keys (JAX's approach); the
  order is uniform unless two keys tie, of probability n**2 / 2**64;
- categories: the exponential race PyTorch uses for multinomial sampling
  without replacement (the largest w / E, E ~ Exp(1), wins); with
  replacement, every sample races anew.

Python's ``random`` and numpy's global generator are left alone.
"""

from __future__ import annotations

import math
import operator
import os

import numpy as np

from ..ir import dtypes
from ..ir import primitives as P
from ..ir.shapes import broadcast_shapes, sizes_from_args
from . import indexing, ops
from .tensor import Tensor, recording, tensor_type_name

# PyTorch's default seed: a process that never seeds draws the same numbers every run.
DEFAULT_SEED = 67280421310721
_WORDS_PER_COUNTER = 4


def _seed_value(seed) -> int:
    """A seed as the 64-bit key. PyTorch takes [-2**63, 2**64), a negative
    seed as its two's complement."""
    seed = operator.index(seed)
    if not -(2**63) <= seed < 2**64:
        raise RuntimeError("Overflow when unpacking long")
    return seed % 2**64


def _as_int64(value: int) -> int:
    """An unsigned 64-bit value as the int64 with its bits."""
    return value - 2**64 if value >= 2**63 else value


class Generator:
    """A stream of random numbers, PyTorch's ``torch.Generator``.

    >>> import fusegrad
    >>> g = fusegrad.Generator().manual_seed(0)
    >>> first = fusegrad.rand(3, generator=g)
    >>> bool((fusegrad.rand(3, generator=g.manual_seed(0)) == first).all())
    True
    """

    def __init__(self, device="cpu"):
        if str(device).split(":")[0] != "cpu":
            raise RuntimeError(f"fusegrad runs on the CPU only, got device {str(device)!r}")
        self._seed = Tensor._new(np.array(DEFAULT_SEED, np.int64), dtypes.int64)
        self._offset = Tensor._new(np.array(0, np.int64), dtypes.int64)

    @property
    def device(self) -> str:
        return "cpu"

    def manual_seed(self, seed) -> Generator:
        """Restarts the stream from ``seed``; returns the generator."""
        self._write(self._seed, _as_int64(_seed_value(seed)))
        self._write(self._offset, 0)
        return self

    def seed(self) -> int:
        """Restarts the stream from a non-deterministic seed, which it returns."""
        if recording.trace is not None:  # a compiled program would replay one seed
            recording.trace.unsupported("Generator.seed()")
        seed = int.from_bytes(os.urandom(8), "little")
        self.manual_seed(seed)
        return seed

    def initial_seed(self) -> int:
        return self._seed.item() % 2**64

    def get_state(self) -> Tensor:
        """The state as an int64 tensor ``[seed, offset]`` (PyTorch's CPU
        state is a byte tensor; this is what a counter-based one holds)."""
        return ops.stack([self._seed, self._offset])

    def set_state(self, new_state) -> Generator:
        if (
            not isinstance(new_state, Tensor)
            or new_state.dtype is not dtypes.int64
            or new_state.shape != (2,)
        ):
            raise RuntimeError(
                "expected a generator state: an int64 tensor [seed, offset] as get_state() "
                f"returns, got {_describe(new_state)}"
            )
        self._seed._commit_inplace(new_state[0])
        self._offset._commit_inplace(new_state[1])
        return self

    def _write(self, state: Tensor, value: int) -> None:
        state._commit_inplace(Tensor._new(np.array(value, np.int64), dtypes.int64))

    def _words(self, shape: tuple) -> Tensor:
        """Random 32-bit words (int64 values in [0, 2**32)) of ``shape``; the
        stream moves past the counters they take."""
        words = P.random_bits(self._seed, self._offset, shape=tuple(shape))
        counters = -(-math.prod(shape) // _WORDS_PER_COUNTER)
        self._offset._commit_inplace(P.add(self._offset, counters))
        return words


default_generator = Generator()


def _describe(value) -> str:
    if isinstance(value, Tensor):
        return f"{tensor_type_name(value._dtype)} of shape {list(value.shape)}"
    return type(value).__name__


def manual_seed(seed) -> Generator:
    """Seeds the default generator (rand, randn, dropout, nn layers' initialization)."""
    return default_generator.manual_seed(int(seed))


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    return default_generator.get_state()


def set_rng_state(new_state) -> None:
    default_generator.set_state(new_state)


def stream(generator, sampler: str) -> Generator:
    """The generator ``sampler`` draws from: ``generator``, or the default one."""
    if generator is None:
        return default_generator
    if not isinstance(generator, Generator):
        raise TypeError(
            f"{sampler}(): argument 'generator' must be fusegrad.Generator, not "
            f"{type(generator).__name__}"
        )
    return generator


def _scalar_type(dtype) -> str:
    """PyTorch's name of a dtype in kernel errors: Float, Double, Long, Int, Bool."""
    return tensor_type_name(dtype).removeprefix("fusegrad.").removesuffix("Tensor")


def require_floating(dtype, kernel: str) -> None:
    if not dtype.is_floating_point:
        raise RuntimeError(f"\"{kernel}\" not implemented for '{_scalar_type(dtype)}'")


# ------------------------------------------------------------ words to values


def _float64(t: Tensor) -> Tensor:
    return P.convert(t, dtype=dtypes.float64)


def _fraction53(gen: Generator, shape: tuple) -> Tensor:
    """float64 multiples of 2**-53 in [0, 1): 32 bits of one word above 21 of another."""
    high, low = _float64(gen._words(shape)), _float64(gen._words(shape))
    return (high * 2.0**21 + P.floor(low * 2.0**-11)) * 2.0**-53


def uniform(gen: Generator, shape: tuple, dtype) -> Tensor:
    """Floats in [0, 1) of ``dtype``, multiples of 2**-24 (float32) or 2**-53 (float64)."""
    require_floating(dtype, "check_uniform_bounds")
    if dtype is dtypes.float64:
        return _fraction53(gen, shape)
    top24 = P.floor(_float64(gen._words(shape)) * 2.0**-8)  # exact: float64 holds 32 bits
    return P.convert(top24 * 2.0**-24, dtype=dtype)


def standard_normal(gen: Generator, shape: tuple, dtype) -> Tensor:
    """Box-Muller: a pair of uniforms (u, v) makes the pair of independent
    normals r cos(2 pi v), r sin(2 pi v) with r = sqrt(-2 log(1 - u))."""
    require_floating(dtype, "normal_kernel_cpu")
    size = math.prod(shape)
    pairs = -(-size // 2)
    u, v = uniform(gen, (pairs, 1), dtype), uniform(gen, (pairs, 1), dtype)
    radius = P.sqrt(P.log(1.0 - u) * -2.0)  # 1 - u is in (0, 1]: no log(0)
    angle = v * (2 * math.pi)
    normals = ops.cat([radius * P.cos(angle), radius * P.sin(angle)], dim=1)
    return normals.reshape(-1)[:size].reshape(shape)


def exponential(gen: Generator, shape: tuple, dtype) -> Tensor:
    """Exp(1) by inversion: -log(1 - u)."""
    return -P.log1p(-uniform(gen, shape, dtype))


def _words63(gen: Generator, shape: tuple) -> Tensor:
    """int64 values uniform over [0, 2**63): 31 bits of one word above 32 of another."""
    high = P.convert(P.floor(_float64(gen._words(shape)) * 0.5), dtype=dtypes.int64)
    return high * 2**32 + gen._words(shape)


def _remainder(x: Tensor, span: int) -> Tensor:
    """x mod span for int64 x >= 0 and 2**32 < span < 2**63. The quotient, below
    2**31, is estimated in float64 to within one; the remainder the estimate
    leaves is corrected once (int64 products wrap, so even an estimate whose
    product overflows leaves the exact difference)."""
    quotient = P.convert(P.floor(_float64(x) / float(span)), dtype=dtypes.int64)
    rest = x - quotient * span
    rest = P.where(rest < 0, rest + span, rest)
    return P.where(rest >= span, rest - span, rest)


def integers(gen: Generator, low: int, span: int, shape: tuple) -> Tensor:
    """int64 values uniform over [low, low + span), span at most 2**63, with
    the bias of PyTorch's CPU generator (span / 2**32 below 2**32 values,
    span / 2**63 above)."""
    if span <= 2**32:
        # floor(w * span / 2**32) of a word w: rounding the product may move a
        # word across a boundary, never up to span
        scaled = _float64(gen._words(shape)) * (span / 2**32)
        values = P.convert(P.floor(scaled), dtype=dtypes.int64)
    elif span < 2**63:
        values = _remainder(_words63(gen, shape), span)
    elif span == 2**63:
        values = _words63(gen, shape)
    else:
        raise RuntimeError(
            f"random integers: a range of {span} values is wider than the 2**63 supported"
        )
    return values + low if low else values


def permutation(gen: Generator, n: int) -> Tensor:
    return P.argsort(_words63(gen, (n,)), axis=0, descending=False)


def _bernoulli(gen: Generator, shape: tuple, p, dtype) -> Tensor:
    """Ones (as ``dtype``) where a uniform draw falls below ``p``, a number or
    a tensor of probabilities. The draw has p's floating dtype, else
    ``dtype`` when floating, else float64."""
    if isinstance(p, Tensor):
        draw_dtype = p._dtype
    else:
        draw_dtype = dtype if dtype.is_floating_point else dtypes.float64
    return P.convert(uniform(gen, shape, draw_dtype) < p, dtype=dtype)


def bernoulli_mask(shape: tuple, keep_probability: float, dtype) -> Tensor:
    """Ones where a uniform draw falls below ``keep_probability`` (dropout's mask)."""
    return _bernoulli(stream(None, "dropout"), shape, keep_probability, dtype)


# ---------------------------------------------------------------- samplers


def _check_probability(p, what: str) -> None:
    if not 0 <= p <= 1:
        raise RuntimeError(f"{what} expects p to be in [0, 1], but got p={p}")


def _check_probabilities(p: Tensor) -> None:
    values = p._data
    if not ((values >= 0) & (values <= 1)).all():
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")


def bernoulli(input, p=None, *, generator=None) -> Tensor:
    """1 with probability ``input`` (or ``p``), else 0, in input's dtype and shape."""
    input = ops.as_tensor_arg(input)
    if p is None:
        require_floating(input._dtype, "bernoulli_tensor_cpu_p_")
        _check_probabilities(input)
        p = input.detach()
    else:
        _check_probability(p, "bernoulli_")
    return _bernoulli(stream(generator, "bernoulli"), input.shape, p, input._dtype)


def _detached(value):
    return value.detach() if isinstance(value, Tensor) else value


def normal(
    mean, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False
) -> Tensor:
    """``normal(mean, std, size)`` for numbers; with a tensor mean or std, one
    draw per element of their broadcast shape. Not reparameterized: no
    gradient flows to mean and std, as in PyTorch."""
    if not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        if size is None:
            raise RuntimeError(
                "normal expects that either mean or std is a tensor, or size is defined"
            )
        if not isinstance(size, (tuple, list)):
            raise TypeError(
                f"normal(): argument 'size' must be tuple of ints, not {_describe(size)}"
            )
        _check_std(std)
        dtype = dtypes.as_dtype(dtype) if dtype is not None else dtypes.default_float()
        shape = sizes_from_args(size)
        out = standard_normal(stream(generator, "normal"), shape, dtype) * std + mean
        return out.requires_grad_() if requires_grad else out
    if size is not None or dtype is not None or requires_grad:
        raise TypeError(
            "normal(): size, dtype and requires_grad go only with a number mean and std"
        )
    dtype = dtypes.result_type(mean, std)
    if isinstance(std, Tensor):
        if not (std._data >= 0).all():
            raise RuntimeError("normal expects all elements of std >= 0.0")
    else:
        _check_std(std)
    shape = broadcast_shapes(*(t.shape for t in (mean, std) if isinstance(t, Tensor)))
    z = standard_normal(stream(generator, "normal"), shape, dtype)
    return z * _detached(std) + _detached(mean)


def _check_std(std) -> None:
    if not std >= 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")


# Categories are indexed in float32 by PyTorch, hence its limit.
MAX_CATEGORIES = 2**24


def multinomial(input, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:
    """Indices drawn from each row of non-negative ``input`` weights (not
    necessarily normalized): ``num_samples`` per row, distinct unless
    ``replacement`` (which draws ``num_samples`` exponentials per category)."""
    input = ops.as_tensor_arg(input)
    if not 1 <= input.ndim <= 2:
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not input._dtype.is_floating_point:
        raise RuntimeError(
            "multinomial only supports floating-point dtypes for input, got: "
            f"{_scalar_type(input._dtype)}"
        )
    num_samples = operator.index(num_samples)
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    categories = input.shape[-1]
    if not replacement and num_samples > categories:
        raise RuntimeError(
            "cannot sample n_sample > prob_dist.size(-1) samples without replacement"
        )
    if categories > MAX_CATEGORIES:
        raise RuntimeError("number of categories cannot exceed 2^24")
    weights = input._data
    if not (np.isfinite(weights) & (weights >= 0)).all():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if (weights.sum(axis=-1) <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    gen = stream(generator, "multinomial")
    weights = input.detach()
    if replacement:  # each sample races its own exponentials over the categories
        weights = ops.unsqueeze(weights, -2)
        shape = input.shape[:-1] + (num_samples, categories)
        return P.argmax(_race(gen, weights, shape), axis=input.ndim)
    order = P.argsort(-_race(gen, weights, input.shape), axis=input.ndim - 1, descending=False)
    return order[..., :num_samples]


def _race(gen: Generator, weights: Tensor, shape: tuple) -> Tensor:
    """w / E for exponentials E: a category's chance to hold the largest is
    its share of the weight. Zero weights get -1, so they never beat a
    positive one (0 / E would be nan where E is 0)."""
    times = exponential(gen, shape, weights._dtype)
    return P.where(weights > 0.0, weights / times, -1.0)


# ----------------------------------------------------------- in-place samplers


def _fill(self: Tensor, sample: Tensor) -> Tensor:
    """Overwrites self with ``sample`` as one in-place operation: the version
    bumps, and no gradient flows to the old value."""
    indexing.setitem(self, Ellipsis, sample)
    return self


def uniform_(self, from_=0.0, to=1.0, *, generator=None) -> Tensor:
    """Fills self with floats drawn uniformly from [from_, to)."""
    if not from_ <= to:
        raise RuntimeError(
            f"uniform_ expects to return a [from, to) range, but found from={from_} > to={to}"
        )
    u = uniform(stream(generator, "uniform_"), self.shape, self._dtype)
    return _fill(self, u * (to - from_) + from_)


def normal_(self, mean=0.0, std=1.0, *, generator=None) -> Tensor:
    _check_std(std)
    z = standard_normal(stream(generator, "normal_"), self.shape, self._dtype)
    return _fill(self, z * std + mean)


def bernoulli_(self, p=0.5, *, generator=None) -> Tensor:
    """Fills self with 1 with probability ``p`` (a number or a tensor broadcast to self), else 0."""
    if isinstance(p, Tensor):
        require_floating(p._dtype, "bernoulli_tensor_cpu_p_")
        _check_probabilities(p)
        p = p.detach()
    else:
        _check_probability(p, "bernoulli_")
    return _fill(self, _bernoulli(stream(generator, "bernoulli_"), self.shape, p, self._dtype))


def exponential_(self, lambd=1.0, *, generator=None) -> Tensor:
    require_floating(self._dtype, "exponential_cpu")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    times = exponential(stream(generator, "exponential_"), self.shape, self._dtype)
    return _fill(self, times / lambd)


def geometric_(self, p, *, generator=None) -> Tensor:
    """Fills self with the number of Bernoulli(p) trials up to the first success."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    dtype = self._dtype if self._dtype.is_floating_point else dtypes.float64
    u = uniform(stream(generator, "geometric_"), self.shape, dtype)
    # k failures before the success while (1 - p)**(k + 1) < 1 - u <= (1 - p)**k
    return _fill(self, P.floor(P.log1p(-u) / math.log1p(-p)) + 1.0)


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None) -> Tensor:
    require_floating(self._dtype, "cauchy_cpu")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    u = uniform(stream(generator, "cauchy_"), self.shape, self._dtype)
    angle = (u - 0.5) * math.pi
    return _fill(self, P.sin(angle) / P.cos(angle) * sigma + median)


def log_normal_(self, mean=1.0, std=2.0, *, generator=None) -> Tensor:
    require_floating(self._dtype, "log_normal_cpu")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    z = standard_normal(stream(generator, "log_normal_"), self.shape, self._dtype)
    return _fill(self, P.exp(z * std + mean))


def _largest(dtype) -> int:
    """The top of ``random_()``'s default range: the largest integer the dtype
    holds exactly (floats: 2**digits) or at all."""
    if dtype is dtypes.bool_:
        return 1
    if dtype.is_floating_point:
        return 2 ** (np.finfo(dtype.np).nmant + 1)
    return int(np.iinfo(dtype.np).max)


def check_integer_range(low: int, high: int, dtype) -> None:
    """PyTorch's checks of a range [low, high) of integers for ``dtype``."""
    if not low < high:
        raise RuntimeError(
            f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"
        )
    if not dtype.is_floating_point:
        smallest = 0 if dtype is dtypes.bool_ else int(np.iinfo(dtype.np).min)
        for name, value in (("from", low), ("to - 1", high - 1)):
            if not smallest <= value <= _largest(dtype):
                raise RuntimeError(f"{name} is out of bounds for {dtype.name}")


def random_(self, *bounds, to=None, generator=None) -> Tensor:
    """``random_()``, ``random_(to)``, ``random_(from, to)``: integers drawn
    uniformly from [from, to); without ``to``, up to the largest integer the
    dtype holds (exactly, for floats)."""
    if len(bounds) > 2 or (len(bounds) == 2 and to is not None):
        raise TypeError("random_() takes at most two bounds: from and to")
    if len(bounds) == 2:
        low, high = bounds
    elif len(bounds) == 1 and to is None:
        low, high = 0, bounds[0]
    else:
        low, high = (bounds[0] if bounds else 0), to
    low = operator.index(low)
    high = _largest(self._dtype) + 1 if high is None else operator.index(high)
    check_integer_range(low, high, self._dtype)
    values = integers(stream(generator, "random_"), low, high - low, self.shape)
    return _fill(self, values)


for _method in (
    uniform_, normal_, bernoulli_, exponential_, geometric_, random_, cauchy_, log_normal_
):  # fmt: skip
    setattr(Tensor, _method.__name__, _method)
Tensor.bernoulli = bernoulli
Tensor.multinomial = multinomial
