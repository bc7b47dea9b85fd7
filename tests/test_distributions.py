"""fusegrad.distributions: densities, entropies and divergences against
numpy's closed forms, their gradients against finite differences, the same
numbers compiled (calls 1 to 3), samples of the right shapes and moments, and
PyTorch's parameter and support checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.distributions as D

_rng = np.random.default_rng(7)
LOC, LOG_SCALE = _rng.standard_normal(3), 0.3 * _rng.standard_normal(3)
VALUES = _rng.standard_normal((4, 3))
_FACTOR = _rng.standard_normal((3, 3))
COVARIANCE = _FACTOR @ _FACTOR.T + np.eye(3)


def _normal_log_prob(x, loc, scale):
    return -((x - loc) ** 2) / (2 * scale**2) - np.log(scale) - 0.5 * np.log(2 * np.pi)


def _mvn_log_prob(x, loc, covariance):
    difference = x - loc
    mahalanobis = np.einsum("...i,ij,...j->...", difference, np.linalg.inv(covariance), difference)
    return -0.5 * (len(loc) * np.log(2 * np.pi) + np.linalg.slogdet(covariance)[1] + mahalanobis)


def _log_softmax(z):
    return (
        z
        - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True))
        - z.max(-1, keepdims=True)
    )


# name: (fusegrad function of (loc, log_scale), numpy reference of the same)
CASES = {
    "normal log_prob": (
        lambda m, s: D.Normal(m, s.exp()).log_prob(fg.tensor(VALUES)),
        lambda m, s: _normal_log_prob(VALUES, m, np.exp(s)),
    ),
    "normal entropy": (
        lambda m, s: D.Normal(m, s.exp()).entropy(),
        lambda m, s: 0.5 + 0.5 * np.log(2 * np.pi) + s,
    ),
    "normal kl": (
        lambda m, s: D.kl_divergence(D.Normal(m, s.exp()), D.Normal(s, m.exp())),
        lambda m, s: (
            np.log(np.exp(m) / np.exp(s))
            + (np.exp(2 * s) + (m - s) ** 2) / (2 * np.exp(2 * m))
            - 0.5
        ),
    ),
    "independent normal log_prob": (
        lambda m, s: D.Independent(D.Normal(m, s.exp()), 1).log_prob(fg.tensor(VALUES)),
        lambda m, s: _normal_log_prob(VALUES, m, np.exp(s)).sum(-1),
    ),
    "bernoulli log_prob": (
        lambda m, s: D.Bernoulli(logits=m).log_prob(fg.tensor([1.0, 0.0, 1.0])),
        lambda m, s: (
            np.array([1.0, 0.0, 1.0]) * np.log(1 / (1 + np.exp(-m)))
            + np.array([0.0, 1.0, 0.0]) * np.log(1 - 1 / (1 + np.exp(-m)))
        ),
    ),
    "bernoulli entropy": (
        lambda m, s: D.Bernoulli(probs=m.sigmoid()).entropy(),
        lambda m, s: -(p := 1 / (1 + np.exp(-m))) * np.log(p) - (1 - p) * np.log(1 - p),
    ),
    "categorical log_prob": (
        lambda m, s: D.Categorical(logits=fg.stack([m, s])).log_prob(fg.tensor([2, 0])),
        lambda m, s: _log_softmax(np.stack([m, s]))[[0, 1], [2, 0]],
    ),
    "categorical entropy": (
        lambda m, s: D.Categorical(logits=fg.stack([m, s])).entropy(),
        lambda m, s: (
            -(np.exp(_log_softmax(np.stack([m, s]))) * _log_softmax(np.stack([m, s]))).sum(-1)
        ),
    ),
    "categorical kl": (
        lambda m, s: D.kl_divergence(D.Categorical(logits=m), D.Categorical(logits=s)),
        lambda m, s: (np.exp(_log_softmax(m)) * (_log_softmax(m) - _log_softmax(s))).sum(),
    ),
    "exponential log_prob": (
        lambda m, s: D.Exponential(s.exp()).log_prob(m.abs()),
        lambda m, s: s - np.exp(s) * np.abs(m),
    ),
    "uniform entropy": (
        lambda m, s: D.Uniform(m, m + s.exp()).entropy(),
        lambda m, s: s,
    ),
    "multivariate normal log_prob": (
        lambda m, s: D.MultivariateNormal(m, covariance_matrix=fg.tensor(COVARIANCE)).log_prob(
            fg.tensor(VALUES)
        ),
        lambda m, s: _mvn_log_prob(VALUES, m, COVARIANCE),
    ),
    "multivariate normal kl": (
        lambda m, s: D.kl_divergence(
            D.MultivariateNormal(m, covariance_matrix=fg.tensor(COVARIANCE)),
            D.MultivariateNormal(s, covariance_matrix=fg.tensor(2 * np.eye(3))),
        ),
        lambda m, s: (
            0.5
            * (
                np.trace(COVARIANCE / 2)
                + (s - m) @ (s - m) / 2
                - 3
                + np.linalg.slogdet(2 * np.eye(3))[1]
                - np.linalg.slogdet(COVARIANCE)[1]
            )
        ),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_densities_match_their_closed_forms_eagerly_and_compiled(name):
    fn, reference = CASES[name]
    want = reference(LOC, LOG_SCALE)
    compiled = fg.jit(fn)
    for call in range(3):
        loc, log_scale = (fg.tensor(a + 0.01 * call) for a in (LOC, LOG_SCALE))
        want = reference(LOC + 0.01 * call, LOG_SCALE + 0.01 * call)
        np.testing.assert_allclose(fn(loc, log_scale).numpy(), want, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(compiled(loc, log_scale).numpy(), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", list(CASES))
def test_density_gradients_match_finite_differences(name):
    fn, _ = CASES[name]
    inputs = tuple(fg.tensor(a, requires_grad=True) for a in (LOC, LOG_SCALE))
    assert fg.autograd.gradcheck(fn, inputs)
    assert fg.autograd.gradgradcheck(fn, inputs)


def test_samples_have_the_requested_shapes_and_moments():
    fg.manual_seed(0)
    normal = D.Normal(fg.tensor([1.0, -2.0]), fg.tensor([0.5, 2.0]))
    draws = normal.sample((20000,))
    assert draws.shape == (20000, 2) and not draws.requires_grad
    np.testing.assert_allclose(draws.mean(0).numpy(), [1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(draws.std(0).numpy(), [0.5, 2.0], rtol=0.03)
    categorical = D.Categorical(probs=fg.tensor([[0.2, 0.8, 0.0], [1.0, 1.0, 2.0]]))
    picks = categorical.sample((6000,))
    assert picks.shape == (6000, 2) and picks.dtype is fg.int64
    np.testing.assert_allclose(
        [(picks[:, 0] == 1).double().mean().item(), (picks[:, 1] == 2).double().mean().item()],
        [0.8, 0.5],
        atol=0.03,
    )
    assert (picks[:, 0] != 2).all()
    mvn = D.MultivariateNormal(
        fg.zeros(3, dtype=fg.float64), covariance_matrix=fg.tensor(COVARIANCE)
    )
    assert mvn.rsample((5, 2)).shape == (5, 2, 3)
    assert D.Bernoulli(probs=fg.full((4,), 0.5)).sample((3,)).shape == (3, 4)
    assert D.Uniform(0.0, 2.0).rsample((7,)).max().item() < 2.0


def test_rsample_carries_gradients_to_the_parameters():
    loc, scale = fg.tensor([0.5], requires_grad=True), fg.tensor([2.0], requires_grad=True)
    fg.manual_seed(1)
    draw = D.Normal(loc, scale).rsample((3,))
    draw.sum().backward()
    assert loc.grad.item() == 3.0
    fg.manual_seed(1)
    noise = fg.randn(3, 1)
    assert scale.grad.item() == pytest.approx(noise.sum().item())


def test_parameters_and_values_are_checked_as_pytorch_checks_them():
    with pytest.raises(ValueError, match="Expected parameter scale"):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError, match="Expected parameter probs"):
        D.Bernoulli(probs=fg.tensor([1.5]))
    with pytest.raises(ValueError, match="within the support"):
        D.Categorical(logits=fg.zeros(3)).log_prob(fg.tensor(3))
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Categorical()
    assert D.Uniform(0.0, 1.0, validate_args=False).log_prob(fg.tensor(2.0)).item() == -math.inf
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Exponential(1.0))
    independent = D.Independent(D.Normal(fg.zeros(2, 3), 1.0), 1)
    assert (independent.batch_shape, independent.event_shape) == ((2,), (3,))
