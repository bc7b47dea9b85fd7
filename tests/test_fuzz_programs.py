"""The program-level differential fuzzer (tools/fuzz_programs.py): a fixed budget
of random Python programs run eagerly and compiled, compared by semantics.py,
and the fuzzer's own machinery.

FUSEGRAD_PROGRAM_FUZZ sets the budget (40 programs by default, about ten
seconds), FUSEGRAD_PROGRAM_FUZZ_SEED the programs.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load_fuzz_programs():
    spec = importlib.util.spec_from_file_location(
        "fuzz_programs", ROOT / "tools" / "fuzz_programs.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_programs"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


fp = _load_fuzz_programs()

# What the generator is meant to draw; each must show up in a few dozen programs.
CONSTRUCTS = {
    "elementwise", "reduction", "matmul", "indexing", "view", "setitem",
    "item", "float", "int", "tolist", "branch", "for", "raise",
    "object-attribute", "module-attribute", "module-state", "train-eval", "dropout",
    "global-read", "global-write", "list-append", "dict-set", "closure",
    "inplace-argument", "inplace-view", "same-tensor-twice", "tensor-and-its-view",
    "global-as-argument", "shape-changes", "requires-grad-argument",
    "hook", "backward", "optimizer", "scheduler", "between",
}  # fmt: skip


def test_random_python_programs_run_compiled_as_they_run_eagerly():
    programs = int(os.environ.get("FUSEGRAD_PROGRAM_FUZZ", "40"))
    seed = int(os.environ.get("FUSEGRAD_PROGRAM_FUZZ_SEED", "0"))
    report = fp.fuzz_programs(programs, seed, shrink_seconds=0, log=lambda line: None)
    if report.failures:
        shown = "\n\n".join(
            f"# program {index}: {failure.kind}: {fp.headline(failure)[:300]}\n"
            f"# constructs: {', '.join(program.constructs)}\n{program.source}"
            for index, program, failure, _, _ in report.failures[:3]
        )
        raise AssertionError(
            f"{report.tally()}\n`python tools/fuzz_programs.py --programs {programs} "
            f"--seed {seed}` shrinks them to reproducers\n\n{shown}"
        )


def test_the_same_seed_draws_the_same_programs():
    first = [fp.draw_program(7, index)[0].source for index in range(5)]
    again = [fp.draw_program(7, index)[0].source for index in reversed(range(5))][::-1]
    assert first == again
    assert len(set(first)) == 5
    assert fp.draw_program(8, 0)[0].source != first[0]


def test_the_generator_draws_every_construct_in_programs_eager_runs():
    drawn = [fp.draw_program(3, index) for index in range(60)]
    assert all(3 <= program.statements <= fp.MAX_STATEMENTS for program, _ in drawn)
    assert sum(redraws for _, redraws in drawn) < 10  # eager refuses few of them
    assert CONSTRUCTS - {c for program, _ in drawn for c in program.constructs} == set()


def _reads_an_item(program) -> bool:
    """The fake checker: as if the jit got every ``.item()`` in step wrong."""
    return any(".item()" in p.text for p in program.pieces if p.place == "step")


def test_the_shrinker_cuts_everything_a_planted_failure_does_not_need():
    drawn = (fp.draw_program(0, index)[0] for index in range(100))
    program = next(
        p for p in drawn if len(p.features) >= 4 and p.arguments.constructs and _reads_an_item(p)
    )
    shrunk, runs = fp.shrink(program, _reads_an_item)
    assert _reads_an_item(shrunk) and runs > 5
    # the statement reading .item(), and what it reads (a loss, an object)
    assert len(shrunk.features) == 1 and shrunk.statements <= 2
    assert shrunk.calls == 1 and shrunk.arguments.constructs == []
    assert not any(_reads_an_item(c) and fp.eager_valid(c) for c in fp.candidates(shrunk))


def test_a_divergence_in_the_child_shrinks_to_a_standalone_reproducer(tmp_path):
    # a global drawn by an unseeded generator: different in the eager and the
    # compiled namespace, whatever the jit does
    planted = fp.Feature(
        (
            fp.in_state("offset = float(np.random.default_rng().standard_normal())"),
            fp.in_step("h = h + offset"),
        )
    )
    program = fp.Program(
        seed=1,
        arguments=fp.Arguments(seed=2, cols=3, rows=(2, 3), grad=False, alias="same"),
        features=(
            planted,
            fp.Feature((fp.in_step("h = fg.tanh(h) * 0.5 + 0.25", "elementwise"),)),
            fp.Feature((fp.in_step("h = h - h.mean(dim=0, keepdim=True)", "reduction"),)),
        ),
    )
    (failure,) = fp.run_program(program, timeout=60).failures
    assert fp.verdict(failure) == "diverged"
    assert fp.signature(failure) == "diverged at result[1][0]"

    shrunk, _ = fp.shrink_failure(program, failure, timeout=60, seconds=60)
    assert shrunk == fp.Program(
        seed=1,
        arguments=fp.Arguments(seed=2, cols=3, rows=(2,), grad=False, alias="none"),
        features=(planted,),
        calls=1,
    )

    path = tmp_path / "reproducer.py"
    path.write_text(fp.reproducer(shrunk, failure, "a test"))
    result = subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert result.returncode == 1 and "Divergence: call 1: result[1][0]" in result.stderr
