"""nn modules and optimizers, against the update rules written out in numpy."""

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn
import fusegrad.nn.functional as F


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


def test_state_dict_round_trip():
    a, b = nn.Linear(3, 2), nn.Linear(3, 2)
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a.weight.detach().numpy(), b.weight.detach().numpy())
