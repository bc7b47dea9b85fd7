"""Differential fuzzer: random programs run eagerly and through ``fusegrad.jit``, compared.

    python tools/fuzz.py --programs 1000 --seed 0 --jobs 1 --out fuzz-failures/

A program is a random DAG of public ops over one to three input tensors, kept
as a list of source lines: it is drawn op by op, each op tried eagerly on the
real inputs (an op eager refuses is drawn again), and it runs from its
rendered Python source, the same text a reproducer holds. Each program's
checks (check_values, check_grads, ...: the modes) run in a forked child, so a
segfault, an abort from heap corruption or a hang is a failure of that
program, not of the fuzzer. A failure is shrunk (ops dropped or bypassed,
shapes made smaller, constants simpler, fewer calls) while it keeps its kind,
then written out as a standalone script. docs/fuzzing.md says how to read one
and why the tolerances are what they are.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import gc
import json
import math
import os
import random
import re
import select
import signal
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

import fusegrad as fg
import fusegrad.nn.functional as F

MODES = ("values", "grads", "second", "inside", "executor", "dynamic")
BACKENDS = ("default", "native", "threads", "windows", "products")
MAX_ELEMENTS = 20_000  # per value: keeps a program's run in milliseconds

# ------------------------------------------------------------------ harness begin
# Everything from here to "harness end" is copied verbatim into every
# reproducer, so it may use only contextlib, numpy (np), fusegrad (fg) and
# fusegrad.nn.functional (F).

# (rtol, atol) by the program's least precise float dtype. The kernels' exp,
# log, tanh, erf, sin, ... are approximations within a few ulps, and fused
# sums add in another order than numpy does; a dozen ops compound that, so
# float32 gets rtol 1e-4 (about 150 times tanh's and erf's 5.5 ulp) and
# float64 1e-9. atol is relative to the largest magnitude in the same output.
TOLERANCES = {"float32": (1e-4, 1e-5), "float64": (1e-9, 1e-9), "exact": (0.0, 0.0)}
# Under autocast, a float32 value an ulp apart in a kernel can round to the
# neighbouring bfloat16 (2**-8 to 2**-7 of the value) where eager's did not:
# one such step is allowed anywhere, and half the smallest step of the
# largest magnitude in the output (a sum that cancels); the noise runs leave
# bfloat16 values as they are rounded, so their noise is the steps their
# operands' noise makes them take.
TOLERANCES["bfloat16"] = (2.0**-7, 2.0**-9)
# Beyond that, the noise of each element is measured, not guessed: eager runs
# again with every op's results moved by a few ulps (and a float32 program in
# float64 too), and an element may differ from eager by this many times as
# much as eager's own value moved. That covers ill-conditioned spots: sums
# that cancel, log near 0, 1 - tanh(x)**2 where tanh saturates, large
# arguments of sin. Where eager's value changes kind (NaN, inf, a bool, an
# index: a comparison near a tie), the element is not judged.
NOISE_FACTOR = 10.0


class NotApplicable(Exception):
    """The eager program gives this check nothing to compare: eager raised, or
    no output needs a gradient."""


def eager(function, *args):
    try:
        return function(*args)
    except Exception as error:
        raise NotApplicable(f"eager: {type(error).__name__}: {error}") from error


def as_input(array, requires_grad):
    """A tensor sharing ``array``'s memory and strides, so its layout reaches compiled code."""
    tensor = fg.from_numpy(array)
    return tensor.requires_grad_() if requires_grad else tensor


def as_list(outputs):
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def snapshot(values):
    """Copies of the tensors' values (None stays None), to compare after later calls."""
    return [None if v is None else values_of(v) for v in values]


def values_of(tensor):
    """A copy of ``tensor``'s values (fusegrad's or torch's); a bfloat16 or
    float16 tensor's in float32, with its dtype's name in the array dtype's
    metadata (``dtype_name``)."""
    tensor = tensor.detach()
    name = str(tensor.dtype).split(".")[-1]
    if name in ("bfloat16", "float16"):
        named = np.dtype(np.float32, metadata={"dtype": name})
        return np.array(tensor.float().numpy()).astype(named)
    return np.array(tensor.numpy())


def dtype_name(a):
    return (a.dtype.metadata or {}).get("dtype", a.dtype.name)


def random_arrays(shapes, seed):
    """Cotangents and weights: float32-representable, so float32 and float64 runs agree."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32).astype(np.float64) for s in shapes]


def as_tensors(arrays, like):
    return [fg.from_numpy(a).to(t.dtype) for a, t in zip(arrays, like)]


def jitter(value, rng, ulp=None, direction=None):
    """``value`` moved by 1 to 4 ``ulp`` per float element, up or down at
    random or all one ``direction`` (1 or -1). By default each element's own
    ulp, and zeros and multiples of 0.5 (exact in any order of operations)
    stay; NaN and inf always do."""
    a = np.asarray(value)
    if a.dtype.kind != "f" or a.size == 0:
        return value
    exact = ~np.isfinite(a)
    if ulp is None:
        ulp = np.spacing(a)
        exact |= np.round(a * 2) == a * 2
    signs = direction if direction is not None else rng.choice([-1, 1], a.shape)
    steps = rng.integers(1, 5, a.shape) * signs
    return np.where(exact, a, a + steps * ulp).astype(a.dtype)


@contextlib.contextmanager
def rounding_noise(seed=0, keep_bfloat16=False):
    """While active, every primitive's float results move by a few ulps, and a
    sum's by a few ulps of the sum of its terms' magnitudes times the square root
    of their count (another order of addition); the same on every run. Eager then
    shows how far rounding anywhere moves each value. ``keep_bfloat16``: results
    whose every value is a bfloat16 stay (autocast's rounded values). Seed 0
    moves every result up, seed 1 down, the others at random: where a value
    that cancelled to an exact 0 decides a branch (a ReLU of a row's
    deviation from its mean, all its values equal), only noise of both signs
    shows that either branch may be taken (three runs at random missed it
    one time in eight). Internal (the primitives' registry): adapt when it
    changes."""
    from fusegrad.ir.primitives import PRIMITIVES

    rng = np.random.default_rng(seed)
    direction = {0: 1, 1: -1}.get(seed)
    exact = {p: p.impl for p in PRIMITIVES.values()}

    def noisy(name, impl):
        @np.errstate(all="ignore")  # eager's own warnings are fusegrad's to silence
        def run(*args, **params):
            result = impl(*args, **params)
            if keep_bfloat16 and is_bfloat16(result):
                return result
            if name != "reduce_sum" or np.asarray(result).dtype.kind != "f":
                return jitter(result, rng, direction=direction)
            terms = np.asarray(args[0])
            count = terms.size // max(np.asarray(result).size, 1)
            magnitude = np.asarray(impl(np.abs(terms), **params))
            return jitter(result, rng, np.spacing(magnitude) * np.sqrt(count), direction)

        return run

    for p, impl in exact.items():
        p.impl = noisy(p.name, impl)
    try:
        yield
    finally:
        for p, impl in exact.items():
            p.impl = impl


def is_bfloat16(value):
    """Whether ``value`` is float32 holding bfloat16 values alone (its low 16 bits zero)."""
    a = np.asarray(value)
    return a.dtype == np.float32 and not np.any(a.view(np.uint32) & 0xFFFF)


NOISY_RUNS = 3  # one run's noise can cancel out by chance


def input_sets(make_inputs, precision, requires_grad=False, dtype=None):
    """Equal inputs for eager, for its noisy runs, for its float64 run (a float32
    program's) and for the compiled calls."""
    sets = {
        "eager": make_inputs(requires_grad, dtype),
        "jit": make_inputs(requires_grad, dtype),
    }
    sets.update((f"noisy {k}", make_inputs(requires_grad, dtype)) for k in range(NOISY_RUNS))
    if precision == "float32":
        sets["float64"] = make_inputs(requires_grad, np.float64)
    return sets


def unless_raising(function, *args):
    """``function(*args)``, or None if it raises: a noisy run can break a tie an
    index depends on (an argmax indexing a shorter axis)."""
    try:
        return function(*args)
    except Exception:
        return None


def noise_runs(run, sets, precision):
    """``run`` (eager, of a list of inputs) with rounding noise, and in float64
    (a float32 program); the ones that ran."""
    others = []
    for k in range(NOISY_RUNS):
        with rounding_noise(seed=k, keep_bfloat16=precision == "bfloat16"):
            others.append(unless_raising(run, sets[f"noisy {k}"]))
    if "float64" in sets:
        others.append(unless_raising(run, sets["float64"]))
    return [o for o in others if o is not None]


@np.errstate(all="ignore")
def noise_of(want, others):
    """Per value, per element: how far eager's value moved in the other runs (inf
    where it changed kind: NaN, +-inf or finite; a bool or an index)."""
    found = []
    for k, w in enumerate(want):
        if w is None:
            found.append(None)
            continue
        total = np.zeros(w.shape)
        for other in others:
            o = other[k] if k < len(other) else None
            if o is None or o.shape != w.shape:
                continue
            if w.dtype.kind != "f":
                moved = np.where(w == o, 0.0, np.inf)
            else:
                w64, o64 = w.astype(np.float64), o.astype(np.float64)
                same_kind = (np.isnan(w64) == np.isnan(o64)) & (
                    np.where(np.isinf(w64), w64, 0) == np.where(np.isinf(o64), o64, 0)
                )
                moved = np.where(np.isfinite(w64), np.abs(w64 - o64), 0.0)
                moved = np.where(same_kind, np.nan_to_num(moved, nan=np.inf), np.inf)
            total = np.maximum(total, moved)
        found.append(total)
    return found


def summary(a):
    if a is None:
        return "None"
    return f"{a.dtype}{list(a.shape)} with {np.count_nonzero(a)} nonzero elements"


@np.errstate(all="ignore")
def mismatch(got, want, noise, precision):
    """(category, message) saying how ``got`` differs from ``want``, or None."""
    if got is None or want is None:
        # an input the outputs do not depend on: None eagerly, zeros from a compiled node
        other = want if got is None else got
        if other is None or not np.any(other):
            return None
        return "none", f"got {summary(got)}, expected {summary(want)}"
    if got.shape != want.shape:
        return "shape", f"shape {got.shape}, expected {want.shape}"
    if dtype_name(got) != dtype_name(want):
        return "dtype", f"dtype {dtype_name(got)}, expected {dtype_name(want)}"
    rounds = dtype_name(want) == "bfloat16" and precision != "exact"
    if rounds and not is_bfloat16(got[np.isfinite(got)]):
        return "rounding", "a bfloat16 value holds float32 values it cannot represent"
    if noise is None:
        noise = np.zeros(want.shape)
    judged = np.isfinite(noise)
    if want.dtype.kind != "f":
        bad = (got != want) & judged
        category = "value"
    else:
        g, w = got.astype(np.float64), want.astype(np.float64)
        rtol, atol = TOLERANCES[precision]
        finite = np.isfinite(w)
        allowed = rtol * np.abs(w) + atol * np.abs(w[finite]).max(initial=0.0)
        noise = np.where(judged, noise, 0.0)
        # elements of one value come from one formula: the mean noise is every
        # element's floor, as a run can round one element exactly by luck
        allowed = allowed + NOISE_FACTOR * np.maximum(
            noise, noise[judged].mean() if judged.any() else 0
        )
        same = (g == w) | (np.isnan(g) & np.isnan(w))
        if precision == "exact":
            same &= np.signbit(g) == np.signbit(w)
        close = np.where(finite & (precision != "exact"), np.abs(g - w) <= allowed, same)
        bad = ~close & judged
        category = "nonfinite" if (bad & (~finite | ~np.isfinite(g))).any() else "value"
    if not bad.any():
        return None
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return category, (
        f"{int(bad.sum())} of {bad.size} elements differ, first at {where}: "
        f"got {got[where]!r}, expected {want[where]!r}"
    )


def compare(label, got, want, noise, precision):
    """[(category, message)] for every value of ``got`` that is not ``want``'s."""
    if len(got) != len(want):
        return [("structure", f"{label}: {len(got)} values, expected {len(want)}")]
    noise = noise if noise is not None else [None] * len(want)
    problems = []
    for k, (g, w, n) in enumerate(zip(got, want, noise)):
        found = mismatch(g, w, n, precision)
        if found:
            problems.append((found[0], f"{label}, value {k}: {found[1]}"))
    return problems


def unchanged(label, tensors, values, category):
    """Tensors must still hold ``values`` bit for bit (outputs after later calls, inputs)."""
    return [(category, m) for _, m in compare(label, snapshot(tensors), values, None, "exact")]


def check_values(program, make_inputs, precision, calls=3):
    """Compiled calls 1..calls against eager: with fresh, equal inputs each call,
    then with the same input tensors every call. Outputs must keep their values
    after later calls, and inputs must be left as they were."""

    def run(args):
        return snapshot(as_list(program(*args)))

    sets = input_sets(make_inputs, precision)
    want = eager(run, sets["eager"])
    noise = noise_of(want, noise_runs(run, sets, precision))
    problems = []
    for series in ("fresh", "same"):
        compiled = fg.jit(program)
        same = make_inputs()
        kept = []
        for call in range(1, calls + 1):
            outputs = as_list(compiled(*(make_inputs() if series == "fresh" else same)))
            label = f"values, {series} inputs, call {call}"
            problems += compare(label, snapshot(outputs), want, noise, precision)
            kept.append((label, outputs, snapshot(outputs)))
        for label, outputs, values in kept:
            problems += unchanged(f"{label}, after call {calls}", outputs, values, "clobbered")
        problems += unchanged(
            f"values, {series} inputs", same, snapshot(make_inputs()), "input-modified"
        )
    want = eager(write_effects, program, make_inputs)
    got = write_effects(compiled, make_inputs)  # the last series' program, called again
    # a write eager refuses (into a broadcast) may succeed compiled: it changes no other value
    got = [g if w is not None else None for g, w in zip(got, want)]
    if got != want:
        problems.append(
            ("aliased", f"values: writing into each output changed {got}, eagerly {want}")
        )
    return problems


def write_effects(function, make_inputs):
    """For each output in turn, written into: which of the inputs and
    outputs it changed (None: the write was refused). Compiled outputs
    share memory with inputs or each other where eager's do, and only there."""
    args = make_inputs()
    outputs = [o for o in as_list(function(*args)) if isinstance(o, fg.Tensor)]
    tensors = [t for t in list(args) + outputs if isinstance(t, fg.Tensor)]
    effects = []
    for output in outputs:
        before = snapshot(tensors)
        try:
            with fg.no_grad():
                output.fill_(3)
        except (RuntimeError, ValueError, TypeError):
            effects.append(None)
            continue
        after = snapshot(tensors)
        effects.append([not np.array_equal(b, a, equal_nan=True) for b, a in zip(before, after)])
    return effects


def differentiable_positions(outputs):
    positions = [k for k, o in enumerate(outputs) if o.requires_grad]
    if not positions:
        raise NotApplicable("no output requires grad")
    return positions


def check_grads(program, make_inputs, precision, calls=3, style="grad", first=False, seed=0):
    """Gradients through compiled calls 1..calls against eager: autograd.grad of
    the outputs with cotangents ("grad"), of one scalar loss made of them ("loss"),
    or backward() into .grad ("backward"); of every output that needs a gradient
    or only the ``first``; fresh leaves each call, then the same leaves every
    call (their .grad accumulating, eagerly too)."""
    outputs = as_list(eager(program, *make_inputs(requires_grad=True)))
    positions = differentiable_positions(outputs)[: 1 if first else None]
    cotangents = random_arrays([outputs[k].shape for k in positions], seed)

    def gradients(function, leaves):
        outputs = as_list(function(*leaves))
        flags = [o.requires_grad for o in outputs]
        targets = [outputs[k] for k in positions]
        seeds = as_tensors(cotangents, targets)
        if style == "grad":
            return flags, snapshot(fg.autograd.grad(targets, leaves, seeds, allow_unused=True))
        if style == "loss":
            loss = sum((t * s).sum() for t, s in zip(targets, seeds))
            return flags, snapshot(fg.autograd.grad(loss, leaves, allow_unused=True))
        fg.autograd.backward(targets, seeds)
        return flags, snapshot([leaf.grad for leaf in leaves])

    problems = []
    for series in ("fresh", "same"):
        compiled = fg.jit(program)
        leaves = input_sets(make_inputs, precision, requires_grad=True)
        for call in range(1, calls + 1):
            if series == "fresh" and call > 1:
                leaves = input_sets(make_inputs, precision, requires_grad=True)
            flags, want = eager(gradients, program, leaves["eager"])
            others = noise_runs(lambda leaves: gradients(program, leaves)[1], leaves, precision)
            got_flags, got = gradients(compiled, leaves["jit"])
            label = f"grads ({style}), {series} leaves, call {call}"
            if got_flags != flags:
                problems.append(("requires-grad", f"{label}: {got_flags}, expected {flags}"))
            else:
                problems += compare(label, got, want, noise_of(want, others), precision)
    return problems


def check_second(program, make_inputs, calls=3, style="grad", seed=0):
    """Float64 gradients of gradients through compiled calls 1..calls: first
    derivatives by autograd.grad(create_graph=True) of the outputs with
    cotangents ("grad") or of one scalar loss made of them, then the gradient of
    a weighted sum of them."""
    outputs = as_list(eager(program, *make_inputs(requires_grad=True, dtype=np.float64)))
    positions = differentiable_positions(outputs)
    cotangents = random_arrays([outputs[k].shape for k in positions], seed)

    def derivatives(function, leaves):
        outputs = as_list(function(*leaves))
        targets = [outputs[k] for k in positions]
        seeds = as_tensors(cotangents, targets)
        if style != "grad":  # one scalar loss rather than several outputs
            targets, seeds = [sum((t * s).sum() for t, s in zip(targets, seeds))], None
        firsts = fg.autograd.grad(targets, leaves, seeds, create_graph=True, allow_unused=True)
        weights = random_arrays([leaf.shape for leaf in leaves], seed + 1)
        terms = [
            (g * fg.from_numpy(w)).sum()
            for g, w in zip(firsts, weights)
            if g is not None and g.requires_grad
        ]
        seconds = [None] * len(leaves)  # the first derivatives are constants
        if terms:
            seconds = fg.autograd.grad(sum(terms), leaves, allow_unused=True)
        return snapshot(firsts) + snapshot(seconds)

    compiled = fg.jit(program)
    problems = []
    for call in range(1, calls + 1):
        leaves = input_sets(make_inputs, "float64", requires_grad=True, dtype=np.float64)
        want = eager(derivatives, program, leaves["eager"])
        others = noise_runs(lambda leaves: derivatives(program, leaves), leaves, "float64")
        got = derivatives(compiled, leaves["jit"])
        problems += compare(f"second, call {call}", got, want, noise_of(want, others), "float64")
    return problems


def check_inside(program, make_inputs, precision, calls=3, style="backward", seed=0):
    """A function that runs the program and differentiates it itself (backward(),
    autograd.grad, or autograd.grad with create_graph=True and a gradient of the
    gradients), compiled: what it returns and the leaves' .grad after calls
    1..calls, with fresh leaves each call and then the same leaves every call."""
    outputs = as_list(eager(program, *make_inputs(requires_grad=True)))
    positions = differentiable_positions(outputs)
    # float64 seeds for every run: their values are float32's, so the products agree
    seeds = [fg.from_numpy(c) for c in random_arrays([outputs[k].shape for k in positions], seed)]
    count = len(make_inputs())

    def step(*args):
        leaves, seeds = args[:count], args[count:]
        outputs = as_list(program(*leaves))
        loss = sum((outputs[k] * s).sum() for k, s in zip(positions, seeds))
        if style == "backward":
            loss.backward()
            return outputs
        grads = fg.autograd.grad(
            loss, leaves, allow_unused=True, create_graph=style == "create_graph"
        )
        if style == "grad":
            return outputs + list(grads)
        total = sum((g * g).sum() for g in grads if g is not None)
        return outputs + list(grads) + list(fg.autograd.grad(total, leaves, allow_unused=True))

    def run(function, leaves):
        returned = snapshot(as_list(function(*leaves, *seeds)))
        return returned + snapshot([leaf.grad for leaf in leaves])

    problems = []
    for series in ("fresh", "same"):
        compiled = fg.jit(step)
        leaves = input_sets(make_inputs, precision, requires_grad=True)
        for call in range(1, calls + 1):
            if series == "fresh" and call > 1:
                leaves = input_sets(make_inputs, precision, requires_grad=True)
            want = eager(run, step, leaves["eager"])
            others = noise_runs(lambda leaves: run(step, leaves), leaves, precision)
            got = run(compiled, leaves["jit"])
            label = f"inside ({style}), {series} leaves, call {call}"
            problems += compare(label, got, want, noise_of(want, others), precision)
    return problems


def check_dynamic(program, make_inputs, make_resized, precision, calls=3, seed=0):
    """Traced with every dimension dynamic at the program's own sizes, then
    called at others (``make_resized``: every size of 2 or more one larger):
    values, gradients of a loss made of the outputs, and the leaves' .grad
    a backward inside the function writes, against eager at those sizes on
    calls 1..calls."""
    try:
        outputs = as_list(eager(program, *make_resized(requires_grad=True)))
    except Exception as error:
        raise NotApplicable(f"eager refuses the other sizes: {error}") from None
    positions = [k for k, o in enumerate(outputs) if o.requires_grad]
    cotangents = random_arrays([outputs[k].shape for k in positions], seed)

    def values(function, leaves):
        return snapshot(as_list(function(*leaves)))

    def gradients(function, leaves):
        outputs = as_list(function(*leaves))
        targets = [outputs[k] for k in positions]
        loss = sum((t * c).sum() for t, c in zip(targets, as_tensors(cotangents, targets)))
        return snapshot(fg.autograd.grad(loss, leaves, allow_unused=True))

    def backward_inside(*leaves):  # writes the leaves' .grad from the program
        outputs = as_list(program(*leaves))
        sum(outputs[k].sum() for k in positions).backward()
        return outputs

    def with_grads(function, leaves):
        return snapshot(as_list(function(*leaves)) + [leaf.grad for leaf in leaves])

    problems = []
    for name, function, measure, requires_grad in (
        ("values", program, values, False),
        ("grads", program, gradients, True),
        ("backward inside", backward_inside, with_grads, True),
    ):
        if requires_grad and not positions:
            continue
        compiled = fg.jit(function, dynamic=True)
        compiled(*make_inputs(requires_grad))  # the trace, at the program's sizes
        for call in range(1, calls + 1):
            leaves = input_sets(make_resized, precision, requires_grad=requires_grad)
            want = eager(measure, function, leaves["eager"])
            others = noise_runs(
                lambda leaves, measure=measure, function=function: measure(function, leaves),
                leaves,
                precision,
            )
            got = measure(compiled, leaves["jit"])
            label = f"dynamic sizes, {name}, call {call} at other sizes"
            problems += compare(label, got, want, noise_of(want, others), precision)
    return problems


def check_executor(program, make_inputs, precision, calls=3, seed=0):
    """The runtime's own invariant, on the graphs traced for the program (forward
    and backward): step by step close to the reference interpreter, and every
    planned run bit for bit what the step-by-step run gave."""
    eager(program, *make_inputs(requires_grad=True))
    problems = []
    for name, reference, others, runs in executor_runs(
        program, make_inputs, calls, seed, precision
    ):
        step, planned = runs[0], runs[1:]
        label = f"executor, {name} graph, step by step vs the reference interpreter"
        problems += compare(label, step, reference, noise_of(reference, others), precision)
        for run, outputs in enumerate(planned, 2):
            label = f"executor, {name} graph, run {run} (planned) vs step by step"
            problems += [("plan-" + c, m) for c, m in compare(label, outputs, step, None, "exact")]
    return problems


def executor_runs(program, make_inputs, calls, seed, precision):
    """THE adapter to fusegrad's runtime internals (being rewritten): for the
    forward and backward graphs jit traces for the program, (name, the reference
    interpreter's outputs, its outputs with rounding noise and (but under
    autocast) in float64, [the outputs of Executor.run on runs 1..calls]). Run 1
    goes step by step and plans; later runs follow the plan, each on fresh inputs
    in the same layouts. Each way of running takes the backward's residuals from
    its own forward run: the backward computes values again with the bits its
    forward had (a max's ties found by equality)."""
    from fusegrad.ir.graph import Const, evaluate
    from fusegrad.runtime.executor import Executor

    traced = fg.jit(program).lower(*make_inputs(requires_grad=True)).program
    forward, backward = traced.forward, traced.backward
    types = traced.output_types  # (the forward returns an input for an output that is its view)
    cotangents = [  # a bfloat16 output's: bfloat16 values, as its tensor would hold
        dtype.round(c)
        for c, (_, dtype) in zip(random_arrays([shape for shape, _ in types], seed), types)
    ]
    first_residual = traced.num_outputs + traced.num_extras

    def forward_inputs():
        args = make_inputs(requires_grad=True)
        located = traced.lookup() if traced.lookup else ()
        return traced._arrays(args + [c.current(args, located) for c in traced.captured])

    def float64_run(graph, inputs):
        def wide(a):
            a = np.asarray(a)
            return a.astype(np.float64) if a.dtype.kind == "f" else a

        env = {v: wide(a) for v, a in zip(graph.inputs, inputs)}

        def read(v):
            return wide(v.value) if isinstance(v, Const) else env[v]

        for eqn in graph.eqns:
            env[eqn.out] = wide(eqn.prim.impl(*[read(v) for v in eqn.inputs], **eqn.params))
        return [read(v) for v in graph.outputs]

    def both(run):
        """Copies of the forward's outputs and the backward's, fed by that forward."""
        values = run(forward, forward_inputs())
        found = [[np.array(a) for a in values]]
        if backward is not None:
            residuals = list(values[first_residual:])
            found.append(
                [np.array(a) for a in run(backward, residuals + [c.copy() for c in cotangents])]
            )
        return found

    def noisy(seed):
        def run(graph, inputs):
            with rounding_noise(seed, keep_bfloat16=precision == "bfloat16"):
                return evaluate(graph, inputs)

        return run

    executors = {graph: Executor(graph) for graph in (forward, backward) if graph is not None}

    def executed(graph, inputs):
        return executors[graph].run(inputs)

    references = both(evaluate)
    ways = [noisy(k) for k in range(NOISY_RUNS)]
    if precision != "bfloat16":
        ways.append(float64_run)
    others = [o for o in (unless_raising(both, run) for run in ways) if o]
    runs = [both(executed) for _ in range(calls)]
    return [
        (name, references[k], [o[k] for o in others], [r[k] for r in runs])
        for k, name in enumerate(["forward", "backward"][: len(references)])
    ]


def check_heap():
    """Frees the garbage and has glibc walk its heap (consolidating free chunks):
    corrupted heap metadata aborts here, in the check that corrupted it, rather
    than in a later one, or not at all."""
    import ctypes
    import gc

    gc.collect()
    ctypes.CDLL(None).malloc_trim(0)


def configure_backend(profile):
    """Runtime knobs (internal: adapt when the runtime changes). "native": every
    kernel runs compiled, even the tiny ones otherwise run in numpy; "threads":
    besides, every kernel's loop is split across threads; "windows": besides
    native's, convolutions run the other way than this machine's (their windows
    read in place, as with AVX-512, or copied out); "products": besides native's,
    every matrix product runs in the packed GEMM, however small, in parts on
    three threads, and autocast's as bfloat16 pairs on any CPU."""
    import importlib

    try:  # where kernel launches are decided: the rewritten runtime, else codegen
        knobs = importlib.import_module("fusegrad.runtime.launch")
    except ImportError:
        knobs = importlib.import_module("fusegrad.codegen.kernels")
    if profile in ("native", "threads", "windows", "products"):
        knobs.SMALL_WORK = 0
    if profile == "windows":
        from fusegrad.codegen import convolution

        in_place = not convolution.reads_windows_in_place()
        convolution.reads_windows_in_place = lambda: in_place
    if profile == "threads":
        knobs.PARALLEL_WORK = 1
        knobs.PARALLEL_WORK_BESIDE_BLAS = 1
    if profile == "products":
        from fusegrad.runtime import packed_gemm, routines

        packed_gemm.MIN_WORK = packed_gemm.SPLIT_WORK = 0
        packed_gemm.MIN_SIDE = 1
        routines.MIN_WORK = 1 << 62  # not the small-matrix routine
        routines._unpacked_call = lambda x, y: None  # nor unpacked
        packed_gemm.BFLOAT16_PAIRS = True  # emulated where the CPU has no bfloat16 dot
        fg.set_num_threads(3)


# ------------------------------------------------------------------ harness end

# ------------------------------------------------------------------ programs


@dataclass(frozen=True)
class Input:
    """One argument: its values come from the program's numpy seed, in this layout."""

    name: str
    shape: tuple
    dtype: str  # "float32" or "float64"
    layout: str = "contiguous"  # or transposed, strided, expanded, reversed
    fill: str = "normal"  # or quantized (exact ties and zeros), special
    scale: float = 1.0
    broadcast: tuple = ()  # expanded: the dimensions read with stride 0
    specials: tuple = ()  # special: (flat position, value) pairs, value as source text


@dataclass(frozen=True)
class Op:
    out: str
    expr: str
    reads: tuple  # the names the expression reads


@dataclass(frozen=True)
class Program:
    seed: int  # of the input values, the cotangents and the weights
    inputs: tuple
    ops: tuple
    outputs: tuple
    backend: str = "default"
    grad_style: str = "grad"  # check_grads and check_second: grad, loss or backward
    inside_style: str = "backward"  # check_inside: backward, grad or create_graph
    first_output_only: bool = False  # check_grads: the other outputs get no cotangent
    calls: int = 3
    autocast: bool = False  # the ops run under autocast("cpu", dtype=bfloat16)

    @property
    def precision(self) -> str:
        if not any(i.dtype == "float32" for i in self.inputs):
            return "float64"
        return "bfloat16" if self.autocast else "float32"

    @property
    def source(self) -> str:
        return render(self)

    @property
    def digest(self) -> str:
        return sha1(repr(self).encode()).hexdigest()[:10]


def _base_shape(spec: Input) -> tuple:
    if spec.layout == "transposed":
        return spec.shape[::-1]
    if spec.layout == "strided":
        return tuple(2 * s + 1 for s in spec.shape)
    if spec.layout == "expanded":
        return tuple(1 if d in spec.broadcast else s for d, s in enumerate(spec.shape))
    return spec.shape


def _input_lines(spec: Input) -> list:
    name, base = spec.name, _base_shape(spec)
    values = f"rng.standard_normal({base!r}) * {spec.scale!r}"
    lines = [f"    {name} = {values if base else f'np.asarray({values})'}"]
    if spec.fill == "quantized":
        lines.append(f"    {name}[...] = np.round({name} * 2) / 2  # exact ties and zeros")
    if math.prod(base):
        lines += [f"    {name}.flat[{p % math.prod(base)}] = {v}" for p, v in spec.specials]
    cast = f"{name}.astype(dtype or np.{spec.dtype})"
    if spec.layout == "expanded":
        lines.append(f"    {name} = np.broadcast_to({cast}, {spec.shape!r})")
    else:
        view = {
            "transposed": ".T",
            "strided": "[" + ", ".join(["1::2"] * len(spec.shape)) + "]",
            "reversed": "[..., ::-1]",
        }.get(spec.layout, "")
        lines.append(f"    {name} = {cast}{view}")
    return lines


def _tuple(names) -> str:
    return f"({names[0]},)" if len(names) == 1 else f"({', '.join(names)})"


def _resized(spec: Input) -> Input:
    """The input with every size of 2 or more one larger (sizes equal before
    stay equal, so what broadcast still broadcasts)."""
    return replace(spec, shape=tuple(n + 1 if n >= 2 else n for n in spec.shape))


def render(program: Program) -> str:
    names = [i.name for i in program.inputs]
    lines = []
    for function, inputs, what in (
        ("make_inputs", program.inputs, "The arguments"),
        ("make_resized", map(_resized, program.inputs), "The arguments at other sizes"),
    ):
        lines += [
            f"def {function}(requires_grad=False, dtype=None):",
            f'    """{what}, equal on every call; dtype overrides every input\'s."""',
            f"    rng = np.random.default_rng({program.seed})",
        ]
        for spec in inputs:
            lines += _input_lines(spec)
        lines += [f"    return [as_input(a, requires_grad) for a in {_tuple(names)}]", "", ""]
    lines += [f"def program({', '.join(names)}):"]
    indent = "    "
    if program.autocast and program.ops:
        lines.append('    with fg.autocast("cpu", dtype=fg.bfloat16):')
        indent *= 2
    lines += [f"{indent}{op.out} = {op.expr}" for op in program.ops]
    lines.append(f"    return {_tuple(program.outputs)}")
    return "\n".join(lines) + "\n"


def load(program: Program) -> dict:
    """The program's namespace: ``make_inputs`` and ``program``, run from its source."""
    namespace = {"np": np, "fg": fg, "F": F, "as_input": as_input}
    exec(compile(program.source, f"<program {program.digest}>", "exec"), namespace)
    return namespace


def eager_accepts(program: Program) -> bool:
    """Whether eager fusegrad runs the program for every dtype and grad setting checks use."""
    try:
        namespace = load(program)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for requires_grad, dtype in ((False, None), (True, None), (False, np.float64)):
                namespace["program"](*namespace["make_inputs"](requires_grad, dtype))
    except Exception:
        return False
    return True


# ------------------------------------------------------------------ drawing programs

FLOATS = ("float32", "float64")
# what runs a matrix product
PRODUCTS = ("@", "matmul", "mm(", "F.linear", "F.conv", "einsum", "scaled_dot_product")
AUTOCAST_SHARE = 0.3  # of programs with a product: under autocast(bfloat16)
NUMBERS = (0.5, 2.0, -1.5, 3.0, 1.0, -0.25)
SPECIAL_VALUES = ("np.nan", "np.inf", "-np.inf", "0.0", "-0.0", "1e4")


@dataclass
class Value:
    name: str
    shape: tuple
    dtype: str

    @property
    def ndim(self) -> int:
        return len(self.shape)


@dataclass
class Draw:
    """A program being drawn: its values so far, with eager tensors to try ops on."""

    rng: random.Random
    sizes: list
    seed: int  # the program's: its inputs' values
    inputs: list
    values: list = field(default_factory=list)
    env: dict = field(default_factory=dict)
    ops: list = field(default_factory=list)
    redraws: int = 0
    staged: list = field(default_factory=list)  # (Input, tensor): the drawn op's new inputs

    def pick(self, dtypes=FLOATS, fits=lambda v: True):
        """A value, the later ones likelier, so chains grow deep."""
        found = [v for v in self.values if v.dtype in dtypes and fits(v)]
        if not found:
            return None
        return self.rng.choices(found, weights=range(1, len(found) + 1))[0]

    def partner(self, a: Value, dtypes=FLOATS):
        """A value whose shape broadcasts with ``a``'s (``a`` itself included)."""
        return self.pick(dtypes, lambda v: _broadcasts(v.shape, a.shape))

    def number(self) -> float:
        return self.rng.choice(NUMBERS)

    def dim(self, ndim: int) -> int:
        return self.rng.randrange(-max(ndim, 1), max(ndim, 1))

    def dim_args(self, ndim: int, several=True, none=True) -> str:
        """``dim=...`` (one, several, or left out: all) and sometimes ``keepdim=True``."""
        r = self.rng.random()
        if none and r < 0.25:
            text = ""
        elif several and ndim >= 2 and r < 0.5:
            dims = self.rng.sample(range(ndim), self.rng.randint(2, ndim))
            text = "dim=" + repr(tuple(d - ndim if self.rng.random() < 0.3 else d for d in dims))
        else:
            text = f"dim={self.dim(ndim)}"
        if text and self.rng.random() < 0.4:
            text += ", keepdim=True"
        return text

    def size(self) -> int:
        return self.rng.choice(self.sizes)

    def new_input(self, shape: tuple, dtype: str) -> Value:
        """A new argument of the program for the op being drawn (a convolution's
        filters, say), kept if the op is."""
        spec = _input(self.rng, f"x{len(self.inputs) + len(self.staged)}", shape, dtype)
        inputs = (*self.inputs, *(s for s, _ in self.staged), spec)
        shell = Program(seed=self.seed, inputs=inputs, ops=(), outputs=(spec.name,))
        self.staged.append((spec, load(shell)["make_inputs"]()[-1]))
        return Value(spec.name, shape, dtype)

    def attempt(self, drawn) -> None:
        """Runs a drawn op eagerly; keeps it (and the inputs it added) when eager
        accepts it and its result is small."""
        staged, self.staged = self.staged, []
        if drawn is None:
            return
        expr, reads = drawn
        name = f"v{len(self.ops)}"
        added = {spec.name: tensor for spec, tensor in staged}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = eval(expr, {"fg": fg, "F": F, "np": np, **self.env, **added})
        except Exception:
            result = None
        if not isinstance(result, fg.Tensor) or result.numel() > MAX_ELEMENTS:
            self.redraws += 1
            return
        for spec, tensor in staged:
            self.inputs.append(spec)
            self.env[spec.name] = tensor
            self.values.append(Value(spec.name, spec.shape, spec.dtype))
        self.env[name] = result
        self.values.append(Value(name, tuple(result.shape), result.dtype.name))
        self.ops.append(Op(name, expr, tuple(dict.fromkeys(v.name for v in reads))))


def _broadcasts(a: tuple, b: tuple) -> bool:
    return all(x == y or 1 in (x, y) for x, y in zip(a[::-1], b[::-1]))


UNARY = (
    "fg.exp({a})",
    "fg.log(fg.abs({a}) + {eps})",
    "fg.sqrt(fg.abs({a}))",
    "fg.tanh({a})",
    "fg.sigmoid({a})",
    "fg.relu({a})",
    "F.gelu({a})",
    'F.gelu({a}, approximate="tanh")',
    "F.softplus({a})",
    "F.softplus({a}, beta=2.0, threshold=3.0)",
    "fg.erf({a})",
    "fg.sin({a})",
    "fg.cos({a})",
    "fg.abs({a})",
    "-{a}",
    "fg.log1p(fg.abs({a}))",
    "fg.expm1({a})",
    "fg.atan({a})",
    "fg.asinh({a})",
    "fg.sinh({a})",
    "fg.erfc({a})",
    "fg.sinc({a})",
    "fg.xlogy({a}, fg.abs({a}) + {eps})",
    "fg.rsqrt(fg.abs({a}) + {eps})",
    "fg.clamp({a}, {lo}, {hi})",
    "{a}.clamp(min={lo})",
    "{a}.clamp(max={hi})",
    "F.silu({a})",
    "F.mish({a})",
    "F.selu({a})",
    "F.logsigmoid({a})",
    "F.hardswish({a})",
    "F.hardsigmoid({a})",
    "F.hardtanh({a}, {lo}, {hi})",
    "F.leaky_relu({a}, 0.1)",
    "F.softsign({a})",
    "F.tanhshrink({a})",
    "{a}.square()",
    "fg.reciprocal(fg.abs({a}) + {eps})",
    "fg.floor({a})",
    "fg.round({a})",
    "fg.trunc({a})",
    "{a}.frac()",
)


def _unary(d: Draw):
    a = d.pick()
    template = d.rng.choice(UNARY)
    eps, lo, hi = (
        d.rng.choice([0.01, 0.1, 1.0]),
        d.rng.choice([-1.0, -0.5, 0.0]),
        d.rng.choice([0.5, 1.0, 2.0]),
    )
    return template.format(a=a.name, eps=eps, lo=lo, hi=hi), [a]


def _binary(d: Draw):
    a = d.pick()
    b = d.partner(a)
    op = d.rng.choice(["+", "-", "*", "/", "**", "maximum", "minimum", "logaddexp", "hypot"])
    form = d.rng.choice(["tensor", "tensor", "number", "number first", "0-d"])
    if op in ("maximum", "minimum", "logaddexp", "hypot"):
        return f"fg.{op}({a.name}, {b.name})", [a, b]
    if op == "**":
        if form == "tensor":
            base = d.rng.choice([a.name, f"fg.abs({a.name})"])
            return f"{base} ** {b.name}", [a, b]
        if form == "number first":
            return f"{d.rng.choice([2.0, 0.5, 1.5])} ** {a.name}", [a]
        return f"{a.name} ** {d.rng.choice([2, 3, 0.5, -1, 2.5, -2, 0, 1])}", [a]
    if form == "tensor":
        return f"{a.name} {op} {b.name}", [a, b]
    if form == "number":
        return f"{a.name} {op} {d.number()}", [a]
    if form == "number first":
        return f"{d.number()} {op} {a.name}", [a]
    scalar = d.pick(fits=lambda v: v.ndim == 0)
    if scalar is not None and d.rng.random() < 0.5:
        return f"{a.name} {op} {scalar.name}", [a, scalar]
    dtype = d.rng.choice(FLOATS)
    return f"{a.name} {op} fg.tensor({d.number()}, dtype=fg.{dtype})", [a]


def _division(d: Draw):
    """fmod, remainder and floor division. Their divisors are no round
    numbers: a value an approximation computes an ulp apart eagerly and
    compiled (a saturated 1.0) must not sit on a multiple, where the
    remainder jumps by the divisor."""
    a = d.pick()
    divisor = d.rng.choice([0.7, -1.3, 2.9, 0.37])
    form = d.rng.choice(["%", "//", "fmod", "tensor"])
    if form == "fmod":
        return f"fg.fmod({a.name}, {divisor})", [a]
    if form == "tensor":
        b = d.partner(a)
        op = d.rng.choice(["%", "//"])
        return f"{a.name} {op} (fg.abs({b.name}) + {abs(divisor)})", [a, b]
    return f"{a.name} {form} {divisor}", [a]


def _comparison(d: Draw):
    a = d.pick()
    op = d.rng.choice([">", "<", ">=", "<=", "==", "!="])
    if d.rng.random() < 0.5:
        b = d.partner(a)
        return f"{a.name} {op} {b.name}", [a, b]
    return f"{a.name} {op} {d.number()}", [a]


def _where(d: Draw):
    condition = d.pick(("bool",))
    if condition is None or d.rng.random() < 0.3:
        a = d.pick()
        text, reads, shape = f"{a.name} > {d.number()}", [a], a.shape
    else:
        text, reads, shape = condition.name, [condition], condition.shape
    branches = []
    for _ in range(2):
        b = d.pick(fits=lambda v: _broadcasts(v.shape, shape))
        if b is None or d.rng.random() < 0.25:
            branches.append(str(d.number()))
        else:
            branches.append(b.name)
            reads.append(b)
    return f"fg.where({text}, {branches[0]}, {branches[1]})", reads


def _logical(d: Draw):
    a = d.pick(("bool",))
    if a is None:
        return None
    b = d.partner(a, ("bool",))
    return d.rng.choice(
        [
            f"{a.name} & {b.name}",
            f"{a.name} | {b.name}",
            f"~{a.name}",
            f"fg.logical_xor({a.name}, {b.name})",
        ]
    ), [a, b]


def _reduction(d: Draw):
    a = d.pick()
    n = a.ndim
    kind = d.rng.choice(
        [
            "sum",
            "mean",
            "amax",
            "amin",
            "prod",
            "var",
            "std",
            "logsumexp",
            "norm",
            "max",
            "min",
            "argmax",
            "softmax",
            "log_softmax",
            "all",
            "any",
        ]
    )
    if kind in ("sum", "mean", "amax", "amin"):
        return f"{a.name}.{kind}({d.dim_args(n)})", [a]
    if kind == "prod":
        return f"{a.name}.prod({d.dim_args(n, several=False)})", [a]
    if kind in ("var", "std"):
        extra = d.rng.choice(["", "correction=0", "correction=1"])
        return f"{a.name}.{kind}({', '.join(t for t in (d.dim_args(n), extra) if t)})", [a]
    if kind == "logsumexp":
        return f"{a.name}.logsumexp({d.dim_args(n, none=False)})", [a]
    if kind == "norm":
        p = d.rng.choice(["", "p=1", "p=2", 'p=float("inf")'])
        return f"{a.name}.norm({', '.join(t for t in (p, d.dim_args(n)) if t)})", [a]
    if kind in ("max", "min"):
        if d.rng.random() < 0.3:
            return f"{a.name}.{kind}()", [a]
        return f"{a.name}.{kind}({d.dim_args(n, several=False, none=False)}).values", [a]
    if kind == "argmax":
        return f"{a.name}.argmax({d.dim_args(n, several=False)})", [a]
    if kind in ("softmax", "log_softmax"):
        return f"fg.{kind}({a.name}, dim={d.dim(n)})", [a]
    b = d.pick(("bool",))
    if b is None:
        return None
    return f"{b.name}.{kind}({d.dim_args(b.ndim, several=False)})", [b]


def _matmul_fits(a: tuple, b: tuple) -> bool:
    if not a or not b or a[-1] != (b[0] if len(b) == 1 else b[-2]):
        return False
    return _broadcasts(a[:-2], b[:-2])


def _matmul(d: Draw):
    floats = [v for v in d.values if v.dtype in FLOATS]
    pairs = [(a, b) for a in floats for b in floats if _matmul_fits(a.shape, b.shape)]
    weights = [d.values.index(a) + d.values.index(b) + 1 for a, b in pairs]
    r = d.rng.random()
    if pairs and r < 0.6:
        a, b = d.rng.choices(pairs, weights=weights)[0]
        forms = ["{a} @ {b}", "fg.matmul({a}, {b})"]
        if a.ndim == b.ndim == 2:
            forms.append("fg.mm({a}, {b})")
        if a.ndim == b.ndim == 3:
            forms.append("fg.bmm({a}, {b})")
        return d.rng.choice(forms).format(a=a.name, b=b.name), [a, b]
    if r < 0.8:  # linear: a @ w.T (+ bias)
        a = d.pick(fits=lambda v: v.ndim >= 1)
        w = a and d.pick(fits=lambda v: v.ndim == 2 and v.shape[1] == a.shape[-1])
        if w is None:
            return None
        bias = d.pick(fits=lambda v: v.shape in ((w.shape[0],), ()))
        if bias is None or d.rng.random() < 0.3:
            return f"F.linear({a.name}, {w.name})", [a, w]
        return f"F.linear({a.name}, {w.name}, {bias.name})", [a, w, bias]
    a = d.pick(fits=lambda v: v.ndim >= 2)
    if a is None:
        return None
    form = d.rng.choice(["{a} @ {a}.transpose(-1, -2)", "{a}.transpose(-1, -2) @ {a}"])
    return form.format(a=a.name), [a]


def _index_text(d: Draw, shape: tuple) -> str:
    """A basic index: integers, slices with steps and negative bounds, None, ..."""
    items = []
    for size in shape[: d.rng.randint(1, max(len(shape), 1))]:
        r = d.rng.random()
        if r < 0.25:
            items.append(":")
        elif r < 0.45 and size:
            items.append(str(d.rng.randrange(-size, size)))
        else:
            start, stop = (
                d.rng.choice(["", str(d.rng.randint(-size - 1, size + 1))]) for _ in "ab"
            )
            step = d.rng.choice(["", "", ":2", ":3"])
            items.append(f"{start}:{stop}{step}")
    if d.rng.random() < 0.15:
        items.insert(d.rng.randint(0, len(items)), "None")
    if d.rng.random() < 0.15:
        items = ["...", *items[-1:]]
    return ", ".join(items)


def _factor(d: Draw, numel: int) -> list:
    """Random dimensions with ``numel`` elements."""
    rank = d.rng.randint(1, 4)
    dims = [1] * rank
    if numel == 0:
        dims = [d.rng.choice([0, *d.sizes]) for _ in range(rank)]
        dims[d.rng.randrange(rank)] = 0
        return dims
    n, p = numel, 2
    while n > 1:
        while n % p:
            p += 1
        dims[d.rng.randrange(rank)] *= p
        n //= p
    if d.rng.random() < 0.4:
        dims[d.rng.randrange(rank)] = -1
    return dims


def _view(d: Draw):
    a = d.pick(FLOATS + ("bool", "int64")) if d.rng.random() < 0.15 else d.pick()
    n, shape = a.ndim, a.shape
    kind = d.rng.choice(
        [
            "index",
            "index",
            "expand",
            "transpose",
            "permute",
            "reshape",
            "view",
            "flatten",
            "unsqueeze",
            "squeeze",
            "T",
            "narrow",
            "broadcast_to",
        ]
    )
    if kind == "index":
        return f"{a.name}[{_index_text(d, shape)}]", [a]
    if kind in ("expand", "broadcast_to"):
        sizes = [d.size() if s == 1 else d.rng.choice([s, -1]) for s in shape]
        if not sizes or d.rng.random() < 0.3:
            sizes.insert(0, d.size())
        if kind == "expand":
            return f"{a.name}.expand({', '.join(map(str, sizes))})", [a]
        new = len(sizes) - n
        target = tuple(shape[k - new] if s == -1 else s for k, s in enumerate(sizes))
        return f"fg.broadcast_to({a.name}, {target!r})", [a]
    if kind == "transpose":
        return f"{a.name}.transpose({d.dim(n)}, {d.dim(n)})", [a]
    if kind == "permute":  # (PyTorch's permute() wants dimensions, even of a 0-d tensor)
        order = d.rng.sample(range(n), n)
        return (f"{a.name}.permute({', '.join(map(str, order))})", [a]) if n else None
    if kind in ("reshape", "view"):
        return f"{a.name}.{kind}({', '.join(map(str, _factor(d, math.prod(shape))))})", [a]
    if kind == "flatten":
        if d.rng.random() < 0.4:
            return f"{a.name}.flatten()", [a]
        return f"{a.name}.flatten({d.dim(n)}, {d.dim(n)})", [a]
    if kind == "unsqueeze":
        return f"{a.name}.unsqueeze({d.rng.randint(-n - 1, n)})", [a]
    if kind == "squeeze":
        return f"{a.name}.squeeze({d.rng.choice(['', str(d.dim(n))])})", [a]
    if kind == "T":
        return f"{a.name}.T", [a]
    dim = d.dim(n)
    size = shape[dim] if shape else 1
    start = d.rng.randint(0, size)
    return f"{a.name}.narrow({dim}, {start}, {d.rng.randint(0, size - start)})", [a]


def _joining(d: Draw):
    a = d.pick()
    n = a.ndim
    kind = d.rng.choice(["cat", "stack", "split", "split sections", "chunk"])
    if kind == "cat":
        dim = d.dim(n)
        axis = dim % max(n, 1)
        b = d.pick(
            fits=lambda v: (
                v.ndim == n
                and all(s == t for k, (s, t) in enumerate(zip(v.shape, a.shape)) if k != axis)
            )
        )
        return f"fg.cat([{a.name}, {b.name}], dim={dim})", [a, b]
    if kind == "stack":
        b = d.pick(fits=lambda v: v.shape == a.shape)
        return f"fg.stack([{a.name}, {b.name}], dim={d.rng.randint(-n - 1, n)})", [a, b]
    dim = d.dim(n)
    size = a.shape[dim] if a.shape else 0
    if kind == "split":
        piece = d.rng.randint(1, max(size, 1))
        count = max(-(-size // piece), 1)
        return f"fg.split({a.name}, {piece}, dim={dim})[{d.rng.randrange(-count, count)}]", [a]
    if kind == "split sections":
        first = d.rng.randint(0, size)
        return f"{a.name}.split([{first}, {size - first}], dim={dim})[{d.rng.randint(0, 1)}]", [a]
    chunks = d.rng.randint(1, 4)
    return f"fg.chunk({a.name}, {chunks}, dim={dim})[{d.rng.randrange(chunks)}]", [a]


def _positions(d: Draw, size: int, count: int, negative=True) -> list:
    low = -size if negative else 0
    return [d.rng.randrange(low, size) for _ in range(count)]


def _indexing(d: Draw):
    a = d.pick(fits=lambda v: v.ndim >= 1 and v.shape[0] > 0)
    if a is None:
        return None
    kind = d.rng.choice(
        [
            "array",
            "array",
            "two arrays",
            "list",
            "mask list",
            "mask tensor",
            "index_select",
            "gather",
            "gather argmax",
            "computed",
        ]
    )
    first = a.shape[0]
    if kind == "array":
        dim = d.rng.randrange(a.ndim)
        if a.shape[dim] == 0:
            return None
        idx = _positions(d, a.shape[dim], d.rng.randint(1, 4))
        return f"{a.name}[{':, ' * dim}fg.tensor({idx})]", [a]
    if kind == "two arrays" and a.ndim >= 2 and a.shape[1]:
        count = d.rng.randint(1, 4)
        rows, cols = _positions(d, first, count), _positions(d, a.shape[1], count)
        return f"{a.name}[fg.tensor({rows}), fg.tensor({cols})]", [a]
    if kind == "list":
        return f"{a.name}[{_positions(d, first, d.rng.randint(1, 4))}]", [a]
    if kind == "mask list":
        return f"{a.name}[{[d.rng.random() < 0.5 for _ in range(first)]}]", [a]
    if kind == "mask tensor" and d.rng.random() < 0.3:  # rare: jit refuses it, as documented
        return f"{a.name}[{a.name} > 0]", [a]
    if kind == "index_select":
        dim = d.rng.randrange(a.ndim)
        if a.shape[dim] == 0:
            return None
        idx = _positions(d, a.shape[dim], d.rng.randint(1, 4), negative=False)
        return f"fg.index_select({a.name}, {dim}, fg.tensor({idx}))", [a]
    if kind == "gather":
        dim = d.rng.randrange(a.ndim)
        if a.shape[dim] == 0:
            return None
        shape = [
            d.rng.randint(1, 3) if k == dim else d.rng.randint(0, s) for k, s in enumerate(a.shape)
        ]
        idx = np.array(_positions(d, a.shape[dim], math.prod(shape), negative=False)).reshape(shape)
        return f"fg.gather({a.name}, {dim}, fg.tensor({idx.tolist()}, dtype=fg.int64))", [a]
    if kind == "gather argmax":
        dim = d.rng.randrange(a.ndim)
        return f"fg.gather({a.name}, {dim}, {a.name}.argmax(dim={dim}, keepdim=True))", [a]
    i = d.pick(("int64",), fits=lambda v: v.ndim <= 1)
    if i is None:
        return None
    if d.rng.random() < 0.5:
        return f"{a.name}[{i.name}]", [a, i]
    return f"fg.index_select({a.name}, {d.rng.randrange(a.ndim)}, {i.name})", [a, i]


def _nn(d: Draw):
    a = d.pick(fits=lambda v: v.ndim >= 1)
    if a is None:
        return None
    kind = d.rng.choice(["layer_norm", "mse_loss", "cross_entropy"])
    if kind == "layer_norm":
        normalized = a.shape[-d.rng.randint(1, min(a.ndim, 2)) :]
        w = d.pick(fits=lambda v: v.shape == normalized)
        b = d.pick(fits=lambda v: v.shape == normalized)
        if w is None or d.rng.random() < 0.3:
            return f"F.layer_norm({a.name}, {normalized!r})", [a]
        return f"F.layer_norm({a.name}, {normalized!r}, {w.name}, {b.name})", [a, w, b]
    if kind == "mse_loss":
        b = d.pick(fits=lambda v: v.shape == a.shape)
        reduction = d.rng.choice(["", ', reduction="sum"', ', reduction="none"'])
        return f"F.mse_loss({a.name}, {b.name}{reduction})", [a, b]
    if a.ndim > 2 or a.shape[-1] == 0:
        return None
    classes = a.shape[-1]
    if a.ndim == 1:
        return f"F.cross_entropy({a.name}, fg.tensor({d.rng.randrange(classes)}))", [a]
    targets = _positions(d, classes, a.shape[0], negative=False)
    return f"F.cross_entropy({a.name}, fg.tensor({targets}, dtype=fg.int64))", [a]


def _image(d: Draw, dims: int, big: bool) -> Value:
    """What a convolution or a pooling reads: a value of (N, C, *spatial) or
    (C, *spatial), an earlier one or a new input; a big one is batched, with
    more channels and larger sides."""
    found = d.pick(fits=lambda v: v.ndim in (dims + 1, dims + 2))
    if found is not None and not big and d.rng.random() < 0.5:
        return found
    if big:
        lead = (d.rng.choice([2, 3, 4]), d.rng.choice([2, 3, 4, 6, 8]))
        sides = {1: (24, 64), 2: (6, 14), 3: (3, 6)}[dims]
    else:
        lead = (d.rng.choice([0, 1, 1, 2, 3]), d.rng.choice([1, 1, 2, 3, 4]))
        lead = lead[1:] if d.rng.random() < 0.15 else lead  # unbatched
        sides = {1: (1, 12), 2: (1, 8), 3: (1, 4)}[dims]
    shape = lead + tuple(d.rng.randint(*sides) for _ in range(dims))
    return d.new_input(shape, d.inputs[0].dtype)


def _settings(d: Draw, name: str, values: list, default=None) -> str:
    """``, name=...`` for settings of each spatial axis: one int when they are
    equal (now and then a tuple all the same), else a tuple; nothing when
    they are the default."""
    if default is not None and all(v == default for v in values) and d.rng.random() < 0.7:
        return ""
    if len(set(values)) == 1 and d.rng.random() < 0.7:
        return f", {name}={values[0]}"
    return f", {name}={tuple(values)!r}"


def _convolution(d: Draw):
    """conv1d, conv2d or conv3d: random stride, padding (numbers or "same" and
    "valid"), dilation and groups, with and without bias, over an earlier value
    or a new image; new filters. A big one reaches the stacked-product routine."""
    dims = d.rng.choices([1, 2, 3], weights=[3, 5, 2])[0]
    big = d.rng.random() < 0.3
    x = _image(d, dims, big)
    batched = x.ndim == dims + 2
    channels, sides = x.shape[1 if batched else 0], x.shape[-dims:]
    divisors = [g for g in range(1, channels + 1) if channels % g == 0] or [1]
    groups = 1 if d.rng.random() < 0.5 else d.rng.choice(divisors)
    filters = groups * d.rng.choice([4, 8, 16] if big else [1, 1, 2, 3])
    kernel = [d.rng.randint(1, max(1, min(4, side))) for side in sides]
    stride = [d.rng.choice([1, 1, 1, 2, 3]) for _ in sides]
    dilation = [d.rng.choice([1, 1, 1, 2]) for _ in sides]
    w = d.new_input((filters, channels // groups, *kernel), x.dtype)
    args, reads = [x.name, w.name], [x, w]
    if d.rng.random() < 0.6:
        bias = d.pick(fits=lambda v: v.shape == (filters,) and v.dtype == x.dtype)
        if bias is None or d.rng.random() < 0.5:
            bias = d.new_input((filters,), x.dtype)
        args.append(bias.name)
        reads.append(bias)
    padding = d.rng.choice(["numbers", "numbers", "same", "valid"])
    if padding == "same":  # PyTorch refuses strided "same"
        stride = [1] * dims
    if padding == "numbers":
        padding_text = _settings(d, "padding", [d.rng.choice([0, 0, 1, 2]) for _ in sides], 0)
    else:
        padding_text = f", padding={padding!r}"
    settings = (
        _settings(d, "stride", stride, 1)
        + padding_text
        + _settings(d, "dilation", dilation, 1)
        + (f", groups={groups}" if groups > 1 else "")
    )
    return f"F.conv{dims}d({', '.join(args)}{settings})", reads


def _pooling(d: Draw):
    """max_pool1d/2d, avg_pool1d/2d (kernel, stride, padding, dilation, ceil_mode,
    count_include_pad, divisor_override, return_indices) and adaptive_avg_pool1d/2d."""
    kind = d.rng.choice(["max", "max", "avg", "avg", "adaptive"])
    dims = d.rng.choice([1, 2, 2])
    x = _image(d, dims, big=d.rng.random() < 0.2)
    sides = x.shape[-dims:]
    if kind == "adaptive":
        counts = [d.rng.choice([1, 2, 3, side, side + 1, None]) for side in sides]
        size = counts[0] if dims == 1 and d.rng.random() < 0.5 else tuple(counts)
        return f"F.adaptive_avg_pool{dims}d({x.name}, {size!r})", [x]
    kernel = [d.rng.randint(1, max(1, min(4, side))) for side in sides]
    text = f"F.{kind}_pool{dims}d({x.name}{_settings(d, 'kernel_size', kernel)}"
    if d.rng.random() < 0.6:  # else the default: tiles, the max's own routine
        text += _settings(d, "stride", [d.rng.choice([1, 1, 2, 3]) for _ in sides])
    dilation = [1] * dims
    if kind == "max":
        dilation = [d.rng.choice([1, 1, 1, 2]) for _ in sides]
    # up to half the kernel, dilated or not (PyTorch's max_pool1d/2d's bound)
    text += _settings(d, "padding", [d.rng.randint(0, k // 2) for k in kernel], 0)
    text += _settings(d, "dilation", dilation, 1) if kind == "max" else ""
    text += ", ceil_mode=True" if d.rng.random() < 0.3 else ""
    if kind == "avg" and d.rng.random() < 0.3:
        text += ", count_include_pad=False"
    if kind == "avg" and dims == 2 and d.rng.random() < 0.1:
        text += f", divisor_override={d.rng.choice([1, 3, 7])}"
    if kind == "max" and d.rng.random() < 0.1:
        return f"{text}, return_indices=True)[{d.rng.randint(0, 1)}]", [x]
    return text + ")", [x]


def _stacked_matmul(d: Draw):
    """A stack of matrix products big enough for the native routine
    (runtime/routines.py ``matmul``: two or more, 1 << 15 multiply-adds in all,
    4 columns or more), the stack broadcast now and then, either operand
    transposed (its rows strided) or in any input layout; new inputs."""
    stack = d.rng.choice([(2,), (3,), (4,), (8,), (2, 3), (3, 2), (2, 1, 3)])
    depth = d.rng.choice([4, 7, 16, 32, 40, 64])  # from 4 vectors: the "dots" form
    columns = d.rng.choice([4, 5, 8, 16, 17, 33, 40])
    count = math.prod(stack)
    rows = -(-(1 << 15) // (count * depth * columns)) * d.rng.choice([1, 1, 2])
    x_stack, y_stack = [], []
    for n in stack:  # each axis in both stacks, or broadcast from 1 in one of them
        shared = d.rng.random() < 0.6
        x_stack.append(n if shared or d.rng.random() < 0.5 else 1)
        y_stack.append(n if shared or x_stack[-1] == 1 else 1)
    if d.rng.random() < 0.2:  # one matrix times the stack
        x_stack, y_stack = [], list(stack)
    elif len(stack) > 1 and d.rng.random() < 0.2:  # y's first axis broadcast
        x_stack[0], y_stack = stack[0], y_stack[1:]
    operands = []
    for lead, matrix in ((x_stack, (rows, depth)), (y_stack, (depth, columns))):
        if math.prod(lead) * math.prod(matrix) > MAX_ELEMENTS:
            return None
        if d.rng.random() < 0.4:
            value = d.new_input((*lead, *matrix[::-1]), d.inputs[0].dtype)
            operands.append((f"{value.name}.transpose(-1, -2)", value))
        else:
            value = d.new_input((*lead, *matrix), d.inputs[0].dtype)
            operands.append((value.name, value))
    (a, x), (b, y) = operands
    form = "fg.bmm" if x.ndim == y.ndim == 3 and x_stack == y_stack else "fg.matmul"
    text = d.rng.choice([f"{a} @ {b}", f"{form}({a}, {b})"])
    return text, [x, y]


def _mixing(d: Draw):
    """Elementwise ops of two or three values: atan2, lerp, addcmul, addcdiv."""
    a = d.pick()
    b, c = d.partner(a), d.partner(a)
    kind = d.rng.choice(["atan2", "lerp", "lerp tensor", "addcmul", "addcdiv"])
    if kind == "atan2":
        return f"fg.atan2({a.name}, {b.name})", [a, b]
    if kind == "lerp":
        return f"fg.lerp({a.name}, {b.name}, {d.rng.choice([0.3, 1.5, -0.5])})", [a, b]
    if kind == "lerp tensor" and b.shape == c.shape == a.shape:
        return f"fg.lerp({a.name}, {b.name}, fg.sigmoid({c.name}))", [a, b, c]
    value = d.rng.choice([1.0, 0.5, -2.0])
    if kind == "addcmul":
        return f"fg.addcmul({a.name}, {b.name}, {c.name}, value={value})", [a, b, c]
    return f"fg.addcdiv({a.name}, {b.name}, fg.abs({c.name}) + 0.5, value={value})", [a, b, c]


def _scan(d: Draw):
    """Running sums, products and maxima, sorting and its kin along one axis."""
    a = d.pick(fits=lambda v: v.ndim >= 1)
    if a is None:
        return None
    dim = d.dim(a.ndim)
    size = a.shape[dim]
    kind = d.rng.choice(
        ["cumsum", "cumprod", "logcumsumexp", "cummax", "cummin", "sort", "topk", "median", "diff"]
    )
    if kind in ("cumsum", "cumprod", "logcumsumexp"):
        return f"{a.name}.{kind}(dim={dim})", [a]
    if kind in ("cummax", "cummin"):
        return f"{a.name}.{kind}(dim={dim})[{d.rng.randint(0, 1)}]", [a]
    if kind == "sort":
        descending = ", descending=True" if d.rng.random() < 0.5 else ""
        return f"fg.sort({a.name}, dim={dim}{descending})[{d.rng.randint(0, 1)}]", [a]
    if kind == "topk":
        largest = ", largest=False" if d.rng.random() < 0.3 else ""
        k = d.rng.randint(0, size)
        return f"{a.name}.topk({k}, dim={dim}{largest})[{d.rng.randint(0, 1)}]", [a]
    if kind == "median" and size:
        return f"{a.name}.median(dim={dim}, keepdim={d.rng.random() < 0.3}).values", [a]
    return f"fg.diff({a.name}, n={d.rng.choice([1, 1, 2])}, dim={dim})", [a]


def _rearranging(d: Draw):
    """Flips, rolls, triangles, repeats, padding, masked fills, diagonals and
    scatters (out of place; ``scatter`` to distinct places, its result
    otherwise undefined)."""
    a = d.pick(fits=lambda v: v.ndim >= 1)
    if a is None:
        return None
    n, shape = a.ndim, a.shape
    dim = d.dim(n)
    kind = d.rng.choice(
        ["flip", "roll", "triangle", "repeat", "pad", "masked_fill", "diagonal", "scatter"]
    )
    if kind == "flip":
        return f"{a.name}.flip({tuple(d.rng.sample(range(n), d.rng.randint(1, n)))!r})", [a]
    if kind == "roll":
        if d.rng.random() < 0.3:
            return f"fg.roll({a.name}, {d.rng.randint(-7, 7)})", [a]
        return f"{a.name}.roll({d.rng.randint(-7, 7)}, {dim})", [a]
    if kind == "triangle" and n >= 2:
        which = d.rng.choice(["tril", "triu"])
        return f"fg.{which}({a.name}, diagonal={d.rng.randint(-2, 2)})", [a]
    if kind == "repeat":
        repeats = [d.rng.choice([1, 1, 2, 3]) for _ in range(n + d.rng.randint(0, 1))]
        return f"{a.name}.repeat({', '.join(map(str, repeats))})", [a]
    if kind == "pad":
        return _padding(d, a)
    if kind == "masked_fill":
        mask = d.pick(("bool",), fits=lambda v: _broadcasts(v.shape, shape) and v.ndim <= n)
        text = mask.name if mask is not None else f"{a.name} > {d.number()}"
        return f"{a.name}.masked_fill({text}, {d.number()})", [a] + ([mask] if mask else [])
    if kind == "diagonal" and n >= 2:
        first, second = d.rng.sample(range(n), 2)
        return f"fg.diagonal({a.name}, {d.rng.randint(-2, 2)}, {first}, {second})", [a]
    if kind != "scatter" or not all(shape):
        return None
    return _scattering(d, a, dim % n)


def _padding(d: Draw, a: Value):
    """F.pad of the last one to three axes: by a constant (negative widths
    crop), or reflected, replicated or circular (where PyTorch has them: 2-D
    to 5-D input, widths within the sides)."""
    mode = d.rng.choice(["constant", "constant", "reflect", "replicate", "circular"])
    axes = d.rng.randint(1, min(a.ndim, 3))
    if mode != "constant":
        axes = min(axes, a.ndim - 1)
        if not 2 <= a.ndim <= 5 or axes == 0:
            return None
    widths = []
    for side in a.shape[::-1][:axes]:
        most = side - 1 if mode == "reflect" else side
        low = -1 if mode == "constant" else 0
        widths += [d.rng.randint(low, max(low, min(most, 3))) for _ in range(2)]
    setting = {"constant": f", value={d.number()}"}.get(mode, f", mode={mode!r}")
    return f"F.pad({a.name}, {tuple(widths)!r}{setting})", [a]


def _scattering(d: Draw, a: Value, dim: int):
    """scatter (to distinct places), scatter_add and index_add of values of
    ``a`` itself or of another value, along ``dim``."""
    kind = d.rng.choice(["scatter", "scatter_add", "index_add"])
    size = a.shape[dim]
    if kind == "index_add":
        count = d.rng.randint(1, 4)
        index = _positions(d, size, count, negative=False)
        sizes = ", ".join(str(count) if k == dim else "-1" for k in range(a.ndim))
        source = f"{a.name}.narrow({dim}, 0, 1).expand({sizes})"
        alpha = d.rng.choice(["", ", alpha=2.0"])
        return f"{a.name}.index_add({dim}, fg.tensor({index}), {source}{alpha})", [a]
    shape = [d.rng.randint(1, s) for s in a.shape]
    count = math.prod(shape)
    if kind == "scatter":
        shape[dim] = 1  # one place per line along dim: distinct
        index = np.array(_positions(d, size, math.prod(shape), negative=False)).reshape(shape)
        return f"{a.name}.scatter({dim}, fg.tensor({index.tolist()}), {d.number()})", [a]
    index = np.array(_positions(d, size, count, negative=False)).reshape(shape)
    source = d.pick(fits=lambda v: v.ndim == a.ndim and all(s >= t for s, t in zip(v.shape, shape)))
    if source is None:
        return None
    window = ", ".join(f":{t}" for t in shape)
    text = f"{a.name}.scatter_add({dim}, fg.tensor({index.tolist()}), {source.name}[{window}])"
    return text, [a, source]


def _more_nn(d: Draw):
    """The rest of what models call in torch.nn.functional: normalizations,
    losses, attention, einsum."""
    a = d.pick(fits=lambda v: v.ndim >= 1)
    if a is None:
        return None
    n, shape = a.ndim, a.shape
    kind = d.rng.choice(
        [
            "normalize",
            "cosine",
            "loss",
            "nll",
            "batch_norm",
            "group_norm",
            "rms_norm",
            "attention",
            "einsum",
        ]
    )
    if kind == "normalize":
        return f"F.normalize({a.name}, p={d.rng.choice([1.0, 2.0])}, dim={d.dim(n)})", [a]
    if kind == "cosine":
        b = d.partner(a)
        return f"F.cosine_similarity({a.name}, {b.name}, dim={d.dim(n)})", [a, b]
    if kind == "loss":
        b = d.pick(fits=lambda v: v.shape == shape)
        loss = d.rng.choice(
            ["l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits"]
        )
        target = f"fg.sigmoid({b.name})" if "entropy" in loss else b.name
        reduction = d.rng.choice(["", ', reduction="sum"', ', reduction="none"'])
        return f"F.{loss}({a.name}, {target}{reduction})", [a, b]
    if kind == "nll" and n == 2 and shape[1]:
        targets = _positions(d, shape[1], shape[0], negative=False)
        log_p = f"F.log_softmax({a.name}, dim=1)"
        return f"F.nll_loss({log_p}, fg.tensor({targets}, dtype=fg.int64))", [a]
    if kind == "batch_norm" and n >= 2 and math.prod(shape) > shape[1]:
        return f"F.batch_norm({a.name}, None, None, training=True)", [a]
    if kind == "group_norm" and n >= 2 and shape[0] and shape[1]:
        groups = d.rng.choice([g for g in range(1, shape[1] + 1) if shape[1] % g == 0])
        return f"F.group_norm({a.name}, {groups})", [a]
    if kind == "rms_norm":
        return f"F.rms_norm({a.name}, {shape[-1:]!r})", [a]
    if kind == "attention" and n >= 2:
        causal = d.rng.random() < 0.5
        return (
            f"F.scaled_dot_product_attention({a.name}, {a.name}, {a.name}, is_causal={causal})",
            [a],
        )
    if kind == "einsum" and n >= 2:
        letters = "ijkl"[:n]
        b = d.pick(fits=lambda v: v.shape == shape)
        one = [f"{letters}->{letters[::-1]}", f"{letters}->{letters[-1]}"]
        two = [f"{letters},{letters}->{letters[0]}", "...j,...j->...", "...ij,...kj->...ik"]
        pattern = d.rng.choice(one + two)
        if pattern in one:
            return f"fg.einsum({pattern!r}, {a.name})", [a]
        return f"fg.einsum({pattern!r}, {a.name}, {b.name})", [a, b]
    return None


def _spatial(d: Draw):
    """conv_transpose1d/2d (stride, padding, output_padding, groups), interpolate
    (nearest, linear, bilinear; by size or scale) and unfold."""
    dims = d.rng.choice([1, 2, 2])
    kind = d.rng.choice(["transposed", "transposed", "interpolate", "unfold"])
    x = _image(d, dims, big=d.rng.random() < 0.2)
    batched = x.ndim == dims + 2
    channels, sides = x.shape[1 if batched else 0], x.shape[-dims:]
    if kind == "transposed":
        groups = d.rng.choice([g for g in (1, 1, 2, 3) if channels % g == 0])
        kernel = [d.rng.randint(1, 3) for _ in sides]
        stride = [d.rng.choice([1, 2, 3]) for _ in sides]
        padding = [d.rng.randint(0, k - 1) for k in kernel]
        extra = [d.rng.randint(0, s - 1) for s in stride]
        w = d.new_input((channels, d.rng.choice([1, 2, 3]), *kernel), x.dtype)
        settings = (
            _settings(d, "stride", stride, 1)
            + _settings(d, "padding", padding, 0)
            + _settings(d, "output_padding", extra, 0)
            + (f", groups={groups}" if groups > 1 else "")
        )
        return f"F.conv_transpose{dims}d({x.name}, {w.name}{settings})", [x, w]
    if kind == "interpolate" and batched:
        mode = d.rng.choice(["nearest", "nearest", "linear" if dims == 1 else "bilinear"])
        corners = ", align_corners=True" if mode != "nearest" and d.rng.random() < 0.4 else ""
        if d.rng.random() < 0.5:
            size = tuple(d.rng.randint(1, 2 * s + 1) for s in sides)
            return f"F.interpolate({x.name}, size={size!r}, mode={mode!r}{corners})", [x]
        scale = d.rng.choice([2, 3, 0.5])
        return f"F.interpolate({x.name}, scale_factor={scale}, mode={mode!r}{corners})", [x]
    if kind == "unfold" and dims == 2 and batched:
        kernel = [d.rng.randint(1, max(1, min(3, s))) for s in sides]
        return f"F.unfold({x.name}, {tuple(kernel)!r}, padding={d.rng.randint(0, 1)})", [x]
    return None


OP_KINDS = (  # (weight, drawer)
    (20, _unary),
    (20, _binary),
    (3, _division),
    (5, _comparison),
    (7, _where),
    (2, _logical),
    (18, _reduction),
    (7, _matmul),
    (18, _view),
    (7, _joining),
    (8, _indexing),
    (5, _nn),
    (2, _convolution),
    (1, _pooling),
    (1, _stacked_matmul),
    (3, _mixing),
    (6, _scan),
    (7, _rearranging),
    (4, _more_nn),
    (2, _spatial),
)


def _draw_inputs(rng: random.Random, sizes: list) -> tuple:
    precision = rng.choice(["float32", "float32", "float32", "float64", "float64"])
    mixed = rng.random() < 0.2
    count = rng.choice([1, 2, 2, 3])
    inputs = []
    for k in range(count):
        if k and rng.random() < 0.6:  # related to the first: broadcasts with it
            shape = inputs[0].shape[rng.randint(0, len(inputs[0].shape)) :]
            shape = tuple(1 if rng.random() < 0.3 else s for s in shape)
        else:
            rank = rng.choices(range(5), weights=[1, 3, 4, 3, 1])[0]
            shape = tuple(rng.choice(sizes) for _ in range(rank))
        while math.prod(shape) > 5000:
            shape = tuple(1 if s == max(shape) else s for s in shape)
        dtype = precision
        if mixed and k == count - 1:
            dtype = "float64" if precision == "float32" else "float32"
        inputs.append(_input(rng, f"x{k}", shape, dtype))
    return tuple(inputs)


def _input(rng: random.Random, name: str, shape: tuple, dtype: str) -> Input:
    """An input of this shape and dtype, in a random layout and with random values."""
    layouts = ["contiguous"] * 5 + ["strided"] * 2 + ["reversed"] + ["expanded"] * 2
    if len(shape) >= 2:
        layouts += ["transposed"] * 2
    layout = rng.choice(layouts) if shape else "contiguous"
    broadcast = ()
    if layout == "expanded":
        broadcast = tuple(sorted(rng.sample(range(len(shape)), rng.randint(1, len(shape)))))
    fill = rng.choices(["normal", "quantized", "special"], weights=[80, 13, 7])[0]
    specials = ()
    if fill == "special":
        count_specials = rng.randint(1, 2)
        specials = tuple(
            (rng.randrange(1000), rng.choice(SPECIAL_VALUES)) for _ in range(count_specials)
        )
    scale = rng.choice([1.0, 1.0, 1.0, 3.0, 0.3])
    return Input(name, shape, dtype, layout, fill, scale, broadcast, specials)


def draw_program(seed: int, index: int) -> tuple:
    """(program ``index`` of the run with ``seed``, op redraws, programs discarded):
    the same for the same arguments, whatever was drawn before it."""
    rng = random.Random(f"fusegrad-fuzz/{seed}/{index}")
    redraws = discarded = 0
    while True:
        sizes = rng.sample([2, 3, 4, 5], 2) + [1]
        if rng.random() < 0.25:
            sizes.append(0)
        if rng.random() < 0.1:
            sizes.append(rng.choice([17, 64, 130, 1100]))
        inputs = _draw_inputs(rng, sizes)
        shell = Program(seed=rng.randrange(2**31), inputs=inputs, ops=(), outputs=("x0",))
        d = Draw(rng, sizes, shell.seed, list(inputs))
        for spec, tensor in zip(inputs, load(shell)["make_inputs"]()):
            d.values.append(Value(spec.name, tuple(tensor.shape), spec.dtype))
            d.env[spec.name] = tensor
        wanted = rng.randint(2, 12)
        weights, drawers = zip(*OP_KINDS)
        for _ in range(wanted * 20):
            if len(d.ops) == wanted:
                break
            d.attempt(rng.choices(drawers, weights=weights)[0](d))
        redraws += d.redraws
        read = {name for op in d.ops for name in op.reads}
        outputs = [op.out for op in d.ops if op.out not in read][-3:]
        others = [op.out for op in d.ops if op.out not in outputs]
        if others and rng.random() < 0.25:
            outputs.insert(0, rng.choice(others))
        convolves = any("F.conv" in op.expr for op in d.ops)  # half of them: "windows"
        multiplies = any(m in op.expr for op in d.ops for m in PRODUCTS)
        # autocast changes only what products and a few others compute
        autocast = multiplies and rng.random() < AUTOCAST_SHARE
        program = replace(
            shell,
            inputs=tuple(d.inputs),
            ops=tuple(d.ops),
            outputs=tuple(outputs),
            backend=rng.choices(
                BACKENDS, weights=[25, 60, 15, 100 if convolves else 0, 40 if multiplies else 0]
            )[0],
            grad_style=rng.choice(["grad", "loss", "backward"]),
            inside_style=rng.choice(["backward", "grad", "create_graph"]),
            first_output_only=rng.random() < 0.3,
            autocast=autocast,
        )
        if outputs and eager_accepts(program):
            return program, redraws, discarded
        discarded += 1


# ------------------------------------------------------------------ running in a child

# TracingErrors the README documents: the compiled program refuses, clearly
DOCUMENTED_LIMITS = ("boolean-mask indexing",)


def check_call(program: Program, mode: str) -> str:
    """The harness call a mode makes, as source: the fuzzer evaluates it, a reproducer holds it."""
    p, calls, seed = repr(program.precision), program.calls, program.seed
    return {
        "values": f"check_values(program, make_inputs, {p}, calls={calls})",
        "grads": f"check_grads(program, make_inputs, {p}, calls={calls}, "
        f"style={program.grad_style!r}, first={program.first_output_only}, seed={seed})",
        "second": f"check_second(program, make_inputs, calls={calls}, "
        f"style={program.grad_style!r}, seed={seed})",
        "inside": f"check_inside(program, make_inputs, {p}, calls={calls}, "
        f"style={program.inside_style!r}, seed={seed})",
        "executor": f"check_executor(program, make_inputs, {p}, calls={calls}, seed={seed})",
        "dynamic": f"check_dynamic(program, make_inputs, make_resized, {p}, calls={calls}, "
        f"seed={seed})",
    }[mode]


def run_mode(program: Program, mode: str, scope: dict) -> dict:
    """One check in this process: its status and the problems it found."""
    try:
        problems = eval(check_call(program, mode), scope)
        check_heap()
    except NotApplicable as error:
        return {"mode": mode, "status": "skipped", "detail": str(error)}
    except fg.TracingError as error:
        if any(limit in str(error) for limit in DOCUMENTED_LIMITS):
            return {"mode": mode, "status": "unsupported", "detail": str(error)}
        return _exception(mode, error)
    except Exception as error:
        return _exception(mode, error)
    return {"mode": mode, "status": "compared", "problems": problems}


def _exception(mode: str, error: Exception) -> dict:
    lines = traceback.format_exception(error)
    return {
        "mode": mode,
        "status": "exception",
        "problems": [[f"exception:{type(error).__name__}", "".join(lines[-6:]).strip()]],
    }


def _child_main(program: Program, modes: tuple, pipe) -> None:
    warnings.simplefilter("ignore")
    configure_backend(program.backend)
    scope = {**globals(), **load(program)}
    for mode in modes:
        pipe.write(json.dumps({"start": mode}) + "\n")
        pipe.flush()
        pipe.write(json.dumps(run_mode(program, mode, scope)) + "\n")
        pipe.flush()
    # Heap corruption often surfaces only when memory is freed: free it all
    # before saying so.
    scope.clear()
    gc.collect()
    pipe.write(json.dumps({"done": True}) + "\n")
    pipe.flush()


@dataclass(frozen=True)
class Failure:
    kind: str  # mode:category, e.g. "values:value", "grads:crash:SIGSEGV", "inside:timeout"
    detail: str

    @property
    def signature(self) -> str:
        """What must persist while shrinking: the kind, and an exception's message with
        its numbers left out (a shape changes as the program shrinks); for a crash
        only that the process dies by a signal, as heap corruption shows up as an
        abort or a segfault, in one mode or a later one."""
        if ":crash:" in self.kind:
            return "crash"
        if ":exception:" not in self.kind:
            return self.kind
        last = self.detail.strip().splitlines()[-1] if self.detail.strip() else ""
        return f"{self.kind}: {re.sub(r'[0-9]+', '#', last)[:120]}"


@dataclass
class Outcome:
    failures: list
    statuses: dict  # mode -> compared, skipped, unsupported, exception
    seconds: float


class Child:
    """A forked process running a program's checks, reporting one JSON line per event."""

    def __init__(self, program: Program, modes: tuple, timeout: float, main=_child_main):
        read_end, write_end = os.pipe()
        self.stderr = tempfile.TemporaryFile()  # glibc's word on a corrupted heap lands here
        self.started = time.monotonic()
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns into the fuzzer
            os.close(read_end)
            os.dup2(self.stderr.fileno(), 2)
            faulthandler.disable()  # the death is the parent's to report
            code = 0
            try:
                with os.fdopen(write_end, "w") as pipe:
                    main(program, modes, pipe)
            except BaseException:
                traceback.print_exc()
                code = 70
            os._exit(code)
        os.close(write_end)
        self.fd = read_end
        self.deadline = self.started + timeout
        self.data = b""

    def fileno(self) -> int:
        return self.fd

    def read(self) -> bool:
        """Reads what the child wrote; True at the end of its output."""
        chunk = os.read(self.fd, 1 << 16)
        self.data += chunk
        return not chunk

    def finish(self, timed_out: bool = False) -> Outcome:
        if timed_out:
            os.kill(self.pid, signal.SIGKILL)
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        self.stderr.seek(0)
        said = self.stderr.read().decode(errors="replace").strip().splitlines()[-3:]
        self.stderr.close()
        last_words = "".join(f"\n{line}" for line in said)
        failures, statuses, running, done = [], {}, None, False
        for line in self.data.decode(errors="replace").splitlines():
            message = json.loads(line)
            if "start" in message:
                running = message["start"]
            elif "mode" in message:
                running = None
                statuses[message["mode"]] = message["status"]
                failures += _failures(message["mode"], message.get("problems", []))
            else:
                done = True
        where = running or "exit"
        if timed_out:
            seconds = self.deadline - self.started
            failures.append(Failure(f"{where}:timeout", f"no result in {seconds:.0f} s"))
        elif os.WIFSIGNALED(status):
            name = signal.Signals(os.WTERMSIG(status)).name
            failures.append(
                Failure(f"{where}:crash:{name}", f"the process died of {name}{last_words}")
            )
        elif not done:
            code = os.WEXITSTATUS(status)
            failures.append(Failure(f"{where}:died", f"exit status {code}{last_words}"))
        return Outcome(failures, statuses, time.monotonic() - self.started)


def _failures(mode: str, problems: list) -> list:
    """One failure per category of problem, with the first problem's message."""
    first = {}
    counts = Counter()
    for category, message in problems:
        first.setdefault(category, message)
        counts[category] += 1
    return [
        Failure(
            f"{mode}:{category}",
            first[category]
            + (f" (and {counts[category] - 1} more)" if counts[category] > 1 else ""),
        )
        for category in first
    ]


def run_children(jobs: list, workers: int, timeout: float, on_outcome, main=_child_main) -> None:
    """Runs ``jobs`` ((key, program, modes), drawn lazily) in at most ``workers``
    children at once; ``on_outcome(key, program, outcome)`` as each ends."""
    jobs = iter(jobs)
    running: dict = {}
    while True:
        while len(running) < workers:
            job = next(jobs, None)
            if job is None:
                break
            key, program, modes = job
            running[Child(program, modes, timeout, main)] = (key, program)
        if not running:
            return
        wait = max(0.0, min(c.deadline for c in running) - time.monotonic())
        ready, _, _ = select.select(list(running), [], [], wait)
        for child in ready:
            if child.read():
                on_outcome(*running.pop(child), child.finish())
        for child in [c for c in running if time.monotonic() > c.deadline]:
            on_outcome(*running.pop(child), child.finish(timed_out=True))


def run_program(program: Program, modes: tuple, timeout: float, main=_child_main) -> Outcome:
    found = []
    run_children([(0, program, modes)], 1, timeout, lambda *r: found.append(r[2]), main)
    return found[0]


# ------------------------------------------------------------------ shrinking


def _prune(program: Program) -> Program:
    """Without the ops no output depends on."""
    needed = set(program.outputs)
    kept = []
    for op in reversed(program.ops):
        if op.out in needed:
            kept.append(op)
            needed.update(op.reads)
    return replace(program, ops=tuple(reversed(kept)))


def _bypass(program: Program, index: int, replacement: str) -> Program | None:
    """The program with op ``index`` gone and its readers reading ``replacement``."""
    gone = program.ops[index].out

    def swap(text):
        return re.sub(rf"\b{gone}\b", replacement, text)

    ops = [
        Op(
            op.out,
            swap(op.expr),
            tuple(dict.fromkeys(replacement if r == gone else r for r in op.reads)),
        )
        for op in program.ops[index + 1 :]
    ]
    inputs = {i.name for i in program.inputs}
    outputs = [
        o
        for o in dict.fromkeys(replacement if o == gone else o for o in program.outputs)
        if o not in inputs
    ]
    if not outputs:
        return None
    return _prune(replace(program, ops=program.ops[:index] + tuple(ops), outputs=tuple(outputs)))


def _with_input(program: Program, k: int, new: tuple) -> Program:
    return replace(program, inputs=program.inputs[:k] + new + program.inputs[k + 1 :])


def _smaller_inputs(program: Program):
    """Inputs made simpler one change at a time: fewer, contiguous, plain values, smaller sizes."""
    used = {r for op in program.ops for r in op.reads}
    for k, spec in enumerate(program.inputs):
        if spec.name not in used and len(program.inputs) > 1:
            yield _with_input(program, k, ())
        if spec.layout != "contiguous":
            yield _with_input(program, k, (replace(spec, layout="contiguous", broadcast=()),))
        if spec.fill != "normal":
            yield _with_input(program, k, (replace(spec, fill="normal", specials=()),))
        for j in range(len(spec.specials) if len(spec.specials) > 1 else 0):
            kept = spec.specials[:j] + spec.specials[j + 1 :]
            yield _with_input(program, k, (replace(spec, specials=kept),))
        if spec.scale != 1.0:
            yield _with_input(program, k, (replace(spec, scale=1.0),))
        for d, size in enumerate(spec.shape):
            # toward 1 and 2, never to 0: an empty dimension is another failure
            for smaller in dict.fromkeys(s for s in (1, 2, size // 2, size - 1) if 0 < s < size):
                shape = spec.shape[:d] + (smaller,) + spec.shape[d + 1 :]
                yield _with_input(program, k, (replace(spec, shape=shape),))


NUMBER = re.compile(r"(?<![\w.])\d+\.\d+(?:e[-+]?\d+)?")


def candidates(program: Program):
    """Smaller programs, the biggest cuts first."""
    for calls in range(1, program.calls):
        yield replace(program, calls=calls)
    if len(program.outputs) > 1:
        for o in program.outputs:
            yield _prune(replace(program, outputs=tuple(x for x in program.outputs if x != o)))
    for index in reversed(range(len(program.ops))):
        for replacement in program.ops[index].reads:
            yield _bypass(program, index, replacement)
    yield from _smaller_inputs(program)
    for index, op in enumerate(program.ops):
        for match in NUMBER.finditer(op.expr):
            for simpler in ("1.0", "2.0", "0.5"):
                if float(simpler) != float(match.group()):
                    expr = op.expr[: match.start()] + simpler + op.expr[match.end() :]
                    ops = program.ops[:index] + (replace(op, expr=expr),) + program.ops[index + 1 :]
                    yield replace(program, ops=ops)
                    break
    if program.backend in ("threads", "windows", "products"):
        yield replace(program, backend="native")
    if program.backend != "default":
        yield replace(program, backend="default")
    if program.grad_style != "grad":
        yield replace(program, grad_style="grad")
    if program.inside_style != "backward":
        yield replace(program, inside_style="backward")
    if program.first_output_only:
        yield replace(program, first_output_only=False)


def shrink(program: Program, still_fails, max_runs: int = 200, seconds: float = 180.0) -> tuple:
    """(the smallest program found that ``still_fails``, candidates run): greedy,
    taking the first smaller candidate that still fails until none does."""
    runs, deadline = 0, time.monotonic() + seconds
    seen = {program.digest}
    improved = True
    while improved and runs < max_runs and time.monotonic() < deadline:
        improved = False
        for candidate in candidates(program):
            if candidate is None or candidate.digest in seen:
                continue
            seen.add(candidate.digest)
            if not eager_accepts(candidate):
                continue
            runs += 1
            if still_fails(candidate):
                program, improved = candidate, True
                break
            if runs >= max_runs or time.monotonic() > deadline:
                break
    return program, runs


# ------------------------------------------------------------------ reproducers


HARNESS_BEGIN = "# " + "-" * 66 + " harness begin"
HARNESS_END = "# " + "-" * 66 + " harness end"


def harness_source() -> str:
    text = Path(__file__).read_text()
    return text[text.index(HARNESS_BEGIN) : text.index(HARNESS_END)].rstrip() + "\n"


def reproducer(program: Program, failure: Failure, modes: tuple, origin: str) -> str:
    detail = "\n".join("    " + line for line in failure.detail.splitlines())
    lines = [
        f'"""fusegrad fuzzer reproducer: {failure.kind} ({origin}); as first found:',
        "",
        detail.replace('"""', "'''").replace("\\", "\\\\"),
        "",
        "Run:  MALLOC_PERTURB_=165 python this_file.py  (exit status 1, a traceback or a",
        "crash while the failure is there). `program` is the code under test, `make_inputs`",
        "its arguments; below them is the fuzzer's comparison code, verbatim.",
        '"""',
        "",
        "import contextlib",
        "import os",
        "",
        'os.environ.setdefault("FUSEGRAD_CACHE_DIR", "")  # compile afresh',
        "",
        "import numpy as np  # noqa: E402",
        "",
        "import fusegrad as fg  # noqa: E402",
        "import fusegrad.nn.functional as F  # noqa: E402",
        "",
        "",
        program.source,
        "",
        harness_source(),
        "",
        'if __name__ == "__main__":',
        f"    configure_backend({program.backend!r})",
        "    problems = []",
        *[f"    problems += {check_call(program, mode)}\n    check_heap()" for mode in modes],
        "    for category, message in problems:",
        '        print(f"{category}: {message}")',
        "    raise SystemExit(1 if problems else 0)",
    ]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ the fuzzing run


@dataclass
class Report:
    programs: int = 0
    discarded: int = 0
    redraws: int = 0
    passed: int = 0
    unsupported: int = 0
    seconds: float = 0.0
    failures: list = field(default_factory=list)  # (index, program, failure, shrunk, path)
    statuses: Counter = field(default_factory=Counter)  # (mode, status) -> programs

    def by_kind(self) -> Counter:
        return Counter(f.kind for _, _, f, _, _ in self.failures)

    def tally(self) -> str:
        rate = self.programs / self.seconds if self.seconds else 0.0
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.by_kind().items())) or "none"
        modes = "; ".join(
            f"{mode} "
            + ", ".join(f"{n} {status}" for (m, status), n in self.statuses.items() if m == mode)
            for mode in dict.fromkeys(m for m, _ in self.statuses)
        )
        return (
            f"programs: {self.programs} run in {self.seconds:.0f} s ({rate:.2f}/s), "
            f"{self.discarded} discarded ({self.redraws} op redraws), {self.passed} passed, "
            f"{self.unsupported} refused by jit as documented\n"
            f"checks run: {modes}\n"
            f"failures by kind: {kinds}"
        )


def fuzz(
    programs: int,
    seed: int = 0,
    jobs: int = 1,
    out: Path | None = None,
    timeout: float = 60.0,
    modes: tuple = MODES,
    shrink_per_kind: int = 2,
    shrink_seconds: float = 180.0,
    first: int = 0,
    log=print,
) -> Report:
    """Runs programs ``first .. first + programs - 1`` of ``seed`` in every mode; shrinks
    the first ``shrink_per_kind`` failures of each kind (for up to ``shrink_seconds``
    each) and writes a reproducer of every failure to ``out``."""
    report = Report()
    start = time.monotonic()

    def jobs_to_run():
        for index in range(first, first + programs):
            program, redraws, discarded = draw_program(seed, index)
            report.redraws += redraws
            report.discarded += discarded
            yield index, program, modes

    found = []

    def on_outcome(index, program, outcome):
        report.programs += 1
        report.unsupported += "unsupported" in outcome.statuses.values()
        report.statuses.update(outcome.statuses.items())
        if not outcome.failures:
            report.passed += 1
        for failure in outcome.failures:
            found.append((index, program, failure))
            log(f"program {index}: {failure.kind}: {failure.detail.splitlines()[-1][:160]}")

    run_children(jobs_to_run(), jobs, timeout, on_outcome)
    report.seconds = time.monotonic() - start
    shrunk_per_kind = Counter()
    for index, program, failure in sorted(found, key=lambda f: f[0]):
        shrunk, sequence = program, modes_to_reproduce(failure, modes)[-1]
        if shrunk_per_kind[failure.kind] < shrink_per_kind:
            shrunk_per_kind[failure.kind] += 1
            shrunk, sequence, runs = shrink_failure(
                program, failure, modes, timeout, shrink_seconds
            )
            log(
                f"program {index}: {failure.kind}: shrunk from {len(program.ops)} ops to "
                f"{len(shrunk.ops)} in {runs} runs"
            )
        path = None
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            slug = re.sub(r"[^\w]+", "-", failure.kind)
            path = out / f"{slug}-{shrunk.digest}.py"
            origin = f"program {index} of seed {seed}" + (
                ", shrunk" if shrunk is not program else ""
            )
            path.write_text(reproducer(shrunk, failure, sequence, origin))
        report.failures.append((index, program, failure, shrunk, path))
    return report


CRASH_ATTEMPTS = 3


def modes_to_reproduce(failure: Failure, modes: tuple) -> list:
    """The mode sequences that may reproduce a failure, shortest first: its own
    mode alone, then every mode the child ran up to it (an earlier mode may
    have corrupted the heap a later one trips over); all of them for a failure
    at exit."""
    mode = failure.kind.split(":")[0]
    if mode not in modes:
        return [modes]
    prefix = modes[: modes.index(mode) + 1]
    return [(mode,)] if prefix == (mode,) else [(mode,), prefix]


def shrink_failure(
    program: Program, failure: Failure, modes: tuple, timeout: float, seconds: float
) -> tuple:
    """(the shrunk program, the modes that reproduce it, candidates run); the
    program as it is when no mode sequence reproduces the failure again."""
    # Heap corruption is detected or not depending on the heap's layout: a
    # crash counts if any of a few runs crashes.
    attempts = CRASH_ATTEMPTS if failure.signature == "crash" else 1

    def fails(candidate, sequence):
        for _ in range(attempts):
            outcome = run_program(candidate, sequence, timeout)
            if any(f.signature == failure.signature for f in outcome.failures):
                return True
        return False

    for sequence in modes_to_reproduce(failure, modes):
        if fails(program, sequence):
            shrunk, runs = shrink(program, lambda c, s=sequence: fails(c, s), seconds=seconds)
            return shrunk, sequence, runs
    return program, modes, 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--first", type=int, default=0, help="index of the first program")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("fuzz-failures"))
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per program")
    parser.add_argument(
        "--modes", default=",".join(MODES), help="comma-separated: " + ", ".join(MODES)
    )
    parser.add_argument("--shrink-per-kind", type=int, default=2, help="failures shrunk per kind")
    parser.add_argument("--shrink-seconds", type=float, default=180.0, help="per failure")
    parser.add_argument("--show", type=int, help="print program INDEX's source and exit")
    args = parser.parse_args(argv)
    if args.show is not None:
        print(draw_program(args.seed, args.show)[0].source, end="")
        return 0
    modes = tuple(m for m in args.modes.split(",") if m)
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes: {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory(prefix="fusegrad-fuzz-cache-") as cache:
        # kernels compiled by one program's child are found by the next ones
        os.environ.setdefault("FUSEGRAD_CACHE_DIR", cache)
        report = fuzz(
            args.programs,
            args.seed,
            args.jobs,
            args.out,
            args.timeout,
            modes,
            args.shrink_per_kind,
            args.shrink_seconds,
            args.first,
        )
    for index, program, failure, shrunk, path in report.failures:
        print(
            f"FAIL {failure.kind} program {index} ({len(program.ops)} ops, shrunk to "
            f"{len(shrunk.ops)}): {path}: {failure.detail.splitlines()[-1][:200]}"
        )
    print(report.tally())
    return 1 if report.failures else 0


def run_as_script(main) -> None:
    """A fuzzer's command line: glibc fills what malloc returns with a pattern
    (a read of memory nothing wrote gives garbage instead of a lucky 0), BLAS
    on one thread (one core per job); the process starts again with both set."""
    if "MALLOC_PERTURB_" not in os.environ:
        os.environ["MALLOC_PERTURB_"] = "165"
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        os.execv(sys.executable, [sys.executable, *sys.argv])
    sys.exit(main())


if __name__ == "__main__":
    run_as_script(main)
