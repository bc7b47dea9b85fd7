"""Real programs, written as PyTorch users write them (tests/programs/), run with
fusegrad: each must compute what PyTorch computed (tests/golden/programs/, made by
``python tools/make_goldens.py`` with PyTorch itself), eagerly and with its training
step compiled by ``fusegrad.jit``.

Each program runs in a process of its own, so a crash or a hang fails only its test.

Tolerances. A number is compared as part of the quantity it belongs to (a loss
trajectory, a parameter's values): the largest difference must be within rtol of
the quantity's largest magnitude, so an entry that happens to be near zero is not
held to a relative precision its neighbours' rounding decides. float32 programs get
rtol 1e-4: the two libraries round the same float32 operations differently
(summation order in BLAS, in fused reductions, in convolution), each by about 1e-7,
and training steps compound that; run in float64 instead, PyTorch's numbers for
these programs move by at most 2e-6, so 1e-4 leaves a wide margin, while a real
mistake moves losses and weights by far more. float64 programs get 1e-9: their
numbers move by ~4e-12 when their inputs are perturbed at the rounding level, and a
float32 intermediate anywhere (its rounding alone is 6e-8) would show. Programs
computing in bfloat16 under autocast get 1e-2, a few units of bfloat16's rounding
(2**-8 = 3.9e-3). PyTorch's bfloat16 kernels are not fusegrad's rounding once
in float32, and differ between CPUs: a convolution's weight gradient, on a CPU
without AVX512, is summed into a bfloat16 tensor one batch sample at a time and
rounded each time (on one with AVX512, PyTorch takes oneDNN's kernel instead), so
values move by a unit here and there and training compounds it (1.5e-3 today).
Their dtypes still compare exactly. Integers, booleans, strings and names compare
exactly.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fusegrad

from programs.run import program_names

HERE = Path(__file__).parent
RUN = HERE / "programs" / "run.py"
GOLDEN = HERE / "golden" / "programs"

RTOL = 1e-4
FLOAT64_RTOL = 1e-9
FLOAT64_PROGRAMS = {
    "forward_mode_ad",
    "gaussian_process",
    "jacobians_hessians",
    "lstm_sine",
    "lstm_sine_lbfgs",
    "micrograd_check",
    "neural_tangent_kernel",
    "pinn_poisson",
}
BFLOAT16_RTOL = 1e-2
BFLOAT16_PROGRAMS = {"mixed_precision_loop"}
TIMEOUT_SECONDS = 600

# What each program lacks today: first the API it stops at (its exception), then what
# else it uses that fusegrad does not have yet. These tests are strict xfails, so when
# a program starts to pass, its test fails until its entry here is deleted.
NOT_YET: dict = {}

MODES = ("eager", "compiled")


def _cases():
    for program in program_names():
        for mode in MODES:
            marks = []
            if (program, mode) in NOT_YET:
                marks = [pytest.mark.xfail(strict=True, reason=NOT_YET[program, mode])]
            yield pytest.param(program, mode, id=f"{program}-{mode}", marks=marks)


def _run(program: str, mode: str):
    """What the program returns when it runs with fusegrad (this process's fusegrad)."""
    library_root = str(Path(fusegrad.__file__).parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [library_root, env.get("PYTHONPATH")]))
    command = [sys.executable, str(RUN), program, "fusegrad"]
    if mode == "compiled":
        command.append("--compiled")
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=TIMEOUT_SECONDS
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{program} ({mode}) ran longer than {TIMEOUT_SECONDS} s")
    if done.returncode != 0:
        pytest.fail(f"{program} ({mode}) failed:\n{done.stderr[-3000:]}", pytrace=False)
    return json.loads(done.stdout)


def _is_float_quantity(value) -> bool:
    """Whether value is a float, or a (nested) list of numbers with a float among them."""
    leaves = np.asarray(value, dtype=object).ravel() if isinstance(value, list) else [value]
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in leaves)
    return numbers and any(isinstance(v, float) for v in leaves)


def _mismatches(actual, expected, rtol, path="result"):
    """Where actual differs from expected: (path, description) pairs."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in [*expected, *(key for key in actual if key not in expected)]:
            if key not in actual or key not in expected:
                yield f"{path}[{key!r}]", "missing" if key not in actual else "unexpected"
            else:
                yield from _mismatches(actual[key], expected[key], rtol, f"{path}[{key!r}]")
    elif _is_float_quantity(expected) and _is_float_quantity(actual):
        a, e = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
        if a.shape != e.shape:
            yield path, f"shape {a.shape}, expected {e.shape}"
            return
        error = np.max(np.abs(a - e), initial=0.0)
        scale = np.max(np.abs(e), initial=0.0)
        if not error <= rtol * scale:  # NaN fails too
            off = f"{error / scale:.1e} of its largest magnitude" if scale else f"{error:.1e}"
            yield path, f"{actual}\n  expected {expected}\n  (off by {off})"
    elif json.dumps(actual) != json.dumps(expected):  # exactly, 1 and 1.0 differing
        yield path, f"{actual!r}, expected {expected!r}"


@pytest.mark.parametrize(("program", "mode"), list(_cases()))
def test_program_computes_what_pytorch_computes(program, mode):
    expected = json.loads((GOLDEN / f"{program}.json").read_text())["result"]
    actual = _run(program, mode)
    rtol = RTOL
    if program in FLOAT64_PROGRAMS:
        rtol = FLOAT64_RTOL
    if program in BFLOAT16_PROGRAMS:
        rtol = BFLOAT16_RTOL
    mismatches = list(_mismatches(actual, expected, rtol))
    assert not mismatches, "\n".join(f"{path}: {text}" for path, text in mismatches)


def test_every_program_has_a_golden():
    assert sorted(path.stem for path in GOLDEN.glob("*.json")) == program_names()


def test_the_xfail_table_names_only_real_cases():
    assert set(NOT_YET) <= {(program, mode) for program in program_names() for mode in MODES}
