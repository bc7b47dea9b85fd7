"""Optimizers against their update rules written out in numpy, eagerly and with the
training step compiled; parameter groups, state dicts and their errors."""

import numpy as np
import pytest
from training import assert_trains_as_eagerly, minimizing

import fusegrad as fg
import fusegrad.nn as nn
import fusegrad.nn.functional as F
from fusegrad import optim

W0 = np.array([1.0, -2.0, 0.5, 3.0])
SCALE = np.array([1.0, 0.5, 2.0, 0.1])


def loss_of(w):
    """A loss whose gradient changes direction: sum(scale * w**2 + sin(w))."""
    return (fg.tensor(SCALE) * w * w + w.sin()).sum()


def gradient(w):
    return 2 * SCALE * w + np.cos(w)


def sgd(steps, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    w, buf = W0.copy(), None
    for _ in range(steps):
        g = -gradient(w) if maximize else gradient(w)
        g = g + weight_decay * w
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        w = w - lr * g
    return w


def adam(steps, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, decoupled=False):
    (b1, b2), w = betas, W0.copy()
    m = v = v_max = np.zeros_like(w)
    for t in range(1, steps + 1):
        g = gradient(w)
        if decoupled:
            w = w * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        v_max = np.maximum(v_max, v)
        second = v_max if amsgrad else v
        w = w - lr / (1 - b1**t) * m / (np.sqrt(second) / np.sqrt(1 - b2**t) + eps)
    return w


def rmsprop(steps, lr, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False):
    w = W0.copy()
    square_avg = grad_avg = buf = np.zeros_like(w)
    for _ in range(steps):
        g = gradient(w) + weight_decay * w
        square_avg = alpha * square_avg + (1 - alpha) * g * g
        if centered:
            grad_avg = alpha * grad_avg + (1 - alpha) * g
            avg = np.sqrt(square_avg - grad_avg * grad_avg) + eps
        else:
            avg = np.sqrt(square_avg) + eps
        if momentum:
            buf = momentum * buf + g / avg
            w = w - lr * buf
        else:
            w = w - lr * g / avg
    return w


def adagrad(steps, lr, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10):
    w, total = W0.copy(), np.full_like(W0, initial_accumulator_value)
    for t in range(1, steps + 1):
        g = gradient(w) + weight_decay * w
        total = total + g * g
        w = w - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(total) + eps)
    return w


def adadelta(steps, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0):
    w = W0.copy()
    square_avg = acc_delta = np.zeros_like(w)
    for _ in range(steps):
        g = gradient(w) + weight_decay * w
        square_avg = rho * square_avg + (1 - rho) * g * g
        delta = np.sqrt(acc_delta + eps) / np.sqrt(square_avg + eps) * g
        acc_delta = rho * acc_delta + (1 - rho) * delta * delta
        w = w - lr * delta
    return w


def adamax(steps, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    (b1, b2), w = betas, W0.copy()
    m = u = np.zeros_like(w)
    for t in range(1, steps + 1):
        g = gradient(w) + weight_decay * w
        m = b1 * m + (1 - b1) * g
        u = np.maximum(b2 * u, np.abs(g) + eps)
        w = w - lr / (1 - b1**t) * m / u
    return w


def nadam(steps, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, momentum_decay=4e-3):
    (b1, b2), w = betas, W0.copy()
    m = v = np.zeros_like(w)
    product = 1.0
    for t in range(1, steps + 1):
        g = gradient(w) + weight_decay * w
        mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
        # a float32 tensor in the state, as PyTorch's, multiplied in float32
        product = float(np.float32(product) * np.float32(mu))
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        denom = np.sqrt(v / (1 - b2**t)) + eps
        w = w - lr * (1 - mu) / (1 - product) * g / denom
        w = w - lr * mu_next / (1 - product * mu_next) * m / denom
    return w


def radam(steps, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    (b1, b2), w = betas, W0.copy()
    m = v = np.zeros_like(w)
    rho_inf = 2 / (1 - b2) - 1
    for t in range(1, steps + 1):
        g = gradient(w) + weight_decay * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        corrected = m / (1 - b1**t)
        rho = rho_inf - 2 * t * b2**t / (1 - b2**t)
        if rho > 5:
            rect = np.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
            w = w - corrected * lr * rect * np.sqrt(1 - b2**t) / (np.sqrt(v) + eps)
        else:
            w = w - corrected * lr
    return w


# (id, the optimizer for a list of parameters, the update rule for 4 steps)
CASES = [
    ("sgd", lambda p: optim.SGD(p, lr=0.1), lambda: sgd(4, 0.1)),
    (
        "sgd-momentum-dampening-decay",
        lambda p: optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.05),
        lambda: sgd(4, 0.1, momentum=0.9, dampening=0.2, weight_decay=0.05),
    ),
    (
        "sgd-nesterov-maximize",
        lambda p: optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True, maximize=True),
        lambda: sgd(4, 0.05, momentum=0.8, nesterov=True, maximize=True),
    ),
    ("adam", lambda p: optim.Adam(p, lr=0.1), lambda: adam(4, 0.1)),
    (
        "adam-amsgrad-decay",
        lambda p: optim.Adam(p, lr=0.1, betas=(0.8, 0.9), weight_decay=0.1, amsgrad=True),
        lambda: adam(4, 0.1, betas=(0.8, 0.9), weight_decay=0.1, amsgrad=True),
    ),
    (
        "adamw",
        lambda p: optim.AdamW(p, lr=0.1),
        lambda: adam(4, 0.1, weight_decay=1e-2, decoupled=True),
    ),
    (
        "adamw-amsgrad",
        lambda p: optim.AdamW(p, lr=0.05, weight_decay=0.3, amsgrad=True),
        lambda: adam(4, 0.05, weight_decay=0.3, amsgrad=True, decoupled=True),
    ),
    ("rmsprop", lambda p: optim.RMSprop(p, lr=0.01), lambda: rmsprop(4, 0.01)),
    (
        "rmsprop-centered-momentum",
        lambda p: optim.RMSprop(
            p, lr=0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.1
        ),
        lambda: rmsprop(4, 0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.1),
    ),
    ("adagrad", lambda p: optim.Adagrad(p, lr=0.1), lambda: adagrad(4, 0.1)),
    (
        "adagrad-decay-accumulator",
        lambda p: optim.Adagrad(
            p, lr=0.1, lr_decay=0.1, weight_decay=0.05, initial_accumulator_value=0.5
        ),
        lambda: adagrad(4, 0.1, lr_decay=0.1, weight_decay=0.05, initial_accumulator_value=0.5),
    ),
    ("adadelta", lambda p: optim.Adadelta(p), lambda: adadelta(4)),
    (
        "adamax",
        lambda p: optim.Adamax(p, lr=0.1, weight_decay=0.1),
        lambda: adamax(4, 0.1, weight_decay=0.1),
    ),
    (
        "nadam",
        lambda p: optim.NAdam(p, lr=0.05, weight_decay=0.2),
        lambda: nadam(4, 0.05, weight_decay=0.2),
    ),
    (  # beta2 0.5: the variance is tractable from the first step
        "radam",
        lambda p: optim.RAdam(p, lr=0.1, betas=(0.9, 0.3)),
        lambda: radam(4, 0.1, betas=(0.9, 0.3)),
    ),
    ("radam-untractable", lambda p: optim.RAdam(p, lr=0.1), lambda: radam(4, 0.1)),
    (
        "adadelta-rho-decay",
        lambda p: optim.Adadelta(p, lr=0.5, rho=0.5, weight_decay=0.1),
        lambda: adadelta(4, lr=0.5, rho=0.5, weight_decay=0.1),
    ),
]


@pytest.mark.parametrize(("make", "rule"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_optimizer_follows_its_update_rule(make, rule):
    w = fg.tensor(W0, requires_grad=True)
    opt = make([w])
    for _ in range(4):
        opt.zero_grad()
        loss_of(w).backward()
        opt.step()
    np.testing.assert_allclose(w.detach().numpy(), rule(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(("make", "rule"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_fused_step_compiles_the_same_update(make, rule):
    """fused=True (a group's option, as PyTorch keeps it): an eager step runs
    the update as one compiled program, traced again only when a first
    update makes state (SGD's momentum buffer)."""
    w = fg.tensor(W0, requires_grad=True)
    opt = make([{"params": [w], "fused": True}])
    for _ in range(4):
        opt.zero_grad()
        loss_of(w).backward()
        opt.step()
    np.testing.assert_allclose(w.detach().numpy(), rule(), rtol=1e-12, atol=1e-14)
    info = opt._compiled_update.cache_info()
    assert info.misses <= 2 and info.hits == 4 - info.misses


def test_a_fused_step_reads_the_learning_rate_a_scheduler_sets():
    runs = []
    for fused in (False, True):
        w = fg.tensor(W0, requires_grad=True)
        opt = optim.Adam([w], lr=0.1, fused=fused)
        scheduler = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        for _ in range(6):
            opt.zero_grad()
            loss_of(w).backward()
            opt.step()
            scheduler.step()
        runs.append(w.detach().numpy())
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-12)
    # the first trace keeps the rate it read as a guard (code other than the
    # update could have read it too); once it changed, it is an input
    assert opt._compiled_update.cache_info().misses == 2


def test_a_copy_of_an_optimizer_with_a_scheduler_steps_its_own_parameters():
    """A scheduler wraps ``step`` to note it ran; a copy that kept the wrapper
    stepped the original optimizer (and pickling it failed)."""
    import copy
    import pickle

    w = fg.tensor(W0, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    optim.lr_scheduler.StepLR(opt, step_size=1)
    for copied in (copy.deepcopy(opt), pickle.loads(pickle.dumps(opt))):
        copied_w = copied.param_groups[0]["params"][0]
        copied_w.grad = fg.ones(4, dtype=fg.float64)
        copied.step()
        np.testing.assert_array_equal(copied_w.detach().numpy(), W0 - 0.1)
        np.testing.assert_array_equal(w.detach().numpy(), W0)


def test_a_fused_optimizer_copies_without_its_compiled_update():
    import copy
    import pickle

    w = fg.tensor(W0, requires_grad=True)
    opt = optim.SGD([w], lr=0.1, momentum=0.9, fused=True)
    loss_of(w).backward()
    opt.step()
    for copied in (copy.deepcopy(opt), pickle.loads(pickle.dumps(opt))):
        assert copied._compiled_update is None and len(copied.state) == 1
        copied_w = copied.param_groups[0]["params"][0]
        copied_w.grad = fg.ones(4, dtype=fg.float64)
        copied.step()  # compiles its own update, for its own tensors
        assert copied._compiled_update is not None


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: optim.Adam([fg.ones(2)], fused=True, foreach=True), "cannot be `True` together"),
        (lambda: optim.SGD([fg.ones(2, dtype=fg.float16)], fused=True), "float32 or float64"),
    ],
)
def test_fused_refuses_what_it_cannot_compile(make, message):
    with pytest.raises(RuntimeError, match=message):
        make()


@pytest.mark.parametrize("make", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_a_compiled_training_step_matches_eager_on_every_call(make):
    def make_model():
        model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))
        rng = np.random.default_rng(1)
        with fg.no_grad():
            for p in model.parameters():
                p.copy_(fg.tensor(rng.uniform(-0.5, 0.5, tuple(p.shape)), dtype=fg.float32))
        return model

    x = fg.tensor(np.random.default_rng(0).standard_normal((6, 3)), dtype=fg.float32)
    y = fg.tensor([0, 1, 1, 0, 1, 0])
    loss_of = minimizing(lambda model, x, y: F.cross_entropy(model(x), y))
    assert_trains_as_eagerly(make_model, make, loss_of, [(x, y)] * 3, rtol=1e-5, atol=1e-7)


def test_param_groups_take_their_own_options_and_parameters_without_grad_are_skipped():
    a, b, c = (fg.tensor(W0, requires_grad=True) for _ in range(3))
    opt = optim.SGD([{"params": [a]}, {"params": [b, c], "lr": 0.01}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.01]
    assert opt.param_groups[1]["momentum"] == 0.9
    for _ in range(2):
        opt.zero_grad()
        (loss_of(a) + loss_of(b)).backward()
        opt.step()
    np.testing.assert_allclose(a.detach().numpy(), sgd(2, 0.1, momentum=0.9), rtol=1e-12)
    np.testing.assert_allclose(b.detach().numpy(), sgd(2, 0.01, momentum=0.9), rtol=1e-12)
    np.testing.assert_array_equal(c.detach().numpy(), W0)
    assert c not in opt.state  # no gradient, no state, as in PyTorch


def test_named_parameters_and_add_param_group():
    model = nn.Linear(2, 1)
    opt = optim.Adam(model.named_parameters(), lr=0.1)
    assert opt.param_groups[0]["param_names"] == ["weight", "bias"]
    extra = fg.ones(3, requires_grad=True)
    with pytest.raises(ValueError, match="with/without names"):
        opt.add_param_group({"params": [extra]})
    opt = optim.Adam(model.parameters(), lr=0.1)
    opt.add_param_group({"params": extra, "lr": 0.5})
    assert opt.param_groups[1]["params"] == [extra] and opt.param_groups[1]["lr"] == 0.5
    assert opt.param_groups[1]["betas"] == (0.9, 0.999)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [model.bias]})


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: optim.SGD(fg.ones(2, requires_grad=True)), TypeError, "iterable of Tensors"),
        (lambda: optim.SGD([]), ValueError, "empty parameter list"),
        (lambda: optim.SGD([1.0]), TypeError, "one of the params is float"),
        (lambda: optim.SGD([fg.ones(2, requires_grad=True) * 2]), ValueError, "non-leaf"),
        (lambda: optim.SGD([{"params": {fg.ones(1)}}]), TypeError, "ordered collections"),
        (
            lambda: optim.Adam([fg.ones(1)], betas=(1.0, 0.9)),
            ValueError,
            "beta parameter at index",
        ),
        (lambda: optim.RMSprop([fg.ones(1)], alpha=-1), ValueError, "Invalid alpha value"),
        (lambda: optim.Adagrad([fg.ones(1)], lr_decay=-1), ValueError, "Invalid lr_decay value"),
        (lambda: optim.Adadelta([fg.ones(1)], rho=2), ValueError, "Invalid rho value"),
        (lambda: optim.SGD([fg.ones(1)], nesterov=True), ValueError, "Nesterov momentum"),
        (lambda: optim.Adam([fg.ones(1)], differentiable=True), RuntimeError, "differentiable"),
        (lambda: optim.Adam([fg.ones(1)], capturable=True), RuntimeError, "capturable"),
        (
            lambda: optim.LBFGS([{"params": [fg.ones(1)]}, {"params": [fg.ones(1)]}]),
            ValueError,
            "parameter groups",
        ),
    ],
)
def test_bad_arguments_raise_pytorchs_errors(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_zero_grad_sets_to_none_or_zeros():
    w = fg.ones(2, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    (w * 3).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert w.grad.tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert w.grad is None


def test_a_closure_runs_with_gradients_enabled_and_its_loss_is_returned():
    w = fg.tensor(W0, requires_grad=True)
    opt = optim.Adam([w], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = loss_of(w)
        loss.backward()
        return loss

    with fg.no_grad():
        loss = opt.step(closure)
    assert loss.item() == pytest.approx(loss_of(fg.tensor(W0)).item())
    np.testing.assert_allclose(w.detach().numpy(), adam(1, 0.1), rtol=1e-12)


def _trained(make, steps, state=None):
    w = fg.tensor(W0, requires_grad=True)
    opt = make([w])
    if state is not None:
        with fg.no_grad():
            w.copy_(state["w"])
        opt.load_state_dict(state["optimizer"])
    for _ in range(steps):
        opt.zero_grad()
        loss_of(w).backward()
        opt.step()
    return w, opt


# NAdam's running product of momenta is float32 in its state and, loaded for a
# float64 parameter, float64 (PyTorch casts floating state to the parameter's
# dtype): a resumed run continues it a rounding apart, in PyTorch as here
RESUMABLE = [c for c in CASES if c[0] != "nadam"]


@pytest.mark.parametrize("make", [c[1] for c in RESUMABLE], ids=[c[0] for c in RESUMABLE])
def test_state_dict_resumes_training_exactly(make):
    w, opt = _trained(make, 2)
    state = {"w": w.detach().clone(), "optimizer": opt.state_dict()}
    w_after, _ = _trained(make, 4)
    resumed, _ = _trained(make, 2, state=fg.load(_saved(state)))
    np.testing.assert_array_equal(resumed.detach().numpy(), w_after.detach().numpy())


def _saved(obj):
    import io

    buffer = io.BytesIO()
    fg.save(obj, buffer)
    buffer.seek(0)
    return buffer


def test_state_dict_layout_is_pytorchs():
    model = nn.Linear(2, 1)
    opt = optim.SGD(
        [{"params": [model.weight]}, {"params": [model.bias], "lr": 0.5}], lr=0.1, momentum=0.9
    )
    assert opt.state_dict()["state"] == {}  # no state before the first step
    F.mse_loss(model(fg.ones(3, 2)), fg.zeros(3, 1)).backward()
    opt.step()
    state = opt.state_dict()
    assert list(state["state"]) == [0, 1]
    assert list(state["state"][0]) == ["momentum_buffer"]
    assert state["state"][1]["momentum_buffer"] is opt.state[model.bias]["momentum_buffer"]
    assert [g["params"] for g in state["param_groups"]] == [[0], [1]]
    assert state["param_groups"][1]["lr"] == 0.5
    adam = optim.Adam(model.parameters())
    adam.step()
    assert list(adam.state_dict()["state"][0]) == ["step", "exp_avg", "exp_avg_sq"]
    assert adam.state_dict()["state"][0]["step"].dtype == fg.float32


def test_load_state_dict_checks_groups():
    opt = optim.SGD([fg.ones(1, requires_grad=True)], lr=0.1)
    other = optim.SGD([fg.ones(1, requires_grad=True), fg.ones(1, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="doesn't match the size"):
        opt.load_state_dict(other.state_dict())
    two = optim.SGD([{"params": [fg.ones(1)]}, {"params": [fg.ones(1)]}], lr=0.1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict(two.state_dict())


def test_a_compiled_step_follows_loaded_state_and_new_groups():
    """State replaced by load_state_dict, and a parameter group added after the
    step was compiled, are what the next compiled call uses (never stale)."""
    runs = []
    for compiled in (False, True):
        w = fg.tensor(W0, requires_grad=True)
        v = fg.tensor(W0[::-1].copy(), requires_grad=True)
        opt = optim.Adam([w], lr=0.1)

        def step(opt=opt, w=w, v=v):
            opt.zero_grad()
            (loss_of(w) + loss_of(v)).backward()
            opt.step()

        run = fg.jit(step) if compiled else step
        run()
        run()
        saved = fg.load(_saved(opt.state_dict()))
        run()
        opt.load_state_dict(saved)
        run()
        opt.add_param_group({"params": [v], "lr": 0.2})
        run()
        run()
        runs.append((w.detach().numpy().copy(), v.detach().numpy().copy()))
    (w_eager, v_eager), (w_jit, v_jit) = runs
    np.testing.assert_allclose(w_jit, w_eager, rtol=1e-12)
    np.testing.assert_allclose(v_jit, v_eager, rtol=1e-12)
    assert not np.array_equal(v_eager, W0[::-1])


def _lbfgs_reference(steps, lr, max_iter, history_size):
    """PyTorch's L-BFGS without line search, written out in numpy."""
    w = W0.copy()
    n_iter, d, t, dirs, stps, ro, h_diag, prev_g = 0, None, None, [], [], [], 1.0, None
    for _ in range(steps):
        g = gradient(w)
        for inner in range(1, max_iter + 1):
            n_iter += 1
            if n_iter == 1:
                d = -g
            else:
                y, s = g - prev_g, d * t
                ys = y @ s
                if ys > 1e-10:
                    if len(dirs) == history_size:
                        dirs.pop(0), stps.pop(0), ro.pop(0)
                    dirs.append(y), stps.append(s), ro.append(1.0 / ys)
                    h_diag = ys / (y @ y)
                q, al = -g, [0.0] * len(dirs)
                for i in reversed(range(len(dirs))):
                    al[i] = (stps[i] @ q) * ro[i]
                    q = q - al[i] * dirs[i]
                d = q * h_diag
                for i in range(len(dirs)):
                    d = d + (al[i] - (dirs[i] @ d) * ro[i]) * stps[i]
            prev_g = g
            t = min(1.0, 1.0 / np.abs(g).sum()) * lr if n_iter == 1 else lr
            if g @ d > -1e-9:
                break
            w = w + t * d
            if inner != max_iter:
                g = gradient(w)
    return w


def test_lbfgs_follows_pytorchs_algorithm():
    w = fg.tensor(W0, requires_grad=True)
    opt = optim.LBFGS([w], lr=0.5, max_iter=5, history_size=3)

    def closure():
        opt.zero_grad()
        loss = loss_of(w)
        loss.backward()
        return loss

    for _ in range(3):
        opt.step(closure)
    expected = _lbfgs_reference(3, lr=0.5, max_iter=5, history_size=3)
    np.testing.assert_allclose(w.detach().numpy(), expected, rtol=1e-10)
    assert opt.state[w]["func_evals"] == 15


@pytest.mark.parametrize("compiled", [False, True])
def test_lbfgs_with_strong_wolfe_finds_the_minimum(compiled):
    w = fg.tensor(W0, requires_grad=True)
    opt = optim.LBFGS([w], line_search_fn="strong_wolfe", max_iter=50)

    def closure():
        opt.zero_grad()
        loss = loss_of(w)
        loss.backward()
        return loss

    opt.step(fg.jit(closure) if compiled else closure)
    np.testing.assert_allclose(gradient(w.detach().numpy()), 0, atol=1e-5)


def test_lbfgs_step_inside_jit_is_a_clear_error():
    w = fg.tensor(W0, requires_grad=True)
    opt = optim.LBFGS([w])

    def closure():
        opt.zero_grad()
        loss = loss_of(w)
        loss.backward()
        return loss

    with pytest.raises(fg.TracingError, match="LBFGS"):
        fg.jit(lambda: opt.step(closure))()


@pytest.mark.parametrize("make", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_lower_takes_back_the_state_a_first_step_makes(make):
    """lower() restores the parameters; the state the traced first step made
    must go too, or the next call would take a second step's update."""
    runs = []
    for lowered in (False, True):
        w = fg.tensor(W0, requires_grad=True)
        opt = make([w])

        def step(opt=opt, w=w):
            opt.zero_grad()
            loss_of(w).backward()
            opt.step()

        compiled = fg.jit(step)
        if lowered:
            compiled.lower()
            np.testing.assert_array_equal(w.detach().numpy(), W0)
        for _ in range(2):
            compiled()
        runs.append(w.detach().numpy().copy())
    np.testing.assert_array_equal(runs[1], runs[0])
