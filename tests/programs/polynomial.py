"""The "Learning PyTorch with Examples" tutorial: fitting sin(x) on [-pi, pi] with a
third-order polynomial, in each of the tutorial's styles.

Tensors with gradients derived by hand; autograd; a custom ``autograd.Function``
(the Legendre polynomial P3); ``nn.Sequential`` with ``nn.Flatten(0, 1)`` and a
by-hand update; a custom Module with SGD; a dynamic network that reuses a
parameter for a varying number of terms; and ``optim.RMSprop``. The tutorial runs
thousands of steps; a few hundred show the same trajectories.
"""

import math

import numpy as np

STEPS = 300
LOG_EVERY = 60  # the tutorial prints the loss every 100 steps


def run(torch, compile=None) -> dict:
    nn = torch.nn
    rng = np.random.default_rng(0)

    def compiled(step):
        return compile(step) if compile else step

    def randn():
        return torch.tensor(rng.standard_normal(), dtype=torch.float32)

    x = torch.linspace(-math.pi, math.pi, 2000, dtype=torch.float32)
    y = torch.sin(x)
    result = {}

    def fit(step, *args):
        """Runs step(*args) STEPS times; its loss every LOG_EVERY steps."""
        step = compiled(step)
        losses = []
        for t in range(STEPS):
            loss = step(*args)
            if t % LOG_EVERY == LOG_EVERY - 1:
                losses.append(loss.item())
        return losses

    # tensors, with the backward pass written by hand
    a, b, c, d = randn(), randn(), randn(), randn()

    def manual_step(learning_rate):
        y_pred = a + b * x + c * x**2 + d * x**3
        loss = (y_pred - y).pow(2).sum()
        grad_y_pred = 2.0 * (y_pred - y)
        grad_a = grad_y_pred.sum()
        grad_b = (grad_y_pred * x).sum()
        grad_c = (grad_y_pred * x**2).sum()
        grad_d = (grad_y_pred * x**3).sum()
        a.sub_(learning_rate * grad_a)
        b.sub_(learning_rate * grad_b)
        c.sub_(learning_rate * grad_c)
        d.sub_(learning_rate * grad_d)
        return loss

    result["tensors"] = {
        "losses": fit(manual_step, 1e-6),
        "coefficients": [a.item(), b.item(), c.item(), d.item()],
    }

    # autograd
    a, b, c, d = (randn().requires_grad_() for _ in range(4))

    def autograd_step(learning_rate):
        y_pred = a + b * x + c * x**2 + d * x**3
        loss = (y_pred - y).pow(2).sum()
        loss.backward()
        with torch.no_grad():
            for coefficient in (a, b, c, d):
                coefficient -= learning_rate * coefficient.grad
                coefficient.grad = None
        return loss

    result["autograd"] = {
        "losses": fit(autograd_step, 1e-6),
        "coefficients": [a.item(), b.item(), c.item(), d.item()],
    }

    # a new autograd function
    class LegendrePolynomial3(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input**3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            (input,) = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input**2 - 1)

    # near the solution, so that the Legendre fit converges (the tutorial's choice)
    a = torch.full((), 0.0, dtype=torch.float32, requires_grad=True)
    b = torch.full((), -1.0, dtype=torch.float32, requires_grad=True)
    c = torch.full((), 0.0, dtype=torch.float32, requires_grad=True)
    d = torch.full((), 0.3, dtype=torch.float32, requires_grad=True)

    def legendre_step(learning_rate):
        P3 = LegendrePolynomial3.apply
        y_pred = a + b * P3(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        loss.backward()
        with torch.no_grad():
            for coefficient in (a, b, c, d):
                coefficient -= learning_rate * coefficient.grad
                coefficient.grad = None
        return loss

    result["custom_function"] = {
        "losses": fit(legendre_step, 5e-6),
        "coefficients": [a.item(), b.item(), c.item(), d.item()],
    }

    # a custom Module, trained with SGD
    class Polynomial3(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Parameter(randn())
            self.b = nn.Parameter(randn())
            self.c = nn.Parameter(randn())
            self.d = nn.Parameter(randn())

        def forward(self, x):
            return self.a + self.b * x + self.c * x**2 + self.d * x**3

    model = Polynomial3()
    criterion = nn.MSELoss(reduction="sum")
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)

    def module_step():
        y_pred = model(x)
        loss = criterion(y_pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    result["custom_module"] = {
        "losses": fit(module_step),
        "coefficients": [p.item() for p in model.parameters()],
    }

    # a dynamic network: the fourth-order coefficient reused for 0, 1 or 2 more terms
    class DynamicNet(nn.Module):
        def __init__(self):
            super().__init__()
            for name in "abcde":
                setattr(self, name, nn.Parameter(randn()))

        def forward(self, x, extra_terms):
            # the tutorial draws extra_terms with random.randint inside forward; here the
            # caller draws it from numpy, so that both libraries draw the same
            y = self.a + self.b * x + self.c * x**2 + self.d * x**3
            for exp in range(4, 4 + extra_terms):
                y = y + self.e * x**exp
            return y

    model = DynamicNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-8, momentum=0.9)

    def dynamic_step(extra_terms):
        y_pred = model(x, extra_terms)
        loss = criterion(y_pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    dynamic_step = compiled(dynamic_step)
    extra_terms = rng.integers(0, 3, STEPS).tolist()
    result["dynamic"] = {
        "losses": [dynamic_step(n).item() for n in extra_terms][LOG_EVERY - 1 :: LOG_EVERY],
        "coefficients": [p.item() for p in model.parameters()],
    }

    # nn.Sequential on the features (x, x^2, x^3), updated by hand
    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)  # (2000, 3)
    model = nn.Sequential(nn.Linear(3, 1), nn.Flatten(0, 1))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[randn().item() for _ in range(3)]]))
        model[0].bias.copy_(randn().reshape(1))

    def sequential_step(learning_rate):
        loss = criterion(model(xx), y)
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= learning_rate * param.grad
        return loss

    linear_layer = model[0]
    result["nn"] = {
        "losses": fit(sequential_step, 1e-6),
        "coefficients": [linear_layer.bias.item(), *linear_layer.weight[0].tolist()],
    }

    # the same with an optimizer, RMSprop
    model = nn.Sequential(nn.Linear(3, 1), nn.Flatten(0, 1))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[randn().item() for _ in range(3)]]))
        model[0].bias.copy_(randn().reshape(1))
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)

    def rmsprop_step():
        loss = criterion(model(xx), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    linear_layer = model[0]
    result["optim"] = {
        "losses": fit(rmsprop_step),
        "coefficients": [linear_layer.bias.item(), *linear_layer.weight[0].tolist()],
    }
    return result
