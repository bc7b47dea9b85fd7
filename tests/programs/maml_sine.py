"""MAML on sine-wave regression (Finn et al., 2017), as the torch.func tutorials
write it: a small MLP whose parameters are a dict, called with
``torch.func.functional_call``; the inner loop adapts that dict to each task with
``torch.autograd.grad(..., create_graph=True)``, so the query loss after
adaptation differentiates through the inner steps (second order) into the
meta-parameters, updated by Adam; the inner loop written with
``torch.func.grad`` gives the same meta-gradient. Then the trained meta-parameters adapt to an
unseen task with ``torch.func.grad_and_value``.

Tasks (amplitude, phase) and their points come from a seeded numpy generator.
"""

import numpy as np

HIDDEN = 32
TASKS_PER_BATCH = 4
K_SHOT = 10
INNER_STEPS = 2
INNER_LR = 0.01
META_LR = 1e-3
META_STEPS = 6
TEST_STEPS = 5


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional
    functional_call, grad_and_value = torch.func.functional_call, torch.func.grad_and_value

    rng = np.random.default_rng(11)
    model = nn.Sequential(
        nn.Linear(1, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 1)
    )
    with torch.no_grad():
        for p in model.parameters():
            fan_in = p.shape[1] if p.dim() == 2 else p.shape[0]
            values = rng.normal(0, 1 / np.sqrt(fan_in), tuple(p.shape))
            p.copy_(torch.tensor(values, dtype=torch.float32))

    def sample_tasks(n):
        """n sine tasks: support and query points (n, K, 1) each."""
        amplitude = rng.uniform(0.1, 5.0, (n, 1, 1))
        phase = rng.uniform(0, np.pi, (n, 1, 1))
        x = rng.uniform(-5.0, 5.0, (n, 2 * K_SHOT, 1))
        y = amplitude * np.sin(x - phase)
        x, y = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
        return x[:, :K_SHOT], y[:, :K_SHOT], x[:, K_SHOT:], y[:, K_SHOT:]

    def loss_with(params, x, y):
        return F.mse_loss(functional_call(model, params, (x,)), y)

    def adapt(params, x, y):
        """The inner loop: a few SGD steps on the support set, kept differentiable."""
        for _ in range(INNER_STEPS):
            grads = torch.autograd.grad(
                loss_with(params, x, y), list(params.values()), create_graph=True
            )
            params = {name: p - INNER_LR * g for (name, p), g in zip(params.items(), grads)}
        return params

    meta_optimizer = torch.optim.Adam(model.parameters(), lr=META_LR)

    def meta_step(x_support, y_support, x_query, y_query):
        meta_optimizer.zero_grad()
        params = dict(model.named_parameters())
        query_losses = []
        for i in range(TASKS_PER_BATCH):
            adapted = adapt(params, x_support[i], y_support[i])
            query_losses.append(loss_with(adapted, x_query[i], y_query[i]))
        meta_loss = torch.stack(query_losses).mean()
        meta_loss.backward()
        meta_optimizer.step()
        return meta_loss, torch.stack(query_losses).detach()

    meta_step = compile(meta_step) if compile else meta_step

    meta_losses, adapted_losses, unadapted_losses = [], [], []
    for _ in range(META_STEPS):
        tasks = sample_tasks(TASKS_PER_BATCH)
        with torch.no_grad():
            before = [loss_with(dict(model.named_parameters()), x, y) for x, y in zip(*tasks[2:])]
        unadapted_losses.append([loss.item() for loss in before])
        meta_loss, per_task = meta_step(*tasks)
        meta_losses.append(meta_loss.item())
        adapted_losses.append(per_task.tolist())

    # the inner loop written with torch.func.grad instead: the same meta-gradient
    def adapt_with_func_grad(params, x, y):
        for _ in range(INNER_STEPS):
            grads = torch.func.grad(loss_with)(params, x, y)
            params = {name: p - INNER_LR * grads[name] for name, p in params.items()}
        return params

    x_support, y_support, x_query, y_query = sample_tasks(TASKS_PER_BATCH)
    meta_gradients = []
    for inner_loop in (adapt, adapt_with_func_grad):
        params = dict(model.named_parameters())
        meta_loss = sum(
            loss_with(inner_loop(params, x_support[i], y_support[i]), x_query[i], y_query[i])
            for i in range(TASKS_PER_BATCH)
        )
        meta_gradients.append(torch.autograd.grad(meta_loss, list(params.values())))
    func_grad_agrees = all(torch.allclose(a, b) for a, b in zip(*meta_gradients))
    meta_gradient_norm = torch.stack([g.norm() for g in meta_gradients[0]]).norm().item()

    # test time: adapt to an unseen task, with torch.func's gradient transform
    x_support, y_support, x_query, y_query = (t[0] for t in sample_tasks(1))
    params = {name: p.detach() for name, p in model.named_parameters()}
    test_losses = []
    for _ in range(TEST_STEPS):
        grads, loss = grad_and_value(loss_with)(params, x_support, y_support)
        test_losses.append(loss.item())
        params = {name: p - INNER_LR * grads[name] for name, p in params.items()}
    with torch.no_grad():
        query_after = loss_with(params, x_query, y_query).item()
        query_before = loss_with(dict(model.named_parameters()), x_query, y_query).item()

    return {
        "parameter_names": [name for name, _ in model.named_parameters()],
        "meta_losses": meta_losses,
        "adapted_losses": adapted_losses,
        "unadapted_losses": unadapted_losses,
        "test_support_losses": test_losses,
        "test_query_loss_before_and_after": [query_before, query_after],
        "func_grad_inner_loop_agrees": func_grad_agrees,
        "meta_gradient_norm": meta_gradient_norm,
        "parameter_norms": {name: p.norm().item() for name, p in model.named_parameters()},
        "last_layer_weight[0, :6]": model[4].weight[0, :6].tolist(),
    }
