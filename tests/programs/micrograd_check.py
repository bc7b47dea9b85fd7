"""micrograd's own tests: two scalar expressions whose values and gradients micrograd
compares with PyTorch's, in float64.

The second builds its result with in-place additions on intermediate results
(``c += c + 1``), which autograd must record like any other operation. Each is
evaluated at micrograd's point and at a second one, so that a compiled version
runs its compiled program (the first call only traces).
"""


def run(torch, compile=None) -> dict:
    def sanity_check(x):
        z = 2 * x + 2 + x
        q = z.relu() + z * x
        h = (z * z).relu()
        y = h + q + q * x
        y.backward()
        return y

    def more_ops(a, b):
        c = a + b
        d = a * b + b**3
        c += c + 1
        c += 1 + c + (-a)
        d += d * 2 + (b + a).relu()
        d += 3 * d + (b - a).relu()
        e = c - d
        f = e**2
        g = f / 2.0
        g += 10.0 / f
        g.backward()
        return g

    if compile:
        sanity_check, more_ops = compile(sanity_check), compile(more_ops)

    def leaf(value):
        t = torch.Tensor([value]).double()
        t.requires_grad = True
        return t

    result = {}
    for x_value, a_value, b_value in ((-4.0, -4.0, 2.0), (1.5, 3.0, -2.5)):
        x = leaf(x_value)
        y = sanity_check(x)
        a, b = leaf(a_value), leaf(b_value)
        g = more_ops(a, b)
        result[f"at x={x_value}, a={a_value}, b={b_value}"] = {
            "sanity_check": {"y": y.data.item(), "dy/dx": x.grad.item()},
            "more_ops": {"g": g.data.item(), "dg/da": a.grad.item(), "dg/db": b.grad.item()},
        }
    return result
