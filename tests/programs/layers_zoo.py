"""A small image-to-image network of the layers beyond the basics, trained a
few steps with Adam: a padding layer, GroupNorm, PReLU and Hardswish, a
PixelUnshuffle/PixelShuffle pair around a convolution, InstanceNorm,
Unfold/Fold (a hand-made convolution), RMSNorm, GLU, Hardsigmoid,
Softshrink; its loss mixes the metric-learning and regression losses
(cosine similarity, triplet, margin ranking, Gaussian and Poisson NLL,
soft margin), and the metric functions are reported on the trained output.
"""

import numpy as np

STEPS = 12
LOG_EVERY = 3


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(11)
    images = torch.tensor(rng.standard_normal((4, 3, 8, 8)), dtype=torch.float32)
    targets = torch.tensor(rng.standard_normal((4, 4, 8, 8)), dtype=torch.float32)
    labels = torch.tensor(np.where(rng.standard_normal(4) > 0, 1.0, -1.0), dtype=torch.float32)

    class Zoo(nn.Module):
        def __init__(self):
            super().__init__()
            self.pad = nn.ReflectionPad2d(1)
            self.conv = nn.Conv2d(3, 8, 3)
            self.group = nn.GroupNorm(2, 8)
            self.prelu = nn.PReLU(8)
            self.act = nn.Hardswish()
            self.down = nn.PixelUnshuffle(2)
            self.mix = nn.Conv2d(32, 16, 1)
            self.up = nn.PixelShuffle(2)
            self.instance = nn.InstanceNorm2d(4, affine=True)
            self.unfold, self.fold = nn.Unfold(3, padding=1), nn.Fold((8, 8), 3, padding=1)
            self.local = nn.Parameter(torch.zeros(36, 36))
            self.rms = nn.RMSNorm(8)
            self.glu = nn.GLU(1)
            self.head = nn.Linear(4, 8)

        def forward(self, x):
            x = self.act(self.prelu(self.group(self.conv(self.pad(x)))))
            x = self.instance(self.up(self.mix(self.down(x))))
            columns = self.unfold(x)
            x = x + 0.1 * self.fold(self.local @ columns)
            x = self.rms(x)
            gated = self.glu(torch.cat([x, x], 1))
            return F.softshrink(gated, 0.1) + F.hardsigmoid(self.head(x.mean((2, 3)))).mean()

    model = Zoo()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.tensor(0.2 * rng.standard_normal(tuple(p.shape)), dtype=torch.float32))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def step():
        optimizer.zero_grad()
        out = model(images)
        flat, goal = out.flatten(1), targets.flatten(1)
        loss = (
            (1 - F.cosine_similarity(flat, goal)).mean()
            + F.triplet_margin_loss(flat[:2], goal[:2], goal[2:])
            + F.margin_ranking_loss(flat.mean(1), goal.mean(1), labels)
            + 0.1 * F.gaussian_nll_loss(flat, goal, flat.var(1, keepdim=True) + 0.5)
            + 0.1 * F.poisson_nll_loss(flat, goal.abs())
            + F.soft_margin_loss(flat.mean(1), labels)
        )
        loss.backward()
        optimizer.step()
        return loss

    step = compile(step) if compile else step
    losses = []
    for t in range(STEPS):
        loss = step()
        if t % LOG_EVERY == LOG_EVERY - 1:
            losses.append(loss.item())

    with torch.no_grad():
        out = model(images)
        flat, goal = out.flatten(1), targets.flatten(1)
        return {
            "losses": losses,
            "pairwise": F.pairwise_distance(flat, goal).tolist(),
            "cosine": F.cosine_similarity(flat, goal).tolist(),
            "hinge": F.hinge_embedding_loss(flat.mean(1), labels).item(),
            "cosine_embedding": F.cosine_embedding_loss(flat, goal, labels).item(),
            "prelu_weight": model.prelu.weight[:4].tolist(),
            "rms_weight": model.rms.weight[:4].tolist(),
            "out_corner": out[0, :, 0, 0].tolist(),
        }
