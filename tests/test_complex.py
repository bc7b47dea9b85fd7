"""Complex tensors and fusegrad.fft: each op against numpy's complex
arithmetic, gradients against finite differences of numpy's (PyTorch's
convention: dL/dx + i dL/dy), LLaMA's rotary embedding and a spectrogram
eagerly and under jit, PyTorch's dtypes, promotion, printing and errors
(expected values are PyTorch 2.13's), views and in-place writes, and
complex arguments, results and globals of jit functions."""

import copy
import io
import pickle
import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn

RNG = np.random.default_rng(0)


def _complex(*shape, away_from_zero=False):
    z = RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)
    return z + (1.5 + 1.5j) * np.sign(z.real) if away_from_zero else z


def _real(*shape):
    return RNG.standard_normal(shape)


def _values(t):
    return t.detach().numpy()


# ------------------------------------------------------------- the op table

# (id, op on fusegrad tensors, numpy's, arguments: numpy arrays (complex or
# real, each a tensor) or Python numbers)
A, B, Z = _complex(3, 4), _complex(3, 4), _complex(3, 4, away_from_zero=True)
X, Y, M = _real(3, 4), _real(3, 4), _complex(4, 2)
OPS = [
    ("add", lambda a, b: a + b, np.add, (A, B)),
    ("sub", lambda a, b: a - b, np.subtract, (A, B)),
    ("mul", lambda a, b: a * b, np.multiply, (A, B)),
    ("div", lambda a, b: a / b, np.divide, (A, Z)),
    ("real times complex", lambda x, a: x * a, np.multiply, (X, A)),
    ("complex minus real", lambda a, x: a - x, np.subtract, (A, X)),
    ("real over complex", lambda x, b: x / b, np.divide, (X, Z)),
    ("complex over real", lambda a, x: a / (x + 3), lambda a, x: a / (x + 3), (A, X)),
    ("number times", lambda a: (2 - 1j) * a, lambda a: (2 - 1j) * a, (A,)),
    ("plus number", lambda a: a + 1.5j, lambda a: a + 1.5j, (A,)),
    ("number over", lambda b: 2j / b, lambda b: 2j / b, (Z,)),
    ("real tensor times number", lambda x: x * (1 + 2j), lambda x: x * (1 + 2j), (X,)),
    ("neg", lambda a: -a, np.negative, (A,)),
    ("conj", lambda a: a.conj(), np.conj, (A,)),
    ("abs", lambda a: a.abs(), np.abs, (A,)),
    ("angle", lambda a: a.angle(), np.angle, (A,)),
    ("exp", lambda a: a.exp(), np.exp, (A,)),
    ("log", lambda z: z.log(), np.log, (Z,)),
    ("sqrt", lambda z: z.sqrt(), np.sqrt, (Z,)),
    ("reciprocal", lambda z: z.reciprocal(), np.reciprocal, (Z,)),
    ("square", lambda a: a.square(), np.square, (A,)),
    ("sgn", lambda z: z.sgn(), lambda z: z / np.abs(z), (Z,)),
    ("pow 3", lambda a: a**3, lambda a: a**3, (A,)),
    ("pow -2", lambda z: z**-2, lambda z: z**-2.0, (Z,)),
    ("pow 1.5", lambda z: z**1.5, lambda z: z**1.5, (Z,)),
    ("matmul", lambda a, m: a @ m, np.matmul, (A, M)),
    ("outer", lambda a, b: fg.outer(a[0], b[1]), lambda a, b: np.outer(a[0], b[1]), (A, B)),
    ("sum", lambda a: a.sum(0), lambda a: a.sum(0), (A,)),
    ("sum all", lambda a: fg.sum(a), np.sum, (A,)),
    ("mean keepdim", lambda a: a.mean(-1, keepdim=True), lambda a: a.mean(-1, keepdims=True), (A,)),
    ("norm", lambda a: a.norm(), np.linalg.norm, (A,)),
    ("real", lambda a: a.real * 1, np.real, (A,)),
    ("imag", lambda a: fg.imag(a) * 1, np.imag, (A,)),
    (
        "view_as_real",
        lambda a: fg.view_as_real(a) * 1,
        lambda a: np.stack([a.real, a.imag], -1),
        (A,),
    ),
    (
        "polar",
        lambda r, t: fg.polar(r.abs(), t),
        lambda r, t: np.abs(r) * np.exp(1j * t),
        (X, Y),
    ),
    ("complex", lambda r, i: fg.complex(r, i), lambda r, i: r + 1j * i, (X, -X)),
    (
        "to complex",
        lambda x: x.to(fg.complex128 if x.dtype == fg.float64 else fg.complex64),
        lambda x: x + 0j,
        (X,),
    ),
    ("cat", lambda a, x: fg.cat([a, x], 1), lambda a, x: np.concatenate([a, x + 0j], 1), (A, X)),
    ("stack", lambda a, b: fg.stack([a, b], -1), lambda a, b: np.stack([a, b], -1), (A, B)),
    (
        "where",
        lambda a, b: fg.where(a.real > 0, a, b),
        lambda a, b: np.where(a.real > 0, a, b),
        (A, B),
    ),
    ("index", lambda a: a[[2, 0], 1:3], lambda a: a[[2, 0], 1:3], (A,)),
    ("mask", lambda a: a[a.abs() > 1], lambda a: a[np.abs(a) > 1], (A,)),
    ("ellipsis", lambda a: a[..., None, 1], lambda a: a[..., None, 1], (A,)),
    (
        "reshape and transpose",
        lambda a: a.reshape(2, 6).t().flatten(),
        lambda a: a.reshape(2, 6).T.flatten(),
        (A,),
    ),
    (
        "permute",
        lambda a: a.unsqueeze(0).permute(2, 0, 1),
        lambda a: a[None].transpose(2, 0, 1),
        (A,),
    ),
    ("mH", lambda a: a.mH, lambda a: a.conj().T, (A,)),
    ("flip and roll", lambda a: a.flip(0).roll(1, -1), lambda a: np.roll(a[::-1], 1, -1), (A,)),
    ("expand", lambda a: a[:1].expand(2, 4), lambda a: np.broadcast_to(a[:1], (2, 4)), (A,)),
    ("chunk", lambda a: a.chunk(2, 1)[1], lambda a: a[:, 2:], (A,)),
]
OP_IDS = [row[0] for row in OPS]


def _tensors(args, dtype):
    """The arguments as fusegrad tensors of ``dtype``'s precision."""
    return [
        fg.tensor(
            a.astype((dtype if np.iscomplexobj(a) else dtype.to_real()).np), requires_grad=True
        )
        if isinstance(a, np.ndarray)
        else a
        for a in args
    ]


@pytest.mark.parametrize("dtype", [fg.complex64, fg.complex128])
@pytest.mark.parametrize("name,op,reference,args", OPS, ids=OP_IDS)
def test_values_are_numpys_complex_arithmetic(name, op, reference, args, dtype):
    out = op(*_tensors(args, dtype))
    want = reference(*args)
    assert out.dtype is (dtype if np.iscomplexobj(want) else dtype.to_real())
    tolerance = 1e-12 if dtype is fg.complex128 else 2e-5
    np.testing.assert_allclose(_values(out), want, rtol=tolerance, atol=tolerance)


def _loss(value, weights):
    """A real function of a complex (or real) value: its parts weighted."""
    if np.iscomplexobj(value):
        return np.sum(value.real * weights.real + value.imag * weights.imag)
    return np.sum(value * weights.real)


def _numeric_gradient(reference, args, k, weights, eps=1e-6):
    """dL/dx + i dL/dy of argument k's elements, by central differences."""
    base = args[k]
    grad = np.zeros_like(base)
    for index in np.ndindex(base.shape):
        steps = (1, 1j) if np.iscomplexobj(base) else (1,)
        for step in steps:
            moved = []
            for sign in (1, -1):
                shifted = base.copy()
                shifted[index] += sign * eps * step
                moved.append(_loss(reference(*args[:k], shifted, *args[k + 1 :]), weights))
            grad[index] += step * (moved[0] - moved[1]) / (2 * eps)
    return grad


@pytest.mark.parametrize("name,op,reference,args", OPS, ids=OP_IDS)
def test_gradients_are_pytorchs_convention(name, op, reference, args):
    tensors = _tensors(args, fg.complex128)
    out = op(*tensors)
    want = reference(*args)
    weights = RNG.standard_normal(want.shape) + 1j * RNG.standard_normal(want.shape)
    if out.is_complex():
        loss = (out.real * fg.tensor(weights.real) + out.imag * fg.tensor(weights.imag)).sum()
    else:
        loss = (out * fg.tensor(weights.real)).sum()
    loss.backward()
    for k, (arg, tensor) in enumerate(zip(args, tensors)):
        if isinstance(arg, np.ndarray):
            expected = _numeric_gradient(reference, list(args), k, weights)
            got = np.zeros_like(arg) if tensor.grad is None else _values(tensor.grad)
            np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


# PyTorch's gradients where the formulas divide by |z| = 0: none there
AT_ZERO = [
    ("abs", lambda z: z.abs()),
    ("angle", lambda z: z.angle()),
    ("sgn", lambda z: z.sgn().real),
]


@pytest.mark.parametrize("name,op", AT_ZERO, ids=[row[0] for row in AT_ZERO])
def test_gradients_at_zero_are_pytorchs(name, op):
    z = fg.zeros(2, dtype=fg.cfloat, requires_grad=True)
    op(z).sum().backward()
    assert z.grad.tolist() == [0j, 0j]


def test_a_gradient_pytorch_computes():
    z = fg.tensor([1 + 2j, 3 - 1j], requires_grad=True)
    z.angle().sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), [-0.4 + 0.2j, 0.1 + 0.3j], rtol=1e-6)


def test_backward_of_a_complex_output_takes_its_gradient():
    z = fg.tensor([1 + 2j, 3 - 1j], requires_grad=True)
    (z * (2 - 1j)).backward(fg.tensor([1j, 1]))
    np.testing.assert_allclose(z.grad.numpy(), np.conj(2 - 1j) * np.array([1j, 1]))
    with pytest.raises(
        RuntimeError, match=r"only for real scalar outputs but got torch\.complex64"
    ):
        (z * 2).sum().backward()


def test_in_place_updates_keep_the_gradient():
    z = fg.tensor(A, requires_grad=True)
    w = fg.tensor(B)
    y = z * 1
    y.mul_(w)
    y.add_(1j, alpha=2)
    y.abs().sum().backward()
    expected = fg.tensor(A, requires_grad=True)
    (expected * w + 2j).abs().sum().backward()
    np.testing.assert_allclose(z.grad.numpy(), expected.grad.numpy(), rtol=1e-12)


def test_hooks_see_complex_gradients():
    z = fg.tensor([1 + 1j], requires_grad=True)
    seen = []
    z.register_hook(lambda g: seen.append(g.dtype) or g * 2)
    (z * 1j).real.sum().backward()
    assert seen == [fg.complex64] and z.grad.tolist() == [-2j]


# ---------------------------------------------------- rotary embeddings


def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0):
    freqs = 1.0 / (theta ** (fg.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = fg.arange(end, device=freqs.device)
    freqs = fg.outer(t, freqs).float()
    return fg.polar(fg.ones_like(freqs), freqs)


def reshape_for_broadcast(freqs_cis, x):
    ndim = x.ndim
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = fg.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = fg.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = fg.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = fg.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def _rotated(x, dim, theta=10000.0):
    """numpy's rotary embedding of x (batch, sequence, heads, dim)."""
    freqs = 1.0 / theta ** (np.arange(0, dim, 2)[: dim // 2] / dim)
    rotations = np.exp(1j * np.outer(np.arange(x.shape[1]), freqs))[None, :, None, :]
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    rotated = (pairs[..., 0] + 1j * pairs[..., 1]) * rotations
    return np.stack([rotated.real, rotated.imag], -1).reshape(x.shape), rotations


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "jit"])
def test_rotary_embedding_is_numpys(compiled):
    freqs_cis = precompute_freqs_cis(8, 5)
    assert freqs_cis.dtype is fg.complex64 and freqs_cis.shape == (5, 4)
    rotate = fg.jit(apply_rotary_emb) if compiled else apply_rotary_emb
    for _ in range(3):  # calls 1, 2, 3: the trace, the first compiled run, its plan
        q, k = _real(2, 5, 3, 8), _real(2, 5, 3, 8)
        xq = fg.tensor(q.astype(np.float32), requires_grad=True)
        q_out, k_out = rotate(xq, fg.tensor(k.astype(np.float32)), freqs_cis)
        weights = _real(2, 5, 3, 8)
        (q_out * fg.tensor(weights.astype(np.float32))).sum().backward()
        want_q, rotations = _rotated(q, 8)
        np.testing.assert_allclose(_values(q_out), want_q, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(_values(k_out), _rotated(k, 8)[0], rtol=1e-5, atol=1e-5)
        # the gradient is the weights rotated back
        w = weights.reshape(2, 5, 3, 4, 2)
        back = (w[..., 0] + 1j * w[..., 1]) * np.conj(rotations)
        want_grad = np.stack([back.real, back.imag], -1).reshape(q.shape)
        np.testing.assert_allclose(xq.grad.numpy(), want_grad, rtol=1e-5, atol=1e-5)


FREQS_CIS = precompute_freqs_cis(8, 5)


def test_a_global_complex_tensor_is_read_by_jit_functions():
    f = fg.jit(lambda xq, xk: apply_rotary_emb(xq, xk, FREQS_CIS))
    for _ in range(3):
        q = _real(2, 5, 3, 8).astype(np.float32)
        out, _ = f(fg.tensor(q), fg.tensor(q))
        np.testing.assert_allclose(out.numpy(), _rotated(q, 8)[0], rtol=1e-5, atol=1e-5)


class Rotary(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.register_buffer("freqs_cis", precompute_freqs_cis(8, 5))

    def forward(self, x):
        q = self.proj(x)
        return apply_rotary_emb(q, q, self.freqs_cis)[0].square().mean()


def test_a_modules_complex_buffer_under_jit():
    model = Rotary()
    compiled = fg.jit(model)
    for _ in range(3):
        x = fg.tensor(_real(2, 5, 3, 8).astype(np.float32))
        model.zero_grad()
        model(x).backward()
        eager = model.proj.weight.grad.numpy().copy()
        model.zero_grad()
        compiled(x).backward()
        np.testing.assert_allclose(model.proj.weight.grad.numpy(), eager, rtol=1e-5, atol=1e-6)
    state = model.state_dict()
    assert state["freqs_cis"].dtype is fg.complex64
    loaded = Rotary()
    loaded.load_state_dict(state)
    assert bool((loaded.freqs_cis == model.freqs_cis).all())


def test_complex_arguments_and_results_under_jit():
    def f(z, x):
        w = z * fg.view_as_complex(x) + 1j
        return w, w.abs(), w.sum()

    compiled = fg.jit(f)
    for _ in range(3):
        z, x = _complex(3, 4), _real(3, 4, 2)
        args = fg.tensor(z.astype(np.complex64)), fg.tensor(x.astype(np.float32))
        got, want = compiled(*args), f(*args)
        for g, w in zip(got, want):
            assert type(g) is type(w) and g.dtype is w.dtype
            np.testing.assert_allclose(_values(g), _values(w), rtol=1e-6)


def test_in_place_updates_and_python_complex_arguments_under_jit():
    def f(z, w, c):
        z.mul_(w)
        z[0] = c
        fg.view_as_real(z)[..., 1] *= -1
        return z.abs()

    compiled = fg.jit(f)
    for c in (5j, 5j, 2 + 1j):
        w = fg.tensor([2j, 1, 1 + 1j])
        eager, jitted = fg.tensor([1 + 1j, 2 - 1j, 3j]), fg.tensor([1 + 1j, 2 - 1j, 3j])
        np.testing.assert_allclose(compiled(jitted, w, c).numpy(), f(eager, w, c).numpy())
        assert jitted.tolist() == eager.tolist() == [np.conj(c), 2 + 1j, -3 - 3j]


# ------------------------------------------------------------ transforms


def _stft(x, n_fft, hop, window):
    """numpy's centered, reflect-padded short-time transform."""
    x = np.pad(x, [(0, 0), (n_fft // 2, n_fft // 2)], mode="reflect")
    count = 1 + (x.shape[-1] - n_fft) // hop
    frames = np.stack([x[:, i * hop : i * hop + n_fft] for i in range(count)], -2)
    return np.fft.rfft(frames * window, axis=-1).swapaxes(-1, -2)


def _spectrogram(x):
    window = fg.hann_window(400)
    return fg.stft(x, 400, 160, 400, window=window, return_complex=True).abs()


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "jit"])
def test_a_spectrogram_is_numpys(compiled):
    spectrogram = fg.jit(_spectrogram) if compiled else _spectrogram
    window = np.hanning(401)[:400]  # periodic
    for _ in range(3):
        x = _real(2, 1600)
        got = spectrogram(fg.tensor(x.astype(np.float32)))
        assert got.shape == (2, 201, 11)
        want = np.abs(_stft(x, 400, 160, window))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)


def test_stft_gradients_and_istft_round_trip():
    x = fg.tensor(_real(2, 600), requires_grad=True)
    window = fg.hann_window(64, dtype=fg.float64)
    spectrum = fg.stft(x, 64, 16, window=window, return_complex=True)
    assert spectrum.dtype is fg.complex128
    weights = _real(*spectrum.shape)
    (spectrum.abs() * fg.tensor(weights)).sum().backward()
    x0 = x.detach().numpy()

    def loss(signal):
        return np.sum(np.abs(_stft(signal, 64, 16, np.hanning(65)[:64])) * weights)

    step = np.zeros_like(x0)
    step[1, 100] = 1e-6
    numeric = (loss(x0 + step) - loss(x0 - step)) / 2e-6
    assert abs(x.grad.numpy()[1, 100] - numeric) < 1e-6
    signal = fg.istft(spectrum, 64, 16, window=window, length=600)
    np.testing.assert_allclose(signal.detach().numpy(), x0, atol=1e-10)


FFT_SIZES = [1, 2, 7, 16, 400, 600, 1000, 16000]  # 600 and up: Cooley and Tukey's split


@pytest.mark.parametrize("n", FFT_SIZES)
def test_ffts_are_numpys(n):
    x, z = _real(2, n), _complex(2, n)
    for got, want in [
        (fg.fft.rfft(fg.tensor(x)), np.fft.rfft(x)),
        (fg.fft.fft(fg.tensor(z)), np.fft.fft(z)),
        (fg.fft.ifft(fg.tensor(z)), np.fft.ifft(z)),
        (fg.fft.irfft(fg.tensor(np.fft.rfft(x)), n), x),
    ]:
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=1e-9 * max(1, n) ** 0.5)


@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
def test_fft_lengths_dimensions_and_norms_are_numpys(norm):
    x = _real(4, 6, 10)
    spectrum = np.fft.rfft(x, 12, 1, norm)
    np.testing.assert_allclose(fg.fft.rfft(fg.tensor(x), 12, 1, norm).numpy(), spectrum)
    np.testing.assert_allclose(
        fg.fft.irfft(fg.tensor(spectrum), 9, 1, norm).numpy(), np.fft.irfft(spectrum, 9, 1, norm)
    )
    np.testing.assert_allclose(
        fg.fft.fft2(fg.tensor(x), norm=norm).numpy(), np.fft.fft2(x, norm=norm)
    )
    np.testing.assert_allclose(
        fg.fft.irfftn(fg.tensor(np.fft.rfftn(x)), x.shape, norm=norm).numpy(),
        np.fft.irfftn(np.fft.rfftn(x), x.shape, axes=(0, 1, 2), norm=norm),
    )
    np.testing.assert_allclose(fg.fft.fftshift(fg.tensor(x)).numpy(), np.fft.fftshift(x))
    np.testing.assert_allclose(fg.fft.rfftfreq(8, 0.5).numpy(), np.fft.rfftfreq(8, 0.5))


def test_irfft_gradients_ignore_the_imaginary_parts_it_ignores():
    """As PyTorch's: the first and (even n) middle frequencies' imaginary parts
    do not reach the signal."""
    spectrum = fg.tensor(_complex(5), requires_grad=True)
    weights = _real(8)
    (fg.fft.irfft(spectrum) * fg.tensor(weights)).sum().backward()
    grad = spectrum.grad.numpy()
    assert grad[0].imag == 0 and abs(grad[-1].imag) < 1e-15
    k, m = np.arange(5)[:, None], np.arange(8)[None, :]
    twice = np.array([1, 2, 2, 2, 1])[:, None]
    want = twice * np.exp(-2j * np.pi * k * m / 8) / 8 @ weights  # the inverse's transpose
    np.testing.assert_allclose(grad, want, atol=1e-12)


def test_ffts_under_jit():
    def f(x):
        return fg.fft.irfft(fg.fft.rfft(x) * 1j, n=x.shape[-1]), fg.fft.fft(x).abs()

    compiled = fg.jit(f)
    for _ in range(3):
        x = fg.tensor(_real(3, 1000).astype(np.float32))
        for got, want in zip(compiled(x), f(x)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


# -------------------------------------------------- dtypes and promotion


def test_complex_dtypes_are_pytorchs():
    assert fg.cfloat is fg.complex64 and fg.cdouble is fg.complex128
    assert isinstance(fg.complex64, fg.dtype) and fg.complex64.is_complex
    assert not fg.complex64.is_floating_point and fg.complex64.itemsize == 8
    assert fg.complex128.to_real() is fg.float64 and fg.float32.to_complex() is fg.complex64
    assert fg.finfo(fg.complex64).eps == fg.finfo(fg.float32).eps
    z = fg.zeros(2, 3, dtype=fg.cdouble)
    assert z.dtype is fg.complex128 and z.shape == (2, 3) and z.element_size() == 16
    assert z.is_complex() and fg.is_complex(z) and not fg.ones(1).is_complex()
    assert z.type() == "fusegrad.ComplexDoubleTensor"


PROMOTIONS = [  # (operands, PyTorch's result)
    (lambda: fg.ones(2) * 1j, fg.complex64),
    (lambda: fg.ones(2, dtype=fg.float64) * 1j, fg.complex128),
    (lambda: fg.tensor([1, 2]) * 1j, fg.complex64),
    (lambda: fg.tensor(1.0, dtype=fg.float64) * 1j, fg.complex128),
    (lambda: fg.ones(2, dtype=fg.float64) * fg.tensor(1j), fg.complex128),
    (lambda: fg.ones(2) * fg.tensor(1j, dtype=fg.complex128), fg.complex64),
    (lambda: fg.tensor([1, 2]) * fg.tensor(1j, dtype=fg.complex128), fg.complex128),
    (lambda: fg.tensor([1j]) * fg.tensor(1.0, dtype=fg.float64), fg.complex64),
    (lambda: fg.tensor([1j]) * fg.ones(1, dtype=fg.float64), fg.complex128),
    (lambda: fg.cat([fg.ones(2, dtype=fg.cfloat), fg.ones(2, dtype=fg.float64)]), fg.complex128),
    (lambda: fg.full((2,), 1j), fg.complex64),
    (lambda: fg.tensor([1, 2.5, 1j]), fg.complex64),
]


@pytest.mark.parametrize("make,dtype", PROMOTIONS)
def test_promotion_is_pytorchs(make, dtype):
    assert make().dtype is dtype


# -------------------------------------------------------------- printing

REPRS = [
    (lambda: fg.tensor([1 + 2j, 3.5 - 4j]), "tensor([1.0000+2.j, 3.5000-4.j])"),
    (
        lambda: fg.tensor([[1 + 2j, 3.5 - 4j], [0j, -1e-5 + 1e5j]]),
        "tensor([[ 1.0000e+00+2.0000e+00j,  3.5000e+00-4.0000e+00j],\n"
        "        [ 0.0000e+00+0.0000e+00j, -1.0000e-05+1.0000e+05j]])",
    ),
    (lambda: fg.tensor(1 + 2j), "tensor(1.+2.j)"),
    (
        lambda: fg.tensor([1 + 2j], dtype=fg.complex128),
        "tensor([1.+2.j], dtype=fusegrad.complex128)",
    ),
    (
        lambda: fg.tensor([1 + 2j, -3 + 0.5j], requires_grad=True),
        "tensor([ 1.+2.0000j, -3.+0.5000j], requires_grad=True)",
    ),
    (
        lambda: fg.tensor([1 + 2j, -3 + 0.5j], requires_grad=True) * 2,
        "tensor([ 2.+4.j, -6.+1.j], grad_fn=<MulBackward0>)",
    ),
    (lambda: fg.zeros(0, 3, dtype=fg.cfloat), "tensor([], size=(0, 3), dtype=fusegrad.complex64)"),
    (
        lambda: fg.arange(12).to(fg.cfloat) * (1 + 0.5j),
        "tensor([ 0.+0.0000j,  1.+0.5000j,  2.+1.0000j,  3.+1.5000j,  4.+2.0000j,  5.+2.5000j,\n"
        "         6.+3.0000j,  7.+3.5000j,  8.+4.0000j,  9.+4.5000j, 10.+5.0000j, 11.+5.5000j])",
    ),
]


@pytest.mark.parametrize("make,text", REPRS)
def test_repr_is_pytorchs(make, text):
    assert repr(make()) == text


# --------------------------------------------------------------- Python


def test_python_values():
    z = fg.tensor([2 + 7j, 6 - 1j])
    assert z.numpy().dtype == np.complex64 and z.tolist() == [2 + 7j, 6 - 1j]
    assert z[0].item() == 2 + 7j and complex(z[1]) == 6 - 1j and bool(z[1])
    assert f"{z[0]}" == "(2+7j)" and len(z) == 2 and [w.item() for w in z] == z.tolist()
    z.numpy()[0] = 9j  # numpy's array is the tensor's memory, as PyTorch's
    assert z[0].item() == 9j
    shared = np.array([1 + 2j, 3j], np.complex64)
    fg.from_numpy(shared)[1] = 5
    assert shared[1] == 5
    with pytest.raises(RuntimeError, match="cannot be converted to type double"):
        float(fg.tensor(1j))


def test_tensors_made_of_complex_tensors_and_numbers():
    assert fg.tensor(fg.tensor([1j])).tolist() == [1j]
    assert fg.tensor([fg.tensor(1j), fg.tensor(2)]).tolist() == [1j, 2]
    assert fg.tensor(np.array([1j])).dtype is fg.complex128
    assert fg.full_like(fg.tensor([1j, 2]), 3j).tolist() == [3j, 3j]
    with pytest.raises(RuntimeError, match="value cannot be converted to type float without"):
        fg.full_like(fg.ones(2), 1j)


def test_casts_to_real_discard_the_imaginary_part_with_pytorchs_warning():
    z = fg.tensor([1.5 + 2j, -2.7 + 0j])
    with pytest.warns(UserWarning, match="Casting complex values to real discards"):
        assert z.float().tolist() == [1.5, pytest.approx(-2.7)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert z.long().tolist() == [1, -2] and z.type_as(fg.ones(1)).dtype is fg.float32
    assert z.bool().tolist() == [True, True] and z.to(fg.cdouble).dtype is fg.complex128


def test_saving_pickling_and_copying():
    z = fg.tensor([[1 + 2j, 3 - 4j]], dtype=fg.cdouble, requires_grad=True)
    buffer = io.BytesIO()
    fg.save({"z": z}, buffer)
    buffer.seek(0)
    for copied in (fg.load(buffer)["z"], pickle.loads(pickle.dumps(z)), copy.deepcopy(z)):
        assert copied.dtype is fg.complex128 and copied.requires_grad
        assert copied.tolist() == z.tolist()


# --------------------------------------------------------------- views


def test_view_as_real_and_view_as_complex_are_views():
    z = fg.tensor([1 + 2j, 3 - 1j])
    fg.view_as_real(z)[0, 1] = 7
    z.real.mul_(2)
    assert z.tolist() == [2 + 7j, 6 - 1j] and z.imag.tolist() == [7, -1]
    t = fg.ones(3, 2)
    c = fg.view_as_complex(t)
    c[0] = 5 - 1j
    assert t.tolist() == [[5, -1], [1, 1], [1, 1]] and c._base is t


def test_view_as_real_passes_gradients():
    z = fg.tensor([1 + 2j, 3 - 1j], requires_grad=True)
    r = fg.view_as_real(z)
    assert not r.is_leaf and r.grad_fn.name() == "ViewAsRealBackward0"
    (r * fg.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    assert z.grad.tolist() == [1 + 2j, 3 + 4j]
    with pytest.raises(RuntimeError, match="view of a leaf Variable that requires grad"):
        r[0, 0] = 1


# ---------------------------------------------------------------- errors

ERRORS = [  # (call, PyTorch's exception and message)
    (lambda: fg.view_as_complex(fg.ones(3)), "Tensor must have a last dimension of size 2"),
    (
        lambda: fg.view_as_complex(fg.ones(3, 2, dtype=fg.int64)),
        "view_as_complex is only supported for half, float and double tensors, but got a "
        "tensor of scalar type: Long",
    ),
    (
        lambda: fg.view_as_complex(fg.ones(2, 3).t()),
        "Tensor must have a last dimension with stride 1",
    ),
    (
        lambda: fg.view_as_complex(fg.ones(4, 4)[::2, 1:3]),
        "Tensor must have a storage_offset divisible by 2",
    ),
    (lambda: fg.view_as_real(fg.ones(2)), "view_as_real is only supported for complex tensors"),
    (lambda: fg.ones(2).imag, "imag is not implemented for tensors with non-complex dtypes."),
    (
        lambda: fg.polar(fg.ones(2), fg.zeros(2, dtype=fg.float64)),
        "Expected object of scalar type Float but got scalar type Double for second argument",
    ),
    (
        lambda: fg.complex(fg.ones(2, dtype=fg.int64), fg.zeros(2, dtype=fg.int64)),
        "Expected both inputs to be Half, Float or Double tensors but got Long and Long",
    ),
    (
        lambda: fg.ones(2, 2, dtype=fg.cfloat) @ fg.ones(2, 2),
        "expected m1 and m2 to have the same dtype, but got: c10::complex<float> != float",
    ),
    (lambda: fg.tensor([1j]).backward(), "element 0 of tensors does not require grad"),
    (
        lambda: fg.fft.rfft(fg.ones(4, dtype=fg.cfloat)),
        "rfft expects a real input tensor, but got ComplexFloat",
    ),
    (lambda: fg.fft.rfft(fg.ones(4), norm="foo"), 'Invalid normalization mode: "foo"'),
    (
        lambda: fg.fft.irfft(fg.ones(1, dtype=fg.cfloat)),
        r"Invalid number of data points \(0\) specified",
    ),
    (lambda: fg.stft(fg.ones(100), 16), "stft requires the return_complex parameter be given"),
    (lambda: fg.istft(fg.ones(9, 26), 16), "istft requires a complex-valued input tensor"),
]


@pytest.mark.parametrize("call,message", ERRORS)
def test_errors_are_pytorchs(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


# ops with no complex implementation refuse complex tensors, naming the op
# where they are its methods or functions (a regular expression)
REFUSED = [
    (lambda z: z.sigmoid(), "sigmoid is not implemented for complex tensors"),
    (lambda z: z.max(), "max is not implemented for complex tensors"),
    (lambda z: z.cumsum(0), "cumsum is not implemented for complex tensors"),
    (lambda z: z < 1, "__lt__ is not implemented for complex tensors"),
    (lambda z: fg.relu(z), "not implemented for complex tensors .*applies relu"),
    (lambda z: fg.maximum(fg.ones(2), z), "not implemented for complex tensors"),
    (lambda z: fg.nn.functional.linear(z, fg.ones(2, 2)), "complex64 != float"),
]


@pytest.mark.parametrize("call,message", REFUSED)
def test_ops_without_complex_numbers_refuse_them(call, message):
    with pytest.raises(RuntimeError, match=message):
        call(fg.tensor([1 + 1j, 2j]))
