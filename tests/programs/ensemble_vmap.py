"""Model ensembling with ``torch.func.vmap``, as the tutorial does it: four MLPs'
parameters and buffers stacked by ``stack_module_state``, a ``copy.deepcopy``
of one model as the base (the tutorial's is on the ``meta`` device, which
fusegrad does not have), ``vmap(fmodel, in_dims=(0, 0, None))`` for every model
on the same minibatch and ``vmap(fmodel)`` (``in_dims=(0, 0, 0)``) for a
minibatch per model, both checked against each model's own output; then the
stacked parameters trained with Adam on a loss of the vmapped predictions,
each model on its own minibatch, and the trained slices checked to be the
models trained one by one.
"""

import copy

import numpy as np

MODELS = 4
IN, HIDDEN, CLASSES = 8, 16, 3
BATCH = 24
STEPS = 6
LR = 0.01


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional
    functional_call, stack_module_state, vmap = (
        torch.func.functional_call,
        torch.func.stack_module_state,
        torch.func.vmap,
    )

    class SimpleMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(IN, HIDDEN)
            self.fc2 = nn.Linear(HIDDEN, HIDDEN)
            self.fc3 = nn.Linear(HIDDEN, CLASSES)

        def forward(self, x):
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            return self.fc3(x)

    rng = np.random.default_rng(17)
    models = [SimpleMLP() for _ in range(MODELS)]
    with torch.no_grad():
        for model in models:
            for p in model.parameters():
                fan_in = p.shape[1] if p.dim() == 2 else p.shape[0]
                values = rng.normal(0, 1 / np.sqrt(fan_in), tuple(p.shape))
                p.copy_(torch.tensor(values, dtype=torch.float32))
    minibatches = torch.tensor(rng.standard_normal((MODELS, BATCH, IN)), dtype=torch.float32)
    minibatch = minibatches[0]
    targets = torch.tensor(rng.integers(0, CLASSES, (MODELS, BATCH)))

    params, buffers = stack_module_state(models)
    base_model = copy.deepcopy(models[0])  # its own parameters are never used

    def fmodel(params, buffers, x):
        return functional_call(base_model, (params, buffers), (x,))

    # every model on the same minibatch, and each on its own
    with torch.no_grad():
        same = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, minibatch)
        different = vmap(fmodel)(params, buffers, minibatches)
        same_loop = torch.stack([model(minibatch) for model in models])
        different_loop = torch.stack([model(x) for model, x in zip(models, minibatches)])
    same_matches = torch.allclose(same, same_loop, atol=1e-6)
    different_matches = torch.allclose(different, different_loop, atol=1e-6)

    # training the stack: each model on its own minibatch
    def ensemble_loss(predictions, targets):
        per_model = vmap(F.cross_entropy)(predictions, targets)
        return per_model.sum(), per_model

    optimizer = torch.optim.Adam(params.values(), lr=LR)

    def step(minibatches, targets):
        optimizer.zero_grad()
        loss, per_model = ensemble_loss(vmap(fmodel)(params, buffers, minibatches), targets)
        loss.backward()
        optimizer.step()
        return loss, per_model.detach()

    step = compile(step) if compile else step

    losses, per_model_losses = [], []
    for _ in range(STEPS):
        loss, per_model = step(minibatches, targets)
        losses.append(loss.item())
        per_model_losses.append(per_model.tolist())

    # the same training, one model at a time
    for model, x, y in zip(models, minibatches, targets):
        model_optimizer = torch.optim.Adam(model.parameters(), lr=LR)
        for _ in range(STEPS):
            model_optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            model_optimizer.step()
    slices_match = all(
        torch.allclose(params[name][i], p, atol=1e-6)
        for i, model in enumerate(models)
        for name, p in model.named_parameters()
    )

    with torch.no_grad():
        predictions = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, minibatch)
    votes = predictions.argmax(dim=2)

    return {
        "stacked_shapes": {k: list(v.shape) for k, v in params.items()},
        "same_minibatch_shape": list(same.shape),
        "same_minibatch_matches_models": same_matches,
        "different_minibatches_matches_models": different_matches,
        "same_minibatch_logits[:, 0]": same[:, 0].tolist(),
        "different_minibatches_logits[:, 0]": different[:, 0].tolist(),
        "losses": losses,
        "per_model_losses": per_model_losses,
        "slices_match_models_trained_alone": slices_match,
        "trained_logits[:, 0]": predictions[:, 0].tolist(),
        "ensemble_mean_probabilities[:4]": predictions.softmax(dim=2).mean(dim=0)[:4].tolist(),
        "votes[:, :8]": votes[:, :8].tolist(),
        "stacked_parameter_norms": {k: v.norm().item() for k, v in params.items()},
    }
