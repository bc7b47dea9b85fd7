"""Differential fuzzer of Python programs: random training-step-like programs run
eagerly and through ``fusegrad.jit``, and everything they leave behind compared.

    python tools/fuzz_programs.py --programs 200 --seed 0 --out program-failures/

tools/fuzz.py draws graphs of ops; this draws the Python around them: numbers
taken out of tensors and branched or looped on, globals, lists and dicts,
closures, plain objects and modules with attributes, train()/eval(),
optimizers and schedulers, in-place writes into (aliased) arguments, hooks,
exceptions raised on some calls. A program is source text in the form
tests/semantics.py runs: ``step`` (the function compiled), ``arguments(call)``
and ``between(call)``; ``run_both`` compares results, errors and every object
the program's globals reach, after every call. Each program runs in a forked
child (tools/fuzz.py's), so a crash or a hang is that program's failure; a
failure is shrunk (constructs, statements and state items dropped, arguments
made plain, fewer calls) while it fails the same way, and written out as a
standalone script. docs/fuzzing.md says more.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field, replace
from hashlib import sha1
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tools"), str(ROOT / "tests")]

import fuzz  # noqa: E402  (forked children, their timeouts and crash reports)
import semantics  # noqa: E402  (run_both: the eager and the compiled run, compared)

# ------------------------------------------------------------------ programs

PRELUDE = """\
import numpy as np

import fusegrad as fg
import fusegrad.nn as nn
import fusegrad.nn.functional as F
"""

PLANTED = "planted"  # the message of every exception a program raises on purpose
NUMBERS = (0.5, 2.0, -1.5, 0.25, 1.5, -0.75)
MAX_STATEMENTS = 12
FORWARD = "        <forward>"  # where a module's source gets its forward statements


@dataclass(frozen=True)
class Piece:
    """One unit the shrinker may drop: a module-level item ("state"), a statement
    of ``step`` ("step"), of ``between`` ("between") or of the forward of the
    feature's module ("forward"); lines after the first are indented relative to it."""

    place: str
    text: str
    constructs: tuple = ()


@dataclass(frozen=True)
class Feature:
    """One drawn construct: the state it needs and the statements using it."""

    pieces: tuple
    globals: tuple = ()  # names step and between rebind: declared global in both


@dataclass(frozen=True)
class Arguments:
    """``arguments(call)``: x and y of shape (rows, cols), float64, new values each call."""

    seed: int
    cols: int
    rows: tuple  # call k has rows[k % len(rows)] rows
    grad: bool  # x requires grad
    alias: str  # odd calls return "same" (x, x), "view" (x, x[:, :]), "global" (a global, y)
    extra: str = "none"  # a third argument z: see EXTRA_ARGUMENTS

    @property
    def constructs(self) -> list:
        found = {
            "none": [],
            "same": ["same-tensor-twice"],
            "view": ["tensor-and-its-view"],
            "global": ["global-as-argument"],
        }[self.alias]
        if self.extra != "none":
            found.append(f"{self.extra}-argument")
        if len(self.rows) > 1:
            found.append("shape-changes")
        if self.grad:
            found.append("requires-grad-argument")
        return found


@dataclass(frozen=True)
class Program:
    seed: int  # of fg.manual_seed before the state is made: equal parameters in both runs
    arguments: Arguments
    features: tuple
    calls: int = 5

    @property
    def pieces(self) -> list:
        return [piece for feature in self.features for piece in feature.pieces]

    @property
    def statements(self) -> int:
        return sum(piece.place == "step" for piece in self.pieces)

    @property
    def constructs(self) -> tuple:
        found = [c for piece in self.pieces for c in piece.constructs]
        return tuple(sorted(set(found + self.arguments.constructs)))

    @property
    def source(self) -> str:
        return render(self)


def indent(text: str, depth: int = 1) -> str:
    return "\n".join("    " * depth + line if line else line for line in text.splitlines())


# The third argument z, an object other than a tensor: (the state it needs,
# how arguments(call) picks it, the statements of step using it). Two objects
# alternate, or one changes, so a program made for one must read the other.
EXTRA_ARGUMENTS = {
    "numpy-array": (
        "buffer = np.zeros({cols})",
        "if call % 2:\n    buffer[:] = call % 3\nz = buffer if call % 2 else np.full({cols}, 0.5)",
        "h = h * fg.from_numpy(z)",
    ),
    "generator": (
        "gens = [fg.Generator().manual_seed(1), fg.Generator().manual_seed(2)]",
        "z = gens[call // 2 % 2]",
        "h = h + fg.rand(h.shape, generator=z, dtype=fg.float64)",
    ),
    "object": (
        "class Box:\n    scale = 1.0\n\n\nboxes = [Box(), Box()]\n"
        "for box in boxes:\n    box.t = fg.zeros({cols}, dtype=fg.float64)",
        "z = boxes[call // 2 % 2]\nz.scale = 1.0 + call % 3",
        "h = h * z.scale + z.t\nz.t = z.t * 0.5 + h.detach().mean(0)",
    ),
    "module": (
        "nets = [nn.Linear({cols}, {cols}).double(), nn.Linear({cols}, {cols}).double()]",
        "z = nets[call % 2]",
        "h = h + z(h)",
    ),
}


def _arguments_source(a: Arguments) -> str:
    grad = ", requires_grad=True" if a.grad else ""
    rows = f"{list(a.rows)}[call % {len(a.rows)}]" if len(a.rows) > 1 else str(a.rows[0])
    lines = [
        "def arguments(call):",
        "    fg.manual_seed(call)  # dropout draws the same masks eagerly and compiled",
        f"    rng = np.random.default_rng({a.seed} + call)",
        f"    rows = {rows}",
        f"    x = fg.tensor(rng.standard_normal((rows, {a.cols})), dtype=fg.float64{grad})",
        f"    y = fg.tensor(rng.standard_normal((rows, {a.cols})), dtype=fg.float64)",
    ]
    z = ""
    if a.extra != "none":
        _, pick, _ = EXTRA_ARGUMENTS[a.extra]
        lines.append(indent(pick.format(cols=a.cols)))
        z = ", z"
    second = {"same": "x, x", "view": "x, x[:, :]", "global": "shared, y"}.get(a.alias)
    if second:
        lines += ["    if call % 2:", f"        return {second}{z}"]
    lines.append(f"    return x, y{z}")
    if a.extra != "none":
        state, _, _ = EXTRA_ARGUMENTS[a.extra]
        lines = [state.format(cols=a.cols), "", ""] + lines
    if a.alias == "global":
        values = f"np.random.default_rng({a.seed}).standard_normal(({a.rows[0]}, {a.cols}))"
        lines = [f"shared = fg.tensor({values}, dtype=fg.float64{grad})", "", ""] + lines
    return "\n".join(lines)


def _state_text(piece: Piece, feature: Feature) -> str:
    """The item; a module's with its feature's forward statements in its forward."""
    forward = "\n".join(indent(p.text, 2) for p in feature.pieces if p.place == "forward")
    return piece.text.replace(FORWARD, forward)


def render(program: Program) -> str:
    pieces = program.pieces
    names = sorted({name for feature in program.features for name in feature.globals})
    declared = [f"    global {', '.join(names)}"] if names else []
    parts = [PRELUDE, f"fg.manual_seed({program.seed})"]
    parts += [
        _state_text(piece, feature)
        for feature in program.features
        for piece in feature.pieces
        if piece.place == "state"
    ]
    parts.append(_arguments_source(program.arguments))
    between = [indent(piece.text) for piece in pieces if piece.place == "between"]
    if between:
        parts.append("\n".join(["def between(call):", *declared, *between]))
    extra = program.arguments.extra
    step = [f"def step(x, y{'' if extra == 'none' else ', z'}):", *declared, "    h = x + y"]
    if extra != "none":
        step.append(indent(EXTRA_ARGUMENTS[extra][2]))
    step.append("    n = 0.0")
    step += [indent(piece.text) for piece in pieces if piece.place == "step"]
    parts.append("\n".join([*step, "    return h, n"]))
    return "\n\n\n".join(part.strip("\n") for part in parts) + "\n"


def eager_valid(program: Program) -> bool:
    """Whether eager runs every call, raising nothing but the planted errors, to
    finite results: the programs worth comparing."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            space = semantics.namespace(program.source)
            for call in range(program.calls):
                if "between" in space:
                    space["between"](call)
                try:
                    h, n = space["step"](*space["arguments"](call))
                except ValueError as error:
                    if str(error) != PLANTED:
                        return False
                    continue
                if not (np.isfinite(h.detach().numpy()).all() and math.isfinite(n)):
                    return False
    except Exception:
        return False
    return True


# ------------------------------------------------------------------ drawing programs
# Every statement of step keeps h a float64 tensor of shape (rows, cols) and n
# a Python float (step returns both); state tensors have shape (cols,), so they
# broadcast whatever a call's rows.


@dataclass
class Draw:
    rng: random.Random
    cols: int
    grad: bool  # x requires grad
    names: int = 0

    def fresh(self) -> int:
        """A number no other construct of the program names its state with."""
        self.names += 1
        return self.names

    def number(self) -> float:
        return self.rng.choice(NUMBERS)


def in_state(text: str, *constructs) -> Piece:
    return Piece("state", text, constructs)


def in_step(text: str, *constructs) -> Piece:
    return Piece("step", text, constructs)


def in_between(text: str, *constructs) -> Piece:
    return Piece("between", text, ("between", *constructs))


def in_forward(text: str, *constructs) -> Piece:
    return Piece("forward", text, constructs)


def tensor_op(d: Draw) -> Piece:
    a, b, c = d.number(), d.number(), d.cols
    order = d.rng.sample(range(c), c)
    category, text = d.rng.choice(
        [
            ("elementwise", f"h = fg.tanh(h) * {a} + {b}"),
            ("elementwise", f"h = h * y + {a}"),
            ("elementwise", f"h = fg.where(h > {a}, h, h * {b})"),
            ("elementwise", "h = fg.exp(-h.abs()) + fg.sigmoid(h).clamp(0.2, 0.8)"),
            ("reduction", "h = h - h.mean(dim=0, keepdim=True)"),
            ("reduction", "h = h / (1.0 + h.abs().sum(dim=1, keepdim=True))"),
            ("reduction", "h = h - h.logsumexp(dim=1, keepdim=True) + h.max()"),
            ("reduction", "h = F.softmax(h, dim=1) * h.std()"),
            ("matmul", "h = fg.tanh(h @ (h.t() @ y) * 0.1)"),
            ("matmul", "h = fg.tanh(h @ h.t() @ h * 0.1)"),
            ("indexing", f"h = fg.cat([h[:, 1:], h[:, :1]], dim=1) * {a}"),
            ("indexing", "h = h * fg.tanh(h[:1]) + h[-1]"),
            ("indexing", f"h = h.index_select(1, fg.tensor({order})) + h"),
            ("view", "h = h.t().reshape(h.shape) + h.flip(1)"),
            ("view", "h = h.unsqueeze(0).expand(2, -1, -1).sum(0) * 0.5"),
            ("view", f"h = h.reshape(-1)[:{c}].view(1, {c}) + h"),
            ("setitem", f"h = h.clone()\nh[:, 0] = {a}"),
        ]
    )
    return in_step(text, category)


def number_from_tensor(d: Draw) -> tuple:
    """(construct, expression): a Python number read out of h."""
    return d.rng.choice(
        [
            ("item", "h.sum().item()"),
            ("item", "h.max().item()"),
            ("float", "float(h.mean())"),
            ("int", "int(h.abs().sum() * 10) % 7"),
            ("tolist", "sum(h.sum(0).tolist())"),
            ("tolist", "h[0].tolist()[-1]"),
        ]
    )


def if_else(test: str, d: Draw, *constructs) -> Piece:
    yes, no = tensor_op(d), tensor_op(d)
    text = f"if {test}:\n{indent(yes.text)}\nelse:\n{indent(no.text)}"
    return in_step(text, "branch", *constructs, *yes.constructs, *no.constructs)


def tensor_ops(d: Draw) -> Feature:
    return Feature((tensor_op(d),))


def numbers(d: Draw) -> Feature:
    construct, number = number_from_tensor(d)
    return Feature((in_step(f"n = n + {number}", construct),))


def branch(d: Draw) -> Feature:
    construct, number = number_from_tensor(d)
    if d.rng.random() < 0.7:
        return Feature((if_else(f"{number} > {d.number()}", d, construct),))
    return Feature((if_else(f"n > {d.number()}", d),))


def loop(d: Draw) -> Feature:
    kind = d.rng.choice(["item", "number", "tolist", "global"])
    if kind == "tolist":
        return Feature((in_step("for v in h[0].tolist():\n    n = n + 0.1 * v", "for", "tolist"),))
    op = tensor_op(d)
    reps = f"reps{d.fresh()}"
    header, constructs = {
        "item": ("for i in range(int(h.abs().sum().item()) % 3 + 1):", ("for", "item")),
        "number": ("for i in range(int(abs(n)) % 3):", ("for",)),
        "global": (f"for i in range({reps}):", ("for", "global-read")),
    }[kind]
    looped = in_step(f"{header}\n{indent(op.text)}\n    n = n + i", *constructs, *op.constructs)
    if kind != "global":
        return Feature((looped,))
    changed = in_between(f"{reps} = call % 3 + 1", "global-write")
    return Feature((in_state(f"{reps} = 2"), changed, looped), globals=(reps,))


def plain_object(d: Draw) -> Feature:
    box = f"box{d.fresh()}"
    made = in_state(
        f"class {box.capitalize()}:\n    count = 0\n\n\n{box} = {box.capitalize()}()\n"
        f"{box}.last = 0.0\n{box}.t = fg.zeros({d.cols}, dtype=fg.float64)"
    )
    uses = [
        in_step(f"{box}.count += 1", "object-attribute"),
        in_step(f"{box}.last = h.sum().item()", "object-attribute", "item"),
        in_step(f"{box}.t = {box}.t * 0.5 + h.detach().mean(0)", "object-attribute"),
        in_step(f"h = h * (1.0 + 0.1 * {box}.count)", "object-attribute"),
        in_step(f"h = h + {box}.t", "object-attribute"),
        in_step(f"n = n + {box}.last", "object-attribute"),
    ]
    changes = [
        in_between(f"{box}.count = call", "object-attribute"),
        in_between(f"{box}.t = fg.full(({d.cols},), call, dtype=fg.float64)", "object-attribute"),
    ]
    pieces = [made, *d.rng.sample(uses, d.rng.randint(1, 3))]
    if d.rng.random() < 0.5:
        pieces.append(d.rng.choice(changes))
    return Feature(tuple(pieces))


MODULE_EFFECTS = (
    in_forward("self.calls += 1", "module-attribute"),
    in_forward("self.stat = out.mean().item()", "module-attribute", "item"),
    in_forward("self.memory = self.memory * 0.5 + out.detach().mean(0)", "module-attribute"),
    in_forward("if self.training:\n    out = out + 0.1", "train-eval", "branch"),
    in_forward("out = self.drop(out)", "dropout"),
)


def module(d: Draw) -> Feature:
    net = f"net{d.fresh()}"
    made = in_state(
        f"class {net.capitalize()}(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        f"        self.lin = nn.Linear({d.cols}, {d.cols}).double()\n"
        "        self.drop = nn.Dropout(0.5)\n"
        "        self.calls = 0\n"
        "        self.scale = 1.0\n"
        "        self.stat = 0.0\n"
        f"        self.memory = fg.zeros({d.cols}, dtype=fg.float64)\n"
        "\n"
        "    def forward(self, v):\n"
        "        out = fg.tanh(self.lin(v)) * self.scale\n"
        f"{FORWARD}\n"
        "        return out\n"
        "\n"
        "\n"
        f"{net} = {net.capitalize()}()"
    )
    effects = d.rng.sample(MODULE_EFFECTS, d.rng.randint(1, 3))
    pieces = [made, *effects, in_step(f"h = {net}(h)", "module-attribute")]
    if d.rng.random() < 0.3:
        toggle = f"if n > 0:\n    {net}.eval()\nelse:\n    {net}.train()"
        pieces.insert(-1, in_step(toggle, "train-eval", "branch"))
    if d.rng.random() < 0.3:
        pieces.append(in_step(f"n = n + {net}.calls + {net}.stat", "module-attribute"))
    if d.rng.random() < 0.5:
        pieces.append(
            d.rng.choice(
                [
                    in_between(f"{net}.scale = 1.0 + 0.5 * call", "module-attribute"),
                    in_between(f"{net}.train(call % 2 == 0)", "train-eval"),
                ]
            )
        )
    return Feature(tuple(pieces))


def callable_object(d: Draw) -> Feature:
    """A hand-written layer (makemore's): state read and written in
    ``__call__`` and a property, a global read there, a list it appends to."""
    k, c = d.fresh(), d.cols
    layer, scale = f"layer{k}", f"scale{k}"
    made = in_state(
        f"{scale} = 1.0\n\n\nclass Layer{k}:\n"
        f"    def __init__(self):\n        self.steps = 0\n        self.outs = []\n"
        f"        self.mean = fg.zeros({c}, dtype=fg.float64)\n\n"
        f"    @property\n    def gain(self):\n        return {scale} * (1.0 + 0.1 * self.steps)\n\n"
        f"    def __call__(self, v):\n        self.steps += 1\n"
        f"        self.mean = self.mean * 0.9 + v.detach().mean(0) * 0.1\n"
        f"        self.outs.append(v.sum().item())\n"
        f"        return v * self.gain + self.mean\n\n\n{layer} = Layer{k}()"
    )
    pieces = [made, in_step(f"h = {layer}(h)", "callable-object", "global-read", "item")]
    changes = [
        in_between(f"{scale} = 1.0 + 0.5 * (call % 2)", "global-write"),
        in_between(f"{layer}.steps = call", "object-attribute"),
        in_step(f"n = n + len({layer}.outs)", "callable-object"),
        in_step(f"if {layer}.steps % 2:\n    h = h * 0.5", "callable-object", "branch"),
    ]
    pieces += d.rng.sample(changes, d.rng.randint(0, 2))
    return Feature(tuple(pieces), globals=(scale,))


def batch_norm(d: Draw) -> Feature:
    bn = f"bn{d.fresh()}"
    pieces = [
        in_state(f"{bn} = nn.BatchNorm1d({d.cols}).double()"),
        in_step(f"h = {bn}(h)", "module-state"),
    ]
    toggle = d.rng.choice(["between", "step", None])
    if toggle == "between":
        pieces.append(in_between(f"{bn}.train(call < 3)", "train-eval"))
    if toggle == "step":
        pieces.insert(1, in_step(f"{bn}.train(n < 1.0)", "train-eval"))
    return Feature(tuple(pieces))


def global_state(d: Draw) -> Feature:
    g, c = f"g{d.fresh()}", d.cols
    kind = d.rng.choice(["counter", "tensor", "float", "flag"])
    if kind == "flag":
        pieces = [
            in_state(f"{g} = True"),
            in_between(f"{g} = call % 2 == 0", "global-write"),
            if_else(g, d, "global-read"),
        ]
    elif kind == "float":
        pieces = [
            in_state(f"{g} = 1.0"),
            in_between(f"{g} = 1.0 + 0.5 * call", "global-write"),
            in_step(f"h = h * {g}", "global-read"),
        ]
    else:
        start, write, read = {
            "counter": ("0", f"{g} += 1", f"h = h * (1.0 + 0.1 * {g})"),
            "tensor": (
                f"fg.zeros({c}, dtype=fg.float64)",
                f"{g} = {g} * 0.5 + h.detach().mean(0)",
                f"h = h + {g}",
            ),
        }[kind]
        uses = [in_step(write, "global-write"), in_step(read, "global-read")]
        pieces = [in_state(f"{g} = {start}"), *d.rng.sample(uses, d.rng.randint(1, 2))]
    return Feature(tuple(pieces), globals=(g,))


def container(d: Draw) -> Feature:
    k = d.fresh()
    if d.rng.random() < 0.5:
        log = f"log{k}"
        made = in_state(f"{log} = []")
        uses = [
            in_step(f"{log}.append(h.sum().item())", "list-append", "item"),
            in_step(f"{log}.append(h.detach().mean(0))", "list-append"),
            in_step(f"{log}.append(n)", "list-append"),
            in_step(f"h = h + 0.1 * len({log})", "list-read"),
        ]
    else:
        cache = f"cache{k}"
        made = in_state(f"{cache} = {{}}")
        uses = [
            in_step(f'{cache}["last"] = h.detach().mean(0)', "dict-set"),
            in_step(f"{cache}[len({cache}) % 3] = float(h.max())", "dict-set", "float"),
            in_step(f'if "last" in {cache}:\n    h = h + {cache}["last"]', "dict-read", "branch"),
            in_step(f"n = n + len({cache})", "dict-read"),
        ]
    return Feature((made, *d.rng.sample(uses, d.rng.randint(1, 2))))


def closure(d: Draw) -> Feature:
    k, c = d.fresh(), d.cols
    kind = d.rng.choice(["cell", "nonlocal", "tensor"])
    if kind == "cell":
        made = (
            f"def make{k}():\n    cell = [0.0]\n\n    def bump(v):\n        cell[0] += v\n"
            f"        return cell[0]\n\n    return bump, cell\n\n\nbump{k}, cell{k} = make{k}()"
        )
        use = in_step(f"n = n + bump{k}(h.mean().item())", "closure", "item")
    elif kind == "nonlocal":
        made = (
            f"def make{k}():\n    count = 0\n\n    def tick():\n        nonlocal count\n"
            f"        count += 1\n        return count\n\n    return tick\n\n\ntick{k} = make{k}()"
        )
        use = in_step(f"h = h * (1.0 + 0.1 * tick{k}())", "closure")
    else:
        made = (
            f'def make{k}():\n    store = {{"t": fg.zeros({c}, dtype=fg.float64)}}\n\n'
            '    def remember(t):\n        store["t"] = store["t"] * 0.5 + t.detach().mean(0)\n'
            f'        return store["t"]\n\n    return remember\n\n\nremember{k} = make{k}()'
        )
        use = in_step(f"h = h + remember{k}(h)", "closure")
    return Feature((in_state(made), use))


def inplace_argument(d: Draw) -> Feature:
    a, columns = d.number(), d.rng.randint(1, d.cols - 1)
    scale_x = "with fg.no_grad():\n    x.mul_(0.5)" if d.grad else "x.mul_(0.5)"  # x may be a leaf
    construct, write, read = d.rng.choice(
        [
            ("inplace-argument", f"y.mul_({a})", "h = h + y"),
            ("inplace-argument", "y.add_(h.detach() * 0.1)", "h = h + y"),
            ("inplace-argument", "y.clamp_(-0.5, 0.5)", "h = h * y"),
            ("inplace-argument", scale_x, "h = h + x"),
            ("inplace-view", f"y[:, :{columns}] += 1.0", "h = h + y"),
            ("inplace-view", "y[0] = h.detach()[0]", "h = h - y"),
            ("inplace-view", f"v = y[1:]\nv.mul_({a})", "h = h + y"),
        ]
    )
    return Feature((in_step(write, construct), in_step(read)))


def backward_pieces() -> tuple:
    backward = "if h.requires_grad:\n    (h * h).sum().backward(retain_graph=True)"
    read = "if x.grad is not None:\n    n = n + float(x.grad.sum())"
    return (in_step(backward, "backward", "branch"), in_step(read, "float", "branch"))


def backward(d: Draw) -> Feature:
    return Feature(backward_pieces())


def hook(d: Draw) -> Feature:
    kind = d.rng.choice(["leaf", "intermediate", "global"][0 if d.grad else 1 :])
    if kind == "leaf":
        return Feature((in_step("x.register_hook(lambda g: g * 2.0)", "hook"), *backward_pieces()))
    if kind == "intermediate":
        registered = "if h.requires_grad:\n    h.register_hook(lambda g: g.clamp(-0.5, 0.5))"
        return Feature((in_step(registered, "hook", "branch"), *backward_pieces()))
    k = d.fresh()
    w, seen = f"w{k}", f"seen{k}"
    made = (
        f"{w} = fg.ones({d.cols}, dtype=fg.float64, requires_grad=True)\n{seen} = []\n"
        f"{w}.register_hook(lambda g: {seen}.append(g.sum().item()))"
    )
    return Feature(
        (
            in_state(made, "hook", "item"),
            in_step(f"({w} * h.detach()).sum().backward()", "backward"),
            in_step(f"n = n + float({w}.grad.sum())", "float"),
        )
    )


def optimizer(d: Draw) -> Feature:
    k = d.fresh()
    model, opt, loss, sched = f"model{k}", f"opt{k}", f"loss{k}", f"sched{k}"
    make = d.rng.choice(
        [
            f"fg.optim.SGD({model}.parameters(), lr=0.1, momentum=0.9)",
            f"fg.optim.Adam({model}.parameters(), lr=0.05)",
        ]
    )
    source = "h.detach()" if d.rng.random() < 0.7 else "h"  # or also into x's .grad
    pieces = [
        in_state(f"{model} = nn.Linear({d.cols}, 1).double()\n{opt} = {make}", "optimizer"),
        in_step(f"{opt}.zero_grad()", "optimizer"),
        in_step(f"{loss} = {model}({source}).pow(2).mean()"),
        in_step(f"{loss}.backward()", "backward"),
        in_step(f"{opt}.step()", "optimizer"),
        in_step(f"n = n + {loss}.item()", "item"),
    ]
    if d.rng.random() < 0.5:
        made = d.rng.choice(
            [f"StepLR({opt}, step_size=2, gamma=0.5)", f"ExponentialLR({opt}, gamma=0.8)"]
        )
        pieces.insert(1, in_state(f"{sched} = fg.optim.lr_scheduler.{made}", "scheduler"))
        where = d.rng.choice([in_step, in_between])
        pieces.append(where(f"{sched}.step()", "scheduler"))
    elif d.rng.random() < 0.4:
        pieces.append(in_between(f'{opt}.param_groups[0]["lr"] = 0.1 / (call + 1)', "optimizer"))
    return Feature(tuple(pieces))


def raising(d: Draw) -> Feature:
    planted = f'raise ValueError("{PLANTED}")'
    kind = d.rng.choice(["number", "shape", "item", "counter"])
    if kind == "counter":
        calls = f"calls{d.fresh()}"
        counted = f"{calls} += 1\nif {calls} % 3 == 0:\n    {planted}"
        pieces = (in_state(f"{calls} = 0"), in_step(counted, "raise", "global-write"))
        return Feature(pieces, globals=(calls,))
    test, constructs = {
        "number": (f"n > {abs(d.number()) + 0.5}", ()),
        "shape": ("x.shape[0] > 3", ()),
        "item": (f"h.sum().item() < {d.number()}", ("item",)),
    }[kind]
    return Feature((in_step(f"if {test}:\n    {planted}", "raise", "branch", *constructs),))


FEATURES = (  # (weight, drawer)
    (4.0, tensor_ops),
    (2.0, numbers),
    (2.0, branch),
    (1.5, loop),
    (1.0, plain_object),
    (1.0, callable_object),
    (1.0, module),
    (0.5, batch_norm),
    (1.5, global_state),
    (1.0, container),
    (1.0, closure),
    (1.5, inplace_argument),
    (1.0, hook),
    (1.0, backward),
    (1.0, optimizer),
    (1.0, raising),
)


def draw_arguments(rng: random.Random) -> Arguments:
    rows = (rng.randint(2, 5),)  # 2 at least: BatchNorm1d trains on a batch
    if rng.random() < 0.4:
        rows = tuple(rng.sample(range(2, 6), rng.randint(2, 3)))
    grad = rng.random() < 0.4
    alias = rng.choice(["none", "none", "same", "view", "global"])
    if alias == "global":
        rows = rows[:1]  # the global tensor has one shape
    if grad and alias in ("same", "view"):
        alias = "none"  # y would be a leaf that requires grad: writing into it is an error
    extra = rng.choice(["none"] * 4 + sorted(EXTRA_ARGUMENTS))
    return Arguments(rng.randrange(2**31), rng.randint(2, 4), rows, grad, alias, extra)


def draw_program(seed: int, index: int, calls: int = 5) -> tuple:
    """(program ``index`` of ``seed``, programs redrawn because eager failed): the
    same for the same arguments, whatever was drawn before it."""
    rng = random.Random(f"fusegrad-program-fuzz/{seed}/{index}")
    weights, drawers = zip(*FEATURES)
    redraws = 0
    while True:
        arguments = draw_arguments(rng)
        d = Draw(rng, arguments.cols, arguments.grad)
        wanted, features, statements = rng.randint(3, MAX_STATEMENTS), [], 0
        while statements < wanted:
            feature = rng.choices(drawers, weights=weights)[0](d)
            size = sum(piece.place == "step" for piece in feature.pieces)
            if statements + size <= MAX_STATEMENTS:
                features.append(feature)
                statements += size
        program = Program(rng.randrange(2**31), arguments, tuple(features), calls)
        if eager_valid(program):
            return program, redraws
        redraws += 1


# ------------------------------------------------------------------ running in a child

VERDICTS = ("same", "refused", "diverged", "error", "crashed")  # worst last


def _child_main(program: Program, modes: tuple, pipe) -> None:
    """Runs ``run_both`` on the program, reporting as tools/fuzz.py's children do."""
    warnings.simplefilter("ignore")
    pipe.write(json.dumps({"start": "run"}) + "\n")
    pipe.flush()
    try:
        status = semantics.run_both(program.source, calls=program.calls)
        message = {"mode": "run", "status": status, "problems": []}
    except semantics.Divergence as error:
        problem = ["diverged", str(error)[:2000]]
        message = {"mode": "run", "status": "diverged", "problems": [problem]}
    except Exception as error:
        lines = traceback.format_exception(error)
        problem = [f"exception:{type(error).__name__}", "".join(lines[-6:]).strip()]
        message = {"mode": "run", "status": "exception", "problems": [problem]}
    fuzz.check_heap()  # a corrupted heap aborts here, not in the next program
    pipe.write(json.dumps(message) + "\n" + json.dumps({"done": True}) + "\n")
    pipe.flush()


def run_program(program: Program, timeout: float) -> fuzz.Outcome:
    return fuzz.run_program(program, ("run",), timeout, main=_child_main)


def verdict(failure: fuzz.Failure) -> str:
    if failure.kind == "run:diverged":
        return "diverged"
    if ":exception:" in failure.kind:
        return "error"
    return "crashed"  # a signal, a timeout, a child that died


def headline(failure: fuzz.Failure) -> str:
    """A divergence's first line (where, and the values), an exception's last."""
    lines = failure.detail.strip().splitlines() or [""]
    return lines[0] if failure.kind == "run:diverged" else lines[-1]


def signature(failure: fuzz.Failure) -> str:
    """What must persist while shrinking. For a divergence, where it is: the
    result's kind or value (result[0], result[1][0] for h, result[1][1] for n),
    or the global whose state differs; not the values, which change as the
    program shrinks."""
    if failure.kind != "run:diverged":
        return failure.signature
    found = re.match(
        r"call \d+: (result(?:\[\d+\]){0,2}|state after the call(?:\[[^\]]*\])?)", failure.detail
    )
    return "diverged at " + (found.group(1) if found else "a TracingError to report")


# ------------------------------------------------------------------ shrinking


def _simpler_arguments(a: Arguments):
    if a.alias != "none":
        yield replace(a, alias="none")
    if a.extra != "none":
        yield replace(a, extra="none")
    if len(a.rows) > 1:
        yield replace(a, rows=a.rows[:1])
    if a.grad:
        yield replace(a, grad=False)


def candidates(program: Program):
    """Smaller programs, the biggest cuts first."""
    for calls in range(1, program.calls):
        yield replace(program, calls=calls)
    features = program.features
    for k in reversed(range(len(features))):
        yield replace(program, features=features[:k] + features[k + 1 :])
    for k, feature in enumerate(features):
        for j in range(len(feature.pieces) if len(feature.pieces) > 1 else 0):
            fewer = replace(feature, pieces=feature.pieces[:j] + feature.pieces[j + 1 :])
            yield replace(program, features=features[:k] + (fewer,) + features[k + 1 :])
    for arguments in _simpler_arguments(program.arguments):
        yield replace(program, arguments=arguments)


def shrink(program: Program, still_fails, seconds: float = 120.0) -> tuple:
    """(the smallest program found that ``still_fails``, candidates run): greedy,
    taking the first smaller candidate that runs eagerly and still fails, until
    none does. A candidate eager refuses could only fail another way."""
    runs, deadline = 0, time.monotonic() + seconds
    seen = {program}
    improved = True
    while improved and time.monotonic() < deadline:
        improved = False
        for candidate in candidates(program):
            if candidate in seen:
                continue
            seen.add(candidate)
            if not eager_valid(candidate):
                continue
            runs += 1
            if still_fails(candidate):
                program, improved = candidate, True
                break
            if time.monotonic() > deadline:
                break
    return program, runs


def shrink_failure(
    program: Program, failure: fuzz.Failure, timeout: float, seconds: float
) -> tuple:
    """(the shrunk program, candidates run), each candidate run in a forked child."""
    wanted = signature(failure)
    # whether heap corruption is caught depends on the heap's layout: any of a few runs
    attempts = fuzz.CRASH_ATTEMPTS if wanted == "crash" else 1

    def fails(candidate):
        for _ in range(attempts):
            if any(signature(f) == wanted for f in run_program(candidate, timeout).failures):
                return True
        return False

    return shrink(program, fails, seconds)


# ------------------------------------------------------------------ reproducers


def reproducer(program: Program, failure: fuzz.Failure, origin: str) -> str:
    source = program.source
    assert "'''" not in source and "\\" not in source  # it goes in a raw triple-quoted string
    detail = indent(failure.detail.replace('"""', "'''").replace("\\", "\\\\"))
    return f'''"""fusegrad program fuzzer reproducer: {failure.kind} ({origin}); as first found:

{detail}

Constructs: {", ".join(program.constructs)}.
Run:  python this_file.py  (a traceback, Divergence or a crash while the failure is
there; it prints "same" or "refused" once it is fixed). SOURCE is the program,
run eagerly and compiled by tests/semantics.py's run_both.
"""

import sys
from pathlib import Path

import fusegrad

sys.path.insert(0, str(Path(fusegrad.__file__).resolve().parent.parent / "tests"))
from semantics import run_both  # noqa: E402

SOURCE = r\'\'\'
{source}\'\'\'

if __name__ == "__main__":
    print(run_both(SOURCE, calls={program.calls}))
'''


# ------------------------------------------------------------------ the fuzzing run


@dataclass
class Report:
    verdicts: Counter = field(default_factory=Counter)
    redraws: int = 0
    seconds: float = 0.0
    failures: list = field(default_factory=list)  # (index, program, failure, shrunk, path)

    def tally(self) -> str:
        programs = sum(self.verdicts.values())
        counts = ", ".join(f"{self.verdicts[v]} {v}" for v in VERDICTS)
        constructs = Counter(c for _, _, _, shrunk, _ in self.failures for c in shrunk.constructs)
        common = ", ".join(f"{c} {n}" for c, n in constructs.most_common()) or "none"
        return (
            f"programs: {programs} run in {self.seconds:.0f} s ({self.redraws} redrawn: eager "
            f"failed): {counts}\nconstructs in the failing programs, as shrunk: {common}"
        )


def fuzz_programs(
    programs: int,
    seed: int = 0,
    calls: int = 5,
    out: Path | None = None,
    jobs: int = 1,
    timeout: float = 60.0,
    shrink_seconds: float = 120.0,
    log=print,
) -> Report:
    """Runs programs 0 .. ``programs`` - 1 of ``seed``; shrinks every failure (for
    up to ``shrink_seconds``, 0: not at all) and writes a reproducer of each to ``out``."""
    report = Report()
    start = time.monotonic()
    found = []

    def jobs_to_run():
        for index in range(programs):
            program, redraws = draw_program(seed, index, calls)
            report.redraws += redraws
            yield index, program, ("run",)

    def on_outcome(index, program, outcome):
        verdicts = [verdict(f) for f in outcome.failures] or [outcome.statuses["run"]]
        report.verdicts[max(verdicts, key=VERDICTS.index)] += 1
        for failure in outcome.failures:
            found.append((index, program, failure))
            log(f"program {index}: {failure.kind}: {headline(failure)[:160]}")
            log(f"    constructs: {', '.join(program.constructs)}")

    fuzz.run_children(jobs_to_run(), jobs, timeout, on_outcome, main=_child_main)
    report.seconds = time.monotonic() - start
    for index, program, failure in found:
        shrunk = program
        if shrink_seconds > 0:
            shrunk, runs = shrink_failure(program, failure, timeout, shrink_seconds)
            log(
                f"program {index}: {verdict(failure)}: shrunk from {program.statements} "
                f"statements to {shrunk.statements} in {runs} runs: {', '.join(shrunk.constructs)}"
            )
        path = None
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            path = out / f"{verdict(failure)}-{sha1(shrunk.source.encode()).hexdigest()[:10]}.py"
            origin = f"program {index} of seed {seed}" + (", shrunk" if shrunk != program else "")
            path.write_text(reproducer(shrunk, failure, origin))
        report.failures.append((index, program, failure, shrunk, path))
    return report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--calls", type=int, default=5, help="calls of each program")
    parser.add_argument("--out", type=Path, default=Path("program-failures"))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per program")
    parser.add_argument("--shrink-seconds", type=float, default=120.0, help="per failure")
    parser.add_argument("--show", type=int, help="print program INDEX's source and exit")
    args = parser.parse_args(argv)
    if args.show is not None:
        print(draw_program(args.seed, args.show, args.calls)[0].source, end="")
        return 0
    with tempfile.TemporaryDirectory(prefix="fusegrad-program-fuzz-cache-") as cache:
        # kernels compiled by one program's child are found by the next ones
        os.environ.setdefault("FUSEGRAD_CACHE_DIR", cache)
        report = fuzz_programs(
            args.programs,
            args.seed,
            args.calls,
            args.out,
            args.jobs,
            args.timeout,
            args.shrink_seconds,
        )
    for index, program, failure, shrunk, path in report.failures:
        print(
            f"FAIL {verdict(failure)} program {index} ({program.statements} statements, shrunk "
            f"to {shrunk.statements}): {path}: {headline(failure)[:200]}\n"
            f"    constructs: {', '.join(program.constructs)}\n"
            f"    as shrunk:  {', '.join(shrunk.constructs)}"
        )
    print(report.tally())
    return 1 if report.failures else 0


if __name__ == "__main__":
    fuzz.run_as_script(main)
