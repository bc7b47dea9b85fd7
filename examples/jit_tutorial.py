"""The autograd tutorial's functions of tensors, compiled with @fusegrad.jit.

Each compiled function gives the gradients eager mode gives, including the
ones whose Python control flow depends on tensor values (the compiled
program checks the path it was traced on and retraces when an input takes
another). ``lower`` shows the program: forward and backward IR.
"""

import fusegrad as torch


@torch.jit
def f(a):
    """Piecewise linear: f(a) = k * a, with k chosen by loops and branches."""
    b = a * 2
    while b.norm() < 1000:
        b = b * 2
    if b.sum() > 0:
        c = b
    else:
        c = 100 * b
    return c


for value in (0.25, -1.5, 0.3, 0.25):
    a = torch.tensor(value, requires_grad=True)
    d = f(a)
    d.backward()
    same = bool(a.grad == d / a)
    print(f"f({value}) = {d.item():g}, grad = {a.grad.item():g}, grad == d / a: {same}")
print(f.cache_info())


@torch.jit
def loss(x, w):
    return (torch.tanh(x @ w) * 3).mean()


x = torch.ones(2, 3)
w = torch.full((3, 4), 0.1, requires_grad=True)
for step in range(3):
    value = loss(x, w)
    value.backward()
    print(
        f"step {step}: loss {value.item():.4f}, grad_fn {value.grad_fn.name()}, "
        f"w.grad[0, 0] {w.grad[0, 0].item():.4f}"
    )
print(loss.lower(x, w))

# Gradients of gradients: the compiled backward is itself differentiable.
cube = torch.jit(lambda t: (t**3).sum())
t = torch.tensor([1.0, 2.0], requires_grad=True)
(g,) = torch.autograd.grad(cube(t), t, create_graph=True)
(h,) = torch.autograd.grad(g.sum(), t)
print(g, h)
