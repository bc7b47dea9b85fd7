"""Per-sample gradients, as the torch.func tutorial computes them: a small CNN
(Conv2d, ReLU, max_pool2d, Linear, log_softmax + nll_loss) on 8x8 one-channel
images; ``grad`` of a loss that calls the model by ``functional_call`` on one
sample (``sample.unsqueeze(0)``), mapped over the batch by
``vmap(..., in_dims=(None, None, 0, 0))``, checked against a Python loop of
per-sample ``loss.backward()``. Then DP-SGD: each step's per-sample gradients
clipped to a maximum norm, averaged, noised (numpy noise) and set as ``p.grad``
for SGD. An MLP's per-sample gradients by ``vmap(grad(...))`` with
``chunk_size=``, checked against the unchunked ones.
"""

import numpy as np

BATCH = 16
CLASSES = 10
MAX_NORM = 8.0
NOISE = 0.01
LR = 0.1
STEPS = 5
MLP_IN, MLP_HIDDEN = 6, 12


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional
    functional_call, grad, vmap = torch.func.functional_call, torch.func.grad, torch.func.vmap

    class SimpleCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 8, 3, 1)
            self.conv2 = nn.Conv2d(8, 16, 3, 1)
            self.fc1 = nn.Linear(64, 32)
            self.fc2 = nn.Linear(32, CLASSES)

        def forward(self, x):
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 2)
            x = torch.flatten(x, 1)
            x = F.relu(self.fc1(x))
            return F.log_softmax(self.fc2(x), dim=1)

    rng = np.random.default_rng(21)

    def initialize(model):
        with torch.no_grad():
            for p in model.parameters():
                fan_in = int(np.prod(p.shape[1:])) if p.dim() > 1 else p.shape[0]
                values = rng.normal(0, 1 / np.sqrt(fan_in), tuple(p.shape))
                p.copy_(torch.tensor(values, dtype=torch.float32))

    model = SimpleCNN()
    initialize(model)
    data = torch.tensor(rng.standard_normal((BATCH, 1, 8, 8)), dtype=torch.float32)
    targets = torch.tensor(rng.integers(0, CLASSES, BATCH))

    # the loop: one backward per sample
    def compute_grad(sample, target):
        model.zero_grad()
        F.nll_loss(model(sample.unsqueeze(0)), target.unsqueeze(0)).backward()
        return [p.grad.clone() for p in model.parameters()]

    loop_grads = [torch.stack(g) for g in zip(*(compute_grad(*st) for st in zip(data, targets)))]

    # torch.func: the gradient of one sample's loss, vmapped over the batch
    def compute_loss(params, buffers, sample, target):
        batch = sample.unsqueeze(0)
        predictions = functional_call(model, (params, buffers), (batch,))
        return F.nll_loss(predictions, target.unsqueeze(0))

    ft_compute_grad = grad(compute_loss)
    ft_compute_sample_grad = vmap(ft_compute_grad, in_dims=(None, None, 0, 0))
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    ft_grads = ft_compute_sample_grad(params, buffers, data, targets)
    vmap_matches_loop = [
        torch.allclose(ft_grads[name], g, atol=1e-6) for name, g in zip(params, loop_grads)
    ]

    def per_sample_norms(sample_grads):
        """Each sample's gradient norm, over all the parameters."""
        norms = [g.flatten(1).norm(dim=1) for g in sample_grads.values()]
        return torch.stack(norms).norm(dim=0)

    # DP-SGD: clip each sample's gradient, average, add noise, step
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)

    def dp_step(data, targets, noise):
        params = {k: v.detach() for k, v in model.named_parameters()}
        sample_grads = ft_compute_sample_grad(params, buffers, data, targets)
        norms = per_sample_norms(sample_grads)
        factors = (MAX_NORM / (norms + 1e-6)).clamp(max=1.0)
        for name, p in model.named_parameters():
            clipped = sample_grads[name] * factors.view(-1, *[1] * p.dim())
            p.grad = clipped.mean(dim=0) + noise[name]
        optimizer.step()
        with torch.no_grad():
            loss = F.nll_loss(model(data), targets)
        return loss, norms

    dp_step = compile(dp_step) if compile else dp_step

    losses, step_norms, clipped_fractions = [], [], []
    for _ in range(STEPS):
        noise = {
            name: torch.tensor(
                NOISE * MAX_NORM / BATCH * rng.standard_normal(tuple(p.shape)), dtype=torch.float32
            )
            for name, p in model.named_parameters()
        }
        loss, norms = dp_step(data, targets, noise)
        losses.append(loss.item())
        step_norms.append(norms.tolist())
        clipped_fractions.append((norms > MAX_NORM).float().mean().item())

    # an MLP's per-sample gradients, the batch run in chunks
    mlp = nn.Sequential(nn.Linear(MLP_IN, MLP_HIDDEN), nn.Tanh(), nn.Linear(MLP_HIDDEN, 1))
    initialize(mlp)
    x = torch.tensor(rng.standard_normal((BATCH, MLP_IN)), dtype=torch.float32)
    y = torch.tensor(rng.standard_normal((BATCH, 1)), dtype=torch.float32)

    def mlp_loss(params, x, y):
        return F.mse_loss(functional_call(mlp, params, (x,)), y)

    mlp_params = {k: v.detach() for k, v in mlp.named_parameters()}
    whole = vmap(grad(mlp_loss), in_dims=(None, 0, 0))(mlp_params, x, y)
    chunked = vmap(grad(mlp_loss), in_dims=(None, 0, 0), chunk_size=5)(mlp_params, x, y)

    return {
        "per_sample_grad_shapes": {k: list(v.shape) for k, v in ft_grads.items()},
        "vmap_matches_loop": vmap_matches_loop,
        "per_sample_grad_norms": per_sample_norms(ft_grads).tolist(),
        "fc2_bias_grads[:4]": ft_grads["fc2.bias"][:4].tolist(),
        "dp_losses": losses,
        "dp_per_sample_grad_norms": step_norms,
        "dp_clipped_fractions": clipped_fractions,
        "parameter_norms": {k: v.norm().item() for k, v in model.named_parameters()},
        "mlp_chunked_matches_whole": [torch.allclose(whole[k], chunked[k]) for k in whole],
        "mlp_per_sample_grad_norms": per_sample_norms(whole).tolist(),
        "mlp_first_weight_grad[0]": whole["0.weight"][0].tolist(),
    }
