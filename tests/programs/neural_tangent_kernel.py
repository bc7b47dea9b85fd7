"""Neural tangent kernels, as the torch.func tutorial computes them, in float64:
an MLP called by ``functional_call`` on one input (``x.unsqueeze(0)``); each
input's Jacobian w.r.t. the parameter dict by ``vmap(jacrev(fnet_single),
(None, 0))``, contracted by ``einsum`` into the empirical NTK ('full', 'trace'
and 'diagonal'); the same kernel by NTK-vector products (``vjp``, then ``jvp``
of each vector-Jacobian product, under ``vmap`` over a basis and a double
``vmap`` over the two inputs), checked to agree. The compiled function is the
kernel by Jacobian contraction: its eigenvalues, and kernel regression with it
(``linalg.solve``), before and after a few SGD steps of training.
"""

import numpy as np

IN, HIDDEN, OUT = 3, 16, 2
TRAIN, TEST = 10, 5
STEPS = 4
LR = 0.1


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional
    func = torch.func
    functional_call, jacrev, vjp, jvp, vmap = (
        func.functional_call,
        func.jacrev,
        func.vjp,
        func.jvp,
        func.vmap,
    )

    rng = np.random.default_rng(31)
    net = nn.Sequential(
        nn.Linear(IN, HIDDEN),
        nn.Tanh(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.Tanh(),
        nn.Linear(HIDDEN, OUT),
    ).double()
    with torch.no_grad():
        for p in net.parameters():
            fan_in = p.shape[1] if p.dim() == 2 else p.shape[0]
            p.copy_(torch.tensor(rng.normal(0, 1 / np.sqrt(fan_in), tuple(p.shape))))
    x_train = torch.tensor(rng.uniform(-1, 1, (TRAIN, IN)))
    y_train = torch.tensor(
        np.stack([np.sin(2 * x_train.numpy()).sum(1), x_train.numpy().prod(1)], 1)
    )
    x_test = torch.tensor(rng.uniform(-1, 1, (TEST, IN)))

    def fnet_single(params, x):
        return functional_call(net, params, (x.unsqueeze(0),)).squeeze(0)

    def empirical_ntk_jacobian_contraction(params, x1, x2, compute="full"):
        # jacobian of each input, flattened per parameter: (N, OUT, parameter size)
        jac1 = vmap(jacrev(fnet_single), (None, 0))(params, x1)
        jac1 = [j.flatten(2) for j in jac1.values()]
        jac2 = vmap(jacrev(fnet_single), (None, 0))(params, x2)
        jac2 = [j.flatten(2) for j in jac2.values()]
        einsum_expr = {"full": "Naf,Mbf->NMab", "trace": "Naf,Maf->NM", "diagonal": "Naf,Maf->NMa"}
        result = torch.stack(
            [torch.einsum(einsum_expr[compute], j1, j2) for j1, j2 in zip(jac1, jac2)]
        )
        return result.sum(0)

    def empirical_ntk_ntk_vps(params, x1, x2, compute="full"):
        def get_ntk(x1, x2):
            def func_x1(params):
                return fnet_single(params, x1)

            def func_x2(params):
                return fnet_single(params, x2)

            output, vjp_fn = vjp(func_x1, params)

            def get_ntk_slice(vec):
                # J(x1)^T @ vec, then J(x2) @ that
                vjps = vjp_fn(vec)
                _, jvps = jvp(func_x2, (params,), vjps)
                return jvps

            basis = torch.eye(output.numel(), dtype=output.dtype).view(output.numel(), -1)
            return vmap(get_ntk_slice)(basis)

        # get_ntk(x1, x2) computes J(x1) @ J(x2)^T, transposed: one slice per basis vector
        result = vmap(vmap(get_ntk, (None, 0)), (0, None))(x1, x2)
        if compute == "full":
            return result
        if compute == "trace":
            return torch.einsum("NMKK->NM", result)
        return torch.einsum("NMKK->NMK", result)

    params = {k: v.detach() for k, v in net.named_parameters()}
    by_jacobians = {
        compute: empirical_ntk_jacobian_contraction(params, x_train, x_test, compute)
        for compute in ("full", "trace", "diagonal")
    }
    by_vps = {
        compute: empirical_ntk_ntk_vps(params, x_train, x_test, compute)
        for compute in ("full", "trace", "diagonal")
    }
    methods_agree = {
        compute: torch.allclose(by_jacobians[compute], by_vps[compute], atol=1e-10)
        for compute in by_jacobians
    }

    def ntk_trace(x1, x2):
        params = {k: v.detach() for k, v in net.named_parameters()}
        return empirical_ntk_jacobian_contraction(params, x1, x2, "trace")

    ntk_trace = compile(ntk_trace) if compile else ntk_trace

    def kernel_regression():
        """The trace NTK on the training set, its spectrum, its regression at the test points."""
        k_train = ntk_trace(x_train, x_train)
        k_test = ntk_trace(x_test, x_train)
        eigenvalues = torch.linalg.eigvalsh(k_train)
        alpha = torch.linalg.solve(k_train + 1e-3 * torch.eye(TRAIN, dtype=torch.float64), y_train)
        return eigenvalues, k_test @ alpha

    eigenvalues_before, predictions_before = kernel_regression()
    optimizer = torch.optim.SGD(net.parameters(), lr=LR)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = F.mse_loss(net(x_train), y_train)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    eigenvalues_after, predictions_after = kernel_regression()

    return {
        "jacobian_shapes": {
            k: list(v.shape)
            for k, v in vmap(jacrev(fnet_single), (None, 0))(params, x_test).items()
        },
        "ntk_shapes": {k: list(v.shape) for k, v in by_jacobians.items()},
        "jacobian_contraction_and_ntk_vps_agree": methods_agree,
        "ntk_full[0, 0]": by_jacobians["full"][0, 0].tolist(),
        "ntk_full[:, :, 0, 1]": by_jacobians["full"][:, :, 0, 1].tolist(),
        "ntk_trace": by_jacobians["trace"].tolist(),
        "ntk_diagonal[:3]": by_jacobians["diagonal"][:3].tolist(),
        "ntk_vps_full[:3, 0]": by_vps["full"][:3, 0].tolist(),
        "eigenvalues_before_training": eigenvalues_before.tolist(),
        "kernel_predictions_before_training": predictions_before.tolist(),
        "training_losses": losses,
        "eigenvalues_after_training": eigenvalues_after.tolist(),
        "kernel_predictions_after_training": predictions_after.tolist(),
        "trace_of_train_ntk_after_training": ntk_trace(x_train, x_train).trace().item(),
    }
