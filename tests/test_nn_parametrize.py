"""Weight and spectral normalization (by forward hooks, and as
parametrizations) and nn.utils.parametrize, against their definitions,
eagerly and under jit."""

import copy
import pickle
import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn
from fusegrad.nn.utils import parametrize


def _old_weight_norm(module, **kwargs):
    with pytest.warns(FutureWarning, match="`torch.nn.utils.weight_norm` is deprecated"):
        return nn.utils.weight_norm(module, **kwargs)


def _largest_singular_value(weight: np.ndarray, dim: int = 0) -> float:
    matrix = np.moveaxis(weight, dim, 0).reshape(weight.shape[dim], -1)
    return float(np.linalg.svd(matrix, compute_uv=False)[0])


# ------------------------------------------------------------- weight_norm


def test_weight_norm_keeps_a_magnitude_and_a_direction_and_recomputes_the_weight():
    layer = nn.Linear(3, 4)
    before = layer.weight.detach().numpy().copy()
    _old_weight_norm(layer)
    assert [name for name, _ in layer.named_parameters()] == ["bias", "weight_g", "weight_v"]
    assert layer.weight_g.shape == (4, 1) and layer.weight_v.shape == (4, 3)
    np.testing.assert_allclose(layer.weight.detach().numpy(), before, rtol=1e-6)
    assert layer.weight.grad_fn.name() == "WeightNormInterfaceBackward0"
    with fg.no_grad():
        layer.weight_g.mul_(2.0)
    x = fg.randn(5, 3)
    layer(x).sum().backward()  # the forward's hook computed the weight again
    np.testing.assert_allclose(layer.weight.detach().numpy(), 2 * before, rtol=1e-6)
    v = layer.weight_v.detach().numpy()
    expected_g = (x.numpy().sum(0) * v / np.linalg.norm(v, axis=1, keepdims=True)).sum(1)
    np.testing.assert_allclose(layer.weight_g.grad.numpy().ravel(), expected_g, rtol=1e-5)
    assert layer.weight_v.grad is not None


def test_weight_norm_dimensions_errors_and_removal():
    assert _old_weight_norm(nn.Linear(3, 4), dim=None).weight_g.shape == ()
    assert _old_weight_norm(nn.Linear(3, 4), dim=1).weight_g.shape == (1, 3)
    conv = _old_weight_norm(nn.Conv2d(3, 4, 3), dim=2)
    assert conv.weight_g.shape == (1, 1, 3, 1)
    with pytest.raises(RuntimeError, match=r"^Cannot register two weight_norm hooks on the same "):
        _old_weight_norm(conv, dim=2)
    value = conv.weight.detach().numpy().copy()
    assert nn.utils.remove_weight_norm(conv) is conv
    assert isinstance(conv.weight, nn.Parameter) and not conv._forward_pre_hooks
    assert list(conv.state_dict()) == ["bias", "weight"]
    np.testing.assert_array_equal(conv.weight.detach().numpy(), value)
    with pytest.raises(ValueError) as error:
        nn.utils.remove_weight_norm(nn.Linear(2, 2))
    assert str(error.value) == (
        "weight_norm of 'weight' not found in Linear(in_features=2, out_features=2, bias=True)"
    )


def test_a_weight_normalized_layer_trains_compiled_as_eagerly():
    def make():
        fg.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            return nn.utils.weight_norm(nn.Linear(3, 2))

    eager, compiled = make(), make()
    step = fg.jit(lambda x: compiled(x).square().sum())
    optimizers = [fg.optim.SGD(m.parameters(), lr=0.1) for m in (eager, compiled)]
    for _ in range(3):
        x = fg.randn(4, 3)
        for loss, optimizer in zip((eager(x).square().sum(), step(x)), optimizers):
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    for a, b in zip(eager.parameters(), compiled.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5)


def test_parametrized_weight_norm_keeps_its_tensors_as_originals():
    layer = nn.Linear(3, 4)
    before = layer.weight.detach().numpy().copy()
    nn.utils.parametrizations.weight_norm(layer)
    assert type(layer).__name__ == "ParametrizedLinear" and isinstance(layer, nn.Linear)
    assert parametrize.type_before_parametrizations(layer) is nn.Linear
    assert list(layer.state_dict()) == [
        "bias",
        "parametrizations.weight.original0",
        "parametrizations.weight.original1",
    ]
    assert repr(layer) == (
        "ParametrizedLinear(\n"
        "  in_features=3, out_features=4, bias=True\n"
        "  (parametrizations): ModuleDict(\n"
        "    (weight): ParametrizationList(\n"
        "      (0): _WeightNorm()\n"
        "    )\n"
        "  )\n"
        ")"
    )
    np.testing.assert_allclose(layer.weight.detach().numpy(), before, rtol=1e-6)
    layer(fg.ones(2, 3)).sum().backward()
    assert layer.parametrizations.weight.original0.grad.shape == (4, 1)
    parametrize.remove_parametrizations(layer, "weight")
    assert type(layer) is nn.Linear and isinstance(layer.weight, nn.Parameter)
    np.testing.assert_allclose(layer.weight.detach().numpy(), before, rtol=1e-6)


# ----------------------------------------------------------- spectral_norm


def test_spectral_norm_divides_by_the_power_iterations_estimate_in_training_only():
    fg.manual_seed(0)
    layer = nn.utils.spectral_norm(nn.Linear(5, 4))
    assert [name for name, _ in layer.named_parameters()] == ["bias", "weight_orig"]
    assert [name for name, _ in layer.named_buffers()] == ["weight_u", "weight_v"]
    assert layer.weight.grad_fn is None  # the original until the first forward
    x = fg.randn(2, 5)
    for _ in range(30):
        layer(x)
    original = layer.weight_orig.detach().numpy()
    np.testing.assert_allclose(
        layer.weight.detach().numpy(), original / _largest_singular_value(original), rtol=1e-4
    )
    layer.eval()
    u = layer.weight_u.clone()
    layer(x).sum().backward()
    np.testing.assert_array_equal(layer.weight_u.numpy(), u.numpy())
    assert layer.weight_orig.grad is not None
    value = layer.weight.detach().numpy().copy()
    nn.utils.remove_spectral_norm(layer)
    assert [name for name, _ in layer.named_parameters()] == ["bias", "weight"]
    assert not list(layer.buffers())
    np.testing.assert_allclose(layer.weight.detach().numpy(), value, rtol=1e-6)


def test_spectral_norm_settings_and_errors():
    assert nn.utils.spectral_norm(nn.ConvTranspose2d(3, 5, 2)).weight_u.shape == (5,)
    conv = nn.utils.spectral_norm(nn.Conv2d(3, 5, 2), n_power_iterations=3)
    assert conv.weight_u.shape == (5,) and conv.weight_v.shape == (12,)
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks on the same"):
        nn.utils.spectral_norm(conv)
    with pytest.raises(ValueError, match="Expected n_power_iterations to be positive, but got "):
        nn.utils.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)
    with pytest.raises(ValueError, match=r"^spectral_norm of 'weight' not found in Linear"):
        nn.utils.remove_spectral_norm(nn.Linear(2, 2))


def test_parametrized_spectral_norm_estimates_at_registration_and_each_training_read():
    fg.manual_seed(0)
    layer = nn.utils.parametrizations.spectral_norm(nn.Linear(6, 4))
    assert list(layer.state_dict()) == [
        "bias",
        "parametrizations.weight.original",
        "parametrizations.weight.0._u",
        "parametrizations.weight.0._v",
    ]
    original = layer.parametrizations.weight.original.detach().numpy()
    sigma = _largest_singular_value(original)
    np.testing.assert_allclose(layer.weight.detach().numpy(), original / sigma, rtol=1e-3)
    u = layer.parametrizations.weight[0]._u
    before = u.clone()
    assert layer.weight.shape == (4, 6)  # a read in training improves the estimate
    assert not np.array_equal(u.numpy(), before.numpy())
    layer.eval()
    before = u.clone()
    assert layer.weight.shape == (4, 6)
    np.testing.assert_array_equal(u.numpy(), before.numpy())
    vector = nn.utils.parametrizations.spectral_norm(nn.Linear(3, 2), name="bias")
    np.testing.assert_allclose(float(vector.bias.norm()), 1.0, rtol=1e-6)
    transposed = nn.utils.parametrizations.spectral_norm(nn.ConvTranspose2d(2, 3, 2))
    assert transposed.parametrizations.weight[0]._u.shape == (3,)
    with pytest.raises(IndexError, match=r"expected to be in range of \[-2, 1\] but got 2"):
        nn.utils.parametrizations.spectral_norm(nn.Linear(2, 2), dim=2)
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'scale'"):
        nn.utils.parametrizations.spectral_norm(nn.Linear(2, 2), name="scale")


def test_parametrized_spectral_norm_trains_compiled_as_eagerly():
    def make():
        fg.manual_seed(1)
        return nn.utils.parametrizations.spectral_norm(nn.Linear(3, 3))

    eager, compiled = make(), make()
    step = fg.jit(lambda x: compiled(x).square().sum())
    for _ in range(3):
        x = fg.randn(4, 3)
        eager(x).square().sum().backward()
        step(x).backward()
    for (name, a), b in zip(eager.state_dict().items(), compiled.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, err_msg=name)
    for a, b in zip(eager.parameters(), compiled.parameters()):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5)


# -------------------------------------------------------------- parametrize


class Symmetric(nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).mT

    def right_inverse(self, a):
        return a.triu()


class Scaled(nn.Module):
    def forward(self, x):
        return 2.0 * x

    def right_inverse(self, a):
        return a / 2.0


def test_a_parametrization_computes_the_tensor_and_assigning_stores_its_right_inverse():
    layer = nn.Linear(3, 3)
    parametrize.register_parametrization(layer, "weight", Symmetric())
    parametrize.register_parametrization(layer, "weight", Scaled())
    assert parametrize.is_parametrized(layer) and parametrize.is_parametrized(layer, "weight")
    assert not parametrize.is_parametrized(layer, "bias")
    weight = layer.weight.detach().numpy()
    np.testing.assert_allclose(weight, weight.T)
    symmetric = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 5.0], [3.0, 5.0, 6.0]])
    layer.weight = fg.tensor(symmetric, dtype=fg.float32)
    np.testing.assert_allclose(layer.weight.detach().numpy(), symmetric)
    np.testing.assert_allclose(
        layer.parametrizations.weight.original.detach().numpy(), np.triu(symmetric) / 2
    )
    original = layer.parametrizations.weight.original
    optimizer = fg.optim.SGD(layer.parameters(), lr=0.5)
    layer(fg.ones(1, 3)).sum().backward()
    optimizer.step()  # the optimizer holds the original: assignment kept its identity
    assert layer.parametrizations.weight.original is original
    assert not np.allclose(layer.weight.detach().numpy(), symmetric)
    parametrize.remove_parametrizations(layer, "weight", leave_parametrized=False)
    assert type(layer) is nn.Linear and layer.weight is original


def test_cached_parametrizations_are_computed_once():
    calls = []

    class Counted(nn.Module):
        def forward(self, x):
            calls.append(1)
            return x * 1.0

    layer = parametrize.register_parametrization(nn.Linear(2, 2), "weight", Counted())
    calls.clear()
    with parametrize.cached():
        first = layer.weight
        assert layer.weight is first and len(calls) == 1
    assert layer.weight is not first and len(calls) == 2


def test_parametrize_errors_are_pytorchs():
    class Flatten(nn.Module):
        def forward(self, x):
            return x.reshape(-1)

    with pytest.raises(ValueError, match="may not change the shape of the tensor, unless"):
        parametrize.register_parametrization(nn.Linear(2, 3), "weight", Flatten())
    unsafe = parametrize.register_parametrization(nn.Linear(2, 3), "weight", Flatten(), unsafe=True)
    assert unsafe.weight.shape == (6,)
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized"):
        parametrize.register_parametrization(nn.Linear(2, 2), "scale", Scaled())
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        parametrize.remove_parametrizations(nn.Linear(2, 2), "weight")
    layer = parametrize.register_parametrization(nn.Linear(2, 2), "weight", Flatten(), unsafe=True)
    with pytest.raises(RuntimeError, match="parametrization Flatten does not implement right_"):
        layer.weight = fg.ones(2, 2)
    normalized = nn.utils.parametrizations.weight_norm(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="Cannot leave unparametrized"):
        parametrize.remove_parametrizations(normalized, "weight", leave_parametrized=False)
    with pytest.raises(RuntimeError, match="Serialization of parametrized modules is only"):
        pickle.dumps(normalized)
    replica = copy.deepcopy(normalized)
    assert type(replica) is type(normalized)
    np.testing.assert_array_equal(
        replica.weight.detach().numpy(), normalized.weight.detach().numpy()
    )
