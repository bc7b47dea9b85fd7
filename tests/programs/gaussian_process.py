"""Gaussian-process regression in float64, as the GPyTorch-style tutorials
write it by hand: an RBF kernel from ``torch.cdist``, its hyperparameters
(length scale, signal and noise variance, kept positive through ``softplus``)
fitted by maximizing the marginal likelihood, a ``MultivariateNormal``'s
``log_prob`` over the training targets, with Adam; then the posterior mean
and variance at test points from a Cholesky factor and ``linalg.solve``, and
a ``kl_divergence`` between the fitted prior and the initial one.
"""

import numpy as np

STEPS = 40
LOG_EVERY = 8


def run(torch, compile=None) -> dict:
    rng = np.random.default_rng(3)
    D = torch.distributions
    x = torch.tensor(np.sort(rng.uniform(-3, 3, (30, 1)), axis=0))
    y = torch.tensor(np.sin(2 * x.numpy()[:, 0]) + 0.1 * rng.standard_normal(30))
    x_test = torch.linspace(-3, 3, 7, dtype=torch.float64).unsqueeze(1)

    raw = {
        name: torch.tensor(value, dtype=torch.float64, requires_grad=True)
        for name, value in (("length", 0.0), ("signal", 0.5), ("noise", -2.0))
    }

    def kernel(a, b, length, signal):
        return signal * torch.exp(-0.5 * torch.cdist(a, b).pow(2) / length**2)

    def prior(length, signal, noise):
        covariance = kernel(x, x, length, signal) + noise * torch.eye(30, dtype=torch.float64)
        return D.MultivariateNormal(
            torch.zeros(30, dtype=torch.float64), covariance_matrix=covariance
        )

    def positive(name):
        return torch.nn.functional.softplus(raw[name])

    optimizer = torch.optim.Adam(list(raw.values()), lr=0.05)

    def step():
        optimizer.zero_grad()
        loss = -prior(positive("length"), positive("signal"), positive("noise")).log_prob(y) / 30
        loss.backward()
        optimizer.step()
        return loss

    initial = prior(*(positive(name).detach() for name in ("length", "signal", "noise")))
    step = compile(step) if compile else step
    losses = []
    for t in range(STEPS):
        loss = step()
        if t % LOG_EVERY == LOG_EVERY - 1:
            losses.append(loss.item())

    with torch.no_grad():
        length, signal, noise = (positive(name) for name in ("length", "signal", "noise"))
        train = kernel(x, x, length, signal) + noise * torch.eye(30, dtype=torch.float64)
        factor = torch.linalg.cholesky(train)
        cross = kernel(x, x_test, length, signal)
        alpha = torch.linalg.solve(train, y)
        mean = cross.T @ alpha
        whitened = torch.linalg.solve(factor, cross)
        variance = signal - (whitened**2).sum(0)
        fitted = prior(length, signal, noise)
        return {
            "losses": losses,
            "hyperparameters": [length.item(), signal.item(), noise.item()],
            "posterior_mean": mean.tolist(),
            "posterior_variance": variance.tolist(),
            "log_det": torch.logdet(train).item(),
            "slogdet_sign": torch.linalg.slogdet(train).sign.item(),
            "kl_from_initial": D.kl_divergence(fitted, initial).item(),
            "entropy": fitted.entropy().item(),
        }
