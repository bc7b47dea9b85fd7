"""nn: Module and its containers, nn.init, the layers against numpy, losses,
utils, optimizers against their update rules, and training steps under jit
against eager mode."""

import math
from collections import OrderedDict

import numpy as np
import pytest
from training import assert_trains_as_eagerly, minimizing

import fusegrad as fg
import fusegrad.nn as nn
import fusegrad.nn.functional as F
from fusegrad.nn import init


def test_module_registers_parameters_and_submodules():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2, bias=False))
    names = [name for name, _ in model.named_parameters()]
    assert names == ["0.weight", "0.bias", "2.weight"]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in model.parameters())
    assert model(fg.ones(5, 3)).shape == (5, 2)


def test_linear_init_bounds_and_zero_grad():
    layer = nn.Linear(16, 8)
    assert float(layer.weight.abs().max()) <= 0.25
    layer(fg.ones(2, 16)).sum().backward()
    assert layer.weight.grad is not None
    layer.zero_grad()
    assert layer.weight.grad is None


def test_sgd_momentum_weight_decay_matches_the_update_rule():
    w0 = np.array([1.0, -2.0])
    w = nn.Parameter(fg.tensor(w0))
    opt = fg.optim.SGD([w], lr=0.1, momentum=0.9, weight_decay=0.01)
    ref, buf = w0.copy(), None
    for _ in range(3):
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()
        d = 2 * ref + 0.01 * ref
        buf = d if buf is None else 0.9 * buf + d
        ref = ref - 0.1 * buf
    np.testing.assert_allclose(w.detach().numpy(), ref, rtol=1e-6)


def test_adam_matches_the_update_rule():
    w0 = np.array([1.0, -2.0])
    w = nn.Parameter(fg.tensor(w0))
    opt = fg.optim.Adam([w], lr=0.1)
    ref, m, v = w0.copy(), 0.0, 0.0
    for t in range(1, 4):
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()
        g = 2 * ref
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        ref = ref - 0.1 * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    np.testing.assert_allclose(w.detach().numpy(), ref, rtol=1e-5)


def test_a_small_mlp_learns_xor():
    fg.manual_seed(0)
    x = fg.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    y = fg.tensor([0, 1, 1, 0])
    model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))
    opt = fg.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(200):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    assert model(x).argmax(1).tolist() == [0, 1, 1, 0]


def test_dropout_scales_kept_units_and_is_identity_in_eval():
    fg.manual_seed(1)
    x = fg.ones(1000)
    out = F.dropout(x, 0.25)
    kept = out.numpy()[out.numpy() != 0]
    np.testing.assert_allclose(kept, 1 / 0.75)
    assert 0.65 < kept.size / 1000 < 0.85
    layer = nn.Dropout(0.25).eval()
    assert layer(x) is x


def test_cross_entropy_ignore_index_weights_and_probabilities():
    logits = fg.tensor([[1.0, 2.0, 0.5], [0.1, 0.2, 3.0]], requires_grad=True)
    full = F.cross_entropy(logits, fg.tensor([1, 2]), reduction="none")
    ignored = F.cross_entropy(logits, fg.tensor([1, -100]))
    np.testing.assert_allclose(ignored.item(), full[0].item(), rtol=1e-6)
    probs = F.cross_entropy(logits, fg.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    np.testing.assert_allclose(probs.item(), full.mean().item(), rtol=1e-6)
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(logits, fg.tensor([1, 5]))


@pytest.mark.parametrize("classes", [7, 1100])  # picked by a compare, then by a gather
def test_nll_loss_picks_the_same_values_by_compare_and_by_gather(classes, monkeypatch):
    rng = np.random.default_rng(classes)
    logits = rng.standard_normal((2, classes, 3)).astype(np.float32)
    target = rng.integers(0, classes, (2, 3))
    target[1, 2] = -100
    weight = rng.uniform(0.5, 2.0, classes).astype(np.float32)
    results = []
    for limit in (F.ONE_HOT_CLASSES, 0):
        monkeypatch.setattr(F, "ONE_HOT_CLASSES", limit)
        for fn in (F.cross_entropy, fg.jit(F.cross_entropy)):
            x = fg.tensor(logits, requires_grad=True)
            loss = fn(x, fg.tensor(target), fg.tensor(weight))
            loss.backward()
            results.append((loss.item(), x.grad.numpy()))
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    kept = target != -100
    picked = np.take_along_axis(logp, np.where(kept, target, 0)[:, None], 1)[:, 0]
    w = weight[np.where(kept, target, 0)] * kept
    want = -(picked * w).sum() / w.sum()
    for loss, grad in results:  # compiled sums may add in another order
        np.testing.assert_allclose(loss, want, rtol=1e-5)
        np.testing.assert_allclose(grad, results[0][1], rtol=1e-6, atol=1e-9)
    (compare_loss, compare_grad), (gather_loss, gather_grad) = results[0], results[2]
    assert compare_loss == gather_loss  # eager: the same numbers either way
    np.testing.assert_array_equal(compare_grad, gather_grad)


def test_state_dict_round_trip():
    a, b = nn.Linear(3, 2), nn.Linear(3, 2)
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a.weight.detach().numpy(), b.weight.detach().numpy())


# ------------------------------------------------------------------ Module


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 2)
        self.register_buffer("mean", fg.zeros(2))
        self.register_buffer("scratch", fg.ones(2), persistent=False)
        self.scale = nn.Parameter(fg.ones(()))

    def forward(self, x):
        return self.linear(x) * self.scale - self.mean


def test_parameters_buffers_and_submodules_are_registered_by_assignment():
    block = _Block()
    assert [n for n, _ in block.named_parameters()] == ["scale", "linear.weight", "linear.bias"]
    assert [n for n, _ in block.named_buffers()] == ["mean", "scratch"]
    assert [n for n, _ in block.named_parameters(prefix="b", recurse=False)] == ["b.scale"]
    assert [n for n, _ in block.named_modules()] == ["", "linear"]
    assert list(block.children()) == [block.linear]
    assert block.mean is block._buffers["mean"] and "mean" in dir(block)
    block.mean = fg.full((2,), 3.0)  # assigning to a buffer's name keeps it a buffer
    assert block.mean.tolist() == [3.0, 3.0] and "mean" in block._buffers
    del block.scratch
    assert [n for n, _ in block.named_buffers()] == ["mean"]


def test_registration_errors_use_pytorchs_wording():
    block = _Block()
    with pytest.raises(TypeError, match=r"cannot assign 'fusegrad.FloatTensor' as parameter"):
        block.scale = fg.ones(())
    with pytest.raises(KeyError, match="attribute 'linear' already exists"):
        block.register_buffer("linear", fg.ones(1))
    with pytest.raises(KeyError, match=r'contain "\."'):
        block.register_buffer("a.b", fg.ones(1))
    with pytest.raises(TypeError, match="is not a Module subclass"):
        block.add_module("x", 3)
    with pytest.raises(TypeError, match=r"cannot assign 'fusegrad\.FloatTensor' object to"):
        block.register_parameter("y", fg.ones(1))

    class Early(nn.Module):
        def __init__(self):
            self.weight = nn.Parameter(fg.ones(1))

    with pytest.raises(AttributeError, match=r"before Module.__init__\(\)"):
        Early()


def test_shared_parameters_are_listed_once_but_saved_under_every_name():
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    b.weight = a.weight
    model = nn.Sequential(a, b)
    assert [n for n, _ in model.named_parameters()] == ["0.weight", "0.bias", "1.bias"]
    assert list(model.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]


def test_state_dict_holds_detached_parameters_and_persistent_buffers():
    block = _Block()
    state = block.state_dict()
    assert list(state) == ["scale", "mean", "linear.weight", "linear.bias"]
    assert all(not t.requires_grad for t in state.values())
    assert state["linear.weight"]._data is block.linear.weight._data  # the same storage
    assert block.state_dict(keep_vars=True)["scale"] is block.scale


def test_load_state_dict_copies_and_reports_keys_as_pytorch_does():
    source, target = _Block(), _Block()
    with fg.no_grad():
        source.mean.fill_(5.0)
    result = target.load_state_dict(source.state_dict())
    assert repr(result) == "<All keys matched successfully>"
    assert target.mean.tolist() == [5.0, 5.0]
    np.testing.assert_array_equal(
        target.linear.weight.detach().numpy(), source.linear.weight.detach().numpy()
    )
    state = source.state_dict()
    del state["mean"]
    state["extra"] = fg.ones(1)
    with pytest.raises(RuntimeError) as info:
        target.load_state_dict(state)
    assert str(info.value) == (
        'Error(s) in loading state_dict for _Block:\n\tMissing key(s) in state_dict: "mean". '
        '\n\tUnexpected key(s) in state_dict: "extra". '
    )
    assert target.load_state_dict(state, strict=False) == (["mean"], ["extra"])
    state = source.state_dict()
    state["linear.bias"] = fg.ones(3)
    with pytest.raises(
        RuntimeError, match=r"size mismatch for linear.bias: copying a param with shape"
    ):
        target.load_state_dict(state)


def test_load_state_dict_with_assign_takes_the_tensors():
    target = nn.Linear(2, 1)
    weight = fg.ones(1, 2)
    target.load_state_dict({"weight": weight, "bias": fg.zeros(1)}, assign=True)
    assert isinstance(target.weight, nn.Parameter) and target.weight._data is weight._data


def test_double_converts_in_place_so_optimizers_keep_their_parameters():
    model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    weight = model[0].weight
    model(fg.ones(4, 2)).sum().backward()
    optimizer_params = list(model.parameters())
    model.double()
    assert model[0].weight is weight and weight.dtype is fg.float64
    assert weight.grad.dtype is fg.float64
    assert model[1].running_mean.dtype is fg.float64
    assert model[1].num_batches_tracked.dtype is fg.int64
    assert optimizer_params == list(model.parameters())
    assert model.to(fg.float32) is model and weight.dtype is fg.float32
    assert model.float()[0].weight.dtype is fg.float32
    with pytest.raises(TypeError, match="only accepts floating point"):
        model.to(fg.int64)
    with pytest.raises(TypeError, match="no half-precision"):
        model.half()
    with pytest.raises(RuntimeError, match="CPU only"):
        model.to("cuda")
    assert model.to("cpu") is model


def test_train_eval_apply_zero_grad_and_requires_grad():
    model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(), nn.ReLU()))
    assert all(m.training for m in model.modules())
    model.eval()
    assert not any(m.training for m in model.modules())
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        model.train("yes")
    visited = []
    model.apply(lambda m: visited.append(type(m).__name__))
    assert visited == ["Linear", "Dropout", "ReLU", "Sequential", "Sequential"]
    model(fg.ones(1, 2)).sum().backward()
    model.zero_grad(set_to_none=False)
    assert model[0].weight.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    model.requires_grad_(False)
    assert not any(p.requires_grad for p in model.parameters())


def test_forward_hooks_run_around_forward_and_can_be_removed():
    layer = nn.Linear(2, 2)
    seen = []
    pre = layer.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    post = layer.register_forward_hook(lambda m, args, out: seen.append(out.shape) or out + 1)
    out = layer(fg.ones(3, 2))
    np.testing.assert_allclose(
        out.detach().numpy(), np.broadcast_to(layer.bias.detach().numpy() + 1, (3, 2))
    )
    assert seen == [(3, 2)]
    pre.remove()
    post.remove()
    assert layer(fg.ones(1, 2)).shape == (1, 2) and seen == [(3, 2)]


def test_repr_nests_and_compresses_repeated_list_entries_as_pytorch():
    model = nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2),
        nn.ModuleList([nn.Linear(4, 4) for _ in range(3)] + [nn.ReLU()]),
        nn.ModuleDict({"act": nn.LeakyReLU(0.2), "norm": nn.BatchNorm1d(4, eps=0.1)}),
        nn.LSTM(1, 16, num_layers=2, batch_first=True),
        nn.Embedding(10, 3, padding_idx=0),
        nn.MaxPool2d(2),
        nn.Flatten(),
    )
    assert (
        repr(model)
        == """\
Sequential(
  (0): Conv2d(1, 6, kernel_size=(5, 5), stride=(1, 1), padding=(2, 2))
  (1): ModuleList(
    (0-2): 3 x Linear(in_features=4, out_features=4, bias=True)
    (3): ReLU()
  )
  (2): ModuleDict(
    (act): LeakyReLU(negative_slope=0.2)
    (norm): BatchNorm1d(4, eps=0.1, momentum=0.1, affine=True, bias=True, track_running_stats=True)
  )
  (3): LSTM(1, 16, num_layers=2, batch_first=True)
  (4): Embedding(10, 3, padding_idx=0)
  (5): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
  (6): Flatten(start_dim=1, end_dim=-1)
)"""
    )
    params = nn.ParameterList([fg.ones(2, 3), nn.Parameter(fg.zeros(1, dtype=fg.float64))])
    assert repr(params) == (
        "ParameterList(\n"
        "    (0): Parameter containing: [fusegrad.float32 of size 2x3]\n"
        "    (1): Parameter containing: [fusegrad.float64 of size 1]\n)"
    )


def test_sequential_indexing_slicing_and_editing():
    a, b, c = nn.ReLU(), nn.Tanh(), nn.Sigmoid()
    model = nn.Sequential(a, b)
    assert model[-1] is b and len(model) == 2 and list(model) == [a, b]
    assert isinstance(model[1:], nn.Sequential) and list(model[1:]) == [b]
    model.append(c)
    model.insert(0, nn.Identity())
    assert [type(m).__name__ for m in model] == ["Identity", "ReLU", "Tanh", "Sigmoid"]
    del model[0]
    assert list(model._modules) == ["0", "1", "2"] and model[0] is a
    assert model.pop(1) is b and list(model) == [a, c]
    with pytest.raises(IndexError, match="index 5 is out of range"):
        model[5]
    named = nn.Sequential(OrderedDict([("first", nn.Linear(2, 3)), ("act", nn.ReLU())]))
    assert [n for n, _ in named.named_parameters()] == ["first.weight", "first.bias"]
    assert named(fg.ones(1, 2)).shape == (1, 3)


def test_module_list_dict_and_parameter_containers():
    layers = nn.ModuleList([nn.Linear(2, 2)])
    layers.append(nn.Linear(2, 2))
    layers += [nn.ReLU()]
    assert len(layers) == 3 and [n for n, _ in layers.named_parameters()][:2] == [
        "0.weight",
        "0.bias",
    ]
    del layers[0]
    assert list(layers._modules) == ["0", "1"]
    table = nn.ModuleDict({"a": nn.ReLU()})
    table["b"] = nn.Tanh()
    assert list(table) == ["a", "b"] and "b" in table and table.pop("a").__class__ is nn.ReLU
    plist = nn.ParameterList([fg.ones(2)])
    plist.append(fg.zeros(3))
    assert [n for n, _ in plist.named_parameters()] == ["0", "1"]
    assert all(isinstance(p, nn.Parameter) for p in plist) and plist[-1].shape == (3,)
    pdict = nn.ParameterDict({"w": fg.ones(2)})
    pdict["b"] = nn.Parameter(fg.zeros(1))
    assert list(pdict.keys()) == ["w", "b"] and [n for n, _ in pdict.named_parameters()] == [
        "w",
        "b",
    ]


def test_identity_flatten_unflatten_softmax_modules():
    x = fg.tensor(np.arange(24.0).reshape(2, 3, 4))
    assert nn.Identity(5, key="ignored")(x) is x
    assert nn.Flatten()(x).shape == (2, 12) and nn.Flatten(0, 1)(x).shape == (6, 4)
    assert nn.Unflatten(1, (3, 1))(fg.ones(2, 3)).shape == (2, 3, 1)
    np.testing.assert_allclose(nn.Softmax(dim=-1)(x).sum(-1).numpy(), np.ones((2, 3)), rtol=1e-6)
    np.testing.assert_allclose(
        nn.LogSoftmax(dim=1)(x).exp().sum(1).numpy(), np.ones((2, 4)), rtol=1e-6
    )
    assert repr(nn.Softmax(dim=1)) == "Softmax(dim=1)"


def test_inplace_activations_write_into_their_input():
    x = fg.tensor([-1.0, 2.0])
    assert nn.ReLU(inplace=True)(x) is x and x.tolist() == [0.0, 2.0]
    y = fg.tensor([-1.0, 2.0])
    nn.LeakyReLU(0.5, inplace=True)(y)
    assert y.tolist() == [-0.5, 2.0]
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"


def test_hardtanh_passes_no_gradient_at_its_bounds():
    x = fg.tensor([-1.0, 0.5, 1.0, 2.0], requires_grad=True)
    F.hardtanh(x).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 0.0, 0.0]


# ---------------------------------------------------------------- nn.init


def test_gains_and_fans_as_pytorch_computes_them():
    assert init.calculate_gain("tanh") == 5.0 / 3
    assert init.calculate_gain("relu") == math.sqrt(2.0)
    assert init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2.0 / 1.04)
    assert init.calculate_gain("conv2d") == 1 and init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="Unsupported nonlinearity cube"):
        init.calculate_gain("cube")
    assert init._calculate_fan_in_and_fan_out(fg.empty(6, 3, 5, 5)) == (75, 150)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(fg.empty(3))


def test_initializers_draw_from_their_distributions():
    fg.manual_seed(0)
    w = fg.empty(200, 300)
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + 5)) / math.sqrt(300)
    init.kaiming_uniform_(w, a=math.sqrt(5))
    assert float(w.abs().max()) <= bound and float(w.abs().max()) > 0.99 * bound
    init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert abs(float(w.std()) / (math.sqrt(2.0) / math.sqrt(200)) - 1) < 0.02
    init.xavier_normal_(w, gain=2.0)
    assert abs(float(w.std()) / (2.0 * math.sqrt(2.0 / 500)) - 1) < 0.02
    init.xavier_uniform_(w)
    assert float(w.abs().max()) <= math.sqrt(6.0 / 500)
    init.normal_(w, mean=1.0, std=0.5)
    assert abs(float(w.mean()) - 1.0) < 0.01 and abs(float(w.std()) - 0.5) < 0.01
    init.uniform_(w, -2.0, -1.0)
    assert -2.0 <= float(w.min()) and float(w.max()) < -1.0
    for fill, value in (
        (init.zeros_, 0.0),
        (init.ones_, 1.0),
        (lambda t: init.constant_(t, 3.5), 3.5),
    ):
        assert fill(w) is w and bool((w == value).all())
    d = fg.empty(4, 4, dtype=fg.float64)
    assert init.eye_(d).tolist() == np.eye(4).tolist()


def test_trunc_normal_inverts_the_normal_cdf_within_its_bounds():
    fg.manual_seed(1)
    w = init.trunc_normal_(fg.empty(100000, dtype=fg.float64), mean=0.5, std=1.0, a=-1.0, b=1.0)
    values = w.numpy()
    assert values.min() >= -1.0 and values.max() <= 1.0
    # N(0.5, 1) cut to [-1, 1]: its mean is 0.5 + (phi(-1.5) - phi(0.5)) / (Phi(0.5) - Phi(-1.5))
    phi = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2  # noqa: E731
    expected = 0.5 + (phi(-1.5) - phi(0.5)) / (cdf(0.5) - cdf(-1.5))
    assert abs(values.mean() - expected) < 0.01
    u = fg.tensor(np.linspace(-0.999999, 0.999999, 101))
    np.testing.assert_allclose(fg.erf(fg.erfinv(u)).numpy(), u.numpy(), rtol=1e-13, atol=1e-15)


def test_orthogonal_and_dirac_initializations():
    fg.manual_seed(2)
    q = init.orthogonal_(fg.empty(3, 5, dtype=fg.float64), gain=2.0).numpy()
    np.testing.assert_allclose(q @ q.T, 4 * np.eye(3), atol=1e-12)
    weight = init.dirac_(fg.empty(3, 3, 3, 3))
    x = fg.randn(2, 3, 5, 5)
    np.testing.assert_allclose(F.conv2d(x, weight, padding=1).numpy(), x.numpy(), atol=1e-6)


def test_zero_element_tensors_warn_and_stay_as_they_are():
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        init.kaiming_uniform_(fg.empty(0, 3))


# ---------------------------------------------------------- convolution layers


def test_conv_modules_initialize_as_pytorch_and_call_conv():
    fg.manual_seed(3)
    conv = nn.Conv2d(4, 6, (3, 2), stride=2, padding=1, groups=2)
    assert conv.weight.shape == (6, 2, 3, 2) and conv.bias.shape == (6,)
    bound = 1 / math.sqrt(2 * 3 * 2)
    assert float(conv.weight.abs().max()) <= bound and float(conv.bias.abs().max()) <= bound
    x = fg.randn(2, 4, 7, 6)
    np.testing.assert_array_equal(
        conv(x).detach().numpy(),
        F.conv2d(x, conv.weight, conv.bias, 2, 1, 1, 2).detach().numpy(),
    )
    assert repr(conv) == "Conv2d(4, 6, kernel_size=(3, 2), stride=(2, 2), padding=(1, 1), groups=2)"
    same = nn.Conv1d(2, 3, 4, padding="same", bias=False, padding_mode="reflect")
    assert repr(same) == (
        "Conv1d(2, 3, kernel_size=(4,), stride=(1,), padding=same, bias=False, "
        "padding_mode=reflect)"
    )
    signal = fg.randn(1, 2, 9)
    reflected = F.pad(signal, (1, 2), mode="reflect")
    np.testing.assert_allclose(
        same(signal).detach().numpy(), F.conv1d(reflected, same.weight).detach().numpy()
    )
    assert same(signal).shape == (1, 3, 9)


@pytest.mark.parametrize("batch", [0, 1, 3])
def test_convolutions_of_any_batch_agree_eager_and_compiled(batch):
    """An empty batch gives an empty output and zero filter gradients, as in
    PyTorch: the windows' products reshaped with -1, which an empty array
    cannot, and raised."""

    def net(x, w, w2):
        y = F.max_pool2d(F.relu(F.conv2d(x, w, padding=1)), 2)
        return (F.conv2d(y, w2, stride=2) ** 2).sum() + F.conv1d(x[:, :, 0], w[:, :, 0]).sum()

    fg.manual_seed(batch)
    args = fg.randn(batch, 2, 8, 8, dtype=fg.float64), fg.randn(4, 2, 3, 3, dtype=fg.float64)
    args += (fg.randn(5, 4, 2, 2, dtype=fg.float64),)
    step = fg.value_and_grad(net, argnums=(0, 1, 2))
    value, grads = step(*args)
    assert grads[0].shape == (batch, 2, 8, 8)
    if batch == 0:
        assert float(value) == 0 and not grads[1].numpy().any() and not grads[2].numpy().any()
    compiled = fg.jit(step)
    for _ in range(3):  # calls 1, 2 and 3 take different paths
        got_value, got_grads = compiled(*args)
        np.testing.assert_allclose(got_value.numpy(), value.numpy(), rtol=1e-12)
        for got, want in zip(got_grads, grads):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "thunk,error,message",
    [
        (
            lambda: F.conv2d(fg.ones(1, 2, 5, 5), fg.ones(4, 3, 3, 3)),
            RuntimeError,
            r"Given groups=1, weight of size \[4, 3, 3, 3\], expected input\[1, 2, 5, 5\] to "
            r"have 3 channels, but got 2 channels instead",
        ),
        (
            lambda: F.conv2d(fg.ones(1, 1, 2, 2), fg.ones(1, 1, 3, 3)),
            RuntimeError,
            r"Calculated padded input size per channel: \(2 x 2\). Kernel size: \(3 x 3\)",
        ),
        (
            lambda: F.conv2d(fg.ones(1, 1, 4, 4, dtype=fg.float64), fg.ones(1, 1, 3, 3)),
            RuntimeError,
            r"Input type \(fusegrad.DoubleTensor\) and weight type \(fusegrad.FloatTensor\)",
        ),
        (
            lambda: F.conv2d(fg.ones(1, 4, 4), fg.ones(1, 1, 3, 3), stride=2, padding="same"),
            ValueError,
            "padding='same' is not supported for strided convolutions",
        ),
        (
            lambda: F.conv1d(fg.ones(2, 3, 4, 5), fg.ones(1, 3, 3)),
            RuntimeError,
            r"Expected 2D \(unbatched\) or 3D \(batched\) input to conv1d",
        ),
        (lambda: nn.Conv2d(3, 4, 3, groups=2), ValueError, "in_channels must be divisible"),
        (
            lambda: F.max_pool2d(fg.ones(1, 1, 4, 4), 2, padding=2),
            RuntimeError,
            "pad should be at most half of effective kernel size",
        ),
        (
            lambda: F.avg_pool2d(fg.ones(1, 1, 2, 2), 3),
            RuntimeError,
            r"Given input size: \(1x2x2\). Calculated output size: \(1x0x0\)",
        ),
        (
            lambda: F.pad(fg.ones(1, 2, 3), (3, 0), mode="reflect"),
            RuntimeError,
            "Padding size should be less than the corresponding input dimension",
        ),
        (
            lambda: F.embedding(fg.tensor([1.0]), fg.ones(3, 2)),
            RuntimeError,
            "Expected tensor for argument #1 'indices' to have one of the following scalar types",
        ),
        (
            lambda: F.embedding(fg.tensor([3]), fg.ones(3, 2)),
            IndexError,
            "index out of range in self",
        ),
        (
            lambda: F.embedding(fg.tensor([-1]), fg.ones(3, 2)),
            IndexError,
            "index out of range in self",
        ),
        (
            lambda: F.batch_norm(fg.ones(1, 3), None, None, training=True),
            ValueError,
            "Expected more than 1 value per channel when training",
        ),
        (lambda: nn.BatchNorm2d(3)(fg.ones(2, 3)), ValueError, r"expected 4D input \(got 2D"),
        (
            lambda: F.binary_cross_entropy(fg.tensor([1.5]), fg.tensor([1.0])),
            RuntimeError,
            "all elements of input should be between 0 and 1",
        ),
        (
            lambda: F.binary_cross_entropy(fg.tensor([0.5]), fg.tensor([[1.0]])),
            ValueError,
            "Using a target size",
        ),
        (
            lambda: F.binary_cross_entropy_with_logits(fg.ones(2), fg.ones(3)),
            ValueError,
            r"Target size \(fusegrad.Size\(\[3\]\)\) must be the same as input size",
        ),
        (
            lambda: F.nll_loss(fg.zeros(2, 3), fg.tensor([0, -2])),
            IndexError,
            "Target -2 is out of bounds.",
        ),
        (
            lambda: F.scaled_dot_product_attention(
                fg.ones(2, 3), fg.ones(2, 3), fg.ones(2, 3), fg.ones(2, 2), is_causal=True
            ),
            RuntimeError,
            "Explicit attn_mask should not be set when is_causal=True",
        ),
    ],
)
def test_bad_layer_input_raises_pytorchs_error(thunk, error, message):
    with pytest.raises(error, match=message):
        thunk()


def test_max_pool_gives_the_gradient_to_the_first_maximum_and_returns_its_index():
    x = fg.tensor([[[[1.0, 3.0, 3.0, 0.0], [3.0, 2.0, 5.0, 5.0]]]], requires_grad=True)
    values, indices = F.max_pool2d(x, 2, return_indices=True)
    assert values.tolist() == [[[[3.0, 5.0]]]] and indices.tolist() == [[[[1, 6]]]]
    values.sum().backward()
    assert x.grad.tolist() == [[[[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]]]
    pool = nn.MaxPool2d(2, return_indices=True)
    assert pool(x)[1].tolist() == [[[[1, 6]]]]
    flat = fg.tensor([[[2.0, 7.0, 1.0, 7.0, 4.0]]])
    assert F.max_pool1d(flat, 3, stride=2, padding=1, return_indices=True)[1].tolist() == [
        [[1, 1, 3]]
    ]


def test_avg_pool_divisor_override_and_adaptive_pooling_of_a_global_average():
    x = fg.tensor(np.arange(32.0).reshape(1, 2, 4, 4))
    np.testing.assert_allclose(
        F.avg_pool2d(x, 2, divisor_override=1).numpy()[0, 0], [[10, 18], [42, 50]]
    )
    np.testing.assert_allclose(
        nn.AdaptiveAvgPool2d(1)(x).numpy().ravel(), x.numpy().mean(axis=(2, 3)).ravel()
    )
    assert nn.AdaptiveAvgPool2d((None, 2))(x).shape == (1, 2, 4, 2)
    assert nn.AvgPool2d(2)(x[0]).shape == (2, 2, 2)  # unbatched


@pytest.mark.parametrize("pool", [F.adaptive_avg_pool2d, fg.jit(F.adaptive_avg_pool2d)])
def test_adaptive_avg_pooling_keeps_a_nan_or_an_infinity_in_its_own_windows(pool):
    """Windows of uneven sizes (7 rows into 3: 0-2, 2-4, 4-7, overlapping):
    a NaN reaches the windows that hold it, an infinity too, and no other."""
    x = np.arange(35.0).reshape(1, 1, 7, 5)
    x[0, 0, 0, 0], x[0, 0, 6, 4] = np.nan, -np.inf
    out = pool(fg.tensor(x), (3, 2)).numpy()[0, 0]
    assert np.isnan(out[0, 0]) and out[2, 1] == -np.inf
    assert np.isfinite(np.delete(out.ravel(), [0, 5])).all()


def test_windows_and_fold_are_each_others_transpose():
    from fusegrad.ir import primitives as P

    rng = np.random.default_rng(4)
    x, g = rng.standard_normal((2, 3, 7, 8)), rng.standard_normal((2, 3, 2, 3, 2, 3))
    params = dict(kernel=(2, 3), stride=(3, 2), dilation=(2, 1))
    cols = P.windows(fg.tensor(x), **params).numpy()
    folded = P.fold(fg.tensor(g), size=(7, 8), **params).numpy()
    # <windows(x), g> == <x, fold(g)>
    np.testing.assert_allclose((cols * g).sum(), (x * folded).sum(), rtol=1e-12)


# -------------------------------------------------------------------- batchnorm


def test_batch_norm_normalizes_by_the_batch_and_tracks_running_statistics():
    rng = np.random.default_rng(5)
    data = rng.standard_normal((8, 3, 5)) * 2 + 1
    bn = nn.BatchNorm1d(3, momentum=0.2).double()
    with fg.no_grad():
        bn.weight.copy_(fg.tensor([1.0, 2.0, 0.5]))
        bn.bias.copy_(fg.tensor([0.0, -1.0, 1.0]))
    out = bn(fg.tensor(data)).detach().numpy()
    mean, var = data.mean(axis=(0, 2)), data.var(axis=(0, 2))
    expected = (data - mean[:, None]) / np.sqrt(var[:, None] + 1e-5)
    expected = expected * np.array([1.0, 2.0, 0.5])[:, None] + np.array([0.0, -1.0, 1.0])[:, None]
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.2 * mean, rtol=1e-12)
    unbiased = data.var(axis=(0, 2), ddof=1)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.8 + 0.2 * unbiased, rtol=1e-12)
    assert bn.num_batches_tracked.item() == 1
    bn.eval()
    evaluated = bn(fg.tensor(data)).detach().numpy()
    running = (data - bn.running_mean.numpy()[:, None]) / np.sqrt(
        bn.running_var.numpy()[:, None] + 1e-5
    )
    expected = running * np.array([1.0, 2.0, 0.5])[:, None] + np.array([0.0, -1.0, 1.0])[:, None]
    np.testing.assert_allclose(evaluated, expected, rtol=1e-12, atol=1e-12)
    assert bn.num_batches_tracked.item() == 1
    assert list(bn.state_dict()) == [
        "weight",
        "bias",
        "running_mean",
        "running_var",
        "num_batches_tracked",
    ]


def test_batch_norm_cumulative_average_and_no_running_statistics():
    rng = np.random.default_rng(6)
    batches = [rng.standard_normal((4, 2, 3, 3)) for _ in range(3)]
    bn = nn.BatchNorm2d(2, momentum=None, affine=False).double()
    for batch in batches:
        bn(fg.tensor(batch))
    means = [b.mean(axis=(0, 2, 3)) for b in batches]
    np.testing.assert_allclose(bn.running_mean.numpy(), np.mean(means, axis=0), rtol=1e-12)
    assert bn.weight is None and [n for n, _ in bn.named_parameters()] == []
    free = nn.BatchNorm2d(2, track_running_stats=False).eval().double()
    assert free.running_mean is None and list(free.state_dict()) == ["weight", "bias"]
    out = free(fg.tensor(batches[0])).detach().numpy()  # batch statistics even in eval
    np.testing.assert_allclose(out.mean(axis=(0, 2, 3)), [0.0, 0.0], atol=1e-12)


# -------------------------------------------------------------------- embedding


def test_embedding_padding_idx_starts_at_zero_and_gets_no_gradient():
    fg.manual_seed(7)
    emb = nn.Embedding(5, 3, padding_idx=-1)
    assert emb.padding_idx == 4 and emb.weight[4].tolist() == [0.0, 0.0, 0.0]
    assert repr(emb) == "Embedding(5, 3, padding_idx=4)"
    out = emb(fg.tensor([[4, 1], [1, 0]]))
    assert out.shape == (2, 2, 3)
    out.sum().backward()
    assert emb.weight.grad[:, 0].tolist() == [1.0, 2.0, 0.0, 0.0, 0.0]


def test_embedding_max_norm_renormalizes_the_looked_up_rows_in_place():
    weight = fg.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
    out = F.embedding(fg.tensor([0, 1]), weight, max_norm=1.0)
    np.testing.assert_allclose(weight.numpy()[0], [0.6, 0.8], rtol=1e-6)
    np.testing.assert_allclose(weight.numpy()[1:], [[0.3, 0.4], [6.0, 8.0]])  # row 2: not looked up
    np.testing.assert_allclose(out.numpy(), weight.numpy()[:2])


def test_embedding_from_pretrained_is_frozen():
    table = fg.tensor([[1.0, 2.0], [3.0, 4.0]])
    emb = nn.Embedding.from_pretrained(table)
    assert not emb.weight.requires_grad and emb(fg.tensor([1])).tolist() == [[3.0, 4.0]]


# ------------------------------------------------------------------- recurrent


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _reference_layer(mode, x, h, c, w_ih, w_hh, b_ih, b_hh, reverse=False):
    """One layer and direction of an RNN in numpy, step by step: (outputs, h, c)."""
    outputs = [None] * len(x)
    for t in reversed(range(len(x))) if reverse else range(len(x)):
        gi, gh = x[t] @ w_ih.T + b_ih, h @ w_hh.T + b_hh
        if mode == "LSTM":
            i, f, g, o = np.split(gi + gh, 4, axis=1)
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
        elif mode == "GRU":
            (ir, iz, in_), (hr, hz, hn) = np.split(gi, 3, axis=1), np.split(gh, 3, axis=1)
            r, z = _sigmoid(ir + hr), _sigmoid(iz + hz)
            n = np.tanh(in_ + r * hn)
            h = (1 - z) * n + z * h
        else:
            h = np.tanh(gi + gh)
        outputs[t] = h
    return np.stack(outputs), h, c


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_recurrent_layers_compute_pytorchs_equations(mode, bidirectional):
    fg.manual_seed(8)
    layer = getattr(nn, mode)(3, 4, num_layers=2, bidirectional=bidirectional).double()
    directions = 2 if bidirectional else 1
    rng = np.random.default_rng(9)
    x = rng.standard_normal((5, 2, 3))
    h0 = rng.standard_normal((2 * directions, 2, 4))
    c0 = rng.standard_normal((2 * directions, 2, 4))
    state = (fg.tensor(h0), fg.tensor(c0)) if mode == "LSTM" else fg.tensor(h0)
    output, final = layer(fg.tensor(x), state)
    sequence, hs, cs = x, [], []
    for number in range(2):
        outputs = []
        for direction in range(directions):
            suffix = f"_l{number}" + ("_reverse" if direction else "")
            weights = [
                getattr(layer, name + suffix).detach().numpy()
                for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
            ]
            index = number * directions + direction
            out, h, c = _reference_layer(
                mode, sequence, h0[index], c0[index], *weights, reverse=bool(direction)
            )
            outputs.append(out)
            hs.append(h)
            cs.append(c)
        sequence = np.concatenate(outputs, axis=2)
    np.testing.assert_allclose(output.detach().numpy(), sequence, rtol=1e-12, atol=1e-12)
    h_n = final[0] if mode == "LSTM" else final
    np.testing.assert_allclose(h_n.detach().numpy(), np.stack(hs), rtol=1e-12, atol=1e-12)
    if mode == "LSTM":
        np.testing.assert_allclose(final[1].detach().numpy(), np.stack(cs), rtol=1e-12, atol=1e-12)


def test_recurrent_layer_names_layouts_and_states():
    lstm = nn.LSTM(3, 5, num_layers=2, batch_first=True, bidirectional=True, proj_size=2)
    assert [n for n, _ in lstm.named_parameters()][:5] == [
        "weight_ih_l0",
        "weight_hh_l0",
        "bias_ih_l0",
        "bias_hh_l0",
        "weight_hr_l0",
    ]
    assert lstm.weight_ih_l1.shape == (20, 4) and lstm.weight_hh_l1_reverse.shape == (20, 2)
    output, (h, c) = lstm(fg.randn(7, 6, 3))
    assert output.shape == (7, 6, 4) and h.shape == (4, 7, 2) and c.shape == (4, 7, 5)
    gru = nn.GRU(3, 5, bias=False)
    assert [n for n, _ in gru.named_parameters()] == ["weight_ih_l0", "weight_hh_l0"]
    output, h = gru(fg.randn(6, 3))  # unbatched: (time, features)
    assert output.shape == (6, 5) and h.shape == (1, 5)
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 2, 5\), got \[1, 3, 5\]"):
        gru(fg.randn(4, 2, 3), fg.zeros(1, 3, 5))
    with pytest.raises(RuntimeError, match=r"input.size\(-1\) must be equal to input_size"):
        gru(fg.randn(4, 2, 2))
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(3, 5, proj_size=5)
    bound = 1 / math.sqrt(5)
    assert all(float(p.abs().max()) <= bound for p in lstm.parameters())


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
def test_cells_take_one_step_of_their_layer(mode):
    fg.manual_seed(10)
    layer = getattr(nn, mode)(3, 4).double()
    cell = getattr(nn, mode + "Cell")(3, 4).double()
    cell.load_state_dict({k[:-3]: v for k, v in layer.state_dict().items()})
    x = fg.randn(1, 2, 3, dtype=fg.float64)
    output, _ = layer(x)
    stepped = cell(x[0])
    h = stepped[0] if mode == "LSTM" else stepped
    np.testing.assert_allclose(h.detach().numpy(), output[0].detach().numpy(), rtol=1e-14)
    unbatched = cell(x[0, 0])
    assert (unbatched[0] if mode == "LSTM" else unbatched).shape == (4,)
    assert repr(cell) == f"{mode}Cell(3, 4)"


# ---------------------------------------------------------------------- losses


def test_loss_modules_reduce_as_asked():
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    x, y = fg.tensor(a), fg.tensor(b)
    assert nn.L1Loss(reduction="sum")(x, y).item() == pytest.approx(np.abs(a - b).sum())
    assert nn.MSELoss(reduction="none")(x, y).shape == (3, 4)
    d = np.abs(a - b)
    huber = np.where(d < 0.5, 0.5 * d * d, 0.5 * (d - 0.25)).mean()
    assert nn.HuberLoss(delta=0.5)(x, y).item() == pytest.approx(huber)
    smooth = np.where(d < 0.5, 0.5 * d * d / 0.5, d - 0.25).mean()
    assert nn.SmoothL1Loss(beta=0.5)(x, y).item() == pytest.approx(smooth)
    logp = fg.log_softmax(x, 1)
    target = fg.tensor([0, 3, 1])
    assert nn.NLLLoss()(logp, target).item() == pytest.approx(F.cross_entropy(x, target).item())
    weighted = nn.CrossEntropyLoss(weight=fg.tensor([1.0, 2.0, 0.5, 1.0], dtype=fg.float64))
    assert "weight" in weighted.state_dict()
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        assert nn.MSELoss(size_average=False).reduction == "sum"
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        nn.KLDivLoss()(logp, fg.softmax(y, 1))


def test_binary_cross_entropy_clamps_its_logarithms_and_keeps_pytorchs_gradient():
    x = fg.tensor([0.0, 1.0, 0.3], requires_grad=True)
    t = fg.tensor([1.0, 0.0, 0.0])
    loss = F.binary_cross_entropy(x, t, reduction="none")
    np.testing.assert_allclose(loss.detach().numpy(), [100.0, 100.0, -np.log(0.7)], rtol=1e-6)
    loss.sum().backward()
    # (x - t) / max(x (1 - x), 1e-12): at the ends the denominator is 1e-12
    np.testing.assert_allclose(x.grad.numpy(), [-1e12, 1e12, 0.3 / 0.21], rtol=1e-6)
    w = fg.tensor([2.0, 0.0, 1.0])
    weighted = nn.BCELoss(weight=w, reduction="sum")(x, t)
    assert weighted.item() == pytest.approx(200.0 - np.log(0.7), rel=1e-6)


def test_binary_cross_entropy_with_logits_is_stable_and_weighs_positives():
    x = fg.tensor([-100.0, 100.0, 0.5], dtype=fg.float64, requires_grad=True)
    t = fg.tensor([0.0, 1.0, 1.0], dtype=fg.float64)
    loss = F.binary_cross_entropy_with_logits(x, t, reduction="none")
    np.testing.assert_allclose(
        loss.detach().numpy(), [0.0, 0.0, np.log1p(np.exp(-0.5))], atol=1e-40
    )
    loss.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), _sigmoid(x.detach().numpy()) - t.numpy(), rtol=1e-15)
    criterion = nn.BCEWithLogitsLoss(pos_weight=fg.tensor([3.0], dtype=fg.float64))
    assert criterion(x[2:], t[2:]).item() == pytest.approx(3 * np.log1p(np.exp(-0.5)))


# ------------------------------------------------------------------- attention


def test_attention_rows_with_nothing_to_attend_to_are_zero_with_zero_gradients():
    q = fg.randn(2, 3, dtype=fg.float64, requires_grad=True)
    k = fg.randn(4, 3, dtype=fg.float64, requires_grad=True)
    v = fg.randn(4, 5, dtype=fg.float64)
    mask = fg.tensor([[True, False, True, False], [False, False, False, False]])
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert out[1].tolist() == [0.0] * 5
    out.sum().backward()
    assert q.grad[1].tolist() == [0.0] * 3 and np.isfinite(k.grad.numpy()).all()


def test_attention_scale_and_grouped_query_heads():
    q, k, v = fg.randn(1, 4, 2, 3), fg.randn(1, 2, 5, 3), fg.randn(1, 2, 5, 2)
    out = F.scaled_dot_product_attention(q, k, v, scale=0.3, enable_gqa=True)
    repeated_k = fg.cat([k[:, :1], k[:, :1], k[:, 1:], k[:, 1:]], 1)
    repeated_v = fg.cat([v[:, :1], v[:, :1], v[:, 1:], v[:, 1:]], 1)
    weights = fg.softmax(q @ repeated_k.transpose(-1, -2) * 0.3, -1)
    np.testing.assert_allclose(out.numpy(), (weights @ repeated_v).numpy(), rtol=1e-5, atol=1e-6)


def _attention_reference(query, key, value, w_in, b_in, w_out, b_out, heads, mask, padding):
    """MultiheadAttention in numpy: (L, N, E) inputs, an additive mask, a bool padding mask."""
    e = query.shape[-1]
    q, k, v = (
        x @ w.T + b for x, w, b in zip((query, key, value), np.split(w_in, 3), np.split(b_in, 3))
    )

    def split(x):  # (L, N, E) -> (N, heads, L, head_dim)
        return x.reshape(x.shape[0], x.shape[1], heads, e // heads).transpose(1, 2, 0, 3)

    scores = split(q) @ np.swapaxes(split(k), -1, -2) / np.sqrt(e // heads) + mask
    scores = np.where(padding[:, None, None, :], -np.inf, scores)
    weights = _softmax(scores)
    out = (weights @ split(v)).transpose(2, 0, 1, 3).reshape(query.shape)
    return out @ w_out.T + b_out, weights.mean(axis=1)


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_computes_pytorchs_attention(need_weights):
    fg.manual_seed(16)
    attention = nn.MultiheadAttention(8, 2, batch_first=True).double()
    with fg.no_grad():
        attention.in_proj_bias.copy_(fg.randn(24, dtype=fg.float64))
    rng = np.random.default_rng(17)
    x = rng.standard_normal((3, 5, 8))  # (batch, length, embed)
    mask = np.triu(np.full((5, 5), -np.inf), 1)
    padding = np.zeros((3, 5), bool)
    padding[1, 3:] = True
    tensor = fg.tensor(x)
    out, weights = attention(
        tensor,
        tensor,
        tensor,
        key_padding_mask=fg.tensor(padding),
        attn_mask=fg.tensor(mask),
        need_weights=need_weights,
    )
    params = [p.detach().numpy() for p in attention.parameters()]
    want, want_weights = _attention_reference(
        x.transpose(1, 0, 2), *([x.transpose(1, 0, 2)] * 2), *params, 2, mask, padding
    )
    np.testing.assert_allclose(out.detach().numpy(), want.transpose(1, 0, 2), rtol=1e-12)
    if need_weights:
        np.testing.assert_allclose(weights.detach().numpy(), want_weights, rtol=1e-12)
    else:
        assert weights is None


def test_multihead_attention_parameters_and_variants():
    attention = nn.MultiheadAttention(6, 3, kdim=4, vdim=5, add_bias_kv=True, add_zero_attn=True)
    assert [n for n, _ in attention.named_parameters()] == [
        "q_proj_weight",
        "k_proj_weight",
        "v_proj_weight",
        "in_proj_bias",
        "bias_k",
        "bias_v",
        "out_proj.weight",
        "out_proj.bias",
    ]
    assert repr(nn.MultiheadAttention(4, 2)) == (
        "MultiheadAttention(\n  (out_proj): NonDynamicallyQuantizableLinear(in_features=4, "
        "out_features=4, bias=True)\n)"
    )
    query, key, value = fg.randn(2, 3, 6), fg.randn(7, 3, 4), fg.randn(7, 3, 5)
    out, weights = attention(query, key, value, average_attn_weights=False)
    assert out.shape == (2, 3, 6) and weights.shape == (3, 3, 2, 9)  # 7 keys, a bias, a zero
    out.sum().backward()
    assert all(p.grad is not None for p in attention.parameters())
    unbatched, weights = attention(query[:, 0], key[:, 0], value[:, 0])
    np.testing.assert_allclose(
        unbatched.detach().numpy(), out[:, 0].detach().numpy(), rtol=1e-5, atol=1e-6
    )
    assert weights.shape == (2, 9)
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(6, 4)


# ---------------------------------------------------------------- utils


def _with_grads(*grads):
    params = [nn.Parameter(fg.zeros(len(g))) for g in grads]
    for p, g in zip(params, grads):
        p.grad = fg.tensor(g)
    return params


def test_clip_grad_norm_scales_all_gradients_by_their_total_norm():
    params = _with_grads([3.0, 0.0], [0.0, 4.0])
    total = nn.utils.clip_grad_norm_(params, 1.0)
    assert total.item() == pytest.approx(5.0)
    np.testing.assert_allclose(params[0].grad.numpy(), [3 / (5 + 1e-6), 0.0], rtol=1e-6)
    params = _with_grads([3.0, -7.0], [1.0])
    assert nn.utils.clip_grad_norm_(params, 10.0, norm_type=math.inf).item() == 7.0
    assert params[0].grad.tolist() == [3.0, -7.0]  # within the bound: unchanged
    params = _with_grads([math.inf])
    with pytest.raises(RuntimeError, match=r"The total norm of order 2\.0 for gradients"):
        nn.utils.clip_grad_norm_(params, 1.0, error_if_nonfinite=True)
    assert nn.utils.clip_grad_norm_([nn.Parameter(fg.ones(2))], 1.0).item() == 0.0


def test_clip_grad_value_and_parameter_vectors():
    params = _with_grads([3.0, -0.5], [-2.0])
    nn.utils.clip_grad_value_(params, 1.0)
    assert [p.grad.tolist() for p in params] == [[1.0, -0.5], [-1.0]]
    layer = nn.Linear(2, 1)
    vector = nn.utils.parameters_to_vector(layer.parameters())
    assert vector.shape == (3,)
    nn.utils.vector_to_parameters(fg.tensor([1.0, 2.0, 3.0]), layer.parameters())
    assert layer.weight.tolist() == [[1.0, 2.0]] and layer.bias.tolist() == [3.0]


# ------------------------------------------------------------------ under jit


class _LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.avg_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(nn.Flatten()(x))))


def test_a_lenet_training_step_compiles_to_eagers_numbers():
    rng = np.random.default_rng(13)
    batches = [
        (
            fg.tensor(rng.standard_normal((8, 1, 28, 28)).astype(np.float32)),
            fg.tensor(rng.integers(0, 10, 8)),
        )
        for _ in range(4)
    ]
    assert_trains_as_eagerly(
        _LeNet,
        lambda p: fg.optim.SGD(p, lr=0.05, momentum=0.9),
        minimizing(lambda model, x, y: F.cross_entropy(model(x), y)),
        batches,
        rtol=1e-4,
        atol=1e-4,
    )


class _SinePredictor(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(1, 8, num_layers=2, batch_first=True)
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out)


def test_an_lstm_unrolled_over_its_sequence_compiles_to_eagers_numbers():
    t = np.arange(12) + np.arange(4)[:, None] * 3
    waves = fg.tensor(np.sin(t / 5.0)[:, :, None])
    batch = (waves[:, :-1], waves[:, 1:])
    assert_trains_as_eagerly(
        lambda: _SinePredictor().double(),
        lambda p: fg.optim.Adam(p, lr=0.01),
        minimizing(lambda model, x, y: F.mse_loss(model(x), y)),
        [batch] * 4,
        rtol=1e-10,
        atol=1e-10,
    )


def test_batch_norm_updates_its_running_statistics_inside_a_compiled_step():
    rng = np.random.default_rng(14)
    batches = [(fg.tensor(rng.standard_normal((16, 5)).astype(np.float32)),) for _ in range(4)]

    def make():
        return nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 1))

    eager, jitted, _ = assert_trains_as_eagerly(
        make,
        lambda p: fg.optim.SGD(p, lr=0.1),
        minimizing(lambda m, x: m(x).pow(2).mean()),
        batches,
        rtol=1e-5,
        atol=1e-5,
    )
    assert jitted[1].num_batches_tracked.item() == 4
    # one compiled function in both modes: switching to eval retraces, and uses
    # the running statistics, which it no longer updates
    predict = fg.jit(lambda x: jitted(x))
    x = batches[0][0]
    for mode in (True, False):
        eager.train(mode)
        jitted.train(mode)
        for _ in range(3):
            want = eager(x).detach().numpy()
            np.testing.assert_allclose(predict(x).detach().numpy(), want, rtol=1e-5, atol=1e-6)
            for a, b in zip(eager.buffers(), jitted.buffers()):
                np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6)
    assert jitted[1].num_batches_tracked.item() == 7


def test_a_changed_module_setting_retraces_rather_than_running_a_stale_program():
    act = nn.LeakyReLU(0.1)
    compiled = fg.jit(lambda x: act(x))
    x = fg.tensor([-1.0, 2.0])
    compiled(x)
    assert compiled(x).tolist() == pytest.approx([-0.1, 2.0])
    act.negative_slope = 0.5
    assert compiled(x).tolist() == [-0.5, 2.0]


def test_checks_on_values_are_guards_under_jit():
    emb = nn.Embedding(4, 2)
    lookup = fg.jit(lambda i: emb(i).sum())
    lookup(fg.tensor([0, 3]))
    lookup(fg.tensor([1, 2]))
    with pytest.raises(IndexError, match="index out of range in self"):
        lookup(fg.tensor([1, -1]))  # numpy would have wrapped around to row 3
    bce = fg.jit(lambda p, t: F.binary_cross_entropy(p, t))
    for _ in range(2):
        bce(fg.tensor([0.2, 0.9]), fg.tensor([0.0, 1.0]))
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        bce(fg.tensor([0.2, 1.5]), fg.tensor([0.0, 1.0]))


class _TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(11, 8)
        self.positions = nn.Embedding(6, 8)
        self.norm = nn.LayerNorm(8)
        # no bias: a key's bias has an exactly zero gradient (it shifts a whole row of
        # scores), whose rounding noise Adam would blow up into steps of size lr
        self.qkv = nn.Linear(8, 24, bias=False)
        self.head = nn.Linear(8, 11, bias=False)

    def forward(self, idx):
        x = self.tokens(idx) + self.positions(fg.arange(idx.shape[1]))
        q, k, v = (
            self.qkv(self.norm(x))
            .view(idx.shape[0], idx.shape[1], 2, 12)
            .transpose(1, 2)
            .split(4, -1)
        )
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.head(x + y.transpose(1, 2).reshape(x.shape))


def test_an_attention_step_with_clipped_gradients_compiles_to_eagers_numbers():
    rng = np.random.default_rng(15)
    batches = [
        (fg.tensor(rng.integers(0, 11, (3, 6))), fg.tensor(rng.integers(0, 11, (3, 6))))
        for _ in range(4)
    ]

    def make_step(model, optimizer):
        def step(idx, targets):
            loss = F.cross_entropy(model(idx).view(-1, 11), targets.view(-1))
            loss.backward()
            norm = nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return loss, norm

        return step

    assert_trains_as_eagerly(
        _TinyGPT, lambda p: fg.optim.Adam(p, lr=0.01), make_step, batches, rtol=1e-5, atol=1e-6
    )


def test_multihead_attention_compiles_to_eagers_numbers():
    fg.manual_seed(18)
    attention = nn.MultiheadAttention(8, 2, batch_first=True)
    padding = fg.tensor([[False, False, True], [False, False, False]])

    def attend(x):
        out, weights = attention(x, x, x, key_padding_mask=padding)
        return out.pow(2).sum() + weights.sum()

    compiled = fg.jit(attend)
    rng = np.random.default_rng(19)
    for _ in range(3):
        x = rng.standard_normal((2, 3, 8)).astype(np.float32)
        results = []
        for function in (attend, compiled):
            inputs = fg.tensor(x, requires_grad=True)
            attention.zero_grad()
            value = function(inputs)
            value.backward()
            results.append(
                [value.item(), inputs.grad.numpy(), attention.in_proj_weight.grad.numpy()]
            )
        (v1, g1, w1), (v2, g2, w2) = results
        assert v2 == pytest.approx(v1, rel=1e-5)
        np.testing.assert_allclose(g2, g1, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(w2, w1, rtol=1e-4, atol=1e-5)


def test_running_averages_and_renormalized_embeddings_are_written_back_under_jit():
    rng = np.random.default_rng(20)
    eager, jitted = nn.BatchNorm1d(3, momentum=None), nn.BatchNorm1d(3, momentum=None)
    table = fg.randn(4, 2) * 3
    jitted_table = table.clone()
    compiled = fg.jit(
        lambda x, i: jitted(x).sum() + F.embedding(i, jitted_table, max_norm=1.0).sum()
    )
    for _ in range(3):  # the count behind the average is a tensor, not a constant
        x = fg.tensor(rng.standard_normal((6, 3)).astype(np.float32))
        i = fg.tensor(rng.integers(0, 4, 2))
        eager(x)
        F.embedding(i, table, max_norm=1.0)
        compiled(x, i)
        for a, b in (
            (eager.running_mean, jitted.running_mean),
            (eager.running_var, jitted.running_var),
            (table, jitted_table),
        ):
            np.testing.assert_array_equal(b.numpy(), a.numpy())
    assert jitted.num_batches_tracked.item() == 3 and compiled.cache_info().misses == 1


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64], ids=["f32", "f64"])
def test_binary_cross_entropies_at_their_extremes_compile_to_eagers_numbers(dtype):
    probabilities = np.array([0.0, 1.0, 0.3, 1e-30, 1 - 1e-7, 0.5, 0.0, 1.0] * 3)
    logits = np.array([-200.0, -30.0, -1.0, 0.0, 1.0, 30.0, 200.0, 5.0] * 3)
    targets = np.array([1.0, 0.0, 0.0, 1.0, 0.0, 0.2, 0.0, 1.0] * 3)

    def losses(p, x, t):
        return F.binary_cross_entropy(p, t, reduction="none") + F.binary_cross_entropy_with_logits(
            x, t, reduction="none"
        )

    compiled = fg.jit(losses)
    for _ in range(3):
        results = []
        for function in (losses, compiled):
            inputs = [
                fg.tensor(a, dtype=dtype, requires_grad=True)
                for a in (probabilities, logits, targets)
            ]
            out = function(*inputs)
            out.backward(fg.ones_like(out))
            results.append([out.detach().numpy()] + [a.grad.numpy() for a in inputs])
        for got, want in zip(*results[::-1]):
            np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("kernel,size", [(2, 6), (2, 7), (3, 6), ((2, 1), 5)])
def test_max_pool_tiles_give_the_gradient_to_the_first_maximum_and_keep_nans(
    compiled, kernel, size
):
    """Windows that tile the input take a path of their own (elementwise):
    ties (ReLU's zeros) and NaNs as PyTorch's max pooling has them."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 3, size, size)).astype(np.float32)
    a[0, 0, :2, :2] = 0.0  # a window of ties
    a[1, 2, 0, 1] = np.nan
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    oh, ow = size // kh, size // kw
    tiled = a[:, :, : oh * kh, : ow * kw].reshape(2, 3, oh, kh, ow, kw)
    windows = tiled.transpose(0, 1, 2, 4, 3, 5).reshape(2, 3, oh, ow, kh * kw)
    nan_first = np.where(np.isnan(windows), np.inf, windows)  # NaN wins, the first of them
    first = np.argmax(nan_first, axis=-1)
    expected = np.take_along_axis(windows, first[..., None], -1)[..., 0]
    g = rng.standard_normal(expected.shape).astype(np.float32)
    grad_windows = np.zeros_like(windows)
    np.put_along_axis(grad_windows, first[..., None], g[..., None], -1)
    grad = np.zeros_like(a)
    grad[:, :, : oh * kh, : ow * kw] = (
        grad_windows.reshape(2, 3, oh, ow, kh, kw)
        .transpose(0, 1, 2, 4, 3, 5)
        .reshape(2, 3, oh * kh, ow * kw)
    )
    pool = (
        (lambda x: F.max_pool2d(x, kernel))
        if not compiled
        else fg.jit(lambda x: F.max_pool2d(x, kernel))
    )
    for _ in range(2 if compiled else 1):
        x = fg.tensor(a, requires_grad=True)
        out = pool(x)
        out.backward(fg.tensor(g))
        np.testing.assert_array_equal(out.detach().numpy(), expected)
        np.testing.assert_array_equal(x.grad.numpy(), grad)


def test_channel_dropout_zeroes_whole_channels_and_compiles_to_the_same_draws():
    x = fg.ones(8, 6, 3, 3)
    fg.manual_seed(3)
    eager = nn.Dropout2d(0.25)(x)
    per_channel = eager.reshape(8, 6, 9)
    assert (per_channel.std(-1) == 0).all()  # a channel is kept or dropped whole
    assert set(per_channel[:, :, 0].flatten().tolist()) <= {0.0, float(np.float32(1 / 0.75))}
    fg.manual_seed(3)
    compiled = fg.jit(lambda t: F.dropout2d(t, 0.25))(x)
    np.testing.assert_array_equal(compiled.numpy(), eager.numpy())
    assert (nn.Dropout1d(0.5).eval()(fg.ones(2, 3, 4)) == 1).all()
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input"):
        F.dropout1d(fg.ones(2, 3, 4, 5))
    y = fg.tensor([-1.0, 2.0])
    F.relu_(y)
    assert y.tolist() == [0.0, 2.0]


# ------------------------------------------- 3-D, adaptive max and power pooling


def test_new_pooling_layers_print_and_pool_as_pytorchs():
    volumes, images = fg.randn(1, 2, 4, 6, 5), fg.randn(2, 4, 6, 5)
    layers = [
        (
            "MaxPool3d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)",
            nn.MaxPool3d(2),
            volumes,
            (1, 2, 2, 3, 2),
        ),
        (
            "AvgPool3d(kernel_size=2, stride=2, padding=0)",
            nn.AvgPool3d(2),
            volumes,
            (1, 2, 2, 3, 2),
        ),
        (
            "AdaptiveAvgPool3d(output_size=(None, 2, 1))",
            nn.AdaptiveAvgPool3d((None, 2, 1)),
            volumes,
            (1, 2, 4, 2, 1),
        ),
        ("AdaptiveMaxPool3d(output_size=2)", nn.AdaptiveMaxPool3d(2), volumes, (1, 2, 2, 2, 2)),
        (
            "AdaptiveMaxPool2d(output_size=(3, None))",
            nn.AdaptiveMaxPool2d((3, None)),
            images,
            (2, 4, 3, 5),
        ),
        ("AdaptiveMaxPool1d(output_size=3)", nn.AdaptiveMaxPool1d(3), images[0], (4, 6, 3)),
        (
            "LPPool2d(norm_type=2, kernel_size=3, stride=None, ceil_mode=False)",
            nn.LPPool2d(2, 3),
            images,
            (2, 4, 2, 1),
        ),
    ]
    for text, layer, x, shape in layers:
        assert repr(layer) == text
        assert layer(x).shape == shape
    assert nn.LPPool1d(1, 2)(fg.tensor([[1.0, 2.0, 3.0, 4.0]])).tolist() == [[3.0, 7.0]]


def test_adaptive_max_pooling_indices_and_errors_are_pytorchs():
    x = fg.tensor([[[3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0]]], requires_grad=True)
    values, indices = F.adaptive_max_pool1d(x, 3, return_indices=True)
    assert values.tolist() == [[[4.0, 5.0, 9.0]]] and indices.tolist() == [[[2, 4, 5]]]
    values.sum().backward()
    assert x.grad.tolist() == [[[0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0]]]
    values, indices = nn.AdaptiveMaxPool2d(2, return_indices=True)(fg.arange(12.0).reshape(1, 3, 4))
    assert indices.tolist() == [[[5, 7], [9, 11]]]  # windows of rows 0-1 and 1-2, flat indices
    assert F.adaptive_max_pool2d(fg.ones(1, 2, 5, 6), 0).shape == (1, 2, 0, 0)
    errors = [
        (lambda: F.adaptive_max_pool2d(fg.ones(5), 3), "Expected 3D or 4D tensor, but got: [5]"),
        (
            lambda: F.adaptive_max_pool2d(fg.ones(1, 2, 3), (2,)),
            "output_size.size() must be 2",
        ),
        (
            lambda: F.adaptive_max_pool1d(fg.ones(1, 2, 3, 4), 2),
            "Expected 2 to 3 dimensions, but got 4-dimensional tensor",
        ),
        (
            lambda: F.adaptive_max_pool1d(fg.ones(1, 2, 3), (2, 3)),
            "argument 'output_size' should contain one int (got 2)",
        ),
        (
            lambda: F.adaptive_max_pool2d(fg.ones(1, 2, 0, 3), 2),
            "non-zero size for non-batch dimensions, but input has sizes [1, 2, 0, 3] with "
            "dimension 2 being empty",
        ),
        (lambda: F.adaptive_max_pool2d(fg.ones(1, 2, 3), -1), "negative dimension -1"),
        (
            lambda: F.max_pool3d(fg.ones(1, 1, 1, 1, 1), 2),
            "Given input size: (1x1x1x1). Calculated output size: (1x0x0x0). Output size is too "
            "small",
        ),
    ]
    for call, message in errors:
        with pytest.raises(RuntimeError) as error:
            call()
        assert message in str(error.value)
    with pytest.raises(ValueError, match=r"^Input dimension should be at least 4$"):
        F.adaptive_max_pool2d(fg.ones(1, 2, 3), (1, 2, 3))


def test_max_pool3d_returns_each_maximums_flat_position():
    x = fg.randn(2, 3, 4, 5, 6)
    values, indices = nn.MaxPool3d(2, stride=(1, 2, 3), return_indices=True)(x)
    flat = x.numpy().reshape(2, 3, -1)
    picked = np.take_along_axis(flat, indices.numpy().reshape(2, 3, -1), -1)
    np.testing.assert_array_equal(picked.reshape(values.shape), values.numpy())


# ------------------------------------------------------------- grid sampling


def test_grid_sample_of_an_identity_affine_grid_is_the_input_and_compiles():
    x = fg.randn(2, 3, 4, 5)
    theta = fg.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]] * 2, requires_grad=True)
    for align_corners in (False, True):
        grid = F.affine_grid(theta, x.shape, align_corners=align_corners)
        out = F.grid_sample(x, grid, align_corners=align_corners)
        np.testing.assert_allclose(out.detach().numpy(), x.numpy(), atol=1e-6)

    def transformed(x, theta):
        grid = F.affine_grid(theta, [2, 3, 3, 4], align_corners=False)
        return F.grid_sample(x, grid, padding_mode="border", align_corners=False)

    shifted = fg.tensor([[[0.9, 0.2, 0.3], [-0.1, 1.1, -0.2]]] * 2)
    compiled = fg.jit(transformed)
    for _ in range(2):
        eager_theta = shifted.clone().requires_grad_()
        eager = transformed(x, eager_theta)
        eager.sum().backward()
        jit_theta = shifted.clone().requires_grad_()
        result = compiled(x, jit_theta)
        result.sum().backward()
        np.testing.assert_allclose(result.detach().numpy(), eager.detach().numpy(), rtol=1e-5)
        np.testing.assert_allclose(jit_theta.grad.numpy(), eager_theta.grad.numpy(), rtol=1e-4)


def test_grid_sample_warns_checks_and_reads_nan_positions_as_pytorch():
    x = fg.arange(6.0).reshape(1, 1, 2, 3)
    changed = "Default grid_sample and affine_grid behavior has changed to align_corners=False"
    with pytest.warns(UserWarning, match=changed):
        F.grid_sample(x, fg.zeros(1, 1, 1, 2))
    with pytest.warns(UserWarning, match=changed):
        F.affine_grid(fg.zeros(1, 2, 3), [1, 1, 2, 2])
    nan, inf = float("nan"), float("inf")
    grid = fg.tensor([[[[nan, 0.0], [2.0, 0.2], [-0.9, inf]]]])
    expected = {"zeros": [nan, 0.0, nan], "border": [1.5, 4.1, 3.0], "reflection": [1.5, 3.1, 0.0]}
    for padding_mode, values in expected.items():
        with np.errstate(invalid="ignore"):  # numpy's, on inf - inf
            out = F.grid_sample(x, grid, padding_mode=padding_mode, align_corners=False)
        np.testing.assert_allclose(out.numpy().ravel(), values, rtol=1e-6)
    errors = [
        (
            lambda: F.grid_sample(x, grid, mode="area", align_corners=False),
            ValueError,
            "expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: 'area'",
        ),
        (
            lambda: F.grid_sample(x, grid, padding_mode="wrap", align_corners=False),
            ValueError,
            "expected padding_mode to be 'zeros', 'border', or 'reflection', but got: 'wrap'",
        ),
        (
            lambda: F.grid_sample(x, fg.zeros(2, 1, 1, 2), align_corners=False),
            RuntimeError,
            "expected grid and input to have same batch size, but got input with sizes "
            "[1, 1, 2, 3] and grid with sizes [2, 1, 1, 2]",
        ),
        (
            lambda: F.grid_sample(x, fg.zeros(1, 1, 1, 3), align_corners=False),
            RuntimeError,
            "expected grid to have size 2 in last dimension",
        ),
        (
            lambda: F.grid_sample(
                fg.ones(1, 1, 2, 2, 2), fg.zeros(1, 1, 1, 1, 3), "bicubic", align_corners=True
            ),
            RuntimeError,
            "bicubic interpolation only supports 4D input",
        ),
        (
            lambda: F.grid_sample(x, fg.zeros(1, 1, 1, 2, dtype=fg.float64), align_corners=True),
            RuntimeError,
            "expected scalar type Float but found Double",
        ),
        (
            lambda: F.affine_grid(fg.zeros(1, 3, 3), [1, 1, 2, 3], align_corners=False),
            ValueError,
            "Expected a batch of 2D affine matrices of shape Nx2x3 for size [1, 1, 2, 3]",
        ),
        (
            lambda: F.affine_grid(fg.zeros(1, 2, 3), [1, 1, 2], align_corners=False),
            NotImplementedError,
            "affine_grid only supports 4D and 5D sizes",
        ),
        (
            lambda: F.affine_grid(fg.zeros(1, 2, 3), [1, 1, 0, 3], align_corners=False),
            ValueError,
            "Expected non-zero, positive output size. Got [1, 1, 0, 3]",
        ),
    ]
    for call, kind, message in errors:
        with pytest.raises(kind) as error:
            call()
        assert message in str(error.value)


# ------------------------------------------------------------- SyncBatchNorm


class _Mirror:
    """A process group of two processes that hold the same values: a sum
    over it doubles."""

    def rank(self) -> int:
        return 0

    def size(self) -> int:
        return 2

    def all_reduce(self, array, op):
        assert op == "sum"
        return np.array(array * 2, order="C")


def test_sync_batch_norm_without_a_process_group_is_batch_norm():
    sync, plain = nn.SyncBatchNorm(3), nn.BatchNorm2d(3)
    assert repr(sync) == (
        "SyncBatchNorm(3, eps=1e-05, momentum=0.1, affine=True, bias=True, "
        "track_running_stats=True)"
    )
    x = fg.randn(4, 3, 2, 5)
    np.testing.assert_array_equal(sync(x).detach().numpy(), plain(x).detach().numpy())
    np.testing.assert_array_equal(sync.running_var.numpy(), plain.running_var.numpy())
    assert sync(fg.randn(4, 3)).shape == (4, 3) and int(sync.num_batches_tracked) == 2
    with pytest.raises(ValueError, match=r"^expected at least 2D input \(got 1D input\)$"):
        sync(fg.ones(3))
    with pytest.raises(ValueError, match="SyncBatchNorm number of input channels should be"):
        sync(fg.ones(2, 0))


def test_convert_sync_batchnorm_keeps_parameters_statistics_and_mode():
    model = nn.Sequential(
        nn.Conv2d(1, 3, 3), nn.BatchNorm2d(3), nn.Sequential(nn.BatchNorm1d(4, affine=False))
    )
    model[1].running_mean.fill_(2.0)
    model[2][0].eval()
    weight, statistics = model[1].weight, model[1].running_mean
    converted = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    assert converted is model and type(model[1]) is nn.SyncBatchNorm
    assert model[1].weight is weight and model[1].running_mean is statistics
    assert type(model[2][0]) is nn.SyncBatchNorm and not model[2][0].training
    assert model[2][0].weight is None and model[2][0].bias is None
    single = nn.SyncBatchNorm.convert_sync_batchnorm(nn.BatchNorm1d(2, bias=False))
    assert type(single) is nn.SyncBatchNorm and single.bias is None


def test_sync_batch_norm_normalizes_by_the_statistics_of_every_process(monkeypatch):
    """Two processes with the same batch: the values and gradients of one
    batch normalization of both batches together."""
    import fusegrad.distributed as dist

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: group.size())
    rng = np.random.default_rng(0)
    x, seed = rng.standard_normal((3, 2, 4)), rng.standard_normal((3, 2, 4))
    sync, plain = nn.SyncBatchNorm(2, process_group=_Mirror()), nn.BatchNorm1d(2)
    for layer in (sync, plain):
        layer.weight.data = fg.tensor([1.5, -0.5])
    mine = fg.tensor(x, dtype=fg.float32, requires_grad=True)
    out = sync(mine)
    (out * fg.tensor(seed, dtype=fg.float32)).sum().backward()
    first, second = (fg.tensor(x, dtype=fg.float32, requires_grad=True) for _ in range(2))
    both = plain(fg.cat([first, second]))
    (both * fg.tensor(np.concatenate([seed, seed]), dtype=fg.float32)).sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), both[:3].detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(mine.grad.numpy(), first.grad.numpy(), atol=1e-6)
    np.testing.assert_allclose(sync.running_var.numpy(), plain.running_var.numpy(), rtol=1e-6)
    assert out.grad_fn.name() == "SyncBatchNormBackward"
    sync.eval()
    np.testing.assert_array_equal(sync(mine).detach().numpy(), plain.eval()(mine).detach().numpy())


# --------------------------------------------------------- deprecated names


@pytest.mark.parametrize(
    "old,args",
    [
        ("normal", ()),
        ("uniform", (-1.0, 1.0)),
        ("constant", (0.5,)),
        ("xavier_uniform", ()),
        ("xavier_normal", ()),
        ("kaiming_uniform", ()),
        ("kaiming_normal", ()),
        ("orthogonal", ()),
        ("eye", ()),
        ("sparse", (0.5,)),
    ],
)
def test_old_init_names_warn_and_fill_as_the_new_ones(old, args):
    fg.manual_seed(1)
    expected = getattr(init, old + "_")(fg.empty(4, 6), *args)
    fg.manual_seed(1)
    with pytest.warns(FutureWarning, match=f"`nn.init.{old}` is now deprecated in favor of "):
        got = getattr(init, old)(fg.empty(4, 6), *args)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())
    assert getattr(init, old).__name__ == old


def test_init_sparse_zeroes_a_share_of_every_column_and_dirac_by_its_old_name():
    weight = init.sparse_(fg.empty(10, 7), sparsity=0.25, std=0.5)
    assert ((weight == 0).sum(0) == 3).all()
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.sparse_(fg.empty(2, 3, 4), 0.5)
    with pytest.warns(FutureWarning, match="`nn.init.dirac` is now deprecated"):
        assert init.dirac(fg.empty(2, 2, 3)).sum().item() == 2.0


def test_clip_grad_norm_is_the_deprecated_name_of_clip_grad_norm_():
    p = nn.Parameter(fg.zeros(2))
    p.grad = fg.tensor([3.0, 4.0])
    with pytest.warns(FutureWarning, match="`torch.nn.utils.clip_grad_norm` is now deprecated"):
        total = nn.utils.clip_grad_norm([p], 1.0)
    assert total.item() == 5.0
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-5)


def test_logsigmoid_of_large_inputs_is_positive_zero_as_pytorchs():
    """-softplus(-x) underflowed to -0.0, which prints as -0. and divides into -inf."""
    for logsigmoid in (fg.nn.functional.logsigmoid, fg.jit(fg.nn.functional.logsigmoid)):
        for _ in range(2):
            out = logsigmoid(fg.tensor([1e4, 50.0])).numpy()
            assert out[0] == 0.0 and not np.signbit(out[0]) and out[1] < 0
