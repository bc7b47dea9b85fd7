"""Compiled code keeps the Python semantics of eager code, or refuses it.

Each row is a small program as users write them (see semantics.py): run
eagerly and compiled for five calls, with arguments and Python state
changed between calls, and compared after every call. A row passes when
every call matches, or when the compiled run refuses with a TracingError
and the row is listed as refused.
"""

from __future__ import annotations

import pytest
from semantics import run_both

PRELUDE = """
import numpy as np
import fusegrad as fg
import fusegrad.nn as nn
import fusegrad.nn.functional as F

def data(call, *shape, seed=0, requires_grad=False):
    rng = np.random.default_rng(seed + 17 * call)
    return fg.tensor(rng.standard_normal(shape or (4,)), dtype=fg.float64,
                     requires_grad=requires_grad)
"""

PROGRAMS = {
    # ---- numbers taken from tensors
    "item_is_detached": """
def step(x):
    m = x.abs().max().item()
    y = (x / m).sum() if m > 1.0 else (x * 2).sum()
    y.backward()
    return y
def arguments(call):
    return data(call, 4, requires_grad=True) * (1 + call)
""",
    "float_of_loss_returned": """
def step(x):
    loss = (x * x).mean()
    return float(loss)
def arguments(call):
    return data(call, 64, 33)
""",
    "int_of_sum_returned": """
def step(x):
    return int(x.abs().sum() * 10)
def arguments(call):
    return data(call, 64, 33)
""",
    "tolist_returned": """
def step(x):
    return x.sum(0).tolist()
def arguments(call):
    return data(call, 5, 3)
""",
    "numpy_of_reduced_value": """
def step(x):
    return x.sum().numpy()
def arguments(call):
    return data(call, 7)
""",
    "isinstance_of_item": """
def step(x):
    v = x.sum().item()
    if isinstance(v, float):
        return x * 2
    return x * 3
def arguments(call):
    return data(call, 3)
""",
    "fstring_of_loss": """
log = []
def step(x):
    loss = x.sum()
    log.append(f"loss={loss.item():.3f}")
    return loss
def arguments(call):
    return data(call, 3)
""",
    "str_of_item_returned": """
def step(x):
    return str(round(x.sum().item(), 6))
def arguments(call):
    return data(call, 3)
""",
    "item_as_index": """
def step(x, i):
    k = int(i.item())
    return x[k] * 2
def arguments(call):
    return data(call, 5), fg.tensor(call % 5)
""",
    "item_in_split": """
def step(x, n):
    k = int(n.sum().item())
    a, b = x.split([k, 6 - k])
    return a.sum() - b.sum()
def arguments(call):
    return data(call, 6), fg.tensor([1 + call % 4])
""",
    "negated_int_item": """
def step(x, n):
    k = n.item()
    return x * (-k)
def arguments(call):
    return data(call, 3), fg.tensor(call + 1)
""",
    "numpy_sqrt_of_item": """
def step(x):
    v = x.abs().sum().item()
    return x * np.sqrt(v)
def arguments(call):
    return data(call, 3)
""",
    "dropout_probability_from_item": """
def step(x, p):
    q = p.item()
    return F.dropout(x, p=q, training=False) * 2
def arguments(call):
    return data(call, 3), fg.tensor(0.1 * (call % 3))
""",
    "history_of_item": """
history = []
def step(x):
    loss = (x ** 2).sum()
    history.append(loss.item())
    return loss
def arguments(call):
    return data(call, 4)
""",
    "large_int_arithmetic": """
def step(x, n):
    big = n * 10**12 * 10**9
    return x * (big % 7)
def arguments(call):
    return data(call, 3), 3 + call
""",
    # ---- Python state outside tensors
    "rebound_running_mean": """
class MyBN:
    def __init__(self):
        self.running_mean = fg.zeros(3, dtype=fg.float64)
        self.momentum = 0.1
    def __call__(self, x):
        m = x.mean(0)
        with fg.no_grad():
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * m
        return x - m
bn = MyBN()
def step(x):
    return bn(x).sum()
def arguments(call):
    return data(call, 5, 3)
""",
    "training_with_a_hand_written_batchnorm": """
class MyBatchNorm(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(fg.ones(n, dtype=fg.float64))
        self.bias = nn.Parameter(fg.zeros(n, dtype=fg.float64))
        self.running_mean = fg.zeros(n, dtype=fg.float64)
        self.running_var = fg.ones(n, dtype=fg.float64)
        self.momentum = 0.1
    def forward(self, x):
        if self.training:
            mean, var = x.mean(0), x.var(0, unbiased=False)
            with fg.no_grad():
                self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mean
                self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var
        else:
            mean, var = self.running_mean, self.running_var
        return (x - mean) / (var + 1e-5).sqrt() * self.weight + self.bias
model = nn.Sequential(nn.Linear(4, 8), MyBatchNorm(8), nn.ReLU(), nn.Linear(8, 1)).double()
opt = fg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
def between(call):
    model.train(call != 4)
def step(x, y):
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    if model.training:
        loss.backward()
        opt.step()
    return loss.item()
def arguments(call):
    return data(call, 16, 4), data(call, 16, 1, seed=3)
""",
    "rnn_hidden_on_module": """
class Cell(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3).double()
        self.h = fg.zeros(1, 3, dtype=fg.float64)
    def forward(self, x):
        self.h = fg.tanh(self.lin(x) + self.h.detach())
        return self.h
cell = Cell()
def step(x):
    return cell(x).sum()
def arguments(call):
    return data(call, 1, 3)
""",
    "ema_buffer": """
ema = {"value": fg.zeros(3, dtype=fg.float64)}
def step(x):
    ema["value"] = ema["value"] * 0.9 + x.detach() * 0.1
    return x * 2
def arguments(call):
    return data(call, 3)
""",
    "hand_written_momentum": """
w = fg.ones(3, dtype=fg.float64, requires_grad=True)
state = {}
def step(x):
    loss = (w * x).sum()
    loss.backward()
    with fg.no_grad():
        buf = state.get("buf")
        state["buf"] = w.grad.clone() if buf is None else buf * 0.9 + w.grad
        w.sub_(0.1 * state["buf"])
        w.grad = None
    return loss
def arguments(call):
    return data(call, 3)
""",
    "rebound_global_tensor": """
total = fg.zeros(3, dtype=fg.float64)
def step(x):
    global total
    total = total + x
    return total.sum()
def arguments(call):
    return data(call, 3)
""",
    "global_float_changed": """
scale = 1.0
def between(call):
    global scale
    scale = 1.0 + call
def step(x):
    return x * scale
def arguments(call):
    return data(call, 3)
""",
    "global_read_by_a_helper": """
SCALE = 1.0
def helper(x):
    return x * SCALE
def between(call):
    global SCALE
    SCALE = 1.0 + call
def step(x):
    return helper(x)
def arguments(call):
    return data(call, 3)
""",
    "global_read_through_value_and_grad": """
scale = 1.0
def between(call):
    global scale
    scale = 1.0 + call
def loss(x):
    return (x * x * scale).sum()
step = fg.value_and_grad(loss)
def arguments(call):
    return data(call, 3)
""",
    "global_numpy_arrays_changed_in_place": """
small = np.ones(3)
large = np.ones(10000)  # compared by a sample: its first element is one
def between(call):
    small[1] = call
    large[0] = call
def step(x):
    return x * fg.from_numpy(small) + float(large[0])
def arguments(call):
    return data(call, 3)
""",
    "closure_float_changed": """
def make():
    factor = [2.0]
    def step(x):
        return x * factor[0]
    return step, factor
step, factor = make()
def between(call):
    factor[0] = 2.0 + call
def arguments(call):
    return data(call, 3)
""",
    "config_object_attribute": """
class Config:
    temperature = 1.0
cfg = Config()
def between(call):
    cfg.temperature = 0.5 * (call + 1)
def step(x):
    return F.softmax(x / cfg.temperature, dim=0)
def arguments(call):
    return data(call, 4)
""",
    "class_attribute_changed": """
class Scaler:
    factor = 2.0
def between(call):
    Scaler.factor = 2.0 + call
def step(x):
    return x * Scaler.factor
def arguments(call):
    return data(call, 3)
""",
    "default_argument_changed": """
def step(x, scale=2.0):
    return x * scale
def between(call):
    step.__defaults__ = (2.0 + call,)
def arguments(call):
    return data(call, 3)
""",
    "module_list_attribute": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.scales = [1.0, 2.0]
    def forward(self, x):
        return sum(x * s for s in self.scales)
net = Net()
def between(call):
    net.scales.append(float(call))
def step(x):
    return net(x)
def arguments(call):
    return data(call, 3)
""",
    "sequential_layer_replaced": """
seq = nn.Sequential(nn.Linear(3, 3), nn.ReLU()).double()
def between(call):
    if call == 2:
        seq[1] = nn.Tanh()
    if call == 3:
        seq.append(nn.Sigmoid())
def step(x):
    return seq(x)
def arguments(call):
    return data(call, 2, 3)
""",
    "forward_hook_added": """
lin = nn.Linear(3, 3).double()
def between(call):
    global handle
    if call == 2:
        handle = lin.register_forward_hook(lambda m, i, o: o * 2)
    if call == 4:
        handle.remove()
def step(x):
    return lin(x)
def arguments(call):
    return data(call, 2, 3)
""",
    "eval_and_train_inside_the_step": """
net = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5)).double()
def step(x):
    net.eval()
    y = net(x)
    net.train()
    return y + net(x)
def between(call):
    fg.manual_seed(call)
def arguments(call):
    return data(call, 4, 3)
""",
    "eval_mode_of_bound_forward": """
net = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5)).double()
step = net.forward
def between(call):
    fg.manual_seed(call)
    if call == 2:
        net.eval()
def arguments(call):
    return data(call, 4, 3)
""",
    # ---- side effects
    "log_append": """
log = []
def step(x):
    log.append(len(log))
    return x + len(log)
def arguments(call):
    return data(call, 3)
""",
    "appended_through_a_method_and_a_closure": """
class Tracker:
    def __init__(self):
        self.losses = []
    def log(self, t):
        self.losses.append(t.detach())
def make():
    seen = []
    def note(v):
        seen.extend([v, v + 1])
    return note, seen
tracker = Tracker()
note, seen = make()
def step(x):
    loss = (x * x).sum()
    tracker.log(loss)
    note(loss.item())
    return loss
def arguments(call):
    return data(call, 3)
""",
    "global_read_in_a_dunder_method": """
scale = 1.0
class Layer:
    def __init__(self):
        self.seen = []
    def __call__(self, x):
        self.seen.append(x.sum().item())
        return x * scale * len(self.seen)
layer = Layer()
def step(x):
    return layer(x)
def between(call):
    global scale
    scale = 1.0 + call
def arguments(call):
    return data(call, 3)
""",
    "global_read_in_a_property": """
scale = 1.0
class Layer:
    @property
    def factor(self):
        return scale * 2
    def __getitem__(self, x):
        return x * self.factor
layer = Layer()
def step(x):
    return layer[x]
def between(call):
    global scale
    scale = 1.0 + call % 2
def arguments(call):
    return data(call, 3)
""",
    "slotted_objects": """
class Config:
    __slots__ = ("scale",)
    def __init__(self):
        self.scale = 1.0
class Running:
    __slots__ = ("mean", "__count")
    def __init__(self):
        self.mean = fg.zeros(3, dtype=fg.float64)
        self.__count = 0
    def update(self, v):
        self.__count += 1
        self.mean = self.mean + (v.detach().mean(0) - self.mean) / self.__count
        return self.mean
cfg, running = Config(), Running()
def step(x):
    return x * cfg.scale + running.update(x)
def between(call):
    cfg.scale = 1.0 + call % 2
def arguments(call):
    return data(call, 2, 3)
""",
    "deque_window": """
import collections
window = collections.deque(maxlen=3)
def step(x):
    loss = (x * x).sum()
    window.append(loss.item())
    return loss / (sum(window) / len(window))
def arguments(call):
    return data(call, 3)
""",
    "next_of_iterators": """
batches = [data(k, 3) for k in range(8)]
it = iter(batches)
def numbers():
    k = 0
    while True:
        yield float(k)
        k += 1
counting = numbers()
def step(x):
    return x + next(it) * next(counting)
def arguments(call):
    return data(call, 3)
""",
    "writes_into_argument_containers": """
def step(x, out, log):
    out["loss"] = (x * x).sum() * out["scale"]
    out["n"] = out["n"] + 1
    log.append(x.sum().item())
    return x * 2
def arguments(call):
    return data(call, 3), {"n": call, "scale": 0.5 + call}, [call]
""",
    "appended_list_read_elsewhere": """
history = []
alias = history
def step(x):
    history.append(x.sum().item())
    return x * alias[-1]
def arguments(call):
    return data(call, 3)
""",
    "counter_on_object": """
class Counter:
    n = 0
c = Counter()
def step(x):
    c.n += 1
    return x * c.n
def arguments(call):
    return data(call, 3)
""",
    "set_filled_then_reset": """
class Tracker:
    def __init__(self):
        self.arrived = set()
tracker = Tracker()
tags = {"a"}
def step(x):
    tracker.arrived.add(x.shape[0])
    tags.add("b")
    y = x * len(tracker.arrived) * len(tags)
    tracker.arrived = set()
    return y
def arguments(call):
    return data(call, 3)
""",
    "closure_list_then_eager": """
def make():
    cell = [0.0]
    def bump(v):
        cell[0] += v
        return cell[0]
    return bump, cell
bump, cell = make()
def step(x):
    n = int(x.abs().sum() * 10) % 7
    return x + n + bump(x.mean().item())
def arguments(call):
    return data(call, 3)
""",
    "leaf_hook_with_backward_inside": """
w = fg.ones(3, dtype=fg.float64, requires_grad=True)
seen = []
w.register_hook(lambda g: seen.append(g.sum().item()))
def step(x):
    (w * x).sum().backward()
    return x * 2
def arguments(call):
    return data(call, 3)
""",
    "cache_dict": """
cache = {}
def step(x):
    key = x.shape[0]
    if key not in cache:
        cache[key] = fg.ones(key, dtype=fg.float64)
    return x + cache[key]
def arguments(call):
    return data(call, 3 + call % 2)
""",
    "forward_hook_stores_activation": """
lin = nn.Linear(3, 3).double()
acts = []
lin.register_forward_hook(lambda m, i, o: acts.append(o.detach()))
def step(x):
    return lin(x).sum()
def arguments(call):
    return data(call, 2, 3)
""",
    "post_accumulate_grad_hook": """
w = fg.ones(3, dtype=fg.float64, requires_grad=True)
seen = []
w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.sum().item()))
def step(x):
    (w * x).sum().backward()
    return w.grad.clone()
def arguments(call):
    return data(call, 3)
""",
    "learning_rate_read_by_the_step_and_the_optimizer": """
lin = nn.Linear(3, 1).double()
opt = fg.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
def step(x):
    opt.zero_grad()
    loss = lin(x).pow(2).sum() * (1 + opt.param_groups[0]["lr"])
    loss.backward()
    opt.step()
    return loss
def between(call):
    opt.param_groups[0]["lr"] = [0.1, 0.1, 0.05, 0.2, 0.2, 0.01][call]
def arguments(call):
    return data(call, 4, 3)
""",
    "counter_and_decay_on_a_handwritten_optimizer": """
w = fg.ones(3, dtype=fg.float64, requires_grad=True)
class Opt:
    def __init__(self):
        self.steps, self.lr, self.velocity = 0, 0.2, 0.0
    def step(self):
        self.steps += 1
        if self.steps % 3 == 0:
            self.lr = self.lr * 0.5
        with fg.no_grad():
            self.velocity = 0.9 * self.velocity + w.grad.sum().item()
            w.sub_(self.lr * w.grad + 0.01 * self.velocity)
opt = Opt()
def step(x):
    w.grad = None
    loss = (w * x).pow(2).sum()
    loss.backward()
    opt.step()
    return loss, opt.steps
def arguments(call):
    return data(call, 3)
""",
    "scheduler_inside_step": """
lin = nn.Linear(3, 1).double()
opt = fg.optim.SGD(lin.parameters(), lr=0.1)
sched = fg.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
def step(x):
    opt.zero_grad()
    loss = lin(x).pow(2).mean()
    loss.backward()
    opt.step()
    sched.step()
    return loss
def arguments(call):
    return data(call, 4, 3)
""",
    "numpy_generator_draw": """
rng = np.random.default_rng(0)
def step(x):
    return x * rng.standard_normal()
def arguments(call):
    return data(call, 3)
""",
    "print_inside": """
import io, contextlib
out = io.StringIO()
def step(x):
    with contextlib.redirect_stdout(out):
        print("step", x.shape[0])
    result = x * 2
    return result
def arguments(call):
    return data(call, 3)
def between(call):
    pass
""",
    # ---- reading tensor values without a guard
    "torch_equal": """
def step(x, y):
    return x * 2 if fg.equal(x, y) else x * 3
def arguments(call):
    x = data(call, 3)
    return x, (x.clone() if call % 2 else x + 1)
""",
    "allclose": """
def step(x, y):
    return x * 2 if fg.allclose(x, y) else x * 3
def arguments(call):
    x = data(call, 3)
    return x, (x.clone() if call % 2 else x + 1)
""",
    "tensor_of_tensor": """
def step(x):
    return fg.tensor(x) * 2
def arguments(call):
    return data(call, 3)
""",
    "tensor_of_tensor_list": """
def step(x, y):
    return fg.tensor([x.sum(), y.sum()])
def arguments(call):
    return data(call, 3), data(call, 2, seed=1)
""",
    "is_contiguous_branch": """
def step(x):
    return x * 2 if x.is_contiguous() else x * 3
def arguments(call):
    x = data(call, 3, 3)
    return x if call % 2 else x.t()
""",
    "stride_read": """
def step(x):
    return x * x.stride()[0]
def arguments(call):
    x = data(call, 3, 3)
    return x if call % 2 else x.t()
""",
    # ---- aliasing
    "inplace_on_views_of_arguments": """
def step(x, h):
    h[:, :2] += x[:, :2] * 2
    h.t()[0].mul_(3)
    x[1] = 0.0
    return h.sum() + x.sum()
def arguments(call):
    return data(call, 3, 4), data(call, 3, 4, seed=1)
""",
    "same_tensor_twice": """
def step(a, b):
    a.add_(1)
    return b * 2
def arguments(call):
    t = data(call, 3)
    return (t, t) if call % 2 else (t, t.clone())
""",
    "same_tensor_twice_through_its_plan": """
def step(a, b):
    return (a + b).unsqueeze(0).expand(2, -1, -1).sum(0) * 0.5
def arguments(call):
    t = data(call, 5, 2)
    return (t, t) if call % 2 else (t, t.clone() + 1)
""",
    "view_and_base": """
def step(a, b):
    a.mul_(2)
    return b + 0
def arguments(call):
    t = data(call, 4)
    return (t, t[1:]) if call % 2 else (t, t.clone()[1:])
""",
    "argument_is_a_global": """
g = data(0, 3)
def step(a):
    a.add_(1)
    return g * 1
def arguments(call):
    return g if call % 2 else g.clone()
""",
    # ---- arguments that are not tensors
    "numpy_array_argument": """
def step(x, a):
    return x * fg.from_numpy(a) + float(a.sum())
def arguments(call):
    return data(call, 3), np.array([1.0, 2.0, 3.0 + call % 2])
""",
    "numpy_buffer_refilled": """
buffer = np.zeros(1000)
def step(x, a):
    return x * fg.from_numpy(a[:4])
def between(call):
    buffer[999 - call] = 1.0
    buffer[:4] = call % 3
def arguments(call):
    return data(call, 4), buffer
""",
    "generator_argument": """
g = fg.Generator().manual_seed(3)
def step(x, gen):
    return x + fg.rand(3, generator=gen, dtype=fg.float64)
def arguments(call):
    return data(call, 3), g
""",
    "generators_alternate": """
gens = [fg.Generator().manual_seed(1), fg.Generator().manual_seed(2)]
def step(x, gen):
    return x * fg.randn(3, generator=gen, dtype=fg.float64)
def arguments(call):
    return data(call, 3), gens[call % 2]
""",
    "module_argument": """
models = [nn.Linear(3, 2).double(), nn.Linear(3, 2).double()]
def step(model, x):
    loss = model(x).pow(2).sum()
    loss.backward()
    return loss
def arguments(call):
    return models[call // 2 % 2], data(call, 5, 3)
""",
    "function_argument": """
def mine(t):
    return t * 3
def step(x, activation):
    return activation(x).sum()
def arguments(call):
    return data(call, 4), [fg.tanh, F.relu, mine, np.abs][call % 4]
""",
    "config_object_argument": """
class Config:
    scale = 1.0
cfg = Config()
def step(x, c):
    return x * c.scale
def between(call):
    cfg.scale = 1.0 + call // 2
def arguments(call):
    return data(call, 3), cfg
""",
    # ---- autograd bookkeeping
    "custom_backward_indexes_with_saved_ints": """
class Gather(fg.autograd.Function):
    @staticmethod
    def forward(ctx, x, index):
        ctx.save_for_backward(index)
        ctx.size = x.shape[0]
        return x[index]
    @staticmethod
    def backward(ctx, g):
        index, = ctx.saved_tensors
        out = fg.zeros(ctx.size, dtype=g.dtype)
        out.index_add_(0, index, g)
        return out, None
w = fg.ones(5, dtype=fg.float64, requires_grad=True)
def step(x, index):
    loss = (Gather.apply(w * x, index) ** 2).sum()
    loss.backward()
    return loss
def arguments(call):
    return data(call, 5), fg.tensor([[0, 2, 2], [4, 1, 0], [3, 3, 3]][call % 3])
""",
    "zero_grad_of_unused_parameter": """
a = nn.Linear(3, 1).double()
b = nn.Linear(3, 1).double()
opt = fg.optim.SGD(list(a.parameters()) + list(b.parameters()), lr=0.1)
(b(data(9, 2, 3)).sum()).backward()
def step(x):
    opt.zero_grad()
    loss = a(x).sum()
    loss.backward()
    opt.step()
    return loss
def arguments(call):
    return data(call, 2, 3)
""",
    "retain_grad_on_returned": """
def step(x):
    y = x * 2
    y.retain_grad()
    return y
def arguments(call):
    return data(call, 3, requires_grad=True)
def between(call):
    pass
""",
    "detach_in_place": """
def step(x):
    y = x * 2
    y.detach_()
    return y
def arguments(call):
    return data(call, 3, requires_grad=True)
""",
    "data_clamp_cuts_graph": """
def step(x):
    y = x * 2
    y.data.clamp_(-1, 1)
    return y.sum()
def arguments(call):
    return data(call, 3, requires_grad=True)
""",
    "two_losses_backward_each": """
w = fg.ones(3, dtype=fg.float64, requires_grad=True)
def step(x):
    h = w * x
    return h.sum(), (h * h).sum()
def arguments(call):
    return data(call, 3)
""",
    "leaf_made_inside_returned": """
def step(x):
    p = fg.zeros(3, dtype=fg.float64, requires_grad=True)
    return p, (p + x).sum()
def arguments(call):
    return data(call, 3)
""",
    "autograd_grad_wrt_other_output": """
def step(x):
    h = x * 3
    y = (h * h).sum()
    g, = fg.autograd.grad(y, h)
    return g
def arguments(call):
    return data(call, 3, requires_grad=True)
""",
    # ---- shapes
    "rank_changes": """
def step(x):
    return x * 2
def arguments(call):
    return [data(0, 8, 6), data(1, 8, 7), data(2, 8), data(3, 2, 3, 4), data(4, 5)][call]
""",
}

PROGRAMS = {name: PRELUDE + source for name, source in PROGRAMS.items()}

REFUSED = {  # may refuse with a TracingError naming the line
    "data_clamp_cuts_graph",
    "is_contiguous_branch",
    "leaf_made_inside_returned",
    "stride_read",
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_compiled_program_matches_eager_or_refuses(name):
    outcome = run_both(PROGRAMS[name])
    if outcome == "refused":
        assert name in REFUSED, f"{name} refused, but it should compile"


def test_a_set_reset_every_call_is_redone_not_run_eagerly():
    """A set is a value: one filled and then replaced by an empty one (a
    gradient reducer's bookkeeping) compiles, and the program serves every
    later call."""
    import warnings

    import fusegrad as fg

    class Tracker:
        def __init__(self):
            self.arrived = set()

    tracker = Tracker()

    @fg.jit
    def step(x):
        tracker.arrived.add(x.shape[0])
        y = x * len(tracker.arrived)
        tracker.arrived = set()
        return y

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "runs eagerly"
        for k in range(4):
            assert step(fg.ones(3) * k).tolist() == [float(k)] * 3
    assert tracker.arrived == set()
    assert step.cache_info()[:2] == (3, 1)


def test_eval_and_train_inside_the_step_compile_once():
    """The training flag is guarded as it is when the call starts, not as a
    forward inside the call read it."""
    import fusegrad as fg
    import fusegrad.nn as nn

    net = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))

    @fg.jit
    def step(x):
        net.eval()
        y = net(x)
        net.train()
        return y

    for _ in range(4):
        step(fg.ones(2, 3))
    assert step.cache_info()[:2] == (3, 1) and net.training
