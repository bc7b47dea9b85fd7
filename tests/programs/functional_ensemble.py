"""Model ensembling with ``torch.func``, as the tutorial does it before ``vmap``:
three small MLPs' parameters and buffers stacked by ``stack_module_state``, a
copy of one model as the base (the tutorial's is on the ``meta`` device, which
fusegrad does not have), each model's predictions from ``functional_call`` with
its slice of the stacked state, in a Python loop, stacked; a loss over the
ensemble, its gradients to the stacked parameters (by ``backward``, and by
``torch.func.grad`` to check them), and SGD steps on the stacked parameters.
Each model's parameters, copied out of the stack, then predict as that model
does.
"""

import copy

import numpy as np

MODELS = 3
IN, HIDDEN, OUT = 4, 16, 1
POINTS = 32
STEPS = 6
LR = 0.05


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional
    func = torch.func

    rng = np.random.default_rng(13)
    models = [
        nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, OUT))
        for _ in range(MODELS)
    ]
    with torch.no_grad():
        for model in models:
            for p in model.parameters():
                fan_in = p.shape[1] if p.dim() == 2 else HIDDEN
                values = rng.normal(0, 1 / np.sqrt(fan_in), tuple(p.shape))
                p.copy_(torch.tensor(values, dtype=torch.float32))
    x = torch.tensor(rng.standard_normal((POINTS, IN)), dtype=torch.float32)
    true_w = rng.standard_normal((IN, OUT))
    y = torch.tensor(np.tanh(x.numpy() @ true_w) + 0.1 * rng.standard_normal((POINTS, OUT)))
    y = y.float()

    params, buffers = func.stack_module_state(models)
    base = copy.deepcopy(models[0])  # its own parameters are never used

    def predict(params, buffers, x):
        """Every model's predictions, (MODELS, POINTS, OUT)."""
        return torch.stack(
            [
                func.functional_call(
                    base,
                    ({k: v[i] for k, v in params.items()}, {k: v[i] for k, v in buffers.items()}),
                    (x,),
                )
                for i in range(MODELS)
            ]
        )

    def ensemble_loss(params, buffers, x, y):
        # each model fitted to the targets, summed, so each one's gradient is its own
        return sum(F.mse_loss(p, y) for p in predict(params, buffers, x))

    optimizer = torch.optim.SGD(params.values(), lr=LR)

    def step(x, y):
        optimizer.zero_grad()
        loss = ensemble_loss(params, buffers, x, y)
        loss.backward()
        grads = {k: p.grad.clone() for k, p in params.items()}
        optimizer.step()
        return loss, grads

    step = compile(step) if compile else step

    losses, grads_agree = [], []
    for _ in range(STEPS):
        detached = {k: p.detach() for k, p in params.items()}
        func_grads = func.grad(ensemble_loss)(detached, buffers, x, y)
        loss, grads = step(x, y)
        losses.append(loss.item())
        grads_agree.append(all(torch.allclose(grads[k], func_grads[k]) for k in params))

    with torch.no_grad():
        predictions = predict(params, buffers, x)
        per_model_losses = [F.mse_loss(p, y).item() for p in predictions]
        mean_prediction = predictions.mean(dim=0)
        # model i, given its slice of the stack, predicts what the ensemble's slice i does
        for i, model in enumerate(models):
            for name, p in model.named_parameters():
                p.copy_(params[name][i])
        matches_models = all(torch.allclose(m(x), p) for m, p in zip(models, predictions))

    return {
        "stacked_shapes": {k: list(v.shape) for k, v in params.items()},
        "stacked_require_grad": [v.requires_grad for v in params.values()],
        "losses": losses,
        "grads_agree_with_func_grad": grads_agree,
        "per_model_losses": per_model_losses,
        "ensemble_loss": F.mse_loss(mean_prediction, y).item(),
        "mean_prediction[:8]": mean_prediction[:8, 0].tolist(),
        "stacked_parameter_norms": {k: v.norm().item() for k, v in params.items()},
        "models_match_their_slices": matches_models,
    }
