"""``fusegrad.fft``'s discrete Fourier transforms, and the short-time ones
``fusegrad.stft`` and ``fusegrad.istft`` that audio front ends compute.

A DFT is a product with the DFT matrix, made of real primitives on complex
tensors' pairs (eager/complex_tensor.py), so it is exact to rounding,
differentiable (the gradient is the transposed product: PyTorch's) and
compiles like any product. A long transform of composite length n = n1 n2
is Cooley and Tukey's split, applied again to its parts: n2 transforms of
length n1, a product with twiddle factors, n1 transforms of length n2, so
no matrix is larger than the parts' (a second of 16 kHz audio: 128 x 125).
Only a long prime length needs its whole n x n matrix, refused above
``_LONGEST_PRIME``. The real transforms compute half a spectrum:
``rfft`` as products with that half of the matrix, ``irfft`` as the
inverse of the whole Hermitian spectrum, which ignores the imaginary parts
of the first (and for even n the middle) frequency, as PyTorch's does.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from .eager import creation, ops
from .eager.autocast_policy import autocasts
from .eager.complex_functions import cat, complex_of_parts, to_complex, view_as_real
from .eager.complex_tensor import ComplexTensor, matmul, planes
from .eager.ops.arguments import _to_float, as_tensor_arg
from .eager.tensor import Tensor, constant_array, recording
from .ir import dtypes
from .ir import primitives as P
from .nn import functional as F

__all__ = [
    "fft",
    "ifft",
    "rfft",
    "irfft",
    "fft2",
    "ifft2",
    "rfft2",
    "irfft2",
    "fftn",
    "ifftn",
    "rfftn",
    "irfftn",
    "fftfreq",
    "rfftfreq",
    "fftshift",
    "ifftshift",
]

_DIRECT = 512  # a transform this long or shorter is one product with its matrix
_LONGEST_PRIME = 2048  # the longest transform whose whole matrix is made


# ---------------------------------------------------------------- matrices


def _twiddles(rows: int, columns: int, n: int, inverse: bool, dtype) -> ComplexTensor:
    """exp(-+2 pi i j k / n) for j < rows, k < columns: the DFT matrix, or a
    split transform's twiddle factors. Its pair is a view of the constant
    planes (real parts, imaginary parts), which products read whole."""
    planar = _planar_twiddles(rows, columns, n, inverse, dtype.to_real())
    return ComplexTensor._of(P.transpose(planar, perm=(1, 2, 0)))


@functools.lru_cache(maxsize=64)
def _planar_twiddles(rows: int, columns: int, n: int, inverse: bool, parts) -> Tensor:
    """j k is reduced modulo n exactly before it becomes an angle, so large
    products lose no digits."""
    j, k = np.arange(rows)[:, None], np.arange(columns)[None, :]
    angle = 2 * np.pi * ((j * k) % n) / n
    sign = 1.0 if inverse else -1.0
    return constant_array(np.stack([np.cos(angle), sign * np.sin(angle)]), parts)


def _divisor(n: int):
    """n's largest divisor up to its square root, None for a prime."""
    for d in range(math.isqrt(n), 1, -1):
        if n % d == 0:
            return d
    return None


def _check_prime_length(n: int) -> None:
    if n > _LONGEST_PRIME:
        raise NotImplementedError(
            f"fusegrad: a DFT of prime length {n} is a product with its {n} x {n} matrix, "
            f"made up to length {_LONGEST_PRIME}; pad the signal to a composite length"
        )


def _dft(z: ComplexTensor, inverse: bool) -> ComplexTensor:
    """The unnormalized DFT of ``z`` along its last dimension (exp(+...) for
    the inverse)."""
    n = z.shape[-1]
    n1 = _divisor(n) if n > _DIRECT else None
    if n1 is None:
        if n > _DIRECT:
            _check_prime_length(n)
        return matmul(z, _twiddles(n, n, n, inverse, z.dtype))
    n2, batch = n // n1, z.shape[:-1]
    columns = z.reshape(*batch, n1, n2).transpose(-1, -2)  # [b, a] = z[a n2 + b]
    inner = _dft(columns, inverse) * _twiddles(n2, n1, n, inverse, z.dtype)  # [b, k1]
    outer = _dft(inner.transpose(-1, -2), inverse)  # [k1, k2]
    return outer.transpose(-1, -2).reshape(*batch, n)  # X[k2 n1 + k1]


def _rdft(x: Tensor) -> ComplexTensor:
    """The first n // 2 + 1 frequencies of the DFT of real ``x`` along its
    last dimension (of length n)."""
    n = x.shape[-1]
    half = n // 2 + 1
    if n > _DIRECT and _divisor(n):
        return _dft(to_complex(x, x.dtype.to_complex()), False)[..., :half]
    if n > _DIRECT:
        _check_prime_length(n)
    real, imag = planes(_twiddles(n, half, n, False, x.dtype.to_complex()))
    return complex_of_parts(ops.matmul(x, real), ops.matmul(x, imag))


# ------------------------------------------------------------- arguments


def _scale(n: int, norm, inverse: bool) -> float:
    """The factor of a transform of length n under ``norm``: "backward"
    (None) scales the inverse by 1/n, "forward" the forward one, "ortho"
    both by 1/sqrt(n)."""
    if norm not in (None, "backward", "ortho", "forward"):
        raise RuntimeError(f'Invalid normalization mode: "{norm}"')
    if norm == "ortho":
        return 1 / math.sqrt(n)
    return 1 / n if (norm == "forward") != inverse else 1.0


def _scaled(t, n: int, norm, inverse: bool):
    factor = _scale(n, norm, inverse)
    return t if factor == 1.0 else t * factor


def _check_length(n) -> None:
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")


def _resized(t, n: int):
    """``t`` cut or zero-padded to length n along its last dimension."""
    _check_length(n)
    length = t.shape[-1]
    if n < length:
        return t[..., :n]
    if n > length:
        parts = t.dtype.to_real()
        zeros = creation.zeros(*t.shape[:-1], n - length, dtype=parts)
        return cat([t, zeros], -1) if isinstance(t, ComplexTensor) else ops.cat([t, zeros], -1)
    return t


def _complex(input) -> ComplexTensor:
    input = as_tensor_arg(input)
    if isinstance(input, ComplexTensor):
        return input
    real = _to_float(input)
    return to_complex(real, real.dtype.to_complex())


def _on_last(transform, t, dim: int):
    """``transform`` applied along ``dim`` (moved last and back)."""
    last = t.ndim - 1
    dim = dim % t.ndim if t.ndim else 0
    if dim == last:
        return transform(t)
    return transform(t.movedim(dim, -1)).movedim(-1, dim)


# ------------------------------------------------------- one dimension


def fft(input, n=None, dim=-1, norm=None) -> ComplexTensor:
    def transform(z):
        length = z.shape[-1] if n is None else n
        return _scaled(_dft(_resized(z, length), False), length, norm, False)

    return _on_last(transform, _complex(input), dim)


def ifft(input, n=None, dim=-1, norm=None) -> ComplexTensor:
    def transform(z):
        length = z.shape[-1] if n is None else n
        return _scaled(_dft(_resized(z, length), True), length, norm, True)

    return _on_last(transform, _complex(input), dim)


def rfft(input, n=None, dim=-1, norm=None) -> ComplexTensor:
    input = as_tensor_arg(input)
    if isinstance(input, ComplexTensor):
        raise RuntimeError(f"rfft expects a real input tensor, but got {input.dtype.scalar_name}")

    def transform(x):
        length = x.shape[-1] if n is None else n
        return _scaled(_rdft(_resized(x, length)), length, norm, False)

    return _on_last(transform, _to_float(input), dim)


def irfft(input, n=None, dim=-1, norm=None) -> Tensor:
    """The real signal of length n (default 2 (m - 1)) whose spectrum's first
    m frequencies are ``input``: the inverse of the Hermitian spectrum they
    make (the other frequencies their mirrored conjugates)."""

    def transform(z):
        length = 2 * (z.shape[-1] - 1) if n is None else n
        _check_length(length)
        half = _resized(z, length // 2 + 1)
        mirrored = half[..., 1 : length - length // 2].flip(-1).conj()
        signal = _dft(cat([half, mirrored], -1), True).real
        return _scaled(signal, length, norm, True)

    return _on_last(transform, _complex(input), dim)


# ------------------------------------------------------ several dimensions


def _dims_and_sizes(input, s, dim, last_halved=False) -> tuple:
    """The dimensions an n-dimensional transform runs along and its lengths
    there (``last_halved``: irfftn's last, 2 (m - 1) by default)."""
    if dim is None:
        dim = range(-len(s), 0) if s is not None else range(input.ndim)
    dims = [d % input.ndim for d in ([dim] if isinstance(dim, int) else dim)]
    if s is None:
        s = [input.shape[d] for d in dims]
        if last_halved:
            s[-1] = 2 * (s[-1] - 1)
    if len(s) != len(dims):
        raise RuntimeError("When given, dim and shape arguments must have the same length")
    return dims, list(s)


def fftn(input, s=None, dim=None, norm=None) -> ComplexTensor:
    out = _complex(input)
    for d, n in zip(*_dims_and_sizes(out, s, dim)):
        out = fft(out, n, d, norm)
    return out


def ifftn(input, s=None, dim=None, norm=None) -> ComplexTensor:
    out = _complex(input)
    for d, n in zip(*_dims_and_sizes(out, s, dim)):
        out = ifft(out, n, d, norm)
    return out


def rfftn(input, s=None, dim=None, norm=None) -> ComplexTensor:
    """rfft along the last of the dimensions, then fft along the others."""
    dims, sizes = _dims_and_sizes(as_tensor_arg(input), s, dim)
    out = rfft(input, sizes[-1], dims[-1], norm)
    for d, n in zip(dims[:-1], sizes[:-1]):
        out = fft(out, n, d, norm)
    return out


def irfftn(input, s=None, dim=None, norm=None) -> Tensor:
    """ifft along all but the last of the dimensions, then irfft along it."""
    out = _complex(input)
    dims, sizes = _dims_and_sizes(out, s, dim, last_halved=True)
    for d, n in zip(dims[:-1], sizes[:-1]):
        out = ifft(out, n, d, norm)
    return irfft(out, sizes[-1], dims[-1], norm)


def fft2(input, s=None, dim=(-2, -1), norm=None) -> ComplexTensor:
    return fftn(input, s, dim, norm)


def ifft2(input, s=None, dim=(-2, -1), norm=None) -> ComplexTensor:
    return ifftn(input, s, dim, norm)


def rfft2(input, s=None, dim=(-2, -1), norm=None) -> ComplexTensor:
    return rfftn(input, s, dim, norm)


def irfft2(input, s=None, dim=(-2, -1), norm=None) -> Tensor:
    return irfftn(input, s, dim, norm)


# ------------------------------------------------------------- helpers


def fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """The frequencies of an n-point DFT's outputs, in cycles per ``d``."""
    dtype = dtypes.default_float() if dtype is None else dtype
    values = np.fft.fftfreq(n, d)
    return creation.tensor(values, dtype=dtype, device=device, requires_grad=requires_grad)


def rfftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """The frequencies of an n-point rfft's outputs, in cycles per ``d``."""
    dtype = dtypes.default_float() if dtype is None else dtype
    values = np.fft.rfftfreq(n, d)
    return creation.tensor(values, dtype=dtype, device=device, requires_grad=requires_grad)


def _shifted(input, dim, sign: int):
    input = as_tensor_arg(input)
    dims = range(input.ndim) if dim is None else [dim] if isinstance(dim, int) else dim
    dims = [d % input.ndim for d in dims]
    return input.roll([sign * (input.shape[d] // 2) for d in dims], dims)


def fftshift(input, dim=None):
    """The zero frequency moved to the middle."""
    return _shifted(input, dim, 1)


def ifftshift(input, dim=None):
    return _shifted(input, dim, -1)


# ---------------------------------------------------- short-time transforms


_NO_WINDOW = (
    "A window was not provided. A rectangular window will be applied,which is known to cause "
    "spectral leakage. Other windows such as torch.hann_window or torch.hamming_window are "
    "recommended to reduce spectral leakage.To suppress this warning and use a rectangular "
    "window, explicitly set `window=torch.ones(n_fft, device=<device>)`."
)


def _padded_window(window, win_length: int, n_fft: int, dtype):
    """The window (ones if None) zero-padded to n_fft, centered as PyTorch centers it."""
    if window is None:
        window = creation.ones(win_length, dtype=dtype)
    elif window.ndim != 1 or window.shape[0] != win_length:
        raise RuntimeError(
            "stft: expected a 1D window tensor of size equal to "
            f"win_length={win_length}, but got window with size {list(window.shape)}"
        )
    left = (n_fft - win_length) // 2
    return F.pad(window, (left, n_fft - win_length - left)) if win_length < n_fft else window


def _frames(x, n_fft: int, hop: int):
    """(batch, frames, n_fft): every n_fft samples, hop apart."""
    if isinstance(x, ComplexTensor):  # the pair's windows, its parts last again
        return ComplexTensor._of(x._pair.unfold(-2, n_fft, hop).movedim(-2, -1))
    return x.unfold(-1, n_fft, hop)


def _centered(x, padding: int, mode: str):
    """(batch, length) padded by ``padding`` at both ends as ``F.pad`` pads."""
    if isinstance(x, ComplexTensor):  # the pair's samples as the padded dimension
        padded = F.pad(x._pair.transpose(-1, -2), (padding, padding), mode)
        return ComplexTensor._of(padded.transpose(-1, -2))
    return F.pad(x.unsqueeze(1), (padding, padding), mode).squeeze(1)


def _check_stft(n_fft: int, hop: int, win_length: int, length: int) -> None:
    if not 0 < n_fft <= length:
        raise RuntimeError(f"stft: expected 0 < n_fft < {length}, but got n_fft={n_fft}")
    if hop <= 0:
        raise RuntimeError(f"stft: expected hop_length > 0, but got hop_length={hop}")
    if not 0 < win_length <= n_fft:
        raise RuntimeError(
            f"stft: expected 0 < win_length <= n_fft, but got win_length={win_length}"
        )


@autocasts("stft")
def stft(
    input,
    n_fft,
    hop_length=None,
    win_length=None,
    window=None,
    center=True,
    pad_mode="reflect",
    normalized=False,
    onesided=None,
    return_complex=None,
    align_to_window=None,
):
    """The DFTs of windowed frames of the signal ``input`` (one, or a batch
    of rows): (frequencies, frames), per row."""
    input = as_tensor_arg(input)
    complex_input = isinstance(input, ComplexTensor) or isinstance(window, ComplexTensor)
    if return_complex is None and not complex_input:
        raise RuntimeError(
            "stft requires the return_complex parameter be given for real inputs, and will "
            "further require that return_complex=True in a future PyTorch release."
        )
    if input.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got a {input.ndim}D tensor")
    hop = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    if window is None:
        warnings.warn(_NO_WINDOW, stacklevel=2)
    x = input if isinstance(input, ComplexTensor) else _to_float(input)
    x = x.unsqueeze(0) if input.ndim == 1 else x
    if center:
        x = _centered(x, n_fft // 2, pad_mode)
    _check_stft(n_fft, hop, win_length, x.shape[-1])
    frames = _frames(x, n_fft, hop) * _padded_window(window, win_length, n_fft, x.dtype.to_real())
    if complex_input and onesided:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    if onesided is False or complex_input:
        spectrum = _dft(_complex(frames), False)
    else:
        spectrum = _rdft(frames)
    spectrum = _scaled(spectrum, n_fft, "ortho" if normalized else None, False).transpose(-1, -2)
    spectrum = spectrum.squeeze(0) if input.ndim == 1 else spectrum
    if return_complex or (return_complex is None and complex_input):
        return spectrum
    warnings.warn(
        "stft with return_complex=False is deprecated. In a future pytorch release, stft will "
        "return complex tensors for all inputs, and return_complex=False will raise an error.\n"
        "Note: you can still call torch.view_as_real on the complex output to recover the old "
        "return format.",
        stacklevel=2,
    )
    return view_as_real(spectrum)


def istft(
    input,
    n_fft,
    hop_length=None,
    win_length=None,
    window=None,
    center=True,
    normalized=False,
    onesided=None,
    length=None,
    return_complex=False,
):
    """The signal whose ``stft`` (one-sided) is ``input``: each frame's
    inverse DFT, windowed, added where the frames overlap and divided by the
    window's squares added so (the least-squares estimate, as PyTorch's)."""
    if not isinstance(input, ComplexTensor):
        raise RuntimeError(
            "istft requires a complex-valued input tensor matching the output from stft with "
            "return_complex=True."
        )
    if return_complex or onesided is False:
        raise NotImplementedError("fusegrad: istft computes real signals from one-sided spectra")
    hop = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    spectrum = input.unsqueeze(0) if input.ndim == 2 else input
    if spectrum.shape[-2] != n_fft // 2 + 1:
        raise RuntimeError(
            f"istft: expected the frequency dimension (3rd to the last) of the input tensor to "
            f"match n_fft // 2 + 1 = {n_fft // 2 + 1}, but got {spectrum.shape[-2]}"
        )
    frames = irfft(spectrum.transpose(-1, -2), n_fft)  # (batch, frames, n_fft)
    frames = frames * math.sqrt(n_fft) if normalized else frames
    window = _padded_window(window, win_length, n_fft, frames.dtype)
    signal = _overlap_added(frames * window, hop)
    envelope = _overlap_added((window * window).expand(1, frames.shape[-2], n_fft), hop)
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else signal.shape[-1] - start
    signal, envelope = signal[..., start:end], envelope[..., start:end]
    if recording.trace is None and bool((envelope.abs() < 1e-11).any()):
        raise RuntimeError(f"istft: window overlap add min: {envelope.abs().min().item():g}")
    signal = signal / envelope
    if length is not None and signal.shape[-1] < length:
        signal = F.pad(signal, (0, length - signal.shape[-1]))
    return signal.squeeze(0) if input.ndim == 2 else signal


def _overlap_added(frames, hop: int):
    """(batch, frames, n) frames added into (batch, length), ``hop`` apart."""
    batch, count, n = frames.shape
    total = n + hop * (count - 1)
    added = F.fold(frames.transpose(-1, -2), (1, total), (1, n), stride=(1, hop))
    return added.reshape(batch, total)
