"""Jacobians and Hessians with ``torch.func`` and ``torch.autograd.functional``,
in float64, as the torch.func tutorial on Jacobians and Hessians computes them: a
small MLP's Jacobian with respect to its input (``jacrev`` and ``jacfwd``) and
with respect to its parameters (``jacrev`` of a ``functional_call`` over a
parameter dict), the Hessian of a scalar loss of the input (``hessian``,
``jacfwd(jacrev(f))``, ``torch.autograd.functional.hessian``), a
forward-over-reverse Hessian-vector product (``jvp`` of ``grad``), and their
agreement; then Newton's method with the Hessian and ``torch.linalg.solve``: one
step solving a linear least-squares problem (checked against ``pinv``), and a
few steps of L2-regularized logistic regression.
"""

import numpy as np

IN, HIDDEN, OUT = 3, 8, 2
POINTS, FEATURES = 40, 4
NEWTON_STEPS = 4
L2 = 0.1


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional
    func = torch.func
    float64 = torch.float64

    rng = np.random.default_rng(7)
    model = nn.Sequential(nn.Linear(IN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, OUT)).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.tensor(rng.normal(0, 0.5, tuple(p.shape))))
    x = torch.tensor(rng.standard_normal(IN))
    v = torch.tensor(rng.standard_normal(IN))
    params = {name: p.detach() for name, p in model.named_parameters()}

    def output_with(params, x):
        return func.functional_call(model, params, (x,))

    def loss(x):
        return (model(x) ** 2).sum() + torch.sin(x).prod()

    def derivatives(x, v):
        jac_rev = func.jacrev(model)(x)
        jac_fwd = func.jacfwd(model)(x)
        jac_params = func.jacrev(output_with)(params, x)
        hess = func.hessian(loss)(x)
        hess_rev_rev = func.jacrev(func.jacrev(loss))(x)
        _, hvp = func.jvp(func.grad(loss), (x,), (v,))  # forward-over-reverse
        return jac_rev, jac_fwd, jac_params, hess, hess_rev_rev, hvp

    derivatives = compile(derivatives) if compile else derivatives
    for _ in range(2):  # a compiled function runs traced the second time
        jac_rev, jac_fwd, jac_params, hess, hess_rev_rev, hvp = derivatives(x, v)

    jac_autograd = torch.autograd.functional.jacobian(model, x)
    hess_autograd = torch.autograd.functional.hessian(loss, x)
    agree = {
        "jacrev_jacfwd": torch.allclose(jac_rev, jac_fwd),
        "jacrev_autograd": torch.allclose(jac_rev, jac_autograd),
        "hessian_autograd": torch.allclose(hess, hess_autograd),
        "hessian_jacrev_jacrev": torch.allclose(hess, hess_rev_rev),
        "hessian_symmetric": torch.allclose(hess, hess.T),
        "hvp": torch.allclose(hvp, hess @ v),
        # the output is linear in the last bias: its Jacobian is the identity
        "jacobian_2.bias_identity": torch.equal(
            jac_params["2.bias"], torch.eye(OUT, dtype=float64)
        ),
    }

    # Newton's method: the step solves H d = -g
    A = torch.tensor(rng.standard_normal((POINTS, FEATURES)))
    b = torch.tensor(rng.standard_normal(POINTS))
    labels = torch.tensor((rng.uniform(size=POINTS) < 0.5).astype(np.float64))

    def least_squares(w):
        return 0.5 * ((A @ w - b) ** 2).sum()

    def logistic(w):
        return F.binary_cross_entropy_with_logits(A @ w, labels) + 0.5 * L2 * (w**2).sum()

    def newton_step(w):
        g = func.grad(objective)(w)
        H = func.hessian(objective)(w)
        return w - torch.linalg.solve(H, g)

    objective = least_squares
    w = newton_step(torch.zeros(FEATURES, dtype=float64))
    solution = torch.linalg.pinv(A) @ b

    objective = logistic
    newton_step = compile(newton_step) if compile else newton_step
    w_logistic = torch.zeros(FEATURES, dtype=float64)
    logistic_losses = [logistic(w_logistic).item()]
    for _ in range(NEWTON_STEPS):
        w_logistic = newton_step(w_logistic)
        logistic_losses.append(logistic(w_logistic).item())
    gradient_at_optimum = func.grad(logistic)(w_logistic)

    return {
        "jacobian_input": jac_rev.tolist(),
        "jacobian_params_shapes": {name: list(j.shape) for name, j in jac_params.items()},
        "jacobian_0.weight[:, 0]": jac_params["0.weight"][:, 0].tolist(),
        "jacobian_2.weight": jac_params["2.weight"].tolist(),
        "hessian": hess.tolist(),
        "hvp": hvp.tolist(),
        "agree": agree,
        "least_squares_newton": w.tolist(),
        "least_squares_matches_pinv": torch.allclose(w, solution),
        "least_squares_loss": least_squares(w).item(),
        "logistic_losses": logistic_losses,
        "logistic_weights": w_logistic.tolist(),
        "logistic_gradient_small": bool(gradient_at_optimum.abs().max() < 1e-8),
    }
