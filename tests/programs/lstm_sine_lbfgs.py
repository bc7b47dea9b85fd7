"""pytorch/examples' time-sequence prediction: two LSTMCells unrolled over sine waves,
trained with L-BFGS, in float64.

The model is a Module converted with ``.double()``; its forward loops over the time
steps of ``input.split(1, dim=1)`` and then keeps predicting ``future`` steps from
its own output; ``optimizer.step(closure)`` calls the closure (forward, loss,
backward) as many times as L-BFGS needs.
"""

import math

import numpy as np

WAVES = 6
TEST_WAVES = 2
LENGTH = 25
PERIOD = 20  # the waves are sin(t / PERIOD)
HIDDEN = 12
STEPS = 2
MAX_ITER = 8  # closure evaluations per step, at most
FUTURE = 10


def run(torch, compile=None) -> dict:
    nn = torch.nn

    class Sequence(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm1 = nn.LSTMCell(1, HIDDEN)
            self.lstm2 = nn.LSTMCell(HIDDEN, HIDDEN)
            self.linear = nn.Linear(HIDDEN, 1)

        def forward(self, input, future=0):
            outputs = []
            h_t = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
            c_t = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
            h_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
            c_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
            for input_t in input.split(1, dim=1):
                h_t, c_t = self.lstm1(input_t, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            for _ in range(future):  # predicting the future from its own predictions
                h_t, c_t = self.lstm1(output, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            return torch.cat(outputs, dim=1)

    rng = np.random.default_rng(0)
    seq = Sequence()
    seq.double()
    # PyTorch's LSTMCell and Linear initializations, drawn from numpy so that both
    # libraries start alike
    with torch.no_grad():
        for cell in (seq.lstm1, seq.lstm2):
            for p in cell.parameters():
                bound = 1 / math.sqrt(HIDDEN)
                p.copy_(torch.from_numpy(rng.uniform(-bound, bound, tuple(p.shape))))
        for p in seq.linear.parameters():
            p.copy_(torch.from_numpy(rng.uniform(-1, 1, tuple(p.shape)) / math.sqrt(HIDDEN)))

    t = np.arange(LENGTH) + rng.integers(-4 * PERIOD, 4 * PERIOD, (WAVES + TEST_WAVES, 1))
    data = np.sin(t / PERIOD)
    input = torch.from_numpy(data[TEST_WAVES:, :-1])
    target = torch.from_numpy(data[TEST_WAVES:, 1:])
    test_input = torch.from_numpy(data[:TEST_WAVES, :-1])
    test_target = torch.from_numpy(data[:TEST_WAVES, 1:])
    criterion = nn.MSELoss()
    optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8, max_iter=MAX_ITER)

    def closure():
        optimizer.zero_grad()
        out = seq(input)
        loss = criterion(out, target)
        loss.backward()
        return loss

    if compile:
        closure = compile(closure)

    closure_losses, step_losses = [], []

    def logged_closure():
        loss = closure()
        closure_losses.append(loss.item())
        return loss

    for _ in range(STEPS):
        step_losses.append(optimizer.step(logged_closure).item())

    with torch.no_grad():
        pred = seq(test_input, future=FUTURE)
        test_loss = criterion(pred[:, :-FUTURE], test_target)
    return {
        "closure_losses": closure_losses,
        "step_losses": step_losses,
        "test_loss": test_loss.item(),
        "future": pred[:, -FUTURE:].tolist(),
        "parameter_norms": {name: p.norm().item() for name, p in seq.named_parameters()},
    }
