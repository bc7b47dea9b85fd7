"""A physics-informed neural network in float64: u(x) = MLP(x) fitted to the 1-D
Poisson problem u''(x) = -pi^2 sin(pi x) on (0, 1) with u(0) = u(1) = 0 (its
solution: sin(pi x)). The network is called by ``functional_call`` on one
scalar input; its second derivative at every collocation point by
``vmap(grad(grad(u, argnums=1), argnums=1), in_dims=(None, 0))``, checked
against ``vmap(jacrev(jacrev(...)))`` and ``vmap(hessian(...))``. The loss, the
mean squared residual plus the boundary terms, is trained by Adam through the
vmapped second derivatives (the compiled step); the first derivative at the
boundaries by ``vmap(grad(...))``.
"""

import math

import numpy as np

HIDDEN = 16
POINTS = 24
STEPS = 8
LR = 0.01
BOUNDARY_WEIGHT = 10.0


def run(torch, compile=None) -> dict:
    nn = torch.nn
    func = torch.func
    functional_call, grad, jacrev, hessian, vmap = (
        func.functional_call,
        func.grad,
        func.jacrev,
        func.hessian,
        func.vmap,
    )

    rng = np.random.default_rng(41)
    model = nn.Sequential(
        nn.Linear(1, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, 1)
    ).double()
    with torch.no_grad():
        for p in model.parameters():
            fan_in = p.shape[1] if p.dim() == 2 else p.shape[0]
            p.copy_(torch.tensor(rng.normal(0, 1 / np.sqrt(fan_in), tuple(p.shape))))
    x_interior = torch.tensor(np.sort(rng.uniform(0, 1, POINTS)))
    x_boundary = torch.tensor([0.0, 1.0], dtype=torch.float64)

    def u(params, x):
        """The network at one scalar point."""
        return functional_call(model, params, (x.reshape(1, 1),)).squeeze()

    def source(x):
        return -(math.pi**2) * torch.sin(math.pi * x)

    u_xx = vmap(grad(grad(u, argnums=1), argnums=1), in_dims=(None, 0))
    u_xx_jacrev = vmap(jacrev(jacrev(u, argnums=1), argnums=1), in_dims=(None, 0))
    u_xx_hessian = vmap(hessian(u, argnums=1), in_dims=(None, 0))
    u_x = vmap(grad(u, argnums=1), in_dims=(None, 0))
    u_batch = vmap(u, in_dims=(None, 0))

    def pinn_loss(params):
        residual = u_xx(params, x_interior) - source(x_interior)
        boundary = u_batch(params, x_boundary)
        return (residual**2).mean() + BOUNDARY_WEIGHT * (boundary**2).mean()

    def second_derivatives_agree():
        params = {k: v.detach() for k, v in model.named_parameters()}
        by_grad = u_xx(params, x_interior)
        return [
            torch.allclose(by_grad, u_xx_jacrev(params, x_interior), atol=1e-12),
            torch.allclose(by_grad, u_xx_hessian(params, x_interior), atol=1e-12),
        ]

    agree_before = second_derivatives_agree()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)

    def step():
        optimizer.zero_grad()
        loss = pinn_loss(dict(model.named_parameters()))
        loss.backward()
        optimizer.step()
        return loss

    step = compile(step) if compile else step

    losses = [step().item() for _ in range(STEPS)]

    params = {k: v.detach() for k, v in model.named_parameters()}
    x_check = torch.linspace(0, 1, 6, dtype=torch.float64)
    return {
        "u_xx_shape": list(u_xx(params, x_interior).shape),
        "second_derivatives_agree_before_training": agree_before,
        "second_derivatives_agree_after_training": second_derivatives_agree(),
        "losses": losses,
        "final_loss": pinn_loss(params).item(),
        "u_at_check_points": u_batch(params, x_check).tolist(),
        "u_xx_at_check_points": u_xx(params, x_check).tolist(),
        "u_xx_hessian_at_check_points": u_xx_hessian(params, x_check).tolist(),
        "u_x_at_boundaries": u_x(params, x_boundary).tolist(),
        "residuals[:6]": (u_xx(params, x_interior) - source(x_interior))[:6].tolist(),
        "parameter_norms": {k: v.norm().item() for k, v in params.items()},
    }
