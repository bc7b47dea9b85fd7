"""nn.Transformer learning to copy short sequences, as the PyTorch
transformer tutorials set it up: token and learned position embeddings,
a causal target mask from ``generate_square_subsequent_mask``, padding
masks, teacher forcing, cross-entropy over the vocabulary, Adam. Also a
pre-norm ``TransformerEncoder`` with GELU classifying the same sequences.
"""

import numpy as np

STEPS = 6
LOG_EVERY = 2
VOCAB, LENGTH, BATCH, WIDTH = 12, 6, 8, 16


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(21)
    tokens = torch.tensor(rng.integers(2, VOCAB, (BATCH, LENGTH)))
    padding = torch.tensor(np.arange(LENGTH)[None, :] >= rng.integers(4, LENGTH + 1, (BATCH, 1)))
    start = torch.full((BATCH, 1), 1, dtype=torch.int64)
    decoder_input = torch.cat([start, tokens[:, :-1]], 1)
    classes = torch.tensor(rng.integers(0, 3, BATCH))

    embed = nn.Embedding(VOCAB, WIDTH)
    positions = nn.Parameter(torch.zeros(LENGTH, WIDTH))
    model = nn.Transformer(
        WIDTH, 2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=32,
        dropout=0.0, batch_first=True,
    )  # fmt: skip
    head = nn.Linear(WIDTH, VOCAB)
    encoder = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(
            WIDTH, 4, 24, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        ),
        1,
    )
    classifier = nn.Linear(WIDTH, 3)
    parts = [embed, model, head, encoder, classifier]
    parameters = [positions] + [p for part in parts for p in part.parameters()]
    with torch.no_grad():
        for p in parameters:
            p.copy_(torch.tensor(0.3 * rng.standard_normal(tuple(p.shape)), dtype=torch.float32))
    optimizer = torch.optim.Adam(parameters, lr=0.003)
    causal = nn.Transformer.generate_square_subsequent_mask(LENGTH)

    def step():
        optimizer.zero_grad()
        source = embed(tokens) + positions
        target = embed(decoder_input) + positions
        out = model(
            source, target, tgt_mask=causal, src_key_padding_mask=padding,
            memory_key_padding_mask=padding,
        )  # fmt: skip
        copy_loss = F.cross_entropy(head(out).reshape(-1, VOCAB), tokens.reshape(-1))
        encoded = encoder(source, src_key_padding_mask=padding)
        class_loss = F.cross_entropy(classifier(encoded.mean(1)), classes)
        loss = copy_loss + class_loss
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
        source = embed(tokens) + positions
        out = model(source, embed(decoder_input) + positions, tgt_mask=causal)
        return {
            "losses": losses,
            "predicted": head(out).argmax(-1)[0].tolist(),
            "logits_corner": head(out)[0, 0, :4].tolist(),
            "parameter_names": [name for name, _ in model.named_parameters()][:6],
            "mask_allows": (causal[:3, :3] == 0).tolist(),
        }
