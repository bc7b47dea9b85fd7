"""A makemore-style character-level MLP (Bengio et al. 2003) with batch normalization.

Words become (context of 3 characters -> next character) examples; an embedding
table ``C`` is indexed by the integer contexts (``C[X]``), then a tanh hidden
layer behind a BatchNorm1d and an output layer, with cross-entropy. The parameters
are plain tensors updated by hand, ``p.data += -lr * p.grad``, with the learning
rate stepped down halfway. Evaluation and greedy completion use BatchNorm's
running statistics (eval mode).
"""

import numpy as np

BLOCK_SIZE = 3  # characters of context
N_EMBD = 10
N_HIDDEN = 64
BATCH = 32
STEPS = 30
WORDS = 80


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(0)

    # made-up words: vowels and consonants alternating more often than not
    vowels, consonants = "aeiouy", "bcdfghjklmnpqrstvwxz"
    words = []
    for _ in range(WORDS):
        letters = [rng.choice(list(vowels if rng.random() < 0.5 else consonants))]
        for _ in range(rng.integers(2, 8)):
            alternate = (letters[-1] in vowels) != (rng.random() < 0.2)
            letters.append(rng.choice(list(consonants if alternate else vowels)))
        words.append("".join(letters))
    chars = sorted(set("".join(words)))
    stoi = {s: i + 1 for i, s in enumerate(chars)}
    stoi["."] = 0  # marks the start and the end of a word
    itos = {i: s for s, i in stoi.items()}
    vocab_size = len(itos)

    def build_dataset(words):
        X, Y = [], []
        for w in words:
            context = [0] * BLOCK_SIZE
            for ch in w + ".":
                ix = stoi[ch]
                X.append(context)
                Y.append(ix)
                context = context[1:] + [ix]
        return torch.tensor(X), torch.tensor(Y)

    n_train = int(0.8 * len(words))
    Xtr, Ytr = build_dataset(words[:n_train])
    Xdev, Ydev = build_dataset(words[n_train:])

    def randn(*shape):
        return torch.tensor(rng.standard_normal(shape), dtype=torch.float32)

    C = randn(vocab_size, N_EMBD)
    # Kaiming initialization for tanh: gain 5/3 over sqrt(fan_in)
    W1 = randn(N_EMBD * BLOCK_SIZE, N_HIDDEN) * (5 / 3) / (N_EMBD * BLOCK_SIZE) ** 0.5
    # no b1: the batch normalization right after it would subtract it again
    W2 = randn(N_HIDDEN, vocab_size) * 0.01  # near-uniform predictions at first
    b2 = randn(vocab_size) * 0
    bn = nn.BatchNorm1d(N_HIDDEN)
    parameters = [C, W1, W2, b2, *bn.parameters()]
    for p in parameters:
        p.requires_grad = True

    def forward(X):
        emb = C[X]  # (examples, BLOCK_SIZE, N_EMBD)
        embcat = emb.view(emb.shape[0], -1)
        h = torch.tanh(bn(embcat @ W1))
        return h @ W2 + b2

    def train_step(Xb, Yb, lr):
        logits = forward(Xb)
        loss = F.cross_entropy(logits, Yb)
        for p in parameters:
            p.grad = None
        loss.backward()
        for p in parameters:
            p.data += -lr * p.grad
        return loss

    if compile:
        train_step = compile(train_step)

    lossi = []
    for i in range(STEPS):
        ix = torch.tensor(rng.integers(0, Xtr.shape[0], BATCH))
        lr = 0.1 if i < STEPS // 2 else 0.01  # step learning rate decay
        loss = train_step(Xtr[ix], Ytr[ix], lr)
        lossi.append(loss.log10().item())

    @torch.no_grad()
    def split_loss(X, Y):
        return F.cross_entropy(forward(X), Y).item()

    @torch.no_grad()
    def complete(prefix, max_length=8):
        """The most likely continuation of prefix, a character at a time."""
        context = ([0] * BLOCK_SIZE + [stoi[ch] for ch in prefix])[-BLOCK_SIZE:]
        out = prefix
        while len(out) < max_length:
            ix = torch.argmax(forward(torch.tensor([context])), dim=1).item()
            if ix == 0:
                break
            out += itos[ix]
            context = context[1:] + [ix]
        return out

    bn.eval()
    return {
        "parameters": sum(p.nelement() for p in parameters),
        "examples": [Xtr.shape[0], Xdev.shape[0]],
        "log10_losses": lossi,
        "train_loss": split_loss(Xtr, Ytr),
        "dev_loss": split_loss(Xdev, Ydev),
        "completions": [complete(prefix) for prefix in ("", "b", "ka", "ou")],
        "running_mean[:8]": bn.running_mean[:8].tolist(),
        "running_var[:8]": bn.running_var[:8].tolist(),
        "num_batches_tracked": bn.num_batches_tracked.item(),
        "C[1]": C[1].tolist(),
        "parameter_norms": [p.norm().item() for p in parameters],
    }
