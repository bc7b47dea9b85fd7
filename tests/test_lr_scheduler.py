"""Learning-rate schedulers: the rates their chainable forms reach, epoch by epoch,
against the closed forms PyTorch documents; resuming from state dicts; warnings."""

import math
import warnings

import pytest

import fusegrad as fg
from fusegrad.optim import SGD, Adam
from fusegrad.optim import lr_scheduler as S

BASE = 0.05
EPOCHS = 25


def optimizer(lr=BASE, **kwargs):
    return SGD([fg.ones(1, requires_grad=True)], lr=lr, **kwargs)


def rates(scheduler, epochs=EPOCHS):
    """The rate in effect at each epoch: epoch 0 is set by the constructor."""
    seen = [scheduler.get_last_lr()[0]]
    for _ in range(epochs - 1):
        scheduler.optimizer.step()
        scheduler.step()
        seen.append(scheduler.get_last_lr()[0])
    return seen


def onecycle(step, total, max_lr, pct=0.3, div=25.0, final_div=1e4, linear=False):
    initial, low = max_lr / div, max_lr / div / final_div
    up = pct * total - 1
    start, end, pct_done = (
        (initial, max_lr, step / up)
        if step <= up
        else (max_lr, low, (step - up) / (total - 1 - up))
    )
    if linear:
        return (end - start) * pct_done + start
    return end + (start - end) / 2 * (1 + math.cos(math.pi * pct_done))


def warm_restarts(epoch, t_0, t_mult, eta_min):
    t_i, t_cur = t_0, epoch
    while t_cur >= t_i:
        t_cur, t_i = t_cur - t_i, t_i * t_mult
    return eta_min + (BASE - eta_min) * (1 + math.cos(math.pi * t_cur / t_i)) / 2


# (id, scheduler of an optimizer, the rate at epoch e)
CASES = [
    ("step", lambda o: S.StepLR(o, step_size=3, gamma=0.5), lambda e: BASE * 0.5 ** (e // 3)),
    (
        "multistep",
        lambda o: S.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.1),
        lambda e: BASE * 0.1 ** sum(e >= m for m in [2, 5, 5, 9]),
    ),
    ("exponential", lambda o: S.ExponentialLR(o, gamma=0.9), lambda e: BASE * 0.9**e),
    (
        "cosine",
        lambda o: S.CosineAnnealingLR(o, T_max=10, eta_min=0.001),
        lambda e: 0.001 + (BASE - 0.001) * (1 + math.cos(math.pi * e / 10)) / 2,
    ),
    ("lambda", lambda o: S.LambdaLR(o, lambda e: 1 / (e + 1)), lambda e: BASE / (e + 1)),
    (
        "multiplicative",
        lambda o: S.MultiplicativeLR(o, lambda e: 0.95),
        lambda e: BASE * 0.95**e,
    ),
    (
        "linear",
        lambda o: S.LinearLR(o, start_factor=0.25, end_factor=0.75, total_iters=8),
        lambda e: BASE * (0.25 + 0.5 * min(8, e) / 8),
    ),
    (
        "constant",
        lambda o: S.ConstantLR(o, factor=0.5, total_iters=4),
        lambda e: BASE * (0.5 if e < 4 else 1),
    ),
    (
        "polynomial",
        lambda o: S.PolynomialLR(o, total_iters=10, power=2.0),
        lambda e: BASE * (1 - min(10, e) / 10) ** 2,
    ),
    (
        "onecycle-cos",
        lambda o: S.OneCycleLR(o, max_lr=0.1, total_steps=EPOCHS),
        lambda e: onecycle(e, EPOCHS, 0.1),
    ),
    (
        "onecycle-linear",
        lambda o: S.OneCycleLR(o, max_lr=0.1, total_steps=EPOCHS, anneal_strategy="linear"),
        lambda e: onecycle(e, EPOCHS, 0.1, linear=True),
    ),
    (
        "warm-restarts",
        lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.001),
        lambda e: warm_restarts(e, 3, 2, 0.001),
    ),
    (
        "sequential",
        lambda o: S.SequentialLR(
            o, [S.ConstantLR(o, factor=0.1, total_iters=2), S.ExponentialLR(o, 0.9)], [2]
        ),
        lambda e: BASE * 0.1 if e < 2 else BASE * 0.9 ** (e - 2),
    ),
    (
        "chained",
        lambda o: S.ChainedScheduler(
            [S.ConstantLR(o, factor=0.1, total_iters=2), S.ExponentialLR(o, 0.9)]
        ),
        lambda e: BASE * (0.1 if e < 2 else 1) * 0.9**e,
    ),
]


@pytest.mark.parametrize(("make", "rate"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_scheduler_rates_follow_the_closed_form(make, rate):
    scheduler = make(optimizer(momentum=0.9))
    expected = [rate(e) for e in range(EPOCHS)]
    assert rates(scheduler) == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert scheduler.optimizer.param_groups[0]["lr"] == scheduler.get_last_lr()[0]


@pytest.mark.parametrize(
    ("make", "rate"), [c[1:] for c in CASES[:9]], ids=[c[0] for c in CASES[:9]]
)
def test_a_resumed_scheduler_continues_the_schedule(make, rate):
    opt = optimizer()
    scheduler = make(opt)
    rates(scheduler, 7)
    saved_scheduler, saved_optimizer = scheduler.state_dict(), opt.state_dict()
    expected = rates(scheduler, 6)

    resumed_opt = optimizer()
    resumed = make(resumed_opt)
    resumed_opt.load_state_dict(saved_optimizer)
    resumed.load_state_dict(saved_scheduler)
    assert rates(resumed, 6) == expected


def test_step_with_an_epoch_uses_the_closed_form_and_warns():
    opt = optimizer()
    scheduler = S.StepLR(opt, step_size=2, gamma=0.5)
    opt.step()
    with pytest.warns(UserWarning, match="epoch parameter"):
        scheduler.step(5)
    assert scheduler.get_last_lr() == [BASE * 0.25]


def test_stepping_the_scheduler_before_the_optimizer_warns():
    scheduler = S.StepLR(optimizer(), step_size=2)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        scheduler.step()
    opt = optimizer()
    scheduler = S.StepLR(opt, step_size=2)
    opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scheduler.step()


def test_onecycle_cycles_adams_beta1_and_sgds_momentum():
    adam = Adam([fg.ones(1, requires_grad=True)], betas=(0.9, 0.99))
    scheduler = S.OneCycleLR(adam, max_lr=0.1, total_steps=10, base_momentum=0.8)
    assert adam.param_groups[0]["betas"] == (0.95, 0.99)
    for _ in range(2):
        adam.step()
        scheduler.step()
    pct = 2 / (0.3 * 10 - 1)
    expected = 0.8 + (0.95 - 0.8) / 2 * (1 + math.cos(math.pi * pct))
    assert adam.param_groups[0]["betas"] == (pytest.approx(expected), 0.99)
    sgd = optimizer(momentum=0.9)
    S.OneCycleLR(sgd, max_lr=0.1, total_steps=10)
    assert sgd.param_groups[0]["momentum"] == 0.95
    with pytest.raises(ValueError, match="momentum or beta1"):
        S.OneCycleLR(fg.optim.Adagrad([fg.ones(1)]), max_lr=0.1, total_steps=10)


def test_onecycle_refuses_a_step_past_the_end():
    opt = optimizer()
    scheduler = S.OneCycleLR(opt, max_lr=0.1, total_steps=3)
    for _ in range(3):
        opt.step()
        scheduler.step()
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        scheduler.step()


def test_reduce_on_plateau():
    opt = optimizer(lr=1.0)
    scheduler = S.ReduceLROnPlateau(opt, factor=0.5, patience=1, cooldown=1, min_lr=0.2)
    metrics = [1.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95]
    seen = []
    for metric in metrics:
        scheduler.step(fg.tensor(metric))
        seen.append(scheduler.get_last_lr()[0])
    assert seen == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.2]
    with pytest.raises(ValueError, match=r"Factor should be < 1\.0"):
        S.ReduceLROnPlateau(opt, factor=1.0)


def test_state_dict_holds_pytorchs_fields():
    scheduler = S.StepLR(optimizer(), step_size=2, gamma=0.5)
    assert set(scheduler.state_dict()) == {
        "step_size",
        "gamma",
        "base_lrs",
        "last_epoch",
        "_step_count",
        "_is_initial",
        "_get_lr_called_within_step",
        "_last_lr",
    }
    lambdas = S.LambdaLR(optimizer(), lambda e: 1.0)
    assert lambdas.state_dict()["lr_lambdas"] == [None]


def test_bad_arguments():
    with pytest.raises(TypeError, match="is not an Optimizer"):
        S.StepLR(object(), step_size=1)
    with pytest.raises(KeyError, match="initial_lr"):
        S.StepLR(optimizer(), step_size=1, last_epoch=3)
    with pytest.raises(ValueError, match="Expected 1 lr_lambdas, but got 2"):
        S.LambdaLR(optimizer(), [lambda e: 1, lambda e: 1])
    with pytest.raises(ValueError, match="positive integer T_0"):
        S.CosineAnnealingWarmRestarts(optimizer(), T_0=0)
    opt = optimizer()
    with pytest.raises(ValueError, match="one more than the number of milestone"):
        S.SequentialLR(opt, [S.ExponentialLR(opt, 0.9)], milestones=[3])
