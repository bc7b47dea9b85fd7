"""An MLP regression trained the way a full training script trains: epochs over a
DataLoader, a learning-rate schedule, gradient clipping, and a checkpoint.

The batch size does not divide the dataset, so every epoch ends with a short
batch (drop_last=False). StepLR halves the learning rate every two epochs,
``clip_grad_norm_`` bounds each step's gradient, and halfway through, the model,
optimizer and scheduler are saved with ``torch.save``; fresh ones restored from
the file with ``torch.load`` and ``load_state_dict`` must continue exactly as the
originals do.
"""

import math
import os
import tempfile

import numpy as np

EXAMPLES = 50
FEATURES = 8
BATCH = 16  # 16 + 16 + 16 + 2
EPOCHS = 6
CHECKPOINT_EPOCH = 3


def run(torch, compile=None) -> dict:
    nn = torch.nn
    rng = np.random.default_rng(0)

    x = rng.standard_normal((EXAMPLES, FEATURES)).astype(np.float32)
    y = np.sin(x @ rng.standard_normal((FEATURES, 1))) + 0.1 * rng.standard_normal((EXAMPLES, 1))
    dataset = torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y.astype("f4")))
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=False, drop_last=False)

    def make_training(weights_from=None):
        """A model, its optimizer and scheduler, and a (compiled or eager) training step."""
        model = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, 1))
        if weights_from is not None:  # PyTorch's default init, drawn from numpy
            with torch.no_grad():
                for layer in (model[0], model[2]):
                    bound = 1 / math.sqrt(layer.in_features)
                    for p in (layer.weight, layer.bias):
                        draw = weights_from.uniform(-bound, bound, tuple(p.shape))
                        p.copy_(torch.tensor(draw, dtype=torch.float32))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
        loss_fn = nn.MSELoss()

        def train_step(inputs, targets):
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            grad_norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optimizer.step()
            return loss, grad_norm

        return model, optimizer, scheduler, (compile(train_step) if compile else train_step)

    def train_epoch(model, scheduler, train_step, log):
        model.train()
        for inputs, targets in loader:
            loss, grad_norm = train_step(inputs, targets)
            log["batch_sizes"].append(len(inputs))
            log["losses"].append(loss.item())
            log["grad_norms"].append(grad_norm.item())
        scheduler.step()
        log["lrs"].append(scheduler.get_last_lr()[0])

    def new_log():
        return {"batch_sizes": [], "losses": [], "grad_norms": [], "lrs": []}

    model, optimizer, scheduler, train_step = make_training(weights_from=rng)
    log = new_log()
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "checkpoint.pt")
        for epoch in range(EPOCHS):
            if epoch == CHECKPOINT_EPOCH:
                torch.save(
                    {
                        "epoch": epoch,
                        "model": model.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "scheduler": scheduler.state_dict(),
                    },
                    path,
                )
            train_epoch(model, scheduler, train_step, log)

        checkpoint = torch.load(path)
    restored, restored_optimizer, restored_scheduler, restored_step = make_training()
    restored.load_state_dict(checkpoint["model"])
    restored_optimizer.load_state_dict(checkpoint["optimizer"])
    restored_scheduler.load_state_dict(checkpoint["scheduler"])
    resumed_log = new_log()
    for _ in range(checkpoint["epoch"], EPOCHS):
        train_epoch(restored, restored_scheduler, restored_step, resumed_log)

    model.eval()
    with torch.no_grad():
        inputs, targets = dataset.tensors
        final_loss = nn.functional.mse_loss(model(inputs), targets).item()
    return {
        "batches_per_epoch": len(loader),
        "state_dict_keys": list(model.state_dict()),
        "checkpoint_epoch": checkpoint["epoch"],
        "original": log,
        "resumed": resumed_log,
        "final_loss": final_loss,
        "resumed_parameters_equal": all(
            torch.equal(a, b) for a, b in zip(model.parameters(), restored.parameters())
        ),
        "parameter_norms": {name: p.norm().item() for name, p in model.named_parameters()},
    }
