"""The differential fuzzer (tools/fuzz.py): a fixed budget of random programs
compiled and compared with eager in every mode, and the fuzzer's own machinery.

FUSEGRAD_FUZZ_PROGRAMS sets the budget (60 by default, about two minutes on
one core), FUSEGRAD_FUZZ_SEED the programs, FUSEGRAD_FUZZ_MODES the
modes (comma-separated, all by default; leave out a mode known to fail only
here, never by weakening a comparison).
"""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FUZZ_SCRIPT = ROOT / "tools" / "fuzz.py"


def _load_fuzz():
    spec = importlib.util.spec_from_file_location("fuzz", FUZZ_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


fuzz = _load_fuzz()


def _fresh_interpreter_env() -> dict:
    env = dict(os.environ, MALLOC_PERTURB_="165", OPENBLAS_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def test_random_programs_compile_to_what_eager_computes(tmp_path):
    programs = os.environ.get("FUSEGRAD_FUZZ_PROGRAMS", "60")
    command = [
        sys.executable,
        str(FUZZ_SCRIPT),
        f"--programs={programs}",
        f"--seed={os.environ.get('FUSEGRAD_FUZZ_SEED', '0')}",
        f"--modes={os.environ.get('FUSEGRAD_FUZZ_MODES', ','.join(fuzz.MODES))}",
        "--jobs=1",
        f"--out={tmp_path}",
        "--shrink-per-kind=0",  # shrinking takes minutes: tools/fuzz.py does it
    ]
    result = subprocess.run(command, capture_output=True, text=True, env=_fresh_interpreter_env())
    if result.returncode:
        programs = "\n\n".join(  # a reproducer's own part: what failed, and the program
            f"# {path}\n{path.read_text().split(fuzz.HARNESS_BEGIN)[0].strip()}"
            for path in sorted(tmp_path.glob("*.py"))[:5]
        )
        raise AssertionError(f"{result.stdout}{result.stderr[-2000:]}\n\n{programs}")


def test_the_same_seed_draws_the_same_programs():
    first = [fuzz.draw_program(7, index)[0].source for index in range(5)]
    again = [fuzz.draw_program(7, index)[0].source for index in reversed(range(5))][::-1]
    assert first == again
    assert len(set(first)) == 5
    assert fuzz.draw_program(8, 0)[0].source != first[0]


def test_drawn_programs_run_eagerly_from_their_source():
    for index in range(20):
        program = fuzz.draw_program(3, index)[0]
        assert 1 <= len(program.ops) <= 12 and program.outputs
        assert fuzz.eager_accepts(program)
        namespace = fuzz.load(program)
        with np.errstate(all="ignore"):
            outputs = namespace["program"](*namespace["make_inputs"]())
        assert all(isinstance(o, fuzz.fg.Tensor) for o in outputs)


def test_every_kind_of_op_is_drawn_and_eager_accepts_some():
    """A drawer whose ops eager always refuses (a misspelt name, arguments
    out of range) would test nothing, silently."""
    for _, drawer in fuzz.OP_KINDS:
        kept = 0
        for index in range(4):
            program = fuzz.draw_program(5, index)[0]
            d = fuzz.Draw(random.Random(index), [2, 3, 1], program.seed, list(program.inputs))
            shell = fuzz.replace(program, ops=(), outputs=("x0",))
            for spec, tensor in zip(program.inputs, fuzz.load(shell)["make_inputs"]()):
                d.values.append(fuzz.Value(spec.name, tuple(tensor.shape), spec.dtype))
                d.env[spec.name] = tensor
            d.attempt(("x0 > 0", [d.values[0]]))  # a bool, which some kinds read
            for _ in range(8):
                d.attempt(drawer(d))
            kept += len(d.ops) - 1
        assert kept >= 4, drawer.__name__


def _chain() -> object:
    """x0 (transposed, 4x3) -> tanh -> exp -> row sums -> times 2."""
    ops = [
        fuzz.Op("v0", "fg.tanh(x0)", ("x0",)),
        fuzz.Op("v1", "fg.exp(v0)", ("v0",)),
        fuzz.Op("v2", "v1.sum(dim=1)", ("v1",)),
        fuzz.Op("v3", "v2 * 2.0", ("v2",)),
    ]
    x0 = fuzz.Input("x0", (4, 3), "float32", layout="transposed")
    return fuzz.Program(seed=1, inputs=(x0,), ops=tuple(ops), outputs=("v3",))


def _abort_on_exp(program, modes, pipe):
    pipe.write('{"start": "synthetic"}\n')
    pipe.flush()
    if "fg.exp(" in program.source:
        os.abort()
    pipe.write('{"mode": "synthetic", "status": "compared", "problems": []}\n{"done": true}\n')


def test_the_shrinker_keeps_a_failure_while_cutting_everything_else():
    def still_fails(candidate):
        outcome = fuzz.run_program(candidate, ("synthetic",), 10, main=_abort_on_exp)
        return any(f.signature == "crash" for f in outcome.failures)

    shrunk, runs = fuzz.shrink(_chain(), still_fails)
    assert [op.expr for op in shrunk.ops] == ["fg.exp(x0)"]
    assert shrunk.outputs == ("v1",)
    assert shrunk.inputs[0].shape == (1, 1) and shrunk.inputs[0].layout == "contiguous"
    assert runs > 3


def test_a_crash_or_a_hang_in_the_child_is_a_failure_of_the_program():
    program = _chain()

    def hang(program, modes, pipe):
        pipe.write('{"start": "synthetic"}\n')
        pipe.flush()
        time.sleep(60)

    def abort_at_exit(program, modes, pipe):
        pipe.write('{"start": "synthetic"}\n{"mode": "synthetic", "status": "compared"}\n')
        pipe.flush()
        os.abort()  # as heap corruption found when the arrays are freed

    crashed = fuzz.run_program(program, ("synthetic",), 10, main=_abort_on_exp)
    assert [f.kind for f in crashed.failures] == ["synthetic:crash:SIGABRT"]
    hung = fuzz.run_program(program, ("synthetic",), 1, main=hang)
    assert [f.kind for f in hung.failures] == ["synthetic:timeout"]
    late = fuzz.run_program(program, ("synthetic",), 10, main=abort_at_exit)
    assert [f.kind for f in late.failures] == ["exit:crash:SIGABRT"]
    assert late.statuses == {"synthetic": "compared"}


def test_a_program_that_passes_passes_in_every_mode():
    outcome = fuzz.run_program(
        fuzz.Program(
            seed=3,
            inputs=(fuzz.Input("x0", (3, 4), "float64"),),
            ops=(fuzz.Op("v0", "fg.tanh(x0) * 2.0", ("x0",)),),
            outputs=("v0",),
        ),
        fuzz.MODES,
        60,
    )
    assert outcome.failures == []
    assert outcome.statuses == dict.fromkeys(fuzz.MODES, "compared")


def test_a_reproducer_is_a_standalone_script(tmp_path):
    program = fuzz.Program(
        seed=5,
        inputs=(fuzz.Input("x0", (2, 3), "float32", layout="strided"),),
        ops=(fuzz.Op("v0", "x0 + 1.0", ("x0",)),),
        outputs=("v0",),
    )
    failure = fuzz.Failure("values:value", "a made-up difference")
    path = tmp_path / "reproducer.py"
    path.write_text(fuzz.reproducer(program, failure, ("values",), "a test"))
    result = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, env=_fresh_interpreter_env()
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "def program(x0):\n    v0 = x0 + 1.0\n" in path.read_text()


def test_rounding_noise_passes_and_a_wrong_number_does_not():
    want = np.array([1.0, 2.0, np.nan, np.inf], np.float32)
    close = want * np.float32(1 + 2e-6)
    assert fuzz.mismatch(close, want, None, "float32") is None
    wrong = want.copy()
    wrong[1] = 2.01
    assert fuzz.mismatch(wrong, want, None, "float32")[0] == "value"
    nan_lost = want.copy()
    nan_lost[2] = 0.0
    assert fuzz.mismatch(nan_lost, want, None, "float32")[0] == "nonfinite"
    # an element whose eager value itself moves under rounding gets that much room
    noisy = np.array([0.0, 0.0, 0.0, 0.0])
    noisy[1] = 0.05
    assert fuzz.mismatch(wrong, want, noisy, "float32") is None
    # None (eager: an unused input) and zeros (a compiled node) are the same gradient
    assert fuzz.mismatch(np.zeros(3), None, None, "float64") is None
    assert fuzz.mismatch(None, np.ones(3), None, "float64")[0] == "none"
    assert fuzz.mismatch(want[:2], want, None, "float32")[0] == "shape"


def test_rounding_noise_moves_eager_values_by_ulps_and_then_leaves_them_exact():
    x = fuzz.fg.tensor(np.linspace(0.1, 3.0, 50))
    exact = fuzz.fg.exp(x).numpy()
    with fuzz.rounding_noise():
        noisy = fuzz.fg.exp(x).numpy()
        total = x.sum().numpy()
    assert not np.array_equal(noisy, exact)
    np.testing.assert_allclose(noisy, exact, rtol=1e-15)
    assert total != np.sum(x.numpy()) and abs(total - np.sum(x.numpy())) < 1e-12
    np.testing.assert_array_equal(fuzz.fg.exp(x).numpy(), exact)


def test_under_autocast_a_step_to_the_neighbouring_bfloat16_passes_and_more_does_not():
    """A float32 value an ulp apart in a kernel may round to the next
    bfloat16; two steps, a float32 value in a bfloat16 output or a float32
    output where eager's is bfloat16 are failures."""
    bfloat16 = np.dtype(np.float32, metadata={"dtype": "bfloat16"})
    want = np.array([1.0, 2.0, 3.0, -0.5], np.float32).astype(bfloat16)
    step = want.copy()
    step[1] = 2.015625  # 2 + 2**-6, the next bfloat16
    assert fuzz.mismatch(step, want, None, "bfloat16") is None
    two = want.copy()
    two[1] = 2.03125
    assert fuzz.mismatch(two, want, None, "bfloat16")[0] == "value"
    unrounded = want.copy()
    unrounded[1] = 2.0001
    assert fuzz.mismatch(unrounded, want, None, "bfloat16")[0] == "rounding"
    assert fuzz.mismatch(want.astype(np.float32), want, None, "bfloat16")[0] == "dtype"


def test_rounding_noise_leaves_autocast_values_rounded():
    x = fuzz.fg.tensor(np.linspace(0.1, 3.0, 50), dtype=fuzz.fg.float32)
    with fuzz.fg.autocast("cpu", dtype=fuzz.fg.bfloat16):
        rounded = (x[None] @ x[:, None]).detach()
    with fuzz.rounding_noise(keep_bfloat16=True):
        with fuzz.fg.autocast("cpu", dtype=fuzz.fg.bfloat16):
            again = fuzz.values_of(x[None] @ x[:, None])
        moved = fuzz.values_of(x.exp())
    assert rounded.dtype == fuzz.fg.bfloat16 and fuzz.dtype_name(again) == "bfloat16"
    np.testing.assert_array_equal(again, fuzz.values_of(rounded))
    assert not np.array_equal(moved, x.exp().numpy())


def test_autocast_programs_render_their_ops_under_autocast():
    program = fuzz.replace(_chain(), autocast=True)
    assert program.precision == "bfloat16"
    assert '    with fg.autocast("cpu", dtype=fg.bfloat16):\n        v0 = fg.tanh(x0)' in (
        program.source
    )
    assert fuzz.eager_accepts(program)
