"""PyTorch names much public code uses: the default dtype, lazy modules,
ConvTranspose3d, CTC loss, QR, gumbel_softmax, histogram, Tensor.H/mH/mT,
itemsize and nbytes, and the torch._foreach_* functions (values against
numpy in tests/op_table.py; here their behaviour and errors)."""

import copy
import math
import pickle
import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn
import fusegrad.nn.functional as F

from op_table import _conv_transpose3d_ref, _ctc_ref

# ----------------------------------------------------------------- default dtype


@pytest.fixture
def default_dtype():
    """Sets the default dtype for a test, float32 again after it."""
    yield fg.set_default_dtype
    fg.set_default_dtype(fg.float32)


@pytest.mark.parametrize("dtype", [fg.float64, fg.float16, fg.bfloat16])
def test_the_default_dtype_is_what_floats_are_made_and_promoted_as(default_dtype, dtype):
    default_dtype(dtype)
    assert fg.get_default_dtype() is dtype
    made = [
        fg.tensor([1.0]), fg.tensor(2.5), fg.tensor([]), fg.zeros(2), fg.ones(2), fg.empty(2),
        fg.full((2,), 1.5), fg.rand(2), fg.randn(2), fg.arange(0.5, 2), fg.linspace(0, 1, 3),
        fg.eye(2), fg.Tensor([1]), fg.normal(0.0, 1.0, (2,)), fg.hann_window(4),
        fg.arange(3) * 2.5, fg.sqrt(fg.arange(3)), fg.arange(3) / 2,
    ]  # fmt: skip
    assert all(t.dtype is dtype for t in made)
    assert fg.arange(3).dtype is fg.int64 and fg.tensor([1]).dtype is fg.int64
    assert fg.FloatTensor([1]).dtype is fg.float32
    assert nn.Linear(2, 3).weight.dtype is dtype and nn.Conv2d(1, 2, 3).bias.dtype is dtype
    assert fg.finfo().dtype == dtype.name


def test_a_tensor_of_the_default_dtype_prints_without_it(default_dtype):
    default_dtype(fg.float64)
    assert repr(fg.tensor([1.0])) == "tensor([1.])"
    assert repr(fg.tensor([1.0], dtype=fg.float32)) == "tensor([1.], dtype=fusegrad.float32)"


def test_set_default_dtype_refuses_what_is_no_floating_dtype():
    with pytest.raises(TypeError, match=r"^only floating-point types are supported"):
        fg.set_default_dtype(fg.int32)
    with pytest.raises(TypeError, match=r"^invalid dtype object"):
        fg.set_default_dtype(np.float64)
    assert fg.get_default_dtype() is fg.float32


def test_a_compiled_function_follows_the_default_dtype(default_dtype):
    made_as_default = fg.jit(lambda x: x * 2.5 + fg.ones(1))
    x = fg.arange(3)
    for dtype in (fg.float32, fg.float64, fg.float32):
        default_dtype(dtype)
        for _ in range(3):  # a trace or a hit, then the direct path the last call takes
            assert made_as_default(x).dtype is dtype
    assert made_as_default.cache_info().misses == 2


# ------------------------------------------------------------------ lazy modules


def test_lazy_linear_becomes_a_linear_of_its_first_inputs_size():
    layer = nn.LazyLinear(3)
    weight = layer.weight
    assert repr(layer) == "LazyLinear(in_features=0, out_features=3, bias=True)"
    assert isinstance(weight, nn.UninitializedParameter) and nn.parameter.is_lazy(weight)
    assert layer.has_uninitialized_params()
    out = layer(fg.randn(5, 4))
    assert type(layer) is nn.Linear and layer.in_features == 4 and out.shape == (5, 3)
    assert layer.weight is weight and type(weight) is nn.Parameter and weight.shape == (3, 4)
    assert float(weight.abs().max()) <= 0.5  # initialized as a Linear(4, 3)


def test_an_uninitialized_parameter_refuses_use_but_knows_its_dtype():
    weight = nn.LazyLinear(3, dtype=fg.float64).weight
    assert weight.dtype is fg.float64 and weight.requires_grad
    assert repr(weight) == "<UninitializedParameter>"
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized"):
        _ = weight.shape
    with pytest.raises(ValueError, match="Attempted to use an uninitialized parameter"):
        weight + 1
    parameter = nn.UninitializedParameter()
    parameter.materialize((2, 3))
    assert type(parameter) is nn.Parameter and parameter.shape == (2, 3)


def test_an_optimizer_made_before_the_first_input_updates_the_materialized_parameters():
    model = nn.Sequential(nn.LazyLinear(4), nn.ReLU(), nn.LazyLinear(1))
    opt = fg.optim.SGD(model.parameters(), lr=0.1)
    model(fg.randn(8, 3)).pow(2).sum().backward()
    before = [p.detach().clone() for p in model.parameters()]
    opt.step()
    assert all(not fg.equal(p, b) for p, b in zip(model.parameters(), before))


def test_a_lazy_modules_state_before_its_first_input():
    layer = nn.LazyLinear(3)
    assert all(nn.parameter.is_lazy(t) for t in layer.state_dict().values())
    layer.double()
    assert copy.deepcopy(layer)(fg.ones(1, 2, dtype=fg.float64)).dtype is fg.float64
    unpickled = pickle.loads(pickle.dumps(layer))
    assert unpickled.weight.dtype is fg.float64 and nn.parameter.is_lazy(unpickled.weight)
    loaded = nn.LazyLinear(3)
    loaded.load_state_dict({"weight": fg.ones(3, 2), "bias": fg.zeros(3)})
    assert loaded.weight.shape == (3, 2) and not loaded.has_uninitialized_params()
    assert fg.equal(loaded(fg.ones(1, 2)), fg.full((1, 3), 2.0))


@pytest.mark.parametrize(
    ("lazy", "input", "becomes", "weight_shape"),
    [
        (lambda: nn.LazyConv1d(4, 3), (2, 5, 7), nn.Conv1d, (4, 5, 3)),
        (lambda: nn.LazyConv2d(4, 3, groups=2), (6, 5, 5), nn.Conv2d, (4, 3, 3, 3)),
        (lambda: nn.LazyConv3d(2, 2), (1, 3, 4, 4, 4), nn.Conv3d, (2, 3, 2, 2, 2)),
        (lambda: nn.LazyConvTranspose2d(4, 3, groups=2), (1, 2, 5, 5), nn.ConvTranspose2d,
         (2, 2, 3, 3)),
        (lambda: nn.LazyConvTranspose3d(2, 2), (1, 3, 2, 2, 2), nn.ConvTranspose3d,
         (3, 2, 2, 2, 2)),
    ],
)  # fmt: skip
def test_lazy_convolutions_take_their_inputs_channels(lazy, input, becomes, weight_shape):
    layer = lazy()
    assert repr(layer).startswith(f"Lazy{becomes.__name__}(0, ")
    out = layer(fg.randn(*input))
    assert type(layer) is becomes and layer.weight.shape == weight_shape
    assert layer.bias.shape == (layer.out_channels,) and out.shape[-len(input) + 1] >= 1


def test_a_lazy_convolution_refuses_an_input_of_another_rank():
    with pytest.raises(RuntimeError, match=r"Expected 2D \(unbatched\) or 3D \(batched\) input to"):
        nn.LazyConv1d(4, 2)(fg.randn(2, 2, 3, 4))


def test_lazy_batch_norm_materializes_its_statistics():
    norm = nn.LazyBatchNorm1d()
    assert isinstance(norm.running_mean, nn.UninitializedBuffer)
    x = fg.randn(8, 3)
    norm(x)
    assert type(norm) is nn.BatchNorm1d and norm.num_features == 3
    np.testing.assert_allclose(norm.running_mean.numpy(), 0.1 * x.mean(0).numpy(), rtol=1e-5)
    assert int(norm.num_batches_tracked) == 1 and norm.weight.shape == (3,)
    plain = nn.LazyBatchNorm2d(affine=False, track_running_stats=False)
    assert plain(fg.randn(2, 3, 4, 4)).shape == (2, 3, 4, 4) and plain.weight is None


def test_a_compiled_training_step_materializes_lazy_layers_as_eager_mode_does():
    losses = []
    for compiled in (False, True):
        fg.manual_seed(0)
        model = nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.LazyLinear(2))
        opt = fg.optim.SGD(model.parameters(), lr=0.1)
        x = fg.randn(3, 5)

        def step(x, model=model, opt=opt):
            opt.zero_grad()
            loss = model(x).pow(2).sum()
            loss.backward()
            opt.step()
            return loss

        step = fg.jit(step) if compiled else step
        losses.append([step(x).item() for _ in range(4)])
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)


# ----------------------------------------------------------- ConvTranspose3d


def test_conv_transpose3d_module_computes_f_conv_transpose3d():
    layer = nn.ConvTranspose3d(2, 4, 3, stride=2, padding=1, output_padding=1, bias=False)
    assert repr(layer) == (
        "ConvTranspose3d(2, 4, kernel_size=(3, 3, 3), stride=(2, 2, 2), padding=(1, 1, 1), "
        "output_padding=(1, 1, 1), bias=False)"
    )
    x = fg.randn(1, 2, 3, 3, 3)
    out = layer(x)
    expected = _conv_transpose3d_ref(
        x.numpy(), layer.weight.detach().numpy(), stride=2, padding=1, output_padding=1
    )
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-4, atol=1e-5)
    assert nn.ConvTranspose3d(2, 4, 3, stride=2)(x, output_size=[8, 8, 8]).shape == (1, 4, 8, 8, 8)


def test_conv_transpose_errors_name_the_sizes_as_pytorch_does():
    x, w = fg.randn(1, 2, 3, 3, 3), fg.randn(2, 2, 2, 2, 2)
    with pytest.raises(RuntimeError, match=r"output_padding_depth: 2 output_padding_height: 2"):
        F.conv_transpose3d(x, w, output_padding=2, stride=2)
    with pytest.raises(RuntimeError, match=r"Calculated output size per channel: \(0 x 0 x 0\)"):
        F.conv_transpose3d(x, w, padding=2)
    # output_padding up to the dilation, past the stride
    assert F.conv_transpose2d(x[:, :, 0], w[:, :, 0], output_padding=1, dilation=2).shape == (
        1, 2, 6, 6,
    )  # fmt: skip


# -------------------------------------------------------------------- CTC loss

T, N, C = 6, 3, 5
TARGETS = np.array([[1, 2, 2], [3, 1, 0], [4, 4, 4]])
INPUT_LENGTHS, TARGET_LENGTHS = [6, 5, 4], [3, 2, 0]


def _logits():
    return np.random.default_rng(0).standard_normal((T, N, C))


def test_ctc_loss_reductions_and_target_layouts():
    x = _logits()
    losses = _ctc_ref(x, TARGETS, INPUT_LENGTHS, TARGET_LENGTHS)
    log_probs = fg.tensor(x).log_softmax(2)
    padded = F.ctc_loss(
        log_probs, fg.tensor(TARGETS), INPUT_LENGTHS, TARGET_LENGTHS, reduction="none"
    )
    np.testing.assert_allclose(padded.numpy(), losses, rtol=1e-10)
    joined = fg.tensor([1, 2, 2, 3, 1])
    lengths = fg.tensor(INPUT_LENGTHS), fg.tensor(TARGET_LENGTHS)
    total = F.ctc_loss(log_probs, joined, *lengths, reduction="sum")
    np.testing.assert_allclose(total.item(), losses.sum(), rtol=1e-10)
    mean = nn.CTCLoss()(log_probs, fg.tensor(TARGETS), *lengths)
    np.testing.assert_allclose(mean.item(), (losses / [3, 2, 1]).mean(), rtol=1e-10)
    one = F.ctc_loss(log_probs[:, 0], fg.tensor(TARGETS[0]), [6], [3], reduction="none")
    assert one.shape == () and math.isclose(one.item(), losses[0], rel_tol=1e-10)


def test_ctc_loss_of_an_impossible_alignment_is_infinite_or_zero():
    log_probs = fg.tensor(_logits()[:2]).log_softmax(2).requires_grad_()
    targets = fg.tensor([[1, 1, 1]] * 3)
    infinite = F.ctc_loss(log_probs, targets, [2, 2, 2], [3, 3, 1], reduction="none")
    assert math.isinf(infinite[0].item()) and math.isfinite(infinite[2].item())
    zeroed = F.ctc_loss(log_probs, targets, [2, 2, 2], [3, 3, 1], zero_infinity=True)
    zeroed.backward()
    assert math.isfinite(zeroed.item()) and fg.isfinite(log_probs.grad).all()
    nothing = F.ctc_loss(log_probs, targets, [0, 0, 2], [0, 1, 1], reduction="none")
    assert nothing[0].item() == 0 and math.isinf(nothing[1].item())


def test_ctc_loss_gradient_adds_pytorchs_exp_of_log_probs_at_counted_steps():
    """PyTorch's gradient of log-probabilities is the true one plus
    exp(log_probs) where t < input length."""
    log_probs = fg.tensor(_logits(), requires_grad=True)
    targets, lengths = fg.tensor(TARGETS), (INPUT_LENGTHS, TARGET_LENGTHS)
    F.ctc_loss(log_probs, targets, *lengths, reduction="sum").backward()
    x, eps = _logits(), 1e-6
    true = np.zeros_like(x)
    for index in np.ndindex(*x.shape):
        step = np.zeros_like(x)
        step[index] = eps
        up, down = (
            F.ctc_loss(fg.tensor(x + s), targets, *lengths, reduction="sum").item()
            for s in (step, -step)
        )
        true[index] = (up - down) / (2 * eps)
    counted = np.arange(T)[:, None, None] < np.array(INPUT_LENGTHS)[None, :, None]
    np.testing.assert_allclose(log_probs.grad.numpy(), true + np.exp(x) * counted, atol=1e-6)


def test_ctc_loss_compiles_once_for_lengths_that_change():
    @fg.jit
    def loss(x, targets, input_lengths, target_lengths):
        return F.ctc_loss(x.log_softmax(2), targets, input_lengths, target_lengths)

    x, targets = fg.tensor(_logits()), fg.tensor(TARGETS)
    for input_lengths in ([6, 5, 4], [4, 6, 6], [5, 5, 5]):
        lengths = fg.tensor(input_lengths), fg.tensor(TARGET_LENGTHS)
        expected = F.ctc_loss(x.log_softmax(2), targets, *lengths)
        np.testing.assert_allclose(loss(x, targets, *lengths).item(), expected.item(), rtol=1e-6)
    assert loss.cache_info().misses == 1


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"input_lengths": [7, 5, 4]}, RuntimeError, "input_lengths to have value at most 6, but"),
        ({"target_lengths": [4, 2, 0]}, RuntimeError, "size at least 4 at dimension 1, but got"),
        ({"input_lengths": [6, 5]}, RuntimeError, "input_lengths must be of size batch_size"),
        ({"input_lengths": fg.tensor([6, 5, 4])}, TypeError, "must both be tuples of ints"),
        ({"blank": 5}, RuntimeError, "blank must be in label range"),
        ({"targets": fg.tensor([1, 2, 2, 3])}, RuntimeError, "to have size 5 at dimension 0"),
        ({"reduction": "xx"}, ValueError, "xx is not a valid value for reduction"),
    ],
)
def test_ctc_loss_errors(change, error, message):
    arguments = {
        "log_probs": fg.tensor(_logits()).log_softmax(2),
        "targets": fg.tensor(TARGETS),
        "input_lengths": INPUT_LENGTHS,
        "target_lengths": TARGET_LENGTHS,
        **change,
    }
    with pytest.raises(error, match=message):
        F.ctc_loss(**arguments)


def test_ctc_loss_refuses_what_pytorchs_kernel_does_not_compute():
    for dtype, name in ((fg.int64, "Long"), (fg.float16, "Half")):
        with pytest.raises(NotImplementedError, match=f"not implemented for '{name}'"):
            F.ctc_loss(fg.zeros(T, N, C, dtype=dtype), fg.tensor(TARGETS), [6] * 3, [1] * 3)


def test_nll_loss_2d_is_nll_loss_with_a_deprecation():
    with pytest.warns(FutureWarning, match="`NLLLoss2d` has been deprecated"):
        loss = nn.NLLLoss2d(ignore_index=1)
    x, target = fg.randn(2, 3, 4, 4).log_softmax(1), fg.randint(0, 3, (2, 4, 4))
    assert fg.equal(loss(x, target), nn.NLLLoss(ignore_index=1)(x, target))


# -------------------------------------------------------------------------- QR


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (2, 3, 3)])
def test_qr_factors_are_orthonormal_and_triangular(shape):
    a = fg.randn(*shape, dtype=fg.float64)
    q, r = fg.linalg.qr(a)
    k = min(shape[-2:])
    assert q.shape == (*shape[:-1], k) and r.shape == (*shape[:-2], k, shape[-1])
    np.testing.assert_allclose(
        (q.mT @ q).numpy(), np.broadcast_to(np.eye(k), q.mT.shape[:-1] + (k,)), atol=1e-12
    )
    np.testing.assert_allclose((q @ r).numpy(), a.numpy(), atol=1e-12)
    assert fg.equal(r, r.triu())
    complete = fg.linalg.qr(a, mode="complete")
    assert complete.Q.shape[-1] == shape[-2] and complete.R.shape == a.shape
    only_r = fg.linalg.qr(a, mode="r")
    assert only_r.Q.shape == (0,) and fg.equal(only_r.R, r)


def test_qr_gradients_pytorch_refuses():
    tall = fg.randn(4, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="not computed when mode='r'"):
        fg.linalg.qr(tall, mode="r").R.sum().backward()
    with pytest.raises(RuntimeError, match="not differentiable when mode='complete' and nrows"):
        fg.linalg.qr(tall, mode="complete").R.sum().backward()


def test_qr_arguments_and_the_deprecated_torch_qr():
    with pytest.raises(RuntimeError, match="received unrecognized mode 'x'"):
        fg.linalg.qr(fg.eye(2), mode="x")
    with pytest.raises(
        RuntimeError, match=r"Expected a floating point or complex tensor as input\. Got Long"
    ):
        fg.linalg.qr(fg.ones(2, 2, dtype=fg.int64))
    with pytest.raises(RuntimeError, match="must have at least 2 dimensions"):
        fg.linalg.qr(fg.ones(2))
    a = fg.randn(4, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        q, r = fg.qr(a, some=False)
        fg.qr(a)
    assert q.shape == (4, 4) and r.shape == (4, 3) and type(fg.qr(a)).__name__ == "qr"
    assert len([w for w in caught if "torch.qr is deprecated" in str(w.message)]) <= 1


def test_householder_product_of_a_qr_factorizations_reflectors_is_its_q():
    a = np.random.default_rng(1).standard_normal((5, 3))
    reflectors, tau = np.linalg.qr(a, mode="raw")  # LAPACK's geqrf, transposed
    q = fg.linalg.householder_product(fg.tensor(reflectors.T.copy()), fg.tensor(tau))
    np.testing.assert_allclose(q.numpy(), np.linalg.qr(a)[0], atol=1e-12)
    with pytest.raises(
        RuntimeError, match=r"input.shape\[-1\] must be greater than or equal to tau"
    ):
        fg.linalg.householder_product(fg.randn(4, 3), fg.randn(4))


# ------------------------------------------------------------- gumbel_softmax


def test_gumbel_softmax_samples_the_softmax_of_the_logits():
    logits = fg.tensor([[0.0, 1.0, 2.0]]).expand(20000, 3)
    samples = F.gumbel_softmax(logits, tau=0.5, hard=True)
    assert fg.equal(samples.sum(1), fg.ones(20000)) and fg.equal(samples, samples.round())
    frequencies = samples.mean(0).numpy()
    np.testing.assert_allclose(frequencies, F.softmax(logits[0], 0).numpy(), atol=0.02)
    soft = F.gumbel_softmax(logits[:4], dim=0)
    np.testing.assert_allclose(soft.sum(0).numpy(), np.ones(3), rtol=1e-6)


def test_hard_gumbel_softmax_is_differentiated_as_the_soft_sample():
    logits = fg.randn(3, 4, requires_grad=True)
    weights = fg.randn(3, 4)
    gradients = []
    for hard in (False, True):
        fg.manual_seed(7)
        (F.gumbel_softmax(logits, hard=hard) * weights).sum().backward()
        gradients.append(logits.grad.clone())
        logits.grad = None
    assert fg.allclose(gradients[0], gradients[1])
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated"):
        F.gumbel_softmax(logits, eps=1e-3)


def test_compiled_gumbel_softmax_draws_anew_each_call():
    sample = fg.jit(lambda x: F.gumbel_softmax(x, hard=True))
    logits = fg.zeros(64, 8)
    assert not fg.equal(sample(logits), sample(logits))


# ------------------------------------------------------------------- histogram


def test_histogram_bins_counts_weights_and_densities():
    x = fg.tensor([1.0, 2.0, 1.0])
    hist, edges = fg.histogram(x, bins=4, range=(0.0, 3.0), weight=fg.tensor([1.0, 2.0, 4.0]))
    assert hist.tolist() == [0, 5, 2, 0] and edges.tolist() == [0, 0.75, 1.5, 2.25, 3]
    assert fg.histogram(x, 4).bin_edges.tolist() == [1, 1.25, 1.5, 1.75, 2]  # the data's range
    assert x.histogram(fg.tensor([0.0, 1.5, 3.0])).hist.tolist() == [2, 1]
    density = fg.histogram(x, fg.tensor([0.0, 1.5, 3.0]), density=True).hist
    np.testing.assert_allclose(density.numpy(), [4 / 9, 2 / 9], rtol=1e-6)
    assert fg.histogram(fg.ones(2, 2), 2).bin_edges.tolist() == [0.5, 1, 1.5]
    assert fg.histogram(fg.tensor([]), 2).bin_edges.tolist() == [0, 0.5, 1]
    counted = fg.histogram(x.requires_grad_(), 2)
    assert not counted.hist.requires_grad and repr(counted).startswith(
        "fusegrad.return_types.histogram(\nhist="
    )


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: fg.histogram(fg.tensor([1, 2]), 2), NotImplementedError, "for 'Long'"),
        (lambda: fg.histogram(fg.ones(2), 0), RuntimeError, "bins must be > 0, but got 0"),
        (lambda: fg.histogram(fg.ones(2), 2, range=(3.0, 1.0)), RuntimeError, "min 3 max 1"),
        (lambda: fg.histogram(fg.tensor([1.0, math.inf]), 2), RuntimeError, r"\[1, inf\] is not"),
        (
            lambda: fg.histogram(fg.ones(2), fg.tensor([0.0, 1.0], dtype=fg.float64)),
            RuntimeError,
            "with dtype float and bins for dimension 0 with dtype double",
        ),
        (
            lambda: fg.histogram(fg.ones(2), 2, weight=fg.ones(3)),
            RuntimeError,
            "got input with shape .2, 1. and weight with shape .3.",
        ),
    ],
)
def test_histogram_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ------------------------------------------------------- Tensor.H, mH, mT, sizes


def test_conjugate_and_matrix_transposes():
    x = fg.randn(2, 3, 4, requires_grad=True)
    assert x.mT.shape == x.mH.shape == (2, 4, 3) and fg.randn(2, 3).H.shape == (3, 2)
    assert x.mH.grad_fn is not None
    with pytest.raises(
        RuntimeError, match=r"tensor\.H is only supported on matrices \(2-D tensors\)\. Got 3-D"
    ):
        _ = x.H
    for name in ("mT", "mH"):
        with pytest.raises(RuntimeError, match=f"tensor.{name} is only supported on matrices or"):
            getattr(fg.ones(3), name)
        with pytest.warns(UserWarning, match=f"Tensor.{name} is deprecated on 0-D tensors"):
            assert getattr(fg.tensor(1.0), name).shape == ()


def test_itemsize_and_nbytes_count_the_elements_seen():
    assert fg.ones(3, dtype=fg.float16).itemsize == 2 and fg.ones(1).itemsize == 4
    assert fg.ones(3, 4)[:, ::2].nbytes == 24
    assert fg.ones(2, 3, dtype=fg.float64).expand(4, 2, 3).nbytes == 192


# ------------------------------------------------------------ torch._foreach_*


def test_foreach_ops_return_new_tuples_or_update_the_list_in_place():
    tensors = [fg.ones(2), fg.ones(3)]
    added = fg._foreach_add(tensors, [fg.ones(2), fg.ones(3)], alpha=2)
    assert type(added) is tuple and added[1].tolist() == [3, 3, 3]
    assert fg._foreach_mul_(tensors, [2.0, 3.0]) is tensors
    assert tensors[0].tolist() == [2, 2] and tensors[1].tolist() == [3, 3, 3]
    fg._foreach_lerp_(tensors, [fg.zeros(2), fg.zeros(3)], 0.5)
    fg._foreach_addcdiv_(
        tensors, tensors, [fg.full((2,), 2.0), fg.full((3,), 3.0)], fg.tensor([2.0, 3.0])
    )
    assert tensors[0].tolist() == [2, 2] and tensors[1].tolist() == [3, 3, 3]
    norms = fg._foreach_norm(tensors, math.inf)
    assert [n.item() for n in norms] == [2, 3]
    fg._foreach_zero_(tuple(tensors))
    assert tensors[1].tolist() == [0, 0, 0]


def test_foreach_ops_are_differentiable_and_guard_leaves():
    weights = [fg.ones(2, requires_grad=True), fg.ones(3, requires_grad=True)]
    scaled = fg._foreach_mul(weights, [2.0, 3.0])
    fg._foreach_exp_(scaled)
    sum(s.sum() for s in scaled).backward()
    np.testing.assert_allclose(weights[1].grad.numpy(), 3 * np.exp(3.0) * np.ones(3), rtol=1e-6)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used"):
        fg._foreach_add_(weights, 1.0)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda t: fg._foreach_add(t, t[:1]), RuntimeError, "same number of tensors, got 2 and 1"),
        (lambda t: fg._foreach_add(t, [1]), RuntimeError, "same number of elements as scalar list"),
        (lambda t: fg._foreach_add([], 1), RuntimeError, "at least one tensor"),
        (lambda t: fg._foreach_mul(t, fg.ones(3)), RuntimeError, "scalar tensor expected to be"),
        (lambda t: fg._foreach_add(t[0], 1), TypeError, "argument 'self' must be tuple of Tensors"),
        (lambda t: fg._foreach_add(t, "x"), TypeError, "expected a number, a list of numbers"),
        (lambda t: fg._foreach_add_([fg.tensor([4])], 1.5), RuntimeError, "can't be cast to"),
    ],
)  # fmt: skip
def test_foreach_errors(call, error, message):
    with pytest.raises(error, match=message):
        call([fg.ones(2), fg.ones(3)])


def test_a_compiled_moving_average_by_foreach_ops_matches_eager():
    def update(average, params):
        fg._foreach_lerp_(average, params, 0.1)
        return fg._foreach_norm(average)

    compiled = fg.jit(update)
    params = [fg.randn(3, 4), fg.randn(5)]
    eager_average, compiled_average = [fg.zeros(3, 4), fg.zeros(5)], [fg.zeros(3, 4), fg.zeros(5)]
    for _ in range(3):
        expected, got = update(eager_average, params), compiled(compiled_average, params)
        for a, b in zip((*eager_average, *expected), (*compiled_average, *got)):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)
