"""Forward-mode automatic differentiation, as PyTorch's tutorial "Forward-mode
Automatic Differentiation (Beta)" uses it, in float64: ``fwAD.dual_level``,
``make_dual`` and ``unpack_dual`` (``.primal``, ``.tangent``) on a function of
tensors, the tangent gone once the level is exited, and ``torch.func.jvp`` of
the same function; the directional derivative of an MLP's output along a
direction in its parameters, by making the parameters dual and calling
``torch.func.functional_call``, and the same by ``torch.func.jvp`` and by
``torch.func.linearize``; a custom ``autograd.Function`` (``forward``,
``setup_context``, ``backward`` and ``jvp``) under a dual level and in
``gradcheck(check_forward_ad=True)``; a Jacobian by ``jacfwd`` checked against
``jacrev``; ``torch.autograd.functional.jvp`` and ``hvp``. Then "gradients
without backpropagation" (Baydin et al., 2022): an MLP trained by gradient
descent on forward gradients, each the directional derivative of the loss along
a random direction (one dual level per direction) times that direction,
averaged over a few directions; the training step is compiled.

Weights, inputs, tangents and directions come from a seeded numpy generator.
"""

import numpy as np

IN, HIDDEN, OUT = 3, 8, 2
BATCH = 16
DIRECTIONS = 4
LR = 0.05
STEPS = 6


def run(torch, compile=None) -> dict:
    nn, F = torch.nn, torch.nn.functional
    fwAD = torch.autograd.forward_ad
    func = torch.func

    rng = np.random.default_rng(2022)

    def randn(*shape):
        return torch.tensor(rng.standard_normal(shape))

    # dual tensors: a primal with a tangent, at a dual level
    def fn(x, y):
        return x**2 + y**2 + torch.sin(x) * y

    primal, tangent, plain_tensor = randn(3, 4), randn(3, 4), randn(3, 4)
    with fwAD.dual_level():
        dual_input = fwAD.make_dual(primal, tangent)
        tangent_is_kept = fwAD.unpack_dual(dual_input).tangent is tangent
        dual_output = fn(dual_input, plain_tensor)
        output, jvp = fwAD.unpack_dual(dual_output)
    dual_levels = {
        "unpack_dual_gives_the_tangent": tangent_is_kept,
        "primal_is_fn": torch.allclose(output, fn(primal, plain_tensor)),
        "jvp_by_hand": torch.allclose(
            jvp, (2 * primal + torch.cos(primal) * plain_tensor) * tangent
        ),
        "tangent_gone_after_the_level": fwAD.unpack_dual(dual_output).tangent is None,
        # torch.func's jvp, with a zero tangent for the plain tensor: the same
        "func.jvp": torch.allclose(
            func.jvp(fn, (primal, plain_tensor), (tangent, torch.zeros_like(plain_tensor)))[1], jvp
        ),
    }

    # a Module's directional derivative with respect to its parameters
    model = nn.Sequential(nn.Linear(IN, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, OUT)).double()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.tensor(rng.normal(0, 0.5, tuple(p.shape))))
    x = randn(BATCH, IN)
    params = {name: p.detach() for name, p in model.named_parameters()}
    tangents = {name: randn(*p.shape) for name, p in params.items()}

    with fwAD.dual_level():
        dual_params = {name: fwAD.make_dual(p, tangents[name]) for name, p in params.items()}
        jvp_dual = fwAD.unpack_dual(func.functional_call(model, dual_params, (x,))).tangent

    def output_with(params):
        return func.functional_call(model, params, (x,))

    _, jvp_func = func.jvp(output_with, (params,), (tangents,))
    _, jvp_fn = func.linearize(output_with, params)
    jvp_linearized = jvp_fn(tangents)
    other_tangents = {name: randn(*p.shape) for name, p in params.items()}
    # linear in the tangent: the sum of two directions gives the sum of the derivatives
    summed = {name: tangents[name] + other_tangents[name] for name in params}
    linearity = jvp_fn(summed) - jvp_fn(other_tangents)

    # a custom Function with a forward-mode formula
    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(foo):
            return torch.exp(foo)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output)
            ctx.result = output

        @staticmethod
        def backward(ctx, grad_output):
            (result,) = ctx.saved_tensors
            return grad_output * result

        @staticmethod
        def jvp(ctx, grad_input):
            grad_output = grad_input * ctx.result
            del ctx.result  # not needed by the backward pass, which has it saved
            return grad_output

    fn_primal = torch.tensor(rng.normal(0, 0.5, (3, 3)), requires_grad=True)
    fn_tangent = randn(3, 3)
    with fwAD.dual_level():
        fn_output = Fn.apply(fwAD.make_dual(fn_primal, fn_tangent))
        fn_jvp = fwAD.unpack_dual(fn_output).tangent
    (fn_grad,) = torch.autograd.grad(Fn.apply(fn_primal).sum(), fn_primal)
    custom_function = {
        "jvp": fn_jvp.tolist(),
        "jvp_is_tangent_times_exp": torch.allclose(fn_jvp, fn_tangent * fn_primal.exp()),
        "grad_is_exp": torch.allclose(fn_grad, fn_primal.exp()),
        "gradcheck_forward_ad": torch.autograd.gradcheck(
            Fn.apply,
            (fn_primal,),
            check_forward_ad=True,
            check_backward_ad=False,
            check_undefined_grad=False,
            check_batched_grad=False,
        ),
    }

    # a Jacobian column by column in forward mode, row by row in reverse mode
    point = randn(IN)
    jac_fwd = func.jacfwd(model)(point)
    jac_rev = func.jacrev(model)(point)

    # torch.autograd.functional: a JVP, and a Hessian-vector product
    def energy(w):
        return (model(w) ** 2).sum() + torch.sin(w).prod()

    v = randn(IN)
    model_output, autograd_jvp = torch.autograd.functional.jvp(model, point, v)
    energy_value, autograd_hvp = torch.autograd.functional.hvp(energy, point, v)
    hessian = func.hessian(energy)(point)
    autograd_functional = {
        "jvp": autograd_jvp.tolist(),
        "jvp_is_jacobian_times_v": torch.allclose(autograd_jvp, jac_fwd @ v),
        "output_is_the_model_output": torch.allclose(model_output, model(point)),
        "energy": energy_value.item(),
        "hvp": autograd_hvp.tolist(),
        "hvp_is_hessian_times_v": torch.allclose(autograd_hvp, hessian @ v),
    }

    # gradients without backpropagation: a training step on forward gradients
    y = torch.tensor(np.sin(x.numpy() @ rng.standard_normal((IN, OUT))))

    def loss_with(params):
        return F.mse_loss(func.functional_call(model, params, (x,)), y)

    def forward_gradient_step(directions):
        params = {name: p.detach() for name, p in model.named_parameters()}
        estimate = {name: torch.zeros_like(p) for name, p in params.items()}
        for k in range(DIRECTIONS):
            direction = {name: d[k] for name, d in directions.items()}
            with fwAD.dual_level():
                dual = {name: fwAD.make_dual(p, direction[name]) for name, p in params.items()}
                loss, slope = fwAD.unpack_dual(loss_with(dual))
            for name in estimate:
                estimate[name] += slope * direction[name] / DIRECTIONS
        with torch.no_grad():
            for name, p in model.named_parameters():
                p -= LR * estimate[name]
        return loss

    forward_gradient_step = compile(forward_gradient_step) if compile else forward_gradient_step

    losses = []  # before each step, then after the last
    for _ in range(STEPS):
        directions = {name: randn(DIRECTIONS, *p.shape) for name, p in model.named_parameters()}
        losses.append(forward_gradient_step(directions).item())
    final_params = {name: p.detach() for name, p in model.named_parameters()}
    losses.append(loss_with(final_params).item())

    return {
        "dual_levels": dual_levels,
        "fn_jvp": jvp.tolist(),
        "parameter_jvp": jvp_dual.tolist(),
        "parameter_jvp_agrees": {
            "func.jvp": torch.allclose(jvp_func, jvp_dual),
            "func.linearize": torch.allclose(jvp_linearized, jvp_dual),
            "linearize_is_linear": torch.allclose(linearity, jvp_dual),
        },
        "custom_function": custom_function,
        "jacfwd": jac_fwd.tolist(),
        "jacfwd_matches_jacrev": torch.allclose(jac_fwd, jac_rev),
        "autograd_functional": autograd_functional,
        "forward_gradient_losses": losses,
        "parameter_norms": {name: p.norm().item() for name, p in final_params.items()},
        "final_0.bias": final_params["0.bias"].tolist(),
    }
