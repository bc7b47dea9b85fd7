"""LeNet-5 on MNIST-shaped data.

Two 5x5 convolutions, each followed by ReLU and 2x2 max pooling, then Flatten and a
400-120-84-10 classifier. The loss is cross-entropy and the optimizer SGD with momentum.
Batches come from a DataLoader over a TensorDataset, not shuffled.
"""

import math

import numpy as np

TRAIN_IMAGES = 64
TEST_IMAGES = 8
BATCH = 16
EPOCHS = 2  # 8 optimizer steps


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional

    class LeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 6, kernel_size=5, padding=2)  # 28x28 stays 28x28
            self.conv2 = nn.Conv2d(6, 16, kernel_size=5)
            self.flatten = nn.Flatten()
            self.fc1 = nn.Linear(16 * 5 * 5, 120)
            self.fc2 = nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # 6 x 14 x 14
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # 16 x 5 x 5
            x = self.flatten(x)
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            return self.fc3(x)

    rng = np.random.default_rng(0)
    model = LeNet()
    # PyTorch's default initialization, uniform in +-1/sqrt(fan_in), but drawn from
    # numpy so that both libraries start from the same weights
    with torch.no_grad():
        for layer in (model.conv1, model.conv2, model.fc1, model.fc2, model.fc3):
            bound = 1 / math.sqrt(layer.weight[0].numel())
            for p in (layer.weight, layer.bias):
                p.copy_(torch.tensor(rng.uniform(-bound, bound, tuple(p.shape)), dtype=p.dtype))

    def mnist_like(count):
        """Pixels in [0, 1], normalized with MNIST's mean and standard deviation."""
        pixels = rng.uniform(0, 1, (count, 1, 28, 28)).astype(np.float32)
        return torch.tensor((pixels - 0.1307) / 0.3081), torch.tensor(rng.integers(0, 10, count))

    train_set = torch.utils.data.TensorDataset(*mnist_like(TRAIN_IMAGES))
    test_images, test_labels = mnist_like(TEST_IMAGES)
    loader = torch.utils.data.DataLoader(train_set, batch_size=BATCH, shuffle=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def train_step(images, labels):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    if compile:
        train_step = compile(train_step)

    losses = []
    model.train()
    for _ in range(EPOCHS):
        for images, labels in loader:
            losses.append(train_step(images, labels).item())

    model.eval()
    with torch.no_grad():
        logits = model(test_images)
    return {
        "losses": losses,
        "batches_per_epoch": len(loader),
        "test_logits": logits[:2].tolist(),
        "test_loss": F.cross_entropy(logits, test_labels).item(),
        "conv1_weight[0, 0]": model.conv1.weight[0, 0].tolist(),
        "fc3_bias": model.fc3.bias.tolist(),
        "parameter_norms": {name: p.norm().item() for name, p in model.named_parameters()},
    }
