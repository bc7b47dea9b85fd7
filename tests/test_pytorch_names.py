"""Names third-party PyTorch programs use, with PyTorch's behaviour on a
CPU-only build: torch.accelerator, inference_mode and inference tensors, the
math constants, the tensor's device flags, torch.onnx, the legacy tensor
types, channel dropout of other ranks, PyTorch's torch.nn.modules.<file>
paths, DataParallel, and modules' reprs."""

import importlib
import math
import re
import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn
import fusegrad.nn.functional as F

# ------------------------------------------------------------- accelerator

NO_ACCELERATOR = "Cannot access accelerator device when none is available."


def test_the_usual_device_choice_picks_the_cpu():
    accelerator = fg.accelerator
    device = accelerator.current_accelerator().type if accelerator.is_available() else "cpu"
    assert device == "cpu" and fg.ones(2, device=device).device == fg.device("cpu")


@pytest.mark.parametrize(
    ("call", "answer"),
    [
        (lambda: fg.accelerator.is_available(), False),
        (lambda: fg.accelerator.current_accelerator(), None),
        (lambda: fg.accelerator.current_accelerator(check_available=True), None),
        (lambda: fg.accelerator.device_count(), 0),
        (lambda: fg.accelerator.set_device_index(-1), None),  # a negative index: a no-op
    ],
)
def test_accelerator_questions_get_a_cpu_builds_answers(call, answer):
    got = call()
    assert got == answer and type(got) is type(answer)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: fg.accelerator.current_device_index(), NO_ACCELERATOR),
        (lambda: fg.accelerator.set_device_index(0), NO_ACCELERATOR),
        (lambda: fg.accelerator.set_device_index("cuda:0"), "Accelerator expected"),
        (lambda: fg.accelerator.current_stream(), NO_ACCELERATOR),
        (lambda: fg.accelerator.set_stream(None), NO_ACCELERATOR),
        (lambda: fg.accelerator.synchronize(), NO_ACCELERATOR),
        (lambda: fg.accelerator.synchronize(fg.device("cuda", 0)), "Accelerator expected"),
        (lambda: fg.accelerator.empty_cache(), NO_ACCELERATOR),
        (lambda: fg.accelerator.memory_allocated(), NO_ACCELERATOR),
        (lambda: fg.accelerator.max_memory_allocated(0), NO_ACCELERATOR),
        (lambda: fg.accelerator.memory_reserved(), NO_ACCELERATOR),
        (lambda: fg.accelerator.max_memory_reserved(), NO_ACCELERATOR),
        (lambda: fg.accelerator.memory_stats("cuda"), NO_ACCELERATOR),
        (lambda: fg.accelerator.reset_peak_memory_stats(), NO_ACCELERATOR),
        (lambda: fg.accelerator.reset_accumulated_memory_stats("cuda"), "Accelerator expected"),
        (lambda: fg.accelerator.get_memory_info(), NO_ACCELERATOR),
        (lambda: fg.accelerator.memory.memory_stats(), NO_ACCELERATOR),
    ],
)
def test_what_needs_an_accelerator_raises_pytorchs_error(call, message):
    with pytest.raises(RuntimeError) as error:
        call()
    assert str(error.value) == message


def test_accelerator_device_index_and_the_deprecated_names():
    with fg.accelerator.device_index(None):  # no device to switch to: nothing happens
        pass
    with pytest.raises(RuntimeError, match=NO_ACCELERATOR), fg.accelerator.device_index(0):
        pass
    with pytest.warns(FutureWarning, match="Use `current_device_index` instead"):
        with pytest.raises(RuntimeError, match=NO_ACCELERATOR):
            fg.accelerator.current_device_idx()
    with pytest.warns(FutureWarning, match="Use `set_device_index` instead"):
        fg.accelerator.set_device_idx(-1)


def test_cuda_synchronize_is_a_no_op():
    assert fg.cuda.synchronize() is None and fg.cuda.synchronize(0) is None


# ---------------------------------------------------------- inference mode

INPLACE_ERROR = (
    "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a "
    "clone to get a normal tensor before doing inplace update.See "
    "https://github.com/pytorch/rfcs/pull/17 for more details."
)
SAVED_ERROR = (
    "Inference tensors cannot be saved for backward. To work around you can make a clone to "
    "get a normal tensor and use it in autograd."
)


def test_inference_mode_records_no_graph_and_makes_inference_tensors():
    w = fg.ones(3, requires_grad=True)
    assert not fg.is_inference_mode_enabled()
    with fg.inference_mode():
        assert fg.is_inference_mode_enabled() and not fg.is_grad_enabled()
        product, made, view = w * 2, fg.zeros(2), w[:2]
        view_of_inference = product[1:]
    assert fg.is_grad_enabled() and not fg.is_inference_mode_enabled()
    assert not product.requires_grad and product.grad_fn is None
    assert product.is_inference() and made.is_inference() and fg.is_inference(product)
    assert view_of_inference.is_inference() and product.detach().is_inference()
    # a view of a normal tensor stays normal; so does what is computed outside
    assert not view.is_inference() and not w.is_inference()
    assert not (product + 1).is_inference() and not product.clone().is_inference()
    assert product[0].is_inference()  # a view of an inference tensor, in any mode


@pytest.mark.parametrize(
    "make",
    [
        lambda: fg.bincount(fg.tensor([0, 1, 1, 3])),
        lambda: fg.bincount(fg.tensor([0, 1]), weights=fg.ones(2)),
        lambda: fg.nonzero(fg.tensor([0.0, 2.0])),
        lambda: fg.nonzero(fg.tensor([0.0, 2.0]), as_tuple=True)[0],
        lambda: fg.where(fg.tensor([0.0, 2.0]) > 0)[0],
        lambda: fg.unique(fg.tensor([2, 1, 2]), return_counts=True)[1],
        lambda: fg.unique_consecutive(fg.tensor([2, 2, 1]), return_inverse=True)[1],
        lambda: fg.tril_indices(3, 3),
        lambda: fg.triu_indices(3, 3),
        lambda: fg.argmax(fg.tensor(5.0), dim=0),
        lambda: fg.all(fg.zeros(0)),
        lambda: fg.block_diag(),
    ],
    ids=[
        "bincount",
        "bincount weights",
        "nonzero",
        "nonzero as_tuple",
        "where",
        "unique",
        "unique_consecutive",
        "tril_indices",
        "triu_indices",
        "argmax of a scalar",
        "all of nothing",
        "block_diag of nothing",
    ],
)
def test_what_inference_mode_makes_from_values_is_an_inference_tensor(make):
    with fg.inference_mode():
        assert make().is_inference()
    assert not make().is_inference()


@pytest.mark.parametrize(
    "update",
    [
        lambda t: t.add_(1),
        lambda t: t.mul_(2),
        lambda t: t.zero_(),
        lambda t: t.fill_(3.0),
        lambda t: t.copy_(fg.ones(3)),
        lambda t: t.__setitem__(0, 5.0),
        lambda t: t[1:].add_(1),
    ],
    ids=["add_", "mul_", "zero_", "fill_", "copy_", "setitem", "view add_"],
)
def test_an_inference_tensor_is_updated_in_place_only_in_inference_mode(update):
    with fg.inference_mode():
        t = fg.ones(3)
        update(t)  # inside: allowed
    with pytest.raises(RuntimeError) as error:
        update(t)
    assert str(error.value) == INPLACE_ERROR
    copy = t.clone()
    update(copy)  # PyTorch's advice: a clone is a normal tensor


def test_autograd_refuses_to_save_an_inference_tensor():
    with fg.inference_mode():
        inference = fg.full((3,), 2.0)
    w = fg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError) as error:
        w * inference  # mul saves both operands for the gradient
    assert str(error.value) == SAVED_ERROR
    (w + inference).sum().backward()  # add saves nothing: allowed, as in PyTorch
    assert w.grad.tolist() == [1.0, 1.0, 1.0]
    (w * inference.clone()).sum().backward()
    assert w.grad.tolist() == [3.0, 3.0, 3.0]
    with pytest.raises(RuntimeError, match="Setting requires_grad=True on inference tensor"):
        inference.requires_grad_()
    with fg.inference_mode():
        assert inference.requires_grad_().requires_grad  # inside: allowed


def test_inference_mode_as_a_decorator_and_with_mode_false():
    w = fg.ones(2, requires_grad=True)

    def double(x):
        """Doubles."""
        return x * 2

    for decorated, inference in [
        (fg.inference_mode(double), True),
        (fg.inference_mode()(double), True),
        (fg.inference_mode(True)(double), True),
        (fg.inference_mode(False)(double), False),
        (fg.inference_mode(mode=False)(double), False),
    ]:
        out = decorated(w)
        assert out.is_inference() is inference and out.requires_grad is not inference
        assert decorated.__name__ == "double" and decorated.__doc__ == "Doubles."
    with fg.no_grad(), fg.inference_mode(False):  # PyTorch's inference_mode(False) enables grad
        assert fg.is_grad_enabled() and not fg.is_inference_mode_enabled()
    with fg.inference_mode():
        with fg.no_grad():
            pass
        with fg.inference_mode(False):
            assert fg.is_grad_enabled()
        assert fg.is_inference_mode_enabled() and not fg.is_grad_enabled()
    assert fg.autograd.inference_mode is fg.inference_mode


def test_inference_mode_inside_a_jit_function_works_as_eagerly():
    w = fg.tensor([1.0, 2.0, 3.0], requires_grad=True)

    def step(x):
        with fg.inference_mode():
            frozen = x * w
        return frozen * 2, x * w

    compiled = fg.jit(step)
    for _ in range(3):
        x = fg.tensor([0.5, -1.0, 2.0])
        (frozen, tracked), (eager_frozen, eager_tracked) = compiled(x), step(x)
        np.testing.assert_array_equal(frozen.numpy(), eager_frozen.numpy())
        np.testing.assert_array_equal(tracked.detach().numpy(), eager_tracked.detach().numpy())
        assert not frozen.requires_grad and tracked.requires_grad
        tracked.sum().backward()
    assert w.grad.tolist() == [1.5, -3.0, 6.0]  # three calls' x, and no graph through frozen
    assert compiled.cache_info().hits == 2


# --------------------------------------------------------------- constants


@pytest.mark.parametrize(
    ("name", "value"), [("inf", math.inf), ("nan", math.nan), ("pi", math.pi), ("e", math.e)]
)
def test_math_constants_are_floats(name, value):
    constant = getattr(fg, name)
    assert type(constant) is float
    assert constant == value or (math.isnan(value) and math.isnan(constant))


# ------------------------------------------------------------ device flags

FALSE_FLAGS = [
    "is_cuda",
    "is_xpu",
    "is_mps",
    "is_meta",
    "is_mtia",
    "is_maia",
    "is_hpu",
    "is_ipu",
    "is_xla",
    "is_lazy",
    "is_vulkan",
    "is_mkldnn",
    "is_quantized",
    "is_nested",
    "is_sparse",
    "is_sparse_csr",
]


@pytest.mark.parametrize("flag", FALSE_FLAGS)
def test_device_and_layout_flags_other_than_the_cpus_are_false(flag):
    for t in (fg.ones(2), nn.Parameter(fg.ones(2)), fg.tensor([1, 2])):
        assert getattr(t, flag) is False and t.is_cpu is True


# -------------------------------------------------------------------- onnx


def test_onnx_imports_and_refuses_to_export():
    onnx = importlib.import_module("fusegrad.onnx")
    assert fg.onnx is onnx and onnx.is_in_onnx_export() is False
    model = nn.Linear(2, 1)
    with pytest.raises(RuntimeError, match="fusegrad cannot export ONNX"):
        onnx.export(model, (fg.ones(1, 2),), "model.onnx", training=onnx.TrainingMode.EVAL)
    with pytest.raises(RuntimeError, match="fusegrad cannot export ONNX"):
        onnx.dynamo_export(model, fg.ones(1, 2))


# ------------------------------------------------------- legacy tensor types

LEGACY_TYPES = [
    ("FloatTensor", fg.float32),
    ("DoubleTensor", fg.float64),
    ("HalfTensor", fg.float16),
    ("BFloat16Tensor", fg.bfloat16),
    ("LongTensor", fg.int64),
    ("IntTensor", fg.int32),
    ("BoolTensor", fg.bool),
]


@pytest.mark.parametrize(("name", "dtype"), LEGACY_TYPES)
def test_legacy_types_construct_tensors_of_their_dtype(name, dtype):
    legacy = getattr(fg, name)
    assert legacy([1, 0]).dtype is dtype and legacy([1, 0]).tolist() == legacy([1, 0]).tolist()
    assert legacy(2, 3).shape == (2, 3) and legacy(2, 3).dtype is dtype
    assert legacy().shape == (0,) and legacy().dtype is dtype  # PyTorch's empty tensor([])
    assert legacy.dtype is dtype and legacy.is_cuda is False and legacy.__name__ == name


@pytest.mark.parametrize(("name", "dtype"), LEGACY_TYPES)
def test_legacy_types_are_the_types_of_tensors_of_their_dtype(name, dtype):
    legacy = getattr(fg, name)
    for other_name, other_dtype in LEGACY_TYPES:
        t = fg.zeros(2, dtype=other_dtype)
        assert isinstance(t, legacy) is (other_dtype is dtype)
        assert not isinstance(t, getattr(fg.cuda, other_name))
    assert isinstance(nn.Parameter(fg.zeros(1, dtype=dtype), requires_grad=False), legacy)
    assert not isinstance([1.0], legacy) and not isinstance(np.zeros(2), legacy)


@pytest.mark.parametrize(("name", "dtype"), LEGACY_TYPES)
def test_tensor_type_names_and_converts(name, dtype):
    x = fg.tensor([1.0, 0.0])
    assert fg.zeros(1, dtype=dtype).type() == f"fusegrad.{name}"
    for target in (getattr(fg, name), f"torch.{name}", f"fusegrad.{name}", dtype):
        converted = x.type(target)
        assert converted.dtype is dtype and converted.tolist() == [1, 0]
    assert x.type(fg.FloatTensor) is x and x.type("torch.FloatTensor") is x  # already of it


def test_tensor_type_refuses_what_is_no_cpu_tensor_type():
    x = fg.ones(2)
    with pytest.raises(ValueError, match=r"^invalid type: 'torch.Foo'$"):
        x.type("torch.Foo")
    with pytest.raises(TypeError, match=r"type\(\) received an invalid combination"):
        x.type(5)
    for cuda_type in (fg.cuda.FloatTensor, "torch.cuda.FloatTensor"):
        with pytest.raises(RuntimeError, match="Torch not compiled with CUDA enabled"):
            x.type(cuda_type)


@pytest.mark.parametrize(("name", "dtype"), LEGACY_TYPES)
def test_cuda_tensor_types_exist_but_make_nothing(name, dtype):
    cuda_type = getattr(fg.cuda, name)
    assert cuda_type.is_cuda is True and cuda_type.dtype is dtype
    with pytest.raises(TypeError) as error:
        cuda_type([1.0])
    assert str(error.value) == (
        f"type fusegrad.cuda.{name} not available. Torch not compiled with CUDA enabled."
    )


# --------------------------------------------------- channel dropout's ranks

RANK_WARNING = r"{name}: Received a {rank}-D input to {name}, which is deprecated"
THREE_D_WARNING = r"dropout2d: Received a 3D input to dropout2d and assuming that channel-wise"


@pytest.mark.parametrize(
    ("function", "shape", "warned", "channels"),
    [
        # channels: the dimensions a mask draws over (the others share its draw)
        (F.dropout2d, (2, 3, 4, 5), [], (0, 1)),
        (F.dropout2d, (6, 4, 5), [THREE_D_WARNING], (0, 1)),  # as (N, C, L)
        (F.dropout2d, (8, 6), [RANK_WARNING.format(name="dropout2d", rank=2)], (0, 1)),
        (F.dropout2d, (2, 3, 2, 2, 2), [RANK_WARNING.format(name="dropout2d", rank=5)], (0, 1)),
        (F.dropout3d, (2, 3, 2, 2, 2), [], (0, 1)),
        (F.dropout3d, (6, 2, 2, 2), [], (0,)),  # unbatched (C, D, H, W)
        (F.dropout3d, (6, 2, 2), [RANK_WARNING.format(name="dropout3d", rank=3)], (0,)),
        (F.dropout3d, (12,), [RANK_WARNING.format(name="dropout3d", rank=1)], (0,)),
        (F.dropout3d, (3, 2, 2, 2, 2, 2), [RANK_WARNING.format(name="dropout3d", rank=6)], (0,)),
        (F.dropout1d, (4, 6), [], (0,)),  # unbatched (C, L)
        (F.dropout1d, (2, 6, 3), [], (0, 1)),
    ],
)
def test_channel_dropout_of_any_rank_warns_and_proceeds_as_pytorch(
    function, shape, warned, channels
):
    x = fg.ones(*shape)
    fg.manual_seed(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = function(x, 0.5)
        evaluated = function(x, 0.5, training=False)
    assert len(caught) == 2 * len(warned)
    for warning, pattern in zip(caught, warned * 2):
        assert warning.category is UserWarning and warning.filename == __file__
        assert re.match(pattern, str(warning.message))
    shared = tuple(d for d in range(len(shape)) if d not in channels)
    per_channel = out.numpy().max(axis=shared, keepdims=True)
    np.testing.assert_array_equal(out.numpy(), np.broadcast_to(per_channel, shape))  # whole
    assert set(np.unique(per_channel)) == {0.0, 2.0}  # and not one draw for all
    assert (evaluated == 1).all()  # the identity in eval mode


def test_channel_dropout_modules_warn_and_eval_is_the_identity():
    layer = nn.Dropout2d(0.3)
    with pytest.warns(UserWarning, match="Received a 2-D input to dropout2d"):
        layer(fg.ones(4, 5))
    layer.eval()
    with pytest.warns(UserWarning, match="Received a 5-D input to dropout2d"):
        out = layer(fg.ones(1, 2, 3, 4, 5))
    assert (out == 1).all()


def test_channel_dropout_errors_as_pytorch():
    with pytest.raises(RuntimeError, match=r"^Feature dropout requires at least 2 dimensions"):
        with pytest.warns(UserWarning, match="Received a 1-D input to dropout2d"):
            F.dropout2d(fg.ones(5), 0.5)
    with pytest.warns(UserWarning):
        assert (F.dropout2d(fg.ones(5), 1.0) == 0).all()  # p = 1 zeroes without a mask
    with pytest.raises(RuntimeError) as error:
        F.dropout1d(fg.ones(5), 0.5)
    assert str(error.value) == (
        "dropout1d: Expected 2D or 3D input, but received a 1D input. Note that dropout1d "
        "exists to provide channel-wise dropout on inputs with 1 spatial dimension, a channel "
        "dimension, and an optional batch dimension (i.e. 2D or 3D inputs)."
    )
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        F.dropout3d(fg.ones(5), 1.5)


def test_channel_dropout_of_another_rank_compiles_to_the_same_draws():
    x = fg.ones(8, 6, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fg.manual_seed(4)
        eager = F.dropout2d(x, 0.25)
        fg.manual_seed(4)
        compiled = fg.jit(lambda t: F.dropout2d(t, 0.25))(x)
    np.testing.assert_array_equal(compiled.numpy(), eager.numpy())


# --------------------------------------------------------------- nn paths

MODULE_PATHS = [
    ("activation", "MultiheadAttention"),
    ("activation", "ReLU"),
    ("linear", "Linear"),
    ("linear", "Identity"),
    ("conv", "Conv2d"),
    ("conv", "ConvTranspose2d"),
    ("pooling", "MaxPool2d"),
    ("pooling", "AdaptiveAvgPool2d"),
    ("normalization", "LayerNorm"),
    ("normalization", "GroupNorm"),
    ("batchnorm", "BatchNorm1d"),
    ("batchnorm", "BatchNorm2d"),
    ("instancenorm", "InstanceNorm2d"),
    ("dropout", "Dropout"),
    ("dropout", "Dropout2d"),
    ("loss", "CrossEntropyLoss"),
    ("rnn", "LSTM"),
    ("rnn", "GRUCell"),
    ("sparse", "Embedding"),
    ("container", "Sequential"),
    ("container", "ModuleList"),
    ("module", "Module"),
    ("transformer", "TransformerEncoderLayer"),
    ("padding", "ZeroPad2d"),
    ("padding", "ReflectionPad1d"),
    ("flatten", "Flatten"),
    ("flatten", "Unflatten"),
    ("fold", "Unfold"),
    ("upsampling", "Upsample"),
    ("pixelshuffle", "PixelShuffle"),
    ("distance", "CosineSimilarity"),
]


@pytest.mark.parametrize(("file", "name"), MODULE_PATHS)
def test_torch_nn_modules_paths_resolve_to_the_layers(file, name):
    module = importlib.import_module(f"fusegrad.nn.modules.{file}")
    assert getattr(module, name) is getattr(nn, name)
    assert getattr(getattr(fg.nn.modules, file), name) is getattr(nn, name)  # no import needed


def test_base_classes_and_helpers_by_pytorchs_paths():
    from fusegrad.nn.modules.batchnorm import _BatchNorm, _NormBase
    from fusegrad.nn.modules.instancenorm import _InstanceNorm
    from fusegrad.nn.modules.linear import NonDynamicallyQuantizableLinear
    from fusegrad.nn.modules.utils import _pair, _quadruple, _single, _triple

    assert isinstance(nn.BatchNorm2d(3), _BatchNorm) and isinstance(nn.BatchNorm1d(3), _NormBase)
    # as in PyTorch: an instance normalization is no _BatchNorm (code freezing BNs relies on it)
    assert not isinstance(nn.InstanceNorm2d(3), _BatchNorm)
    assert isinstance(nn.InstanceNorm2d(3), (_InstanceNorm, _NormBase))
    assert issubclass(NonDynamicallyQuantizableLinear, nn.Linear)
    assert isinstance(nn.MultiheadAttention(4, 2).out_proj, NonDynamicallyQuantizableLinear)
    assert (_single(2), _pair(3), _triple((1, 2, 3)), _quadruple(0)) == (
        (2,),
        (3, 3),
        (1, 2, 3),
        (0, 0, 0, 0),
    )


def test_data_parallel_runs_the_module_on_the_cpu():
    from fusegrad.nn.parallel import data_parallel

    fg.manual_seed(0)
    layer = nn.Linear(3, 2)
    x = fg.randn(4, 3)
    np.testing.assert_array_equal(
        data_parallel(layer, x).detach().numpy(), layer(x).detach().numpy()
    )
    np.testing.assert_array_equal(
        data_parallel(layer, (x,), device_ids=[0], output_device=0).detach().numpy(),
        layer(x).detach().numpy(),
    )

    def scaled(input, scale=1.0):
        return input * scale

    assert data_parallel(scaled, x, module_kwargs={"scale": 2.0}).tolist() == (x * 2).tolist()


def test_data_parallel_module_wraps_and_calls_the_module():
    layer = nn.Linear(3, 2)
    wrapped = nn.DataParallel(layer, device_ids=[0])
    assert nn.DataParallel is nn.parallel.DataParallel and wrapped.module is layer
    assert list(wrapped.state_dict()) == ["module.weight", "module.bias"]
    x = fg.ones(2, 3)
    np.testing.assert_array_equal(wrapped(x).detach().numpy(), layer(x).detach().numpy())
    wrapped(x).sum().backward()
    assert layer.weight.grad is not None


# ------------------------------------------------------------------ reprs


@pytest.mark.parametrize(
    ("make", "text"),
    [
        (
            lambda: nn.BatchNorm1d(6),
            "BatchNorm1d(6, eps=1e-05, momentum=0.1, affine=True, bias=True, "
            "track_running_stats=True)",
        ),
        (
            lambda: nn.BatchNorm2d(3, eps=1e-3, momentum=None, affine=False),
            "BatchNorm2d(3, eps=0.001, momentum=None, affine=False, bias=False, "
            "track_running_stats=True)",
        ),
        (
            lambda: nn.InstanceNorm2d(4),
            "InstanceNorm2d(4, eps=1e-05, momentum=0.1, affine=False, bias=False, "
            "track_running_stats=False)",
        ),
        (lambda: nn.LayerNorm(8), "LayerNorm((8,), eps=1e-05, elementwise_affine=True)"),
        (
            lambda: nn.LayerNorm((2, 3), eps=1e-6, elementwise_affine=False),
            "LayerNorm((2, 3), eps=1e-06, elementwise_affine=False)",
        ),
        (lambda: nn.GroupNorm(2, 4), "GroupNorm(2, 4, eps=1e-05, affine=True)"),
        (lambda: nn.Dropout(), "Dropout(p=0.5, inplace=False)"),
        (lambda: nn.Dropout2d(0.2, inplace=True), "Dropout2d(p=0.2, inplace=True)"),
        (lambda: nn.Embedding(10, 3), "Embedding(10, 3)"),
        (
            lambda: nn.Embedding(10, 3, padding_idx=0, max_norm=1.0),
            "Embedding(10, 3, padding_idx=0, max_norm=1.0)",
        ),
        (lambda: nn.Conv2d(1, 2, 3), "Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1))"),
        (
            lambda: nn.Conv2d(1, 2, (3, 5), stride=2, padding=1, dilation=2, bias=False),
            "Conv2d(1, 2, kernel_size=(3, 5), stride=(2, 2), padding=(1, 1), dilation=(2, 2), "
            "bias=False)",
        ),
        (
            lambda: nn.ConvTranspose2d(2, 3, 3, stride=2, output_padding=1),
            "ConvTranspose2d(2, 3, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1))",
        ),
        (lambda: nn.Linear(2, 3), "Linear(in_features=2, out_features=3, bias=True)"),
        (
            lambda: nn.Linear(2, 3, bias=False),
            "Linear(in_features=2, out_features=3, bias=False)",
        ),
        (lambda: nn.LSTM(3, 4), "LSTM(3, 4)"),
        (
            lambda: nn.LSTM(3, 4, 2, batch_first=True, dropout=0.1, bidirectional=True),
            "LSTM(3, 4, num_layers=2, batch_first=True, dropout=0.1, bidirectional=True)",
        ),
        (lambda: nn.GRU(3, 4, bias=False), "GRU(3, 4, bias=False)"),
        (lambda: nn.RNN(3, 4, nonlinearity="relu"), "RNN(3, 4)"),  # RNN shows no nonlinearity
        (lambda: nn.RNNCell(3, 4, nonlinearity="relu"), "RNNCell(3, 4, nonlinearity=relu)"),
        (
            lambda: nn.MultiheadAttention(8, 2),
            "MultiheadAttention(\n  (out_proj): NonDynamicallyQuantizableLinear("
            "in_features=8, out_features=8, bias=True)\n)",
        ),
    ],
)
def test_module_reprs_are_pytorchs(make, text):
    assert repr(make()) == text
