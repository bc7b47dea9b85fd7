"""Mixed precision as PyTorch has it on the CPU: autocast's state and its
spellings, the op policy per category (eager and jit), the numbers of a
training step under bfloat16 autocast against the same casts written out,
jit programs keyed by the autocast state, and GradScaler, disabled and on
the CPU."""

import threading
import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn
import fusegrad.nn.functional as F
from fusegrad.codegen import packed_gemm as codegen_packed
from fusegrad.eager.autocast_policy import CPU_POLICY, autocasts
from fusegrad.ir import primitives as P
from fusegrad.runtime import packed_gemm as runtime_packed

bf16, f32, f64 = fg.bfloat16, fg.float32, fg.float64


def values(t):
    return t.detach().to(f64).numpy()


def randn(*shape, dtype=f32, requires_grad=False, seed=0):
    data = np.random.default_rng(seed).standard_normal(shape)
    return fg.tensor(data, dtype=dtype, requires_grad=requires_grad)


def assert_as_eager(got, want):
    """A compiled result against the eager one: equal up to reassociation in
    fused reductions, which can move a bfloat16 result by one unit in the
    last place."""
    assert got.dtype is want.dtype
    rtol = 2.0**-7 if want.dtype is bf16 else 1e-5
    np.testing.assert_allclose(values(got), values(want), rtol=rtol, atol=1e-6)


# ---------------------------------------------------------------- the state


def test_state_defaults_and_inside_a_region():
    assert not fg.is_autocast_enabled() and not fg.is_autocast_enabled("cpu")
    assert fg.get_autocast_dtype("cpu") is bf16 and fg.get_autocast_dtype("cuda") is fg.float16
    assert fg.amp.is_autocast_available("cpu") and fg.amp.is_autocast_available("cuda")
    with fg.autocast("cpu") as entered:
        assert entered is None  # PyTorch's __enter__ returns nothing
        assert fg.is_autocast_enabled("cpu") and not fg.is_autocast_enabled()
        with fg.autocast("cpu", dtype=fg.float16):
            assert fg.get_autocast_dtype("cpu") is fg.float16
            with fg.autocast("cpu", enabled=False):
                assert not fg.is_autocast_enabled("cpu")
                assert (randn(2, 2) @ randn(2, 2)).dtype is f32
            assert (randn(2, 2) @ randn(2, 2)).dtype is fg.float16
        assert fg.get_autocast_dtype("cpu") is bf16
    assert not fg.is_autocast_enabled("cpu")


def test_decorator_and_the_spelling_torch_amp_autocast():
    @fg.amp.autocast("cpu")
    def product(a, b):
        return fg.is_autocast_enabled("cpu"), a @ b

    enabled, out = product(randn(2, 3), randn(3, 2))
    assert enabled and out.dtype is bf16 and not fg.is_autocast_enabled("cpu")


def test_state_is_thread_local():
    seen = []
    with fg.autocast("cpu"):
        thread = threading.Thread(target=lambda: seen.append(fg.is_autocast_enabled("cpu")))
        thread.start()
        thread.join()
    assert seen == [False]


def test_arguments_and_devices_as_pytorch():
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
        fg.autocast(fg.device("cpu"))
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'meta'"):
        fg.autocast("meta")
    with pytest.warns(UserWarning, match="CPU Autocast only supports dtype of"):
        region = fg.autocast("cpu", dtype=f32)
    with region:
        assert not fg.is_autocast_enabled("cpu")
    with pytest.warns(UserWarning, match="device_type of 'cuda', but CUDA is not available"):
        region = fg.autocast("cuda")
    with region:
        assert not fg.is_autocast_enabled("cuda")
        assert (randn(2, 2) @ randn(2, 2)).dtype is f32


def test_deprecated_spellings_warn_as_pytorch():
    with pytest.warns(FutureWarning, match=r"`torch.cpu.amp.autocast\(args...\)` is deprecated"):
        region = fg.cpu.amp.autocast()
    with region:
        assert fg.is_autocast_enabled("cpu") and fg.get_autocast_dtype("cpu") is bf16
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        region = fg.cuda.amp.autocast()
    assert [(w.category, str(w.message)) for w in caught] == [
        (
            FutureWarning,
            "`torch.cuda.amp.autocast(args...)` is deprecated. "
            "Please use `torch.amp.autocast('cuda', args...)` instead.",
        ),
        (UserWarning, "User provided device_type of 'cuda', but CUDA is not available. Disabling"),
    ]
    assert caught[0].filename == __file__  # at the line making it
    with region:
        assert not fg.is_autocast_enabled("cuda")
    with pytest.warns(DeprecationWarning, match=r"is_autocast_enabled\('cpu'\) instead"):
        assert fg.is_autocast_cpu_enabled() is False


# ------------------------------------------------------------ the op policy


LOWER_PRECISION = [
    ("mm", lambda a: fg.mm(a, a.T)),
    ("matmul", lambda a: a @ a.T),
    ("bmm", lambda a: fg.bmm(a[None], a.T[None])),
    ("addmm", lambda a: fg.addmm(a[:, :1], a, a.T)),
    ("baddbmm", lambda a: fg.baddbmm(a[None], a[None], a.T[None])[0, :, :1]),
    ("linear", lambda a: F.linear(a, a, a[0])),
    ("linear, 3-d", lambda a: F.linear(a[None], a, a[0])),
    ("conv1d", lambda a: F.conv1d(a[None], fg.ones(4, 3, 2))),
    ("prelu", lambda a: F.prelu(a, fg.tensor([0.25]))),
    ("attention", lambda a: F.scaled_dot_product_attention(a[None], a[None], a[None])),
    ("vecdot", lambda a: fg.linalg.vecdot(a, a)),
    ("einsum summing", lambda a: fg.einsum("ij,jk->ik", a, a)),
    ("einsum row dots", lambda a: fg.einsum("ij,ij->i", a, a)),
]
FLOAT32 = [
    ("mse_loss", lambda a: F.mse_loss(a, a.flip(0))),
    ("cross_entropy", lambda a: F.cross_entropy(a, fg.tensor([0, 1, 2]))),
    ("l1_loss", lambda a: F.l1_loss(a, a * 0)),
    ("with_logits", lambda a: F.binary_cross_entropy_with_logits(a, a.sigmoid())),
    ("prod", lambda a: fg.prod(a, 1)),
    ("trace", lambda a: fg.trace(a)),
    ("cdist", lambda a: fg.cdist(a, a)),
    ("inverse", lambda a: fg.inverse(a @ a.T + 3 * fg.eye(3, dtype=a.dtype))),
    ("reflect pad", lambda a: F.pad(a[None], (1, 1), mode="reflect")),
]
IN_INPUT_DTYPE = [
    ("relu", lambda a: F.relu(a)),
    ("exp", lambda a: a.exp()),
    ("softmax", lambda a: a.softmax(-1)),
    ("add", lambda a: a + 1),
    ("circular pad", lambda a: F.pad(a[None], (1, 1), mode="circular")),
    ("adaptive pool", lambda a: F.adaptive_avg_pool1d(a[None], 2)),
    ("einsum of products only", lambda a: fg.einsum("ij,ij->ij", a, a)),
    ("einsum outer", lambda a: fg.einsum("i,j->ij", a[0], a[1])),
    # a summed label of size 1 (in either operand) makes PyTorch multiply, not bmm
    ("einsum summing one", lambda a: fg.einsum("ij,kj->ik", a[:, :1], a[:, :1])),
    ("einsum summing one side's one", lambda a: fg.einsum("ij,kj->ik", a[:, :1], a)),
]
POLICY_CASES = [
    pytest.param(op, result, id=name)
    for cases, result in ((LOWER_PRECISION, bf16), (FLOAT32, f32), (IN_INPUT_DTYPE, None))
    for name, op in cases
]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("input_dtype", [f32, bf16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize(("op", "policy_dtype"), POLICY_CASES)
def test_result_dtype_per_policy(op, policy_dtype, input_dtype, compiled):
    a = randn(3, 3, dtype=input_dtype)
    run = fg.jit(op) if compiled else op
    with fg.autocast("cpu", dtype=bf16):
        out = run(a)
        again = run(a)  # a compiled one's second call runs the program
        expected = op(a)
    assert out.dtype is (policy_dtype or input_dtype)
    assert_as_eager(again, expected)


def test_float64_arguments_are_not_cast():
    a = randn(3, 3, dtype=f64)
    with fg.autocast("cpu"):
        assert (a @ a).dtype is f64 and F.linear(a, a).dtype is f64


def test_promote_runs_in_the_widest_dtype():
    low, high = randn(2, dtype=bf16), randn(2)
    with fg.autocast("cpu"):
        assert fg.cat([low, low]).dtype is bf16 and fg.stack([low, high]).dtype is f32
        assert fg.index_copy(low, 0, fg.tensor([0]), high[:1]).dtype is f32
        with pytest.raises(RuntimeError, match="Unexpected floating ScalarType"):
            fg.cat([low, randn(2, dtype=fg.float16)])


def test_lower_precision_op_is_the_op_on_cast_arguments():
    x, w, b = randn(4, 5), randn(3, 5, seed=1), randn(3, seed=2)
    with fg.autocast("cpu"):
        out = F.linear(x, w, b)
    expected = F.linear(x.to(bf16), w.to(bf16), b.to(bf16))
    np.testing.assert_array_equal(values(out), values(expected))
    # product and bias in float32, rounded once, as PyTorch's addmm
    in_float32 = F.linear(*(t.to(bf16).to(f32) for t in (x, w, b))).to(bf16)
    np.testing.assert_array_equal(values(out), values(in_float32))


def test_out_and_in_place_variants_run_without_autocast():
    a, b = randn(3, 3), randn(3, 3, seed=1)
    out = fg.empty(3, 3)
    with fg.autocast("cpu"):
        fg.mm(a, b, out=out)
        updated = a.clone().addmm_(a, b)
    np.testing.assert_array_equal(values(out), values(fg.mm(a, b)))
    np.testing.assert_array_equal(values(updated), values(a.addmm(a, b)))


def test_every_op_of_the_policy_that_fusegrad_has_runs_under_it():
    dispatched = autocasts("mm")(lambda: None).__code__
    spellings = {"cross_entropy_loss": [F.cross_entropy]}
    checked = 0
    for name in CPU_POLICY:
        found = [getattr(place, name, None) for place in (fg, fg.Tensor, F)]
        if name.startswith("linalg_"):
            found.append(getattr(fg.linalg, name.removeprefix("linalg_"), None))
        for fn in [f for f in found if f is not None] + spellings.get(name, []):
            layers = [fn]
            while hasattr(layers[-1], "__wrapped__"):
                layers.append(layers[-1].__wrapped__)
            assert any(getattr(f, "__code__", None) is dispatched for f in layers), name
            checked += 1
    assert checked >= 50


def test_normalization_of_a_reduced_input_with_float32_weights_as_pytorchs_kernels():
    x = randn(4, 3, 5, dtype=bf16)
    weight, bias = randn(5, seed=1), randn(5, seed=2)
    out = F.layer_norm(x, (5,), weight, bias)
    assert out.dtype is bf16  # not promoted to the weights' float32
    expected = F.layer_norm(x.to(f32), (5,), weight, bias).to(bf16)  # statistics in float32
    np.testing.assert_array_equal(values(out), values(expected))
    running_mean, running_var = fg.zeros(3), fg.ones(3)
    normed = F.batch_norm(x, running_mean, running_var, fg.ones(3), fg.zeros(3), training=True)
    assert normed.dtype is bf16 and running_mean.dtype is f32
    np.testing.assert_allclose(values(running_mean), 0.1 * values(x).mean(axis=(0, 2)), rtol=1e-6)
    # rms_norm: in float32 with float32's eps (the input's, 2^-7, moved small values
    # a long way), times the weight, rounded once to the input's dtype
    small = randn(4, 3, 5, dtype=bf16) * 0.01
    for norm in (F.rms_norm, fg.jit(F.rms_norm)):
        out = norm(small, (5,), weight)
        assert out.dtype is bf16
        up = values(small).astype(np.float32)
        rms = np.sqrt((up * up).mean(-1, keepdims=True) + np.finfo(np.float32).eps)
        expected = fg.tensor(up / rms * values(weight)).to(bf16)
        np.testing.assert_array_equal(values(out), values(expected))


# ------------------------------------------------------------ the numbers


def _mlp_loss(x, target, w1, b1, w2, b2):
    hidden = F.relu(F.linear(x, w1, b1))
    return F.mse_loss(F.linear(hidden, w2, b2), target)


def _parameters():
    return [
        randn(*s, requires_grad=True, seed=k) for k, s in enumerate([(8, 4), (8,), (2, 8), (2,)])
    ]


def test_mlp_under_autocast_matches_the_casts_written_out():
    x, target = randn(16, 4, seed=10), randn(16, 2, seed=11)
    params = _parameters()
    with fg.autocast("cpu", dtype=bf16):
        loss = _mlp_loss(x, target, *params)
    loss.backward()
    explicit = _parameters()
    cast = [p.to(bf16) for p in explicit]
    hidden = F.relu(F.linear(x.to(bf16), cast[0], cast[1]))
    expected = F.mse_loss(F.linear(hidden, cast[2], cast[3]).to(f32), target)
    expected.backward()
    assert loss.dtype is f32  # mse_loss runs in float32
    np.testing.assert_array_equal(values(loss), values(expected))
    for p, q in zip(params, explicit):
        assert p.grad.dtype is f32  # gradients reach float32 parameters in float32
        np.testing.assert_array_equal(values(p.grad), values(q.grad))


def test_training_step_under_autocast_compiles_to_the_eager_numbers():
    def step(x, target, params):
        with fg.autocast("cpu", dtype=bf16):
            loss = _mlp_loss(x, target, *params)
        return fg.autograd.grad(loss, params) + (loss,)

    x, target = randn(16, 4, seed=10), randn(16, 2, seed=11)
    params = _parameters()
    eager = step(x, target, params)
    compiled = fg.jit(step)
    for _ in range(2):
        for got, want in zip(compiled(x, target, params), eager):
            assert_as_eager(got, want)


# bfloat16 pairs multiplied by AVX512-BF16's instruction where the CPU has
# it, and by its emulation anywhere
DOTS = [
    "emulated",
    pytest.param(
        "instruction",
        marks=pytest.mark.skipif(
            not codegen_packed.has_bfloat16_dot(), reason="this CPU has no AVX512-BF16"
        ),
    ),
]


def _bfloat16_pairs_by(dot, monkeypatch):
    """Products of bfloat16 values run as pairs, by ``dot``."""
    monkeypatch.setattr(runtime_packed, "BFLOAT16_PAIRS", True)
    monkeypatch.setattr(runtime_packed, "_calls", {})
    if dot == "emulated":
        monkeypatch.setattr(codegen_packed, "has_bfloat16_dot", lambda: False)


@pytest.mark.parametrize("dot", DOTS)
def test_a_larger_step_under_autocast_runs_bfloat16_pairs_compiled_as_eager(dot, monkeypatch):
    """Products large enough for the packed GEMM run as bfloat16 pairs
    (their float32 operands hold bfloat16 values: eager mode and
    ir/simplify.py mark such products alike), forward and backward, so
    eager and compiled steps compute the same bits; the loss and gradients
    stay within bfloat16's precision of float32's."""
    _bfloat16_pairs_by(dot, monkeypatch)
    pairs = []
    product = runtime_packed.product

    def counted(x, y, pairs_asked=False, rounded=False):
        out = product(x, y, pairs_asked, rounded)
        pairs.append(pairs_asked and out is not None)
        return out

    monkeypatch.setattr(runtime_packed, "product", counted)
    shapes = [(96, 64), (96,), (10, 96), (10,)]
    x, target = randn(256, 64, seed=20), randn(256, 10, seed=21)

    def step(x, target, params, dtype):
        with fg.autocast("cpu", dtype=bf16, enabled=dtype is bf16):
            loss = _mlp_loss(x, target, *params)
        return (loss, *fg.autograd.grad(loss, params))

    params = [randn(*s, requires_grad=True, seed=30 + k) for k, s in enumerate(shapes)]
    eager = step(x, target, params, bf16)
    assert sum(pairs) == 2  # the hidden layer's product and its weight's gradient
    compiled = fg.jit(lambda x, target, params: step(x, target, params, bf16))
    program = str(compiled.lower(x, target, params)).split("\n\n")[0]
    products = [line for line in program.splitlines() if " = matmul" in line]
    assert len(products) == 5 and all("matmul[operands=bf16] " in line for line in products)
    for _ in range(3):
        for got, want in zip(compiled(x, target, params), eager):
            np.testing.assert_array_equal(values(got), values(want))
    for got, want in zip(eager, step(x, target, params, f32)):
        # as a whole (a unit near zero may change sides of the ReLU in bfloat16)
        got, want = values(got).astype(np.float64), values(want)
        assert np.linalg.norm(got - want) <= 5e-2 * np.linalg.norm(want)


@pytest.mark.parametrize("dot", DOTS)
def test_a_compiled_product_rounded_for_a_float32_value_rounds_as_it_stores(dot, monkeypatch):
    """A compiled autocast step runs each product of bfloat16 pairs whose
    float32 sums are only rounded to bfloat16 and made float32 again (a
    weight's gradient, for a float32 weight) as one rounded product
    (``ir/simplify.rounded_products``): the packed GEMM rounds as it
    stores, no kernel's pass rounds the result. The gradients are eager's
    bit for bit (the loss, a fused sum, up to reassociation)."""
    _bfloat16_pairs_by(dot, monkeypatch)
    shapes = [(96, 64), (96,), (10, 96), (10,)]
    x, target = randn(256, 64, seed=22), randn(256, 10, seed=23)
    params = [randn(*s, requires_grad=True, seed=40 + k) for k, s in enumerate(shapes)]

    def step(x, target, params):
        with fg.autocast("cpu", dtype=bf16):
            loss = _mlp_loss(x, target, *params)
        return (loss, *fg.autograd.grad(loss, params))

    eager = step(x, target, params)
    compiled = fg.jit(step)
    graph = compiled.lower(x, target, params).program.forward_executor.graph
    products = [e for e in graph.eqns if e.prim is P.matmul]
    rounded = [e.out.shape for e in products if e.params.get("rounded")]
    # the first weight's gradient (transposed); the second's, 96x256x10,
    # is too small to run packed, so a kernel rounds it as before
    assert len(products) == 5 and rounded == [(64, 96)]
    for _ in range(3):
        loss, *grads = compiled(x, target, params)
        assert_as_eager(loss, eager[0])
        for got, want in zip(grads, eager[1:]):
            np.testing.assert_array_equal(values(got), values(want))


def test_eager_products_of_bfloat16_values_are_marked_until_written():
    """A float32 tensor converted from bfloat16, and its views, hold
    bfloat16 values until the storage they share is written."""
    x = randn(8, 6, seed=1).to(bf16).to(f32)
    assert x._holds_bfloat16() and x.t()._holds_bfloat16() and x[1:].reshape(-1)._holds_bfloat16()
    assert not (x * 2)._holds_bfloat16() and not randn(8, 6)._holds_bfloat16()
    view = x.t()
    x.add_(0.1)
    assert not x._holds_bfloat16() and not view._holds_bfloat16()


@pytest.mark.parametrize("how", ["detach", "data", "clone", "times one", "plus zero"])
@pytest.mark.parametrize("differentiated", [False, True], ids=["value", "gradient"])
def test_a_product_of_a_detached_or_copied_bfloat16_value_compiles_as_eager(
    how, differentiated, monkeypatch
):
    """Eager mode sees no move of bfloat16 values in ``detach()``, ``.data``,
    ``clone()`` or ``* 1.0``, so runs the product after it in float32; the
    compiled program did too until simplification dropped the step and the
    graph's marking, which ran after it, took the product for bfloat16
    pairs: one unit of bfloat16 apart. The graph is now marked before."""
    monkeypatch.setattr(runtime_packed, "BFLOAT16_PAIRS", True)
    monkeypatch.setattr(runtime_packed, "_calls", {})
    if not codegen_packed.has_bfloat16_dot():
        monkeypatch.setattr(codegen_packed, "has_bfloat16_dot", lambda: False)
    moved = {
        "detach": lambda h: h.detach(),
        "data": lambda h: h.data,
        "clone": lambda h: h.clone(),
        "times one": lambda h: h * 1.0,
        "plus zero": lambda h: h + 0.0,
    }[how]

    def run(a, b, cotangent):
        with fg.autocast("cpu", dtype=bf16):
            h = (a @ b).float()
        out = moved(h) @ h
        if not differentiated:
            return (out,)
        return (out, *fg.autograd.grad(out, (a, b), cotangent))

    a, b = randn(96, 160, seed=40, requires_grad=True), randn(160, 96, seed=41, requires_grad=True)
    cotangent = randn(96, 96, seed=42)
    eager = run(a, b, cotangent)
    compiled = fg.jit(run)
    for _ in range(3):
        for got, want in zip(compiled(a, b, cotangent), eager):
            np.testing.assert_array_equal(values(got), values(want))


def test_a_weight_used_twice_in_a_region_is_cast_once_as_pytorchs_cache():
    x = randn(4, 5, seed=3)

    def grad_of_twice(cache_enabled):
        w = randn(5, 5, requires_grad=True)
        with fg.autocast("cpu", cache_enabled=cache_enabled):
            (F.linear(F.linear(x, w), w).to(f32) * 1e3).sum().backward()
        return values(w.grad)

    w = randn(5, 5, requires_grad=True)
    shared = w.to(bf16)  # one cast: both uses' gradients meet in bfloat16
    (F.linear(F.linear(x.to(bf16), shared), shared).to(f32) * 1e3).sum().backward()
    np.testing.assert_array_equal(grad_of_twice(True), values(w.grad))
    w.grad = None
    first, second = w.to(bf16), w.to(bf16)
    (F.linear(F.linear(x.to(bf16), first), second).to(f32) * 1e3).sum().backward()
    np.testing.assert_array_equal(grad_of_twice(False), values(w.grad))


def test_a_cached_cast_is_made_again_after_the_weight_changes():
    w, x = randn(3, 3, requires_grad=True), randn(2, 3, seed=1)
    with fg.autocast("cpu"):
        before = F.linear(x, w)
        with fg.no_grad():
            w.mul_(2)
        after = F.linear(x, w)
    np.testing.assert_array_equal(values(after), values(F.linear(x.to(bf16), w.to(bf16))))
    assert not np.array_equal(values(after), values(before))


# ------------------------------------------------------------ jit programs


def test_a_jit_function_gets_a_program_per_autocast_state():
    @fg.jit
    def product(a, b):
        return a @ b

    a, b = randn(3, 4), randn(4, 2, seed=1)
    for _ in range(3):  # the last calls take the direct path of the program called last
        assert product(a, b).dtype is f32
    with fg.autocast("cpu"):
        assert product(a, b).dtype is bf16
        assert product(a, b).dtype is bf16
    with fg.autocast("cpu", dtype=fg.float16):
        assert product(a, b).dtype is fg.float16
    assert product(a, b).dtype is f32
    assert product.cache_info().misses == 3 and product.cache_info().entries == 3


# ---------------------------------------------------------------- GradScaler


def _model_and_optimizer(lr=0.5):
    model = nn.Linear(3, 1)
    with fg.no_grad():
        model.weight.copy_(fg.tensor([[1.0, 2.0, 3.0]]))
        model.bias.zero_()
    return model, fg.optim.SGD(model.parameters(), lr=lr)


def test_a_disabled_scaler_passes_everything_through():
    with pytest.warns(UserWarning, match="GradScaler is enabled, but CUDA is not available"):
        scaler = fg.amp.GradScaler()  # device "cuda", as nanoGPT builds it
    quiet = fg.amp.GradScaler("cpu", enabled=False)
    for s in (scaler, quiet):
        model, optimizer = _model_and_optimizer()
        loss = model(fg.ones(1, 3)).sum()
        assert s.scale(loss) is loss
        loss.backward()
        s.unscale_(optimizer)
        s.step(optimizer)
        s.update()
        np.testing.assert_allclose(values(model.weight), [[0.5, 1.5, 2.5]])
        assert not s.is_enabled() and s.get_scale() == 1.0 and s.state_dict() == {}
        s.load_state_dict({"scale": 8.0})  # a no-op


def test_enabled_scaler_scales_unscales_and_steps():
    scaler = fg.amp.GradScaler("cpu", init_scale=4.0, growth_interval=2)
    model, optimizer = _model_and_optimizer()
    scaled = scaler.scale(model(fg.ones(1, 3)).sum())
    assert float(scaled) == 24.0
    scaled.backward()
    np.testing.assert_array_equal(values(model.weight.grad), [[4.0, 4.0, 4.0]])
    scaler.unscale_(optimizer)
    np.testing.assert_array_equal(values(model.weight.grad), [[1.0, 1.0, 1.0]])
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
        scaler.unscale_(optimizer)
    scaler.step(optimizer)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(optimizer)
    np.testing.assert_allclose(values(model.weight), [[0.5, 1.5, 2.5]])
    scaler.update()
    assert scaler.get_scale() == 4.0 and scaler.state_dict()["_growth_tracker"] == 1


def _step(scaler, model, optimizer, poison=False):
    optimizer.zero_grad()
    loss = model(fg.ones(1, 3)).sum()
    scaler.scale(loss * (float("inf") if poison else 1.0)).backward()
    scaler.step(optimizer)
    scaler.update()


def test_inf_gradients_skip_the_step_and_back_off_then_the_scale_grows():
    scaler = fg.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2, backoff_factor=0.25)
    model, optimizer = _model_and_optimizer()
    _step(scaler, model, optimizer, poison=True)
    np.testing.assert_array_equal(values(model.weight), [[1.0, 2.0, 3.0]])  # skipped
    assert scaler.get_scale() == 2.0 and scaler.state_dict()["_growth_tracker"] == 0
    _step(scaler, model, optimizer)
    assert scaler.get_scale() == 2.0 and scaler.state_dict()["_growth_tracker"] == 1
    _step(scaler, model, optimizer)
    assert scaler.get_scale() == 4.0 and scaler.state_dict()["_growth_tracker"] == 0
    np.testing.assert_allclose(values(model.weight), [[0.0, 1.0, 2.0]])  # two steps of 0.5


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning", "ignore:invalid:RuntimeWarning")
def test_a_training_step_with_a_scaler_compiles_to_the_eager_numbers():
    def train_step(model, optimizer, scaler, x, target):
        optimizer.zero_grad()
        with fg.autocast("cpu"):
            loss = F.mse_loss(model(x), target)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss

    def setup():
        model, optimizer = _model_and_optimizer(lr=0.05)
        return model, optimizer, fg.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=2)

    x, target = randn(6, 3), randn(6, 1, seed=1)
    eager, compiled = setup(), setup()
    compiled_step = fg.jit(train_step)
    for k in range(5):
        inputs = x * 1e38 if k == 1 else x  # an overflow: a skipped step
        expected = train_step(*eager, inputs, target)
        assert_as_eager(compiled_step(*compiled, inputs, target), expected)
        assert compiled[2].state_dict() == eager[2].state_dict()
        np.testing.assert_array_equal(values(compiled[0].weight), values(eager[0].weight))
    assert compiled_step.cache_info().hits >= 2


def test_scaler_state_dict_round_trip_and_errors():
    scaler = fg.amp.GradScaler("cpu", init_scale=16.0, growth_interval=3)
    model, optimizer = _model_and_optimizer()
    _step(scaler, model, optimizer)
    state = scaler.state_dict()
    assert state == {
        "scale": 16.0,
        "growth_factor": 2.0,
        "backoff_factor": 0.5,
        "growth_interval": 3,
        "_growth_tracker": 1,
    }
    other = fg.amp.GradScaler("cpu")
    other.load_state_dict(state)
    assert other.state_dict() == state
    with pytest.raises(RuntimeError, match="saved from a disabled instance"):
        other.load_state_dict({})
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(optimizer, closure=lambda: None)
    with pytest.raises(AssertionError, match=r"The growth factor must be > 1\.0\."):
        fg.amp.GradScaler("cpu", growth_factor=1.0)


def test_scaler_does_not_unscale_float16_gradients():
    scaler = fg.amp.GradScaler("cpu", init_scale=4.0)
    weight = nn.Parameter(fg.ones(2, dtype=fg.float16))
    optimizer = fg.optim.SGD([weight], lr=0.1)
    scaler.scale(weight.sum()).backward()
    with pytest.raises(ValueError, match=r"Attempting to unscale FP16 gradients\."):
        scaler.step(optimizer)


def test_deprecated_scaler_spellings_warn_as_pytorch():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scaler = fg.cuda.amp.GradScaler(enabled=True)
    assert [(w.category, str(w.message)) for w in caught] == [
        (
            FutureWarning,
            "`torch.cuda.amp.GradScaler(args...)` is deprecated. "
            "Please use `torch.amp.GradScaler('cuda', args...)` instead.",
        ),
        (
            UserWarning,
            "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
        ),
    ]
    assert not scaler.is_enabled()
    with pytest.warns(FutureWarning, match=r"torch.amp.GradScaler\('cpu', args...\)"):
        scaler = fg.cpu.amp.GradScaler(init_scale=2.0)
    assert scaler.is_enabled() and scaler.get_scale() == 2.0
