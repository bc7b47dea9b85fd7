"""REINFORCE on logged episodes, as reinforcement-learning tutorials write
its update: a policy network's logits make a ``Categorical``; the loss is
minus the log-probability of the actions taken times their normalized
returns, less an entropy bonus, with Adam. The episodes come from a seeded
numpy generator (no environment, no sampling compared), and a learned
Gaussian policy head (``Normal`` with ``Independent``) is fitted beside it;
``kl_divergence`` between the policy before and after is reported.
"""

import numpy as np

STEPS = 30
LOG_EVERY = 6


def run(torch, compile=None) -> dict:
    nn, D = torch.nn, torch.distributions
    rng = np.random.default_rng(5)
    states = torch.tensor(rng.standard_normal((64, 4)), dtype=torch.float32)
    actions = torch.tensor(rng.integers(0, 3, 64))
    rewards = rng.standard_normal(64)
    returns = np.array([sum(rewards[i:] * 0.9 ** np.arange(64 - i)) for i in range(64)])
    returns = torch.tensor((returns - returns.mean()) / returns.std(), dtype=torch.float32)
    targets = torch.tensor(rng.standard_normal((64, 2)), dtype=torch.float32)

    policy = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
    gaussian = nn.Linear(4, 2)
    log_std = nn.Parameter(torch.zeros(2))
    with torch.no_grad():
        for p in [*policy.parameters(), *gaussian.parameters()]:
            p.copy_(torch.tensor(0.3 * rng.standard_normal(tuple(p.shape)), dtype=torch.float32))
    parameters = [*policy.parameters(), *gaussian.parameters(), log_std]
    optimizer = torch.optim.Adam(parameters, lr=0.01)

    with torch.no_grad():
        before = D.Categorical(logits=policy(states))

    def step():
        optimizer.zero_grad()
        dist = D.Categorical(logits=policy(states))
        pg_loss = -(dist.log_prob(actions) * returns).mean() - 0.01 * dist.entropy().mean()
        normal = D.Independent(D.Normal(gaussian(states), log_std.exp()), 1)
        fit_loss = -normal.log_prob(targets).mean()
        loss = pg_loss + fit_loss
        loss.backward()
        optimizer.step()
        return loss, pg_loss.detach(), fit_loss.detach()

    step = compile(step) if compile else step
    losses = []
    for t in range(STEPS):
        loss, pg_loss, fit_loss = step()
        if t % LOG_EVERY == LOG_EVERY - 1:
            losses.append([loss.item(), pg_loss.item(), fit_loss.item()])

    with torch.no_grad():
        after = D.Categorical(logits=policy(states))
        return {
            "losses": losses,
            "kl_before_after": D.kl_divergence(before, after).mean().item(),
            "probs_first_state": after.probs[0].tolist(),
            "log_std": log_std.tolist(),
            "entropy": after.entropy().mean().item(),
            "last_layer": policy[2].weight[0].tolist(),
        }
