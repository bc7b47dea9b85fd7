"""fusegrad against its peers on the performance issue's workloads W1-W8.

Every workload is written once against a small library interface
(``lib.tanh``, ``functional.layer_norm``, ...) and run by fusegrad eager,
fusegrad.jit, and — when installed — PyTorch eager, torch.compile and
jax.jit; numpy by hand (the gradient written out) runs beside them. Each
implementation's loss and gradients are checked against float64 numpy before
it is timed (W7's, a GPT too long to differentiate by hand, against fusegrad
eager in float64, which PyTorch and JAX then cross-check); then all of a
workload's implementations run interleaved in one process (in each round,
each implementation starts after the previous one's worker threads went
idle, and runs untimed first; see ``_time``) and the medians are printed with
two ratios: to numpy by hand and to the best peer (torch.compile
and JAX unless the workload names others). Every implementation uses the
cores it uses by default (fusegrad and PyTorch: all of them).

The bandwidth limit of a workload is the time numpy takes to copy as many
bytes as an ideal kernel moves (reading the inputs once, writing the
gradients once). The models W3, W7 and W8 are bounded instead by their matrix
products: the time of those alone, at the same shapes, forward and backward,
in numpy (and torch.mm), and their floating-point operations at the cores'
measured peak (``benchmarks/gemm.py``).

W3-bf16 and W7-bf16 are W3 and W7 under ``autocast("cpu", dtype=bfloat16)``, against
PyTorch's own CPU autocast (eager and torch.compile), checked against the float32
references within bfloat16's precision.

    python benchmarks/peers.py [--only W1,W3] [--repeat 7] [--no-torch-compile]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
import types

import numpy as np

import fusegrad as fg
import fusegrad.nn.functional as F
from fusegrad.codegen import packed_gemm as codegen_packed
from fusegrad.runtime import threads

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
    return loss, (1 - t * t) * s + t * s * (1 - s) - x * e + 2 * x / (1 + x * x)


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


def cross_entropy_numpy(logits, labels):
    """The mean cross-entropy and its gradient with respect to the logits."""
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    rows = np.arange(len(labels))
    g_logits = np.exp(log_probs)
    g_logits[rows, labels] -= 1
    return -log_probs[rows, labels].mean(), g_logits / len(labels)


def w3_numpy(x, labels, w1, b1, w2_, b2, w3, b3):
    h1 = np.tanh(x @ w1 + b1)
    h2 = np.tanh(h1 @ w2_ + b2)
    loss, g_logits = cross_entropy_numpy(h2 @ w3 + b3, labels)
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


def w3_products(batch: int) -> list:
    """W3's matrix products: (left shape, right shape, the left needs a gradient)."""
    return [
        ((batch, 784), (784, 512), False),  # the inputs need no gradient
        ((batch, 512), (512, 512), True),
        ((batch, 512), (512, 10), True),
    ]


def product_flops(products) -> int:
    """Floating-point operations of the products, forward and backward (as
    ``gemms_alone`` runs them): the bound of a step at the machine's peak."""
    total = 0
    for left, right, left_grad in products:
        items = math.prod(np.broadcast_shapes(left[:-2], right[:-2]))
        total += 2 * items * left[-2] * left[-1] * right[-1] * (3 if left_grad else 2)
    return total


def w3(lib, functional, x, labels, w1_, b1, w2_, b2, w3_, b3):
    h = lib.tanh(x @ w1_ + b1)
    h = lib.tanh(h @ w2_ + b2)
    return functional.cross_entropy(h @ w3_ + b3, labels)


def under_autocast(workload):
    """The workload in ``autocast("cpu", dtype=bfloat16)``: products in bfloat16 summed
    in float32, the loss in float32 (the library's autocast policy)."""

    def run(lib, functional, *arrays):
        with lib.autocast("cpu", dtype=lib.bfloat16):
            return workload(lib, functional, *arrays)

    return run


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


# W7: nanoGPT's model (github.com/karpathy/nanoGPT) at a small size, its weights
# passed flat, a linear layer's weight as (in, out)
GPT_LAYERS, GPT_HEADS, GPT_WIDTH, GPT_CONTEXT, GPT_BATCH, GPT_VOCAB = 2, 4, 128, 64, 16, 65
WEIGHTS_PER_BLOCK = 12  # two layer norms and four linear layers, each a weight and a bias


def gpt_block(lib, functional, x, mask, ln1_w, ln1_b, attn_w, attn_b, attn_proj_w, attn_proj_b,
              ln2_w, ln2_b, fc_w, fc_b, fc_proj_w, fc_proj_b):  # fmt: skip
    """Causal self-attention and a GELU MLP, each on a layer norm of the residual stream."""
    batch, steps, width = x.shape
    head = width // GPT_HEADS
    qkv = functional.layer_norm(x, (width,), ln1_w, ln1_b) @ attn_w + attn_b
    q, k, v = (
        qkv[..., i * width : (i + 1) * width].reshape(batch, steps, GPT_HEADS, head).swapaxes(1, 2)
        for i in range(3)
    )
    att = (q @ k.swapaxes(-2, -1)) * (1.0 / math.sqrt(head))
    # position t attends to positions 0..t only
    att = lib.masked_fill(att, mask[:, :, :steps, :steps] == 0, float("-inf"))
    y = (functional.softmax(att, dim=-1) @ v).swapaxes(1, 2).reshape(batch, steps, width)
    x = x + y @ attn_proj_w + attn_proj_b
    h = functional.gelu(functional.layer_norm(x, (width,), ln2_w, ln2_b) @ fc_w + fc_b)
    return x + h @ fc_proj_w + fc_proj_b


def w7(lib, functional, tokens, targets, mask, wte, wpe, ln_f_w, ln_f_b, *blocks):
    """nanoGPT's loss; the token embedding is tied to the output layer, as there."""
    x = wte[tokens] + wpe[: tokens.shape[1]]
    for i in range(0, len(blocks), WEIGHTS_PER_BLOCK):
        x = gpt_block(lib, functional, x, mask, *blocks[i : i + WEIGHTS_PER_BLOCK])
    logits = functional.layer_norm(x, (GPT_WIDTH,), ln_f_w, ln_f_b) @ wte.T
    return functional.cross_entropy(logits.reshape(-1, GPT_VOCAB), targets.reshape(-1))


def gpt_arrays(rng) -> list:
    """Token ids, the next tokens, the causal mask buffer and nanoGPT's initialization."""
    text = rng.integers(0, GPT_VOCAB, (GPT_BATCH, GPT_CONTEXT + 1))
    mask = np.tril(np.ones((GPT_CONTEXT, GPT_CONTEXT), np.float32))[None, None]
    width = GPT_WIDTH

    def normal(*shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def ones(n):
        return np.ones(n, np.float32)

    def zeros(n):
        return np.zeros(n, np.float32)

    # nanoGPT scales the projections into the residual stream down with the depth
    residual_std = 0.02 / math.sqrt(2 * GPT_LAYERS)
    arrays = [np.ascontiguousarray(text[:, :-1]), np.ascontiguousarray(text[:, 1:]), mask]
    arrays += [normal(GPT_VOCAB, width), normal(GPT_CONTEXT, width), ones(width), zeros(width)]
    for _ in range(GPT_LAYERS):
        arrays += [
            ones(width), zeros(width), normal(width, 3 * width), zeros(3 * width),
            normal(width, width, std=residual_std), zeros(width),
            ones(width), zeros(width), normal(width, 4 * width), zeros(4 * width),
            normal(4 * width, width, std=residual_std), zeros(width),
        ]  # fmt: skip
    return arrays


def gpt_products() -> list:
    """W7's matrix products: (left shape, right shape, the left needs a gradient)."""
    rows, width, context = GPT_BATCH * GPT_CONTEXT, GPT_WIDTH, GPT_CONTEXT
    heads, head = (GPT_BATCH, GPT_HEADS), GPT_WIDTH // GPT_HEADS
    block = [
        ((rows, width), (width, 3 * width), True),  # query, key, value
        (heads + (context, head), heads + (head, context), True),  # attention scores
        (heads + (context, context), heads + (context, head), True),  # their values
        ((rows, width), (width, width), True),
        ((rows, width), (width, 4 * width), True),
        ((rows, 4 * width), (4 * width, width), True),
    ]
    return block * GPT_LAYERS + [((rows, width), (width, GPT_VOCAB), True)]


# W8: LeNet-5, its linear layers' weights as (in, out)
LENET_BATCH = 64


def w8(lib, functional, images, labels, conv1_w, conv1_b, conv2_w, conv2_b,
       fc1_w, fc1_b, fc2_w, fc2_b, fc3_w, fc3_b):  # fmt: skip
    conv1 = functional.conv2d(images, conv1_w, conv1_b, padding=2)
    x = functional.max_pool2d(functional.relu(conv1), 2)  # 6 x 14 x 14
    x = functional.max_pool2d(functional.relu(functional.conv2d(x, conv2_w, conv2_b)), 2)
    x = x.reshape(x.shape[0], -1)  # 16 x 5 x 5 = 400
    x = functional.relu(x @ fc1_w + fc1_b)
    x = functional.relu(x @ fc2_w + fc2_b)
    return functional.cross_entropy(x @ fc3_w + fc3_b, labels)


def lenet_arrays(rng) -> list:
    """MNIST-shaped images and labels, and PyTorch's default initialization."""
    images = rng.standard_normal((LENET_BATCH, 1, 28, 28)).astype(np.float32)
    arrays = [images, rng.integers(0, 10, LENET_BATCH)]
    for weight, bias, fan_in in [
        ((6, 1, 5, 5), (6,), 25), ((16, 6, 5, 5), (16,), 150),
        ((400, 120), (120,), 400), ((120, 84), (84,), 120), ((84, 10), (10,), 84),
    ]:  # fmt: skip
        bound = 1 / math.sqrt(fan_in)
        arrays += [rng.uniform(-bound, bound, s).astype(np.float32) for s in (weight, bias)]
    return arrays


def _patches(x, size):
    """im2col: (N, C, H, W) -> (N * H' * W', C * size * size), a row per output pixel."""
    windows = np.lib.stride_tricks.sliding_window_view(x, (size, size), axis=(2, 3))
    return windows.transpose(0, 2, 3, 1, 4, 5).reshape(-1, x.shape[1] * size * size)


def _conv_numpy(x, w, b):
    """A valid convolution as one product: (N, C, H, W) -> (N, O, H', W'), and its patches."""
    n, _, height, width = x.shape
    channels, _, size, _ = w.shape
    patches = _patches(x, size)
    rows = patches @ w.reshape(channels, -1).T + b
    out_size = (height - size + 1, width - size + 1)
    return rows.reshape(n, *out_size, channels).transpose(0, 3, 1, 2), patches


def _conv_numpy_backward(x, w, patches, g, input_grad=True):
    """The gradients of _conv_numpy: input (unless not wanted), weight, bias."""
    channels, _, size, _ = w.shape
    g_rows = g.transpose(0, 2, 3, 1).reshape(-1, channels)
    g_w, g_b = (g_rows.T @ patches).reshape(w.shape), g_rows.sum(0)
    if not input_grad:
        return None, g_w, g_b
    # col2im: every patch's gradient added back where the patch was read
    n, _, out_h, out_w = g.shape
    g_patches = (g_rows @ w.reshape(channels, -1)).reshape(n, out_h, out_w, -1, size, size)
    g_x = np.zeros_like(x)
    for i in range(size):
        for j in range(size):
            g_x[:, :, i : i + out_h, j : j + out_w] += g_patches[..., i, j].transpose(0, 3, 1, 2)
    return g_x, g_w, g_b


def _max_pool_numpy(x):
    """2x2 max pooling, and where each window's maximum was (all of them on ties)."""
    n, c, height, width = x.shape
    windows = x.reshape(n, c, height // 2, 2, width // 2, 2)
    pooled = windows.max((3, 5))
    return pooled, windows == pooled[:, :, :, None, :, None]


def _max_pool_numpy_backward(argmax, g):
    # a tie is a window of zeros after relu, whose gradient relu stops anyway
    n, c, height, width = g.shape
    return (argmax * g[:, :, :, None, :, None]).reshape(n, c, 2 * height, 2 * width)


def w8_numpy(images, labels, conv1_w, conv1_b, conv2_w, conv2_b,
             fc1_w, fc1_b, fc2_w, fc2_b, fc3_w, fc3_b):  # fmt: skip
    """W8 by hand: the convolutions as im2col products, then the MLP of W3."""
    padded = np.pad(images, ((0, 0), (0, 0), (2, 2), (2, 2)))
    conv1, patches1 = _conv_numpy(padded, conv1_w, conv1_b)
    pool1, argmax1 = _max_pool_numpy(np.maximum(conv1, 0))
    conv2, patches2 = _conv_numpy(pool1, conv2_w, conv2_b)
    pool2, argmax2 = _max_pool_numpy(np.maximum(conv2, 0))
    flat = pool2.reshape(len(pool2), -1)
    h1 = np.maximum(flat @ fc1_w + fc1_b, 0)
    h2 = np.maximum(h1 @ fc2_w + fc2_b, 0)
    loss, g_logits = cross_entropy_numpy(h2 @ fc3_w + fc3_b, labels)
    g_h2 = (g_logits @ fc3_w.T) * (h2 > 0)
    g_h1 = (g_h2 @ fc2_w.T) * (h1 > 0)
    g_conv2 = _max_pool_numpy_backward(argmax2, (g_h1 @ fc1_w.T).reshape(pool2.shape))
    g_pool1, g_conv2_w, g_conv2_b = _conv_numpy_backward(
        pool1, conv2_w, patches2, g_conv2 * (conv2 > 0)
    )
    g_conv1 = _max_pool_numpy_backward(argmax1, g_pool1) * (conv1 > 0)
    _, g_conv1_w, g_conv1_b = _conv_numpy_backward(
        padded, conv1_w, patches1, g_conv1, input_grad=False
    )
    return (
        loss, g_conv1_w, g_conv1_b, g_conv2_w, g_conv2_b,
        flat.T @ g_h1, g_h1.sum(0), h1.T @ g_h2, g_h2.sum(0), h2.T @ g_logits, g_logits.sum(0),
    )  # fmt: skip


def lenet_products() -> list:
    """W8's matrix products, the convolutions as im2col: (left, right, left needs a gradient)."""
    n = LENET_BATCH
    return [
        ((n * 28 * 28, 1 * 5 * 5), (25, 6), False),  # the images need no gradient
        ((n * 10 * 10, 6 * 5 * 5), (150, 16), True),
        ((n, 400), (400, 120), True),
        ((n, 120), (120, 84), True),
        ((n, 84), (84, 10), True),
    ]


def gemms_alone(as_array, products, rng):
    """A run of the products alone: each forward a @ b, and for the backward a^T @ g
    and, when a needs a gradient, g @ b^T; ``as_array`` takes numpy arrays to the library's."""
    operands = []
    for left, right, left_grad in products:
        a, b = (rng.standard_normal(shape).astype(np.float32) for shape in (left, right))
        operands.append((*(as_array(v) for v in (a, b, a @ b)), left_grad))

    def run():
        for a, b, g, left_grad in operands:
            a @ b
            a.swapaxes(-1, -2) @ g
            if left_grad:
                g @ b.swapaxes(-1, -2)

    return run


# ---------------------------------------------- the peers' library interface

if jax is not None:

    def _jax_layer_norm(x, shape, weight=None, bias=None, eps=1e-5):
        mean = x.mean(-1, keepdims=True)
        centered = x - mean
        normed = centered / jnp.sqrt((centered * centered).mean(-1, keepdims=True) + eps)
        return normed if weight is None else normed * weight + bias

    def _jax_conv2d(x, weight, bias, padding=0):
        out = jax.lax.conv_general_dilated(
            x, weight, (1, 1), [(padding, padding)] * 2, dimension_numbers=("NCHW", "OIHW", "NCHW")
        )
        return out + bias[:, None, None]

    def _jax_max_pool2d(x, size):
        window = (1, 1, size, size)
        # a Python -inf: JAX recognizes max pooling (and its gradient) by a constant start
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, window, window, "VALID")

    def _jax_cross_entropy(logits, labels):
        log_probs = jax.nn.log_softmax(logits)
        return -jnp.take_along_axis(log_probs, labels[:, None], axis=1).mean()

    JAX_LIB = types.SimpleNamespace(
        tanh=jnp.tanh, sigmoid=jax.nn.sigmoid, exp=jnp.exp, log1p=jnp.log1p, sin=jnp.sin,
        cos=jnp.cos, sqrt=jnp.sqrt, maximum=jnp.maximum, minimum=jnp.minimum,
        masked_fill=lambda x, mask, value: jnp.where(mask, value, x),
    )  # fmt: skip
    JAX_FUNCTIONAL = types.SimpleNamespace(
        gelu=lambda x: jax.nn.gelu(x, approximate=False),
        layer_norm=_jax_layer_norm,
        cross_entropy=_jax_cross_entropy,
        softmax=lambda x, dim: jax.nn.softmax(x, axis=dim),
        relu=jax.nn.relu,
        conv2d=_jax_conv2d,
        max_pool2d=_jax_max_pool2d,
    )


def _leaves(lib, arrays, wrt):
    """Fresh tensors of ``lib`` on the arrays, those in ``wrt`` requiring grad."""
    tensors = [lib.from_numpy(a) for a in arrays]
    for i in wrt:
        tensors[i].requires_grad_()
    return tensors


def _fusegrad_runs(workload, arrays, wrt, hvp):
    """fusegrad eager and jit: {name: run() -> [loss, *gradients] (hvp: [product])}."""

    def leaves():
        return _leaves(fg, arrays, wrt)

    def eager():
        tensors = leaves()
        if hvp:
            (grad,) = fg.autograd.grad(workload(fg, F, tensors[0]), tensors[0], create_graph=True)
            return fg.autograd.grad((grad * tensors[1]).sum(), tensors[0])
        loss = workload(fg, F, *tensors)
        loss.backward()
        return [loss, *(tensors[i].grad for i in wrt)]

    inputs = [fg.from_numpy(a) for a in arrays]
    if hvp:  # reverse over reverse: the gradient of <gradient, v>
        gradient = fg.grad(lambda x: workload(fg, F, x))
        jitted = fg.jit(fg.grad(lambda x, v: (gradient(x) * v).sum()))

        def jit():
            return [jitted(*inputs)]

        # forward over reverse: the gradient's jvp along v, as JAX's jvp(grad)
        of_gradient = fg.func.grad(lambda x: workload(fg, F, x))
        forward = fg.jit(lambda x, v: fg.func.jvp(of_gradient, (x,), (v,))[1])

        def jit_forward_over_reverse():
            return [forward(*inputs)]

        return {
            "fusegrad eager": eager,
            "fusegrad jit": jit,
            "fusegrad jit fwd-over-rev": jit_forward_over_reverse,
        }
    jitted = fg.jit(fg.value_and_grad(lambda *t: workload(fg, F, *t), argnums=tuple(wrt)))

    def jit():
        loss, grads = jitted(*inputs)
        return [loss, *grads]

    # compiled forward, backward() outside: how torch.compile is used
    forward = fg.jit(lambda *t: workload(fg, F, *t))

    def backward_outside():
        tensors = leaves()
        loss = forward(*tensors)
        loss.backward()
        return [loss, *(tensors[i].grad for i in wrt)]

    return {"fusegrad eager": eager, "fusegrad jit": jit, "fusegrad jit, bwd out": backward_outside}


def _torch_runs(workload, arrays, wrt, hvp, compile_too, compile_variants):
    """PyTorch eager and torch.compile; with ``compile_variants`` also the other ways to
    compile a whole step: a torch.func transform, backward() traced into the forward's
    graph, and compiled autograd."""
    runs = {}
    # every workload's forward below is one code object to Dynamo: without a
    # reset, the workloads after its recompile limit (8) would run eagerly
    torch._dynamo.reset()

    def leaves():
        return _leaves(torch, arrays, wrt)

    def eager_step(fn):
        def run():
            tensors = leaves()
            if hvp:
                (grad,) = torch.autograd.grad(fn(tensors[0]), tensors[0], create_graph=True)
                return torch.autograd.grad((grad * tensors[1]).sum(), tensors[0])
            loss = fn(*tensors)
            loss.backward()
            return [loss, *(tensors[i].grad for i in wrt)]

        return run

    def forward(*tensors):
        return workload(torch, TF, *tensors)

    runs["torch eager"] = eager_step(forward)
    if not compile_too:
        return runs
    if hvp:
        gradient = torch.func.grad(forward)
        product = torch.compile(lambda x, v: torch.func.jvp(gradient, (x,), (v,))[1])
        runs["torch.compile"] = lambda: [product(*[torch.from_numpy(a) for a in arrays])]
        return runs
    # the forward compiled, its backward compiled ahead of time by AOTAutograd
    compiled_forward = torch.compile(forward)
    runs["torch.compile"] = eager_step(compiled_forward)
    if not compile_variants:
        return runs
    grad_and_value = torch.compile(torch.func.grad_and_value(forward, argnums=tuple(wrt)))

    def functional_step():
        grads, loss = grad_and_value(*[torch.from_numpy(a) for a in arrays])
        return [loss, *grads]

    def step(*tensors):
        loss = forward(*tensors)
        loss.backward()
        return loss.detach()  # a returned loss whose graph backward() consumed breaks the graph

    whole_step = torch.compile(step)

    def traced_backward_step():
        # backward() traced into the forward's graph instead of a graph break there
        with torch._dynamo.config.patch(trace_autograd_ops=True):
            tensors = leaves()
            loss = whole_step(*tensors)
        return [loss, *(tensors[i].grad for i in wrt)]

    def compiled_autograd_step():
        tensors = leaves()
        loss = compiled_forward(*tensors)
        # the backward graph captured when backward() runs, then compiled
        with torch._dynamo.compiled_autograd._enable(torch.compile):
            loss.backward()
        return [loss, *(tensors[i].grad for i in wrt)]

    runs["torch.compile, func.grad_and_value"] = functional_step
    runs["torch.compile, traced backward"] = traced_backward_step
    runs["torch.compile, compiled autograd"] = compiled_autograd_step
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
        return jax.block_until_ready([result] if hvp else [result[0], *result[1]])

    return {"JAX jit": run}


# ------------------------------------------------------------------ harness


def _as_numpy(value):
    if hasattr(value, "detach"):
        value = value.detach()
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value, np.float64)


def _check(name, results, reference, tolerance):
    assert len(results) == len(reference), f"{name}: {len(results)} results"
    for i, (got, want) in enumerate(zip(results, reference)):
        got = _as_numpy(got)
        error = np.max(np.abs(got - want)) / (np.max(np.abs(want)) + 1e-12)
        assert error < tolerance, f"{name}: result {i} off by {error:.2e}"


def _float64(arrays) -> list:
    return [a.astype(np.float64) if a.dtype == np.float32 else a for a in arrays]


def _float64_fusegrad(workload, arrays, wrt):
    """The loss and gradients by fusegrad eager in float64."""
    tensors = _leaves(fg, _float64(arrays), wrt)
    loss = workload(fg, F, *tensors)
    loss.backward()
    return [_as_numpy(v) for v in [loss, *(tensors[i].grad for i in wrt)]]


# Between implementations: OpenBLAS's threads spin for about 0.1 s after a
# product, PyTorch's and XLA's pools for a while too, and each took a core
# from whichever implementation ran next. Then an implementation runs untimed
# for a while (this VM's cores run slower for a moment after idling), and a
# sample is at least SAMPLE_SECONDS of calls.
SETTLE_SECONDS = 0.3
WARM_SECONDS = 0.05
SAMPLE_SECONDS = 0.05


def _time(runs: dict, repeat: int, number: int) -> dict:
    samples = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            time.sleep(SETTLE_SECONDS)
            start, calls = time.perf_counter(), 0
            while calls < number or time.perf_counter() - start < WARM_SECONDS:
                run()
                calls += 1
            calls = max(number, math.ceil(SAMPLE_SECONDS * calls / (time.perf_counter() - start)))
            start = time.perf_counter()
            for _ in range(calls):
                run()
            samples[name].append((time.perf_counter() - start) / calls)
    return {name: statistics.median(s) * 1e3 for name, s in samples.items()}


def _copy_of(nbytes: int):
    """A numpy copy moving ``nbytes`` (half read, half written)."""
    source = np.ones(nbytes // 2, np.uint8)
    return lambda: source.copy()


def workloads(rng) -> dict:
    """{name: spec}: the arrays, which are differentiated, numpy by hand, the float64
    reference loss and gradients (computed when the workload runs), the bytes an ideal
    kernel moves or the runs of its matrix products alone, the targets."""
    specs = {}
    x = rng.standard_normal(4_000_000).astype(np.float32)
    specs["W1"] = dict(
        title="sum(tanh(x)*sigmoid(x) + exp(-x*x)*0.5 + log1p(x*x)), value+grad, 4M float32",
        workload=w1, arrays=[x], wrt=[0], numpy=lambda: w1_numpy(x),
        reference=lambda: w1_numpy(x.astype(np.float64)), moved=8 * x.size, target=0.5,
    )  # fmt: skip
    x2 = rng.standard_normal((4096, 1024)).astype(np.float32)
    g = (1 + 0.1 * rng.standard_normal(1024)).astype(np.float32)
    b = (0.1 * rng.standard_normal(1024)).astype(np.float32)
    specs["W2"] = dict(
        title="sum(gelu(layer_norm(x)*g + b)), grads wrt x, g, b; x 4096x1024 float32",
        workload=w2, arrays=[x2, g, b], wrt=[0, 1, 2], numpy=lambda: w2_numpy(x2, g, b),
        reference=lambda: w2_numpy(x2.astype(np.float64), g, b), moved=8 * x2.size, target=0.5,
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
        numpy=lambda: w3_numpy(batch, labels, *params),
        reference=lambda: w3_numpy(batch.astype(np.float64), labels, *params),
        references={"numpy matmuls alone": lambda: w3_matmuls(
            batch, params[0], params[2], params[4], h1, h2, g_logits)},
        reference_target=1.1, flops=product_flops(w3_products(len(batch))),
    )  # fmt: skip
    x4, y4 = (rng.standard_normal(16).astype(np.float32) for _ in range(2))
    specs["W4"] = dict(
        title="a 30-op function of 16-float vectors, value+grad, per call",
        workload=w4, arrays=[x4, y4], wrt=[0], numpy=None,
        reference=lambda: [w4_numpy_value(x4.astype(np.float64), y4), w4_numpy_gradient(x4, y4)],
        number=200, tolerance=1e-3, limit_us=10,
    )  # fmt: skip
    x5 = rng.standard_normal(1_000_000).astype(np.float32)
    v5 = rng.standard_normal(1_000_000).astype(np.float32)
    specs["W5"] = dict(
        title="Hessian-vector product of W1's loss, 1M float32",
        workload=w1, arrays=[x5, v5], wrt=[0], hvp=True,
        numpy=lambda: [w1_hessian_diagonal(x5) * v5],
        reference=lambda: [w1_hessian_diagonal(x5.astype(np.float64)) * v5],
        moved=12 * x5.size, target=0.5, peers=["JAX jit"],
    )  # fmt: skip
    x6 = rng.standard_normal(2_000_000)
    specs["W6"] = dict(
        title="W1 in float64, 2M",
        workload=w1, arrays=[x6], wrt=[0], numpy=lambda: w1_numpy(x6),
        reference=lambda: w1_numpy(x6), moved=16 * x6.size, target=0.6, tolerance=1e-9,
    )  # fmt: skip
    gpt = gpt_arrays(rng)
    gpt_weights = list(range(3, len(gpt)))
    specs["W7"] = dict(
        title=(
            f"GPT-mini step: {GPT_LAYERS} layers, {GPT_HEADS} heads, d={GPT_WIDTH}, "
            f"T={GPT_CONTEXT}, batch {GPT_BATCH}, vocab {GPT_VOCAB}: loss + "
            f"{len(gpt_weights)} grads"
        ),
        workload=w7, arrays=gpt, wrt=gpt_weights, numpy=None,
        reference=lambda: _float64_fusegrad(w7, gpt, gpt_weights),
        references=_gemm_runs(gpt_products(), rng), compile_variants=True,
        flops=product_flops(gpt_products()),
        peers=["torch.compile", "torch.compile, func.grad_and_value",
               "torch.compile, traced backward", "torch.compile, compiled autograd"],
        target=0.8,
    )  # fmt: skip
    for name in ("W3", "W7"):
        # JAX has no autocast; torch.compile's variants of a step are W7's alone
        specs[f"{name}-bf16"] = dict(
            specs[name],
            title=specs[name]["title"] + ", under autocast(bfloat16)",
            workload=under_autocast(specs[name]["workload"]), numpy=None, references={},
            tolerance=5e-2, jax=False, compile_variants=False,
            peers=["torch eager", "torch.compile"], target=0.6, peak="bfloat16",
        )  # fmt: skip
        specs[f"{name}-bf16"].pop("reference_target", None)
    lenet = lenet_arrays(rng)
    specs["W8"] = dict(
        title=f"LeNet-5 step, 28x28x1, batch {LENET_BATCH}: loss + 10 grads",
        workload=w8, arrays=lenet, wrt=list(range(2, len(lenet))),
        numpy=lambda: w8_numpy(*lenet),
        reference=lambda: w8_numpy(*_float64(lenet)),
        references=_gemm_runs(lenet_products(), rng), peers=["torch eager"], target=0.7,
        flops=product_flops(lenet_products()),
    )  # fmt: skip
    return specs


def _gemm_runs(products, rng) -> dict:
    runs = {"numpy GEMMs alone": gemms_alone(np.asarray, products, rng)}
    if torch is not None:
        runs["torch.mm GEMMs alone"] = gemms_alone(torch.from_numpy, products, rng)
    return runs


def run_workload(name, spec, repeat, compile_torch) -> None:
    arrays, wrt, hvp = spec["arrays"], spec["wrt"], spec.get("hvp", False)
    reference = spec["reference"]()
    runs = {}
    if spec["numpy"] is not None:
        runs["numpy by hand"] = spec["numpy"]
    runs.update(_fusegrad_runs(spec["workload"], arrays, wrt, hvp))
    if torch is not None:
        compile_variants = spec.get("compile_variants", False)
        runs.update(
            _torch_runs(spec["workload"], arrays, wrt, hvp, compile_torch, compile_variants)
        )
    if jax is not None and spec.get("jax", True):
        runs.update(_jax_runs(spec["workload"], arrays, wrt, hvp))
    first_calls = {}
    for run_name, run in list(runs.items()):  # check, and warm up (traces, compiles)
        start = time.perf_counter()
        try:
            results = run()
        except Exception as error:  # a peer that cannot run this workload
            print(f"  ({run_name} cannot run {name}: {type(error).__name__}: {error})")
            del runs[run_name]
            continue
        first_calls[run_name] = time.perf_counter() - start
        _check(run_name, results, reference, spec.get("tolerance", 1e-3))
        run()
    references = spec.get("references", {})
    runs.update(references)
    if "moved" in spec:
        runs["bandwidth limit"] = _copy_of(spec["moved"])
    times = _time(runs, repeat, spec.get("number", 1))
    numpy_ms = times.get("numpy by hand")
    peer_names = [p for p in spec.get("peers", ["torch.compile", "JAX jit"]) if p in times]
    best_peer = min(times[p] for p in peer_names) if peer_names else None
    unit, scale = ("us", 1e3) if spec.get("number", 1) > 1 else ("ms", 1)
    width = max(22, *(len(run_name) + 2 for run_name in times))
    print(f"{name}: {spec['title']} (medians of {repeat})")
    print(f"  {'':<{width}}{'median ' + unit:>12}{'vs numpy':>10}{'vs best peer':>14}  first call")
    for run_name, ms in times.items():
        ratio_numpy = f"{ms / numpy_ms:.2f}x" if numpy_ms else "-"
        ratio_peer = f"{ms / best_peer:.2f}x" if best_peer else "-"
        first = f"{first_calls[run_name]:.2f} s" if run_name in first_calls else ""
        print(f"  {run_name:<{width}}{ms * scale:12.2f}{ratio_numpy:>10}{ratio_peer:>14}  {first}")
    jit_ms = times["fusegrad jit"]
    for reference_name in references:
        target = f" (target {spec['reference_target']}x)" if "reference_target" in spec else ""
        print(f"  fusegrad jit / {reference_name}: {jit_ms / times[reference_name]:.2f}x{target}")
    if best_peer and "target" in spec:
        verdict = "met" if jit_ms / best_peer <= spec["target"] else "missed"
        best = min(peer_names, key=times.get)
        print(
            f"  fusegrad jit / best peer ({best}): {jit_ms / best_peer:.2f}x "
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
    if "flops" in spec:
        peak = _peak_gflops(spec.get("peak", "float32"))
        limit_ms = spec["flops"] / peak / 1e6
        print(
            f"  fusegrad jit / peak FLOP/s: {jit_ms / limit_ms:.1f}x "
            f"(its products, {spec['flops'] / 1e9:.2f} GFLOP, at {peak:.0f} GFLOP/s: "
            f"{limit_ms:.2f} ms)"
        )
    print()


_peaks: dict = {}


def _peak_gflops(dtype_name: str) -> float:
    """The cores' measured peak (benchmarks/gemm.py), once per dtype; bfloat16's
    is float32's where the CPU has no bfloat16 dot product."""
    from gemm import peak_gflops  # it imports this module

    if dtype_name == "bfloat16" and not codegen_packed.has_bfloat16_dot():
        dtype_name = "float32"
    if dtype_name not in _peaks:
        _peaks[dtype_name] = peak_gflops(dtype_name) * threads.count()
    return _peaks[dtype_name]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="W1,W2,W3,W4,W5,W6,W7,W8,W3-bf16,W7-bf16")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--no-torch-compile", action="store_true")
    args = parser.parse_args()
    forced = os.environ.get("OPENBLAS_CORETYPE")
    if forced:  # numpy's matrix products (and so fusegrad's) run these kernels
        print(f"OPENBLAS_CORETYPE={forced}: numpy's OpenBLAS runs its {forced} kernels\n")
    specs = workloads(np.random.default_rng(0))
    for name in args.only.split(","):
        run_workload(name, specs[name], args.repeat, not args.no_torch_compile)


if __name__ == "__main__":
    main()
