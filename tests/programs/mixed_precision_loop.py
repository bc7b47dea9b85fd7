"""The official automatic-mixed-precision recipe, on the CPU in bfloat16.

An MLP and a small CNN are trained on toy classification data with their forward
pass under ``torch.autocast("cpu", dtype=torch.bfloat16)`` and the recipe's
loop: ``scaler.scale(loss).backward()``, ``scaler.unscale_(optimizer)``,
``clip_grad_norm_``, ``scaler.step(optimizer)``, ``scaler.update()``. The MLP's
``torch.amp.GradScaler("cpu")`` is enabled and starts from a scale so large
that the first gradients overflow: those steps are skipped and the scale backed
off until it fits, then grown every few steps. The CNN's scaler is disabled (the
recipe's ``enabled=use_amp`` switch), as a bfloat16 loop needs no scaling.
Reported: the losses, the scales, the dtypes autocast gives inside and outside
an autocast-disabled subregion, the scaler's state dict.
"""

import numpy as np

FEATURES = 16
CLASSES = 4
SAMPLES = 64
BATCH = 16
EPOCHS = 3
MAX_NORM = 1.0


def dtype_name(dtype) -> str:
    """ "bfloat16" for torch.bfloat16 (the name without the library's)."""
    return str(dtype).split(".")[-1]


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(11)

    centres = rng.standard_normal((CLASSES, FEATURES))
    labels = rng.integers(0, CLASSES, SAMPLES)
    features = centres[labels] + 0.8 * rng.standard_normal((SAMPLES, FEATURES))
    images = np.zeros((SAMPLES, 1, 8, 8))
    for i, label in enumerate(labels):  # a bright bar in one of four places
        images[i, 0, 2 * label : 2 * label + 2, :] = 1.0
    images += 0.3 * rng.standard_normal(images.shape)

    data = torch.tensor(features, dtype=torch.float32).split(BATCH)
    image_data = torch.tensor(images, dtype=torch.float32).split(BATCH)
    targets = torch.tensor(labels).split(BATCH)

    def make_mlp():
        return nn.Sequential(
            nn.Linear(FEATURES, 32),
            nn.ReLU(),
            nn.Linear(32, 32),
            nn.ReLU(),
            nn.Linear(32, CLASSES),
        )

    def make_cnn():
        return nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(8 * 4 * 4, CLASSES),
        )

    def init_from_numpy(net):
        """PyTorch's default init of Linear and Conv2d, uniform in +-1/sqrt(fan_in)."""
        with torch.no_grad():
            for m in net.modules():
                if isinstance(m, (nn.Linear, nn.Conv2d)):
                    bound = 1 / np.sqrt(m.weight[0].numel())
                    for p in (m.weight, m.bias):
                        values = rng.uniform(-bound, bound, tuple(p.shape))
                        p.copy_(torch.tensor(values, dtype=torch.float32))

    def train(net, inputs, scaler, lr):
        opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)

        def train_step(input, target):
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                output = net(input)
                # summed: the gradients of the MLP's scaled loss overflow float32 at
                # its largest scales
                loss = F.cross_entropy(output, target, reduction="sum")
            # scales the loss, and calls backward() on the scaled loss to create
            # scaled gradients
            scaler.scale(loss).backward()
            # unscales the gradients of the optimizer's params in place, so that
            # they can be clipped as usual
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(net.parameters(), max_norm=MAX_NORM)
            # skips optimizer.step() if the gradients contain infs or NaNs
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            return output, loss

        if compile:
            train_step = compile(train_step)

        losses, scales, skipped = [], [], 0
        for _ in range(EPOCHS):
            for input, target in zip(inputs, targets):
                scale = scaler.get_scale()
                output, loss = train_step(input, target)
                losses.append(loss.item())
                scales.append(scaler.get_scale())
                skipped += scaler.get_scale() < scale  # backed off: the step was skipped
        return {
            "losses": losses,
            "scales": scales,
            "output_dtype": dtype_name(output.dtype),
            "loss_dtype": dtype_name(loss.dtype),
            "parameter_dtypes": sorted({dtype_name(p.dtype) for p in net.parameters()}),
            "parameter_norms": [p.norm().item() for p in net.parameters()],
            "skipped_steps": skipped,
            "momentum_norm": opt.state[net[0].weight]["momentum_buffer"].norm().item(),
        }

    mlp = make_mlp()
    init_from_numpy(mlp)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**126, growth_interval=3)
    mlp_result = train(mlp, data, scaler, lr=0.02)
    mlp_result["scaler_state_dict"] = scaler.state_dict()
    mlp_result["scaler_enabled"] = scaler.is_enabled()

    cnn = make_cnn()
    init_from_numpy(cnn)
    use_amp = False
    cnn_scaler = torch.amp.GradScaler("cpu", enabled=use_amp)
    cnn_result = train(cnn, image_data, cnn_scaler, lr=0.01)
    cnn_result["scaler_enabled"] = cnn_scaler.is_enabled()
    cnn_result["scaler_state_dict"] = cnn_scaler.state_dict()
    cnn_result["running_mean"] = cnn[1].running_mean.tolist()

    # what autocast gives, op by op, and an autocast-disabled subregion in float32
    x = image_data[0]
    dtypes = {}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        dtypes["enabled"] = torch.is_autocast_enabled("cpu")
        dtypes["autocast_dtype"] = dtype_name(torch.get_autocast_dtype("cpu"))
        h = cnn[0](x)
        dtypes["conv2d"] = dtype_name(h.dtype)
        dtypes["relu"] = dtype_name(F.relu(h).dtype)
        logits = cnn(x)
        dtypes["linear"] = dtype_name(logits.dtype)
        dtypes["softmax"] = dtype_name(logits.softmax(dim=1).dtype)
        dtypes["cross_entropy"] = dtype_name(F.cross_entropy(logits, targets[0]).dtype)
        dtypes["mse_loss"] = dtype_name(F.mse_loss(logits, torch.zeros(BATCH, CLASSES)).dtype)
        dtypes["sum"] = dtype_name(logits.sum().dtype)
        dtypes["add float32"] = dtype_name((logits + torch.ones(CLASSES)).dtype)
        with torch.autocast("cpu", enabled=False):
            dtypes["disabled"] = torch.is_autocast_enabled("cpu")
            inner = logits.float() @ torch.ones(CLASSES, 2)
            dtypes["matmul in disabled region"] = dtype_name(inner.dtype)
        dtypes["matmul after"] = dtype_name((logits @ torch.ones(CLASSES, 2)).dtype)
    dtypes["after"] = torch.is_autocast_enabled("cpu")
    with torch.no_grad():
        cnn.eval()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            eval_logits = cnn(x)
        accuracy = (eval_logits.argmax(dim=1) == targets[0]).float().mean().item()

    return {
        "mlp": mlp_result,
        "cnn": cnn_result,
        "dtypes": dtypes,
        "eval_logits[:4]": eval_logits[:4].float().tolist(),
        "eval_accuracy": accuracy,
    }
