"""The classic PyTorch autograd tutorial, run on fusegrad.

Every line below is PyTorch code; only the import differs. Random inputs of
the original are replaced by the values the tutorial printed, so the output
can be compared with PyTorch's line by line (tests/golden/autograd_tutorial.txt
is PyTorch 2.x's output of this same file).
"""

import fusegrad as torch

# --- Tensors that track history (x + 2, y * y * 3, mean) --------------------
x = torch.ones(2, 2, requires_grad=True)
print(x)
y = x + 2
print(y)
print(y.grad_fn)
print(x.grad_fn)
z = y * y * 3
out = z.mean()
print(z, out)

# --- requires_grad_ changes the flag in place -------------------------------
a = torch.tensor([[0.5, -1.5], [2.0, 3.0]])
a = (a * 3) / (a - 1)
print(a.requires_grad)
b = (a * a).sum()
print(b.grad_fn)
a.requires_grad_(True)
print(a.requires_grad)
b = (a * a).sum()
print(b.grad_fn)

# --- Gradients: d(out)/dx = 3/2 (x + 2) = 4.5 --------------------------------
out.backward()
print(x.grad)

# --- The legacy Variable API gives the same -----------------------------------
v = torch.autograd.Variable(torch.ones(2, 2), requires_grad=True)
w = (v + 2) * (v + 2) * 3
w.mean().backward(torch.tensor(1.0))
print(v.grad)

# --- A vector-Jacobian product: y is not a scalar, so backward takes a vector -
x = torch.tensor([1.0359, 0.1405, 0.2498], requires_grad=True)
print(x)
y = x * 2
while y.data.norm() < 1000:
    y = y * 2
print(y)
gradients = torch.FloatTensor([0.1, 1.0, 0.0001])
y.backward(gradients)
print(x.grad)

# --- no_grad stops the recording ------------------------------------------------
print(x.requires_grad)
print((x**2).requires_grad)
with torch.no_grad():
    print((x**2).requires_grad)
print(x.detach().requires_grad)

# --- y = 2 x.x has gradient 4x; gradients accumulate until zeroed -------------
x = torch.arange(4.0)
print(x)
x.requires_grad_(True)
print(x.grad)
y = 2 * torch.dot(x, x)
print(y)
y.backward()
print(x.grad)
print(x.grad == 4 * x)
x.grad.zero_()
y = x.sum()
y.backward()
print(x.grad)
x.grad.zero_()
y = x * x
y.sum().backward()
print(x.grad)


# --- Python control flow: f is piecewise linear, so its gradient is d / a -----
def f(a):
    b = a * 2
    while b.norm() < 1000:
        b = b * 2
    if b.sum() > 0:
        c = b
    else:
        c = 100 * b
    return c


for start in (0.3, -1.7):
    a = torch.tensor(start, requires_grad=True)
    d = f(a)
    d.backward()
    print(d, a.grad, a.grad == d / a)

# --- A hook that doubles the gradient, then removed -----------------------------
v = torch.autograd.Variable(torch.Tensor([0, 0, 0]), requires_grad=True)
h = v.register_hook(lambda grad: grad * 2)
v.backward(torch.Tensor([1, 1, 1]))
print(v.grad.data)
h.remove()
v.grad.zero_()
v.backward(torch.Tensor([1, 1, 1]))
print(v.grad)
