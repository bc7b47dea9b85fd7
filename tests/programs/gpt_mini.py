"""A nanoGPT-shaped language model, trained for a few steps on random token ids.

Token and position embeddings, two transformer blocks (LayerNorm, causal
self-attention masked by a registered ``tril`` buffer, GELU MLP) kept in a
ModuleDict and a ModuleList, the input embedding tied to the output layer,
initialization by ``model.apply`` with ``nn.init``, AdamW with separate
weight-decay groups, gradient clipping, nanoGPT's warmup-then-cosine learning rate
set on the param groups each step, an evaluation and greedy generation.
"""

import math

import numpy as np

VOCAB = 65
BLOCK = 16  # context length T
N_EMBD = 32
N_HEAD = 4
N_LAYER = 2
BATCH = 4
STEPS = 8
WARMUP_STEPS = 2
LR_DECAY_STEPS = 5  # then MIN_LR, so the last steps repeat a step already compiled
MAX_LR = 3e-3
MIN_LR = 3e-4
INIT_STD = 0.02
# nanoGPT scales the init of the projections into the residual stream by the depth
RESIDUAL_INIT_STD = INIT_STD / math.sqrt(2 * N_LAYER)


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD)  # query, key and value at once
            self.c_proj = nn.Linear(N_EMBD, N_EMBD)
            self.attn_dropout = nn.Dropout(0.0)
            self.resid_dropout = nn.Dropout(0.0)
            # position t may attend to positions 0..t only
            mask = torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK)
            self.register_buffer("bias", mask)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(N_EMBD, dim=2)
            k = k.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)  # (B, heads, T, head size)
            q = q.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            v = v.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(N_EMBD, 4 * N_EMBD)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * N_EMBD, N_EMBD)
            self.dropout = nn.Dropout(0.0)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(N_EMBD)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(N_EMBD)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(
                dict(
                    wte=nn.Embedding(VOCAB, N_EMBD),
                    wpe=nn.Embedding(BLOCK, N_EMBD),
                    drop=nn.Dropout(0.0),
                    h=nn.ModuleList([Block() for _ in range(N_LAYER)]),
                    ln_f=nn.LayerNorm(N_EMBD),
                )
            )
            self.lm_head = nn.Linear(N_EMBD, VOCAB, bias=False)
            self.transformer.wte.weight = self.lm_head.weight  # weight tying
            self.apply(self._init_weights)
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    nn.init.normal_(p, mean=0.0, std=RESIDUAL_INIT_STD)

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=INIT_STD)

        def forward(self, idx, targets=None):
            _, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long)
            x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            if targets is None:  # generating: only the last position's logits are needed
                return self.lm_head(x[:, [-1], :]), None
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            return logits, loss

    def init_std(name):
        return RESIDUAL_INIT_STD if name.endswith("c_proj.weight") else INIT_STD

    rng = np.random.default_rng(0)
    model = GPT()
    # nn.init.normal_ drew from each library's own generator, so its values differ
    # between libraries; check the distribution, then draw the same one from numpy
    matrices = {name: p for name, p in model.named_parameters() if p.dim() >= 2}
    drawn_with_init_std = {
        name: abs(p.std().item() / init_std(name) - 1) < 0.2 for name, p in matrices.items()
    }
    biases_zero = all(
        bool((p == 0).all()) for name, p in model.named_parameters() if name.endswith(".bias")
    )
    with torch.no_grad():
        for name, p in matrices.items():
            p.copy_(torch.tensor(rng.normal(0, init_std(name), tuple(p.shape)), dtype=p.dtype))

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=MAX_LR,
        betas=(0.9, 0.95),
    )

    def learning_rate(step):
        """Linear warmup, cosine decay to MIN_LR, then MIN_LR."""
        if step < WARMUP_STEPS:
            return MAX_LR * (step + 1) / (WARMUP_STEPS + 1)
        if step > LR_DECAY_STEPS:
            return MIN_LR
        progress = (step - WARMUP_STEPS) / (LR_DECAY_STEPS - WARMUP_STEPS)
        return MIN_LR + 0.5 * (1.0 + math.cos(math.pi * progress)) * (MAX_LR - MIN_LR)

    text = rng.integers(0, VOCAB, 1000)

    def get_batch():
        starts = rng.integers(0, len(text) - BLOCK, BATCH)
        x = torch.stack([torch.from_numpy(text[i : i + BLOCK].astype(np.int64)) for i in starts])
        y = torch.stack(
            [torch.from_numpy(text[i + 1 : i + 1 + BLOCK].astype(np.int64)) for i in starts]
        )
        return x, y

    def train_step(x, y):
        _, loss = model(x, y)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss, grad_norm

    if compile:
        train_step = compile(train_step)

    losses, grad_norms = [], []
    model.train()
    for step in range(STEPS):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step)
        loss, grad_norm = train_step(*get_batch())
        losses.append(loss.item())
        grad_norms.append(grad_norm.item())

    @torch.no_grad()
    def estimate_loss(batches):
        model.eval()
        mean = sum(model(*get_batch())[1].item() for _ in range(batches)) / batches
        model.train()
        return mean

    @torch.no_grad()
    def generate(idx, max_new_tokens):
        """Greedy decoding: always the most likely next token."""
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= BLOCK else idx[:, -BLOCK:]
            logits, _ = model(idx_cond)
            _, idx_next = torch.topk(logits[:, -1, :], k=1, dim=-1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx

    val_loss = estimate_loss(batches=2)
    model.eval()
    return {
        "parameter_names": [name for name, _ in model.named_parameters()],
        "parameters": sum(p.numel() for p in model.parameters()),
        "buffers": [name for name, _ in model.named_buffers()],
        "drawn_with_init_std": drawn_with_init_std,
        "biases_zero": biases_zero,
        "losses": losses,
        "grad_norms": grad_norms,
        "val_loss": val_loss,
        "generated": generate(torch.zeros((1, 1), dtype=torch.long), 20)[0].tolist(),
        "wte_weight[0, :8]": model.transformer.wte.weight[0, :8].tolist(),
        "parameter_norms": {name: p.norm().item() for name, p in model.named_parameters()},
    }
