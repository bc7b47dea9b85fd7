"""fusegrad against its peers on the performance issue's workloads W1-W6.

Every workload is written once against a small library interface
(``lib.tanh``, ``functional.layer_norm``, ...) and run by fusegrad eager,
fusegrad.jit, and — when installed — PyTorch eager, torch.compile and
jax.jit; numpy by hand (the gradient written out) runs beside them. Each
implementation's gradient is checked against float64 numpy before it is
timed; then all of a workload's implementations run interleaved in one
process and the medians are printed with two ratios: to numpy by hand and
to the best of torch.compile and JAX. Every implementation uses the cores it
uses by default (fusegrad and PyTorch: all of them).

The bandwidth limit of a workload is the time numpy takes to copy as many
bytes as an ideal kernel moves (reading the inputs once, writing the
gradients once). W3's reference is instead the time of its matrix products
alone in numpy.

    python benchmarks/peers.py [--only W1,W3] [--repeat 7] [--no-torch-compile]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
import types

import numpy as np

import fusegrad as fg
import fusegrad.nn.functional as F

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # the comparisons are optional
    torch = None
try:
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
except ImportError:
    jax = None


# --------------------------------------------------------------- workloads


def w1(lib, functional, x):
    return (lib.tanh(x) * lib.sigmoid(x) + lib.exp(-x * x) * 0.5 + lib.log1p(x * x)).sum()


def w1_numpy(x):
    t, s, e = np.tanh(x), 1 / (1 + np.exp(-x)), np.exp(-x * x)
    loss = (t * s + e * 0.5 + np.log1p(x * x)).sum()
    return loss, [(1 - t * t) * s + t * s * (1 - s) - x * e + 2 * x / (1 + x * x)]


def w1_hessian_diagonal(x):
    """The second derivative of W1's summand: its Hessian is diagonal."""
    t, s, e = np.tanh(x), 1 / (1 + np.exp(-x)), np.exp(-x * x)
    dt, ds = 1 - t * t, s * (1 - s)
    return (
        -2 * t * dt * s
        + 2 * dt * ds
        + t * ds * (1 - 2 * s)
        + (2 * x * x - 1) * e
        + 2 * (1 - x * x) / (1 + x * x) ** 2
    )


def _erf(x):
    """Abramowitz and Stegun 7.1.26 (error below 1.5e-7): numpy has no erf."""
    t = 1 / (1 + 0.3275911 * np.abs(x))
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return np.sign(x) * (1 - poly * np.exp(-x * x))


def w2_numpy(x, g, b, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    centered = x - mean
    rstd = 1 / np.sqrt((centered * centered).mean(-1, keepdims=True) + eps)
    normed = centered * rstd
    y = normed * g + b
    cdf = 0.5 * (1 + _erf(y / math.sqrt(2)))
    loss = (y * cdf).sum()
    gy = cdf + y * np.exp(-0.5 * y * y) / math.sqrt(2 * math.pi)
    g_normed = gy * g
    gx = rstd * (
        g_normed
        - g_normed.mean(-1, keepdims=True)
        - normed * (g_normed * normed).mean(-1, keepdims=True)
    )
    return loss, gx, (gy * normed).sum(0), gy.sum(0)


def w2(lib, functional, x, g, b):
    return functional.gelu(functional.layer_norm(x, (x.shape[-1],)) * g + b).sum()


def w3_numpy(x, labels, w1, b1, w2_, b2, w3, b3):
    h1 = np.tanh(x @ w1 + b1)
    h2 = np.tanh(h1 @ w2_ + b2)
    logits = h2 @ w3 + b3
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    rows = np.arange(len(labels))
    loss = -log_probs[rows, labels].mean()
    g_logits = np.exp(log_probs)
    g_logits[rows, labels] -= 1
    g_logits /= len(labels)
    g_h2 = (g_logits @ w3.T) * (1 - h2 * h2)
    g_h1 = (g_h2 @ w2_.T) * (1 - h1 * h1)
    grads = (x.T @ g_h1, g_h1.sum(0), h1.T @ g_h2, g_h2.sum(0), h2.T @ g_logits, g_logits.sum(0))
    return loss, *grads


def w3_matmuls(x, w1, w2_, w3, h1, h2, g_logits):
    """The products W3 cannot avoid: three forward, five backward."""
    x @ w1
    h1 @ w2_
    h2 @ w3
    g = g_logits @ w3.T
    h2.T @ g_logits
    g = g @ w2_.T
    h1.T @ g
    x.T @ g


def w3(lib, functional, x, labels, w1_, b1, w2_, b2, w3_, b3):
    h = lib.tanh(x @ w1_ + b1)
    h = lib.tanh(h @ w2_ + b2)
    return functional.cross_entropy(h @ w3_ + b3, labels)


def thirty_ops(lib, x, y):
    """30 elementwise ops and a final sum: the shape of a small model's inner loop."""
    a = lib.tanh(x * y + 1.0)
    b = lib.sigmoid(a - x) * 0.5
    c = lib.exp(-(b * b)) + lib.log1p(x * x)
    d = lib.sin(c) * lib.cos(y) - a / (1.0 + b * b)
    e = lib.sqrt(d * d + 1.0) * lib.tanh(c + d)
    f = (e - a) * (e + b) + lib.exp(-(d * d)) * 0.25
    g = lib.maximum(f, a) + lib.minimum(e, b) * 2.0
    return (g * g + f).sum()


def w4(lib, functional, x, y):
    return thirty_ops(lib, x, y)


def w4_numpy_value(x, y):
    numpy_lib = types.SimpleNamespace(
        tanh=np.tanh, sigmoid=lambda v: 1 / (1 + np.exp(-v)), exp=np.exp, log1p=np.log1p,
        sin=np.sin, cos=np.cos, sqrt=np.sqrt, maximum=np.maximum, minimum=np.minimum,
    )  # fmt: skip
    return thirty_ops(numpy_lib, x, y)


def w4_numpy_gradient(x, y):
    """Central differences in float64: 16 elements, so 32 evaluations."""
    x = x.astype(np.float64)
    grad = np.empty_like(x)
    for i in range(x.size):
        step = np.zeros_like(x)
        step[i] = 1e-6
        grad[i] = (w4_numpy_value(x + step, y) - w4_numpy_value(x - step, y)) / 2e-6
    return grad


# ---------------------------------------------- the peers' library interface

if jax is not None:

    def _jax_layer_norm(x, shape, eps=1e-5):
        mean = x.mean(-1, keepdims=True)
        centered = x - mean
        return centered / jnp.sqrt((centered * centered).mean(-1, keepdims=True) + eps)

    def _jax_cross_entropy(logits, labels):
        log_probs = jax.nn.log_softmax(logits)
        return -jnp.take_along_axis(log_probs, labels[:, None], axis=1).mean()

    JAX_LIB = types.SimpleNamespace(
        tanh=jnp.tanh, sigmoid=jax.nn.sigmoid, exp=jnp.exp, log1p=jnp.log1p, sin=jnp.sin,
        cos=jnp.cos, sqrt=jnp.sqrt, maximum=jnp.maximum, minimum=jnp.minimum,
    )  # fmt: skip
    JAX_FUNCTIONAL = types.SimpleNamespace(
        gelu=lambda x: jax.nn.gelu(x, approximate=False),
        layer_norm=_jax_layer_norm,
        cross_entropy=_jax_cross_entropy,
    )


def _leaves(lib, arrays, wrt):
    """Fresh tensors of ``lib`` on the arrays, those in ``wrt`` requiring grad."""
    tensors = [lib.from_numpy(a) for a in arrays]
    for i in wrt:
        tensors[i].requires_grad_()
    return tensors


def _fusegrad_runs(workload, arrays, wrt, hvp):
    """fusegrad eager and jit: {name: run() -> gradient arrays}."""

    def leaves():
        return _leaves(fg, arrays, wrt)

    def eager():
        tensors = leaves()
        if hvp:
            (grad,) = fg.autograd.grad(workload(fg, F, tensors[0]), tensors[0], create_graph=True)
            return fg.autograd.grad((grad * tensors[1]).sum(), tensors[0])
        workload(fg, F, *tensors).backward()
        return [tensors[i].grad for i in wrt]

    inputs = [fg.from_numpy(a) for a in arrays]
    if hvp:
        gradient = fg.grad(lambda x: workload(fg, F, x))
        jitted = fg.jit(fg.grad(lambda x, v: (gradient(x) * v).sum()))

        def jit():
            return [jitted(*inputs)]
    else:
        jitted = fg.jit(fg.value_and_grad(lambda *t: workload(fg, F, *t), argnums=tuple(wrt)))

        def jit():
            return jitted(*inputs)[1]

    runs = {"fusegrad eager": eager, "fusegrad jit": jit}
    if not hvp:  # compiled forward, backward() outside: how torch.compile is used
        forward = fg.jit(lambda *t: workload(fg, F, *t))

        def backward_outside():
            tensors = leaves()
            forward(*tensors).backward()
            return [tensors[i].grad for i in wrt]

        runs["fusegrad jit, bwd out"] = backward_outside
    return runs


def _torch_runs(workload, arrays, wrt, hvp, compile_too):
    runs = {}

    def leaves():
        return _leaves(torch, arrays, wrt)

    def eager_step(fn):
        def run():
            tensors = leaves()
            if hvp:
                (grad,) = torch.autograd.grad(fn(tensors[0]), tensors[0], create_graph=True)
                return torch.autograd.grad((grad * tensors[1]).sum(), tensors[0])
            fn(*tensors).backward()
            return [tensors[i].grad for i in wrt]

        return run

    def forward(*tensors):
        return workload(torch, TF, *tensors)

    runs["torch eager"] = eager_step(forward)
    if compile_too:
        if hvp:
            gradient = torch.func.grad(forward)
            product = torch.compile(lambda x, v: torch.func.jvp(gradient, (x,), (v,))[1])
            runs["torch.compile"] = lambda: [product(*[torch.from_numpy(a) for a in arrays])]
        else:
            runs["torch.compile"] = eager_step(torch.compile(forward))
    return runs


def _jax_runs(workload, arrays, wrt, hvp):
    def forward(*values):
        return workload(JAX_LIB, JAX_FUNCTIONAL, *values)

    if hvp:
        gradient = jax.grad(forward)
        compiled = jax.jit(lambda x, v: jax.jvp(gradient, (x,), (v,))[1])
    else:
        compiled = jax.jit(jax.value_and_grad(forward, argnums=tuple(wrt)))
    device = [jnp.asarray(a) for a in arrays]

    def run():
        result = compiled(*device)
        grads = [result] if hvp else result[1]
        return jax.block_until_ready(grads)

    return {"JAX jit": run}


# ------------------------------------------------------------------ harness


def _as_numpy(value):
    if hasattr(value, "detach"):
        value = value.detach()
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value, np.float64)


def _check(name, grads, reference, tolerance):
    for got, want in zip(grads, reference):
        got = _as_numpy(got)
        error = np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-12)
        assert error < tolerance, f"{name}: gradient off by {error:.2e}"


def _time(runs: dict, repeat: int, number: int) -> dict:
    samples = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            for _ in range(number):
                run()
            samples[name].append((time.perf_counter() - start) / number)
    return {name: statistics.median(s) * 1e3 for name, s in samples.items()}


def _copy_of(nbytes: int):
    """A numpy copy moving ``nbytes`` (half read, half written)."""
    source = np.ones(nbytes // 2, np.uint8)
    return lambda: source.copy()


def workloads(rng) -> dict:
    """{name: spec}: the arrays, which are differentiated, numpy by hand and
    the float64 reference gradients, the bytes an ideal kernel moves."""
    specs = {}
    x = rng.standard_normal(4_000_000).astype(np.float32)
    specs["W1"] = dict(
        title="sum(tanh(x)*sigmoid(x) + exp(-x*x)*0.5 + log1p(x*x)), value+grad, 4M float32",
        workload=w1, arrays=[x], wrt=[0], numpy=lambda: w1_numpy(x)[1],
        reference=w1_numpy(x.astype(np.float64))[1], moved=8 * x.size, target=0.5,
    )  # fmt: skip
    x2 = rng.standard_normal((4096, 1024)).astype(np.float32)
    g = (1 + 0.1 * rng.standard_normal(1024)).astype(np.float32)
    b = (0.1 * rng.standard_normal(1024)).astype(np.float32)
    specs["W2"] = dict(
        title="sum(gelu(layer_norm(x)*g + b)), grads wrt x, g, b; x 4096x1024 float32",
        workload=w2, arrays=[x2, g, b], wrt=[0, 1, 2], numpy=lambda: w2_numpy(x2, g, b)[1:],
        reference=w2_numpy(x2.astype(np.float64), g, b)[1:], moved=8 * x2.size, target=0.5,
    )  # fmt: skip
    batch = rng.standard_normal((256, 784)).astype(np.float32)
    labels = rng.integers(0, 10, 256)
    shapes = [(784, 512), (512,), (512, 512), (512,), (512, 10), (10,)]
    params = [(rng.standard_normal(s) * 0.05).astype(np.float32) for s in shapes]
    h1 = np.tanh(batch @ params[0])
    h2 = np.tanh(h1 @ params[2])
    g_logits = rng.standard_normal((256, 10)).astype(np.float32)
    specs["W3"] = dict(
        title="MLP 784-512-512-10, tanh, softmax cross-entropy, batch 256: loss + 6 grads",
        workload=w3, arrays=[batch, labels, *params], wrt=[2, 3, 4, 5, 6, 7],
        numpy=lambda: w3_numpy(batch, labels, *params)[1:],
        reference=w3_numpy(batch.astype(np.float64), labels, *params)[1:],
        reference_run=("numpy matmuls alone", lambda: w3_matmuls(
            batch, params[0], params[2], params[4], h1, h2, g_logits)),
    )  # fmt: skip
    x4, y4 = (rng.standard_normal(16).astype(np.float32) for _ in range(2))
    specs["W4"] = dict(
        title="a 30-op function of 16-float vectors, value+grad, per call",
        workload=w4, arrays=[x4, y4], wrt=[0], numpy=None,
        reference=[w4_numpy_gradient(x4, y4)], number=200, tolerance=1e-3, limit_us=10,
    )  # fmt: skip
    x5 = rng.standard_normal(1_000_000).astype(np.float32)
    v5 = rng.standard_normal(1_000_000).astype(np.float32)
    specs["W5"] = dict(
        title="Hessian-vector product of W1's loss, 1M float32",
        workload=w1, arrays=[x5, v5], wrt=[0], hvp=True,
        numpy=lambda: [w1_hessian_diagonal(x5) * v5],
        reference=[w1_hessian_diagonal(x5.astype(np.float64)) * v5], moved=12 * x5.size,
        target=0.5, peers=["JAX jit"],
    )  # fmt: skip
    x6 = rng.standard_normal(2_000_000)
    specs["W6"] = dict(
        title="W1 in float64, 2M",
        workload=w1, arrays=[x6], wrt=[0], numpy=lambda: w1_numpy(x6)[1],
        reference=w1_numpy(x6)[1], moved=16 * x6.size, target=0.6, tolerance=1e-9,
    )  # fmt: skip
    return specs


def run_workload(name, spec, repeat, compile_torch) -> None:
    arrays, wrt, hvp = spec["arrays"], spec["wrt"], spec.get("hvp", False)
    runs = {}
    if spec["numpy"] is not None:
        runs["numpy by hand"] = spec["numpy"]
    runs.update(_fusegrad_runs(spec["workload"], arrays, wrt, hvp))
    if torch is not None:
        runs.update(_torch_runs(spec["workload"], arrays, wrt, hvp, compile_torch))
    if jax is not None:
        runs.update(_jax_runs(spec["workload"], arrays, wrt, hvp))
    first_calls = {}
    for run_name, run in list(runs.items()):  # check, and warm up (traces, compiles)
        start = time.perf_counter()
        try:
            grads = run()
        except Exception as error:  # a peer that cannot run this workload
            print(f"  ({run_name} cannot run {name}: {type(error).__name__}: {error})")
            del runs[run_name]
            continue
        first_calls[run_name] = time.perf_counter() - start
        _check(run_name, grads, spec["reference"], spec.get("tolerance", 1e-3))
        run()
    if "reference_run" in spec:
        runs[spec["reference_run"][0]] = spec["reference_run"][1]
    if "moved" in spec:
        runs["bandwidth limit"] = _copy_of(spec["moved"])
    times = _time(runs, repeat, spec.get("number", 1))
    numpy_ms = times.get("numpy by hand")
    peer_names = spec.get("peers", ["torch.compile", "JAX jit"])
    peers = [times[p] for p in peer_names if p in times]
    best_peer = min(peers) if peers else None
    unit, scale = ("us", 1e3) if spec.get("number", 1) > 1 else ("ms", 1)
    print(f"{name}: {spec['title']} (medians of {repeat})")
    print(f"  {'':<22}{'median ' + unit:>12}{'vs numpy':>10}{'vs best peer':>14}  first call")
    for run_name, ms in times.items():
        ratio_numpy = f"{ms / numpy_ms:.2f}x" if numpy_ms else "-"
        ratio_peer = f"{ms / best_peer:.2f}x" if best_peer else "-"
        first = f"{first_calls[run_name]:.2f} s" if run_name in first_calls else ""
        print(f"  {run_name:<22}{ms * scale:12.2f}{ratio_numpy:>10}{ratio_peer:>14}  {first}")
    jit_ms = times["fusegrad jit"]
    if "reference_run" in spec:
        reference = times[spec["reference_run"][0]]
        print(
            f"  fusegrad jit / {spec['reference_run'][0]}: {jit_ms / reference:.2f}x (target 1.1x)"
        )
    elif best_peer and "target" in spec:
        verdict = "met" if jit_ms / best_peer <= spec["target"] else "missed"
        print(
            f"  fusegrad jit / best of {' and '.join(peer_names)}: {jit_ms / best_peer:.2f}x "
            f"(target {spec['target']}x: {verdict})"
        )
    if "limit_us" in spec:
        verdict = "met" if jit_ms * 1e3 <= spec["limit_us"] else "missed"
        print(
            f"  fusegrad jit: {jit_ms * 1e3:.1f} us per call "
            f"(target {spec['limit_us']} us: {verdict})"
        )
    if "moved" in spec:
        print(f"  fusegrad jit / bandwidth limit: {jit_ms / times['bandwidth limit']:.1f}x")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="W1,W2,W3,W4,W5,W6")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--no-torch-compile", action="store_true")
    args = parser.parse_args()
    specs = workloads(np.random.default_rng(0))
    for name in args.only.split(","):
        run_workload(name, specs[name], args.repeat, not args.no_torch_compile)


if __name__ == "__main__":
    main()
