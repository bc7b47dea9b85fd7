"""A two-layer nn.LSTM learning to predict the next value of sine waves, in float64.

The waves are pytorch/examples' time-sequence-prediction data (sines with random
phase shifts); the model reads a wave and predicts each next value, trained on the
mean squared error with Adam, then continues a wave on its own by feeding each
prediction back in with the LSTM's carried (h, c) state.
"""

import math

import numpy as np

WAVES = 8
TEST_WAVES = 2
LENGTH = 30
PERIOD = 20  # the waves are sin(t / PERIOD)
HIDDEN = 16
STEPS = 8
FUTURE = 10


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional

    class SinePredictor(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(input_size=1, hidden_size=HIDDEN, num_layers=2, batch_first=True)
            self.head = nn.Linear(HIDDEN, 1)

        def forward(self, waves, state=None):
            out, state = self.lstm(waves, state)
            return self.head(out), state

    rng = np.random.default_rng(0)
    model = SinePredictor().double()
    # PyTorch initializes every LSTM weight and bias uniformly in +-1/sqrt(hidden size);
    # drawn from numpy so that both libraries start alike
    with torch.no_grad():
        for p in model.parameters():
            bound = 1 / math.sqrt(HIDDEN)
            p.copy_(torch.from_numpy(rng.uniform(-bound, bound, tuple(p.shape))))

    t = np.arange(LENGTH) + rng.integers(-4 * PERIOD, 4 * PERIOD, (WAVES + TEST_WAVES, 1))
    waves = torch.from_numpy(np.sin(t / PERIOD)[:, :, None])  # (wave, time, 1), float64
    inputs, targets = waves[:WAVES, :-1], waves[:WAVES, 1:]
    test_inputs = waves[WAVES:]
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def train_step(inputs, targets):
        optimizer.zero_grad()
        predictions, _ = model(inputs)
        loss = F.mse_loss(predictions, targets)
        loss.backward()
        optimizer.step()
        return loss

    if compile:
        train_step = compile(train_step)

    losses = [train_step(inputs, targets).item() for _ in range(STEPS)]

    model.eval()
    with torch.no_grad():
        predictions, state = model(test_inputs)
        value = predictions[:, -1:]
        future = []
        for _ in range(FUTURE):
            value, state = model(value, state)
            future.append(value)
        future = torch.cat(future, dim=1)
    h, c = state
    return {
        "parameter_names": [name for name, _ in model.named_parameters()],
        "losses": losses,
        "test_predictions[0]": predictions[0, :, 0].tolist(),
        "future": future[:, :, 0].tolist(),
        "final_state_shapes": [list(h.shape), list(c.shape)],
        "final_h[:, 0]": h[:, 0].tolist(),
        "parameter_norms": {name: p.norm().item() for name, p in model.named_parameters()},
    }
