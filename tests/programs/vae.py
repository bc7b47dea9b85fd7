"""A variational autoencoder on MNIST-shaped data, in the shape of pytorch/examples' VAE.

A Linear encoder to the mean and log-variance of a 20-dimensional latent, the
reparameterization trick, a Linear decoder ending in a sigmoid, and the loss
binary cross-entropy (summed) plus the KL divergence, minimized with Adam. The
noise of the reparameterization comes from numpy and is passed in, so both
libraries draw the same.
"""

import math

import numpy as np

IMAGES = 64
TEST_IMAGES = 16
BATCH = 32
EPOCHS = 3  # 6 optimizer steps
LATENT = 20


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(784, 400)
            self.fc21 = nn.Linear(400, LATENT)  # mean
            self.fc22 = nn.Linear(400, LATENT)  # log-variance
            self.fc3 = nn.Linear(LATENT, 400)
            self.fc4 = nn.Linear(400, 784)

        def encode(self, x):
            h1 = F.relu(self.fc1(x))
            return self.fc21(h1), self.fc22(h1)

        def reparameterize(self, mu, logvar, eps):
            std = torch.exp(0.5 * logvar)
            return mu + eps * std

        def decode(self, z):
            h3 = F.relu(self.fc3(z))
            return torch.sigmoid(self.fc4(h3))

        def forward(self, x, eps):
            mu, logvar = self.encode(x.view(-1, 784))
            z = self.reparameterize(mu, logvar, eps)
            return self.decode(z), mu, logvar

    def loss_function(recon_x, x, mu, logvar):
        bce = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
        # KL divergence of N(mu, exp(logvar)) from N(0, 1), Kingma and Welling's appendix B
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return bce + kld

    rng = np.random.default_rng(0)
    model = VAE()
    # PyTorch's default initialization (uniform in +-1/sqrt(fan_in)) drawn from numpy
    with torch.no_grad():
        for layer in (model.fc1, model.fc21, model.fc22, model.fc3, model.fc4):
            bound = 1 / math.sqrt(layer.in_features)
            for p in (layer.weight, layer.bias):
                p.copy_(torch.from_numpy(rng.uniform(-bound, bound, tuple(p.shape)).astype("f4")))

    def images(count):
        return torch.tensor(rng.uniform(0, 1, (count, 1, 28, 28)), dtype=torch.float32)

    def noise(count):
        return torch.tensor(rng.standard_normal((count, LATENT)), dtype=torch.float32)

    train_data, test_data = images(IMAGES), images(TEST_IMAGES)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train_step(data, eps):
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data, eps)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        optimizer.step()
        return loss

    if compile:
        train_step = compile(train_step)

    losses = []
    model.train()
    for _ in range(EPOCHS):
        for start in range(0, IMAGES, BATCH):
            data = train_data[start : start + BATCH]
            losses.append(train_step(data, noise(len(data))).item() / len(data))

    model.eval()
    with torch.no_grad():
        recon, mu, logvar = model(test_data, noise(TEST_IMAGES))
        test_loss = loss_function(recon, test_data, mu, logvar).item() / TEST_IMAGES
        sample = model.decode(noise(8))
    return {
        "losses_per_image": losses,
        "test_loss_per_image": test_loss,
        "test_mu[0]": mu[0].tolist(),
        "test_logvar[0]": logvar[0].tolist(),
        "sample[:, :6]": sample[:, :6].tolist(),
        "sample_mean": sample.mean().item(),
        "parameter_norms": {name: p.norm().item() for name, p in model.named_parameters()},
    }
