"""Layers and an optimizer written by hand, keeping their state on ``self`` by
rebinding attributes rather than updating tensors in place (makemore's
"torchified" layers, a recurrent cell carrying its hidden state between
steps, an exponential moving average of the weights, momentum SGD).

- ``BatchNorm1d``: ``self.running_mean = (1 - m) * self.running_mean + m * mean``
  under ``no_grad`` while ``self.training``; the evaluation uses them.
- ``Tanh`` keeps its last output as ``self.out`` (makemore plots its statistics).
- ``Recurrent``: ``self.h`` is the hidden state, carried across training steps
  (detached: truncated backpropagation), reset by ``reset()``.
- ``EMA``: ``self.shadow[name] = decay * self.shadow[name] + (1 - decay) * p``.
- ``MomentumSGD``: ``self.buffers[k] = beta * self.buffers[k] + g``, a step counter
  and a learning rate halved at a step count, read inside the step.
- ``history`` collects each step's loss as a Python float.
"""

import numpy as np

IN, HIDDEN, OUT = 6, 16, 3
BATCH = 8
STEPS = 12


def run(torch, compile=None) -> dict:
    rng = np.random.default_rng(0)

    def randn(*shape, scale=1.0):
        return torch.tensor(rng.standard_normal(shape) * scale, dtype=torch.float32)

    class Linear:
        def __init__(self, fan_in, fan_out, bias=True):
            self.weight = randn(fan_in, fan_out, scale=fan_in**-0.5).requires_grad_()
            self.bias = torch.zeros(fan_out, requires_grad=True) if bias else None

        def __call__(self, x):
            self.out = x @ self.weight
            if self.bias is not None:
                self.out = self.out + self.bias
            return self.out

        def parameters(self):
            return [self.weight] + ([] if self.bias is None else [self.bias])

    class BatchNorm1d:
        def __init__(self, dim, eps=1e-5, momentum=0.1):
            self.eps, self.momentum, self.training = eps, momentum, True
            self.gamma = torch.ones(dim, requires_grad=True)
            self.beta = torch.zeros(dim, requires_grad=True)
            self.running_mean = torch.zeros(dim)
            self.running_var = torch.ones(dim)

        def __call__(self, x):
            if self.training:
                mean, var = x.mean(0, keepdim=True), x.var(0, keepdim=True)
            else:
                mean, var = self.running_mean, self.running_var
            xhat = (x - mean) / torch.sqrt(var + self.eps)
            self.out = self.gamma * xhat + self.beta
            if self.training:
                with torch.no_grad():
                    m = self.momentum
                    self.running_mean = (1 - m) * self.running_mean + m * mean
                    self.running_var = (1 - m) * self.running_var + m * var
            return self.out

        def parameters(self):
            return [self.gamma, self.beta]

    class Tanh:
        def __call__(self, x):
            self.out = torch.tanh(x)
            return self.out

        def parameters(self):
            return []

    class Recurrent:
        """h <- tanh(x W + h U), its hidden state carried from call to call."""

        def __init__(self, dim):
            self.W = randn(dim, dim, scale=dim**-0.5).requires_grad_()
            self.U = randn(dim, dim, scale=0.5 * dim**-0.5).requires_grad_()
            self.reset()

        def reset(self):
            self.h = torch.zeros(BATCH, self.W.shape[1])

        def __call__(self, x):
            out = torch.tanh(x @ self.W + self.h @ self.U)
            self.h = out.detach()
            return out

        def parameters(self):
            return [self.W, self.U]

    class EMA:
        def __init__(self, named, decay=0.9):
            self.decay = decay
            self.shadow = {name: p.detach().clone() for name, p in named.items()}

        def update(self, named):
            with torch.no_grad():
                for name, p in named.items():
                    self.shadow[name] = self.decay * self.shadow[name] + (1 - self.decay) * p

    class MomentumSGD:
        def __init__(self, params, lr, beta=0.9, halve_at=8):
            self.params, self.lr, self.beta, self.halve_at = params, lr, beta, halve_at
            self.buffers = [torch.zeros_like(p) for p in params]
            self.steps = 0

        def zero_grad(self):
            for p in self.params:
                p.grad = None

        def step(self):
            self.steps += 1
            if self.steps == self.halve_at:
                self.lr = self.lr / 2
            with torch.no_grad():
                for k, p in enumerate(self.params):
                    self.buffers[k] = self.beta * self.buffers[k] + p.grad
                    p -= self.lr * self.buffers[k]

    layers = [
        Linear(IN, HIDDEN, bias=False),  # a batch norm follows: a bias would only be noise
        BatchNorm1d(HIDDEN),
        Tanh(),
        Recurrent(HIDDEN),
        Linear(HIDDEN, OUT),
    ]
    params = [p for layer in layers for p in layer.parameters()]
    named = {f"p{k}": p for k, p in enumerate(params)}
    ema = EMA(named)
    opt = MomentumSGD(params, lr=0.2)
    history = []

    def forward(x):
        for layer in layers:
            x = layer(x)
        return x

    def train_step(x, y):
        loss = torch.nn.functional.cross_entropy(forward(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ema.update(named)
        history.append(loss.item())
        return loss

    def evaluate(x, y):
        layers[1].training = False
        with torch.no_grad():
            loss = torch.nn.functional.cross_entropy(forward(x), y)
        layers[1].training = True
        return loss

    step = compile(train_step) if compile else train_step
    check = compile(evaluate) if compile else evaluate

    xs = [randn(BATCH, IN) for _ in range(4)]
    ys = [torch.tensor(rng.integers(0, OUT, BATCH)) for _ in range(4)]
    evaluations = []
    for k in range(STEPS):
        step(xs[k % 4], ys[k % 4])
        if k % 4 == 3:
            evaluations.append(check(xs[0], ys[0]).item())
            layers[3].reset()

    return {
        "history": history,
        "evaluations": evaluations,
        "steps": opt.steps,
        "lr": opt.lr,
        "running_mean": layers[1].running_mean.tolist(),
        "running_var": layers[1].running_var.tolist(),
        "hidden": layers[3].h[0].tolist(),
        "tanh_out_mean": layers[2].out.mean().item(),
        "ema": ema.shadow["p0"][0].tolist(),
        "momentum": opt.buffers[-1].tolist(),
        "weights": {
            name: p.detach()[0].tolist() if p.dim() > 1 else p.tolist() for name, p in named.items()
        },
    }
