"""A small pre-norm transformer trained with activation checkpointing
(``torch.utils.checkpoint``), as memory-bound training loops do it: each block
wrapped in ``checkpoint(block, x, use_reentrant=False)``, and the same stack run
by ``checkpoint_sequential`` as an ``nn.Sequential`` in two segments. Dropout is
p=0, so recomputing a block gives what its first run gave: the program trains the
same model plainly too and checks the three runs agree.

Blocks: LayerNorm, ``nn.MultiheadAttention`` (batch_first), LayerNorm, a GELU
MLP; mean pooling and a linear classifier, cross_entropy, Adam,
``clip_grad_norm_``.
"""

import math

import numpy as np

FEATURES = 8
D_MODEL = 32
N_HEAD = 4
N_BLOCKS = 4
SEQ = 12
BATCH = 6
CLASSES = 4
STEPS = 5
LR = 3e-3


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional
    from_checkpoint = torch.utils.checkpoint

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(D_MODEL)
            self.attn = nn.MultiheadAttention(D_MODEL, N_HEAD, dropout=0.0, batch_first=True)
            self.ln_2 = nn.LayerNorm(D_MODEL)
            self.mlp = nn.Sequential(
                nn.Linear(D_MODEL, 4 * D_MODEL),
                nn.GELU(),
                nn.Linear(4 * D_MODEL, D_MODEL),
                nn.Dropout(0.0),
            )

        def forward(self, x):
            h = self.ln_1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.ln_2(x))

    class Classifier(nn.Module):
        def __init__(self, checkpointing):
            super().__init__()
            self.checkpointing = checkpointing  # None, "each block" or "sequential"
            self.embed = nn.Linear(FEATURES, D_MODEL)
            self.blocks = nn.Sequential(*[Block() for _ in range(N_BLOCKS)])
            self.ln_f = nn.LayerNorm(D_MODEL)
            self.head = nn.Linear(D_MODEL, CLASSES)

        def forward(self, x):
            x = self.embed(x)
            if self.checkpointing == "each block":
                for block in self.blocks:
                    x = from_checkpoint.checkpoint(block, x, use_reentrant=False)
            elif self.checkpointing == "sequential":
                x = from_checkpoint.checkpoint_sequential(self.blocks, 2, x, use_reentrant=False)
            else:
                x = self.blocks(x)
            return self.head(self.ln_f(x).mean(dim=1))

    rng = np.random.default_rng(5)
    initial = {}
    for name, p in Classifier(None).named_parameters():
        if p.dim() >= 2:
            initial[name] = rng.normal(0, 1 / math.sqrt(p.shape[1]), tuple(p.shape))
        elif "ln_" in name and name.endswith("weight"):
            initial[name] = 1.0 + 0.1 * rng.standard_normal(tuple(p.shape))
        else:
            initial[name] = 0.02 * rng.standard_normal(tuple(p.shape))
    batches = [
        (
            torch.tensor(rng.standard_normal((BATCH, SEQ, FEATURES)), dtype=torch.float32),
            torch.tensor(rng.integers(0, CLASSES, BATCH)),
        )
        for _ in range(STEPS)
    ]

    def train(checkpointing):
        torch.manual_seed(0)
        model = Classifier(checkpointing)
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(torch.tensor(initial[name], dtype=torch.float32))
        optimizer = torch.optim.Adam(model.parameters(), lr=LR)

        def step(x, y):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            grad_norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            return loss, grad_norm

        step = compile(step) if compile else step
        losses, grad_norms = [], []
        for x, y in batches:
            loss, grad_norm = step(x, y)
            losses.append(loss.item())
            grad_norms.append(grad_norm.item())
        return model, losses, grad_norms

    plain, losses, grad_norms = train(None)
    agree = {}
    for checkpointing in ("each block", "sequential"):
        model, other_losses, other_norms = train(checkpointing)
        same = all(
            math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-7)
            for a, b in zip(losses + grad_norms, other_losses + other_norms)
        )
        same = same and all(
            torch.allclose(p, q, rtol=1e-5, atol=1e-6)
            for p, q in zip(plain.parameters(), model.parameters())
        )
        assert same, f"checkpointing ({checkpointing}) changed the training"
        agree[checkpointing] = same

    def norms(name, p):
        """The parameter's norm; an attention's input bias without its key part: adding
        the same vector to every key leaves the softmax as it is, so that part's gradient
        is zero up to rounding, which Adam scales to steps of the learning rate."""
        if name.endswith("in_proj_bias"):
            q, _, v = p.chunk(3)
            return {f"{name}[query]": q.norm().item(), f"{name}[value]": v.norm().item()}
        return {name: p.norm().item()}

    parameter_norms = {}
    for name, p in plain.named_parameters():
        parameter_norms.update(norms(name, p))
    return {
        "losses": losses,
        "grad_norms": grad_norms,
        "checkpointed_agrees": agree,
        "parameter_norms": parameter_norms,
        "head.weight[0]": plain.head.weight[0].tolist(),
    }
