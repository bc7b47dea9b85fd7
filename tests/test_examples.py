"""The examples run and print what PyTorch prints."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def _run(example: str, *arguments: str) -> str:
    """What examples/<example> prints."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / example), *arguments],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def test_autograd_tutorial_prints_what_pytorch_prints():
    printed = re.sub(r"0x[0-9a-f]+", "0x...", _run("autograd_tutorial.py"))
    assert printed == (ROOT / "tests" / "golden" / "autograd_tutorial.txt").read_text()


def test_jit_tutorial_gives_eager_gradients_and_prints_the_ir():
    out = _run("jit_tutorial.py")
    assert out.count("grad == d / a: True") == 4
    assert "grad_fn CompiledFunctionBackward" in out
    assert "forward(%0: f32[2,3], %1: f32[3,4]):" in out and "backward(" in out
    assert "tensor([ 6., 12.])" in out


def test_train_mlp_learns_the_spirals_with_a_compiled_step():
    lines = _run("train_mlp.py", "--steps", "200").splitlines()
    progress = [line for line in lines if line.startswith("step")]
    assert len(progress) == 11 and progress[-1].startswith("step   200/200")
    losses = [float(re.search(r"loss (\S+)", line).group(1)) for line in progress]
    assert losses[-1] < losses[0] / 10
    assert float(re.search(r"accuracy\s+(\S+)%", progress[-1]).group(1)) > 95
    assert re.fullmatch(r"time per step: eager \S+ ms, jit \S+ ms .*", lines[-1])


def test_train_cnn_learns_to_read_the_digits_with_a_compiled_step():
    lines = _run("train_cnn.py", "--steps", "80").splitlines()
    progress = [line for line in lines if line.startswith("step")]
    assert len(progress) == 11 and progress[-1].startswith("step    80/80")
    losses = [float(re.search(r"loss (\S+)", line).group(1)) for line in progress]
    assert losses[-1] < losses[0] / 1.3
    assert float(re.search(r"accuracy\s+(\S+)%", progress[-1]).group(1)) > 30  # chance: 10
    assert re.fullmatch(r"time per step: eager \S+ ms, jit \S+ ms .*", lines[-1])


def test_train_gpt_learns_the_text_and_samples_from_it():
    lines = _run("train_gpt.py", "--steps", "40", "--sample", "20").splitlines()
    progress = [line for line in lines if line.startswith("step")]
    assert len(progress) == 11 and progress[-1].startswith("step    40/40")
    losses = [float(re.search(r"loss (\S+)", line).group(1)) for line in progress]
    assert losses[-1] < losses[0] * 0.8  # from ln(32 characters) = 3.5
    printed = "\n".join(lines)  # the sample may hold line breaks
    sample = printed[printed.index("sample: The river") : printed.index("\ntime per step")]
    assert len(sample) == len("sample: The river") + 20
    assert re.fullmatch(r"time per step: eager \S+ ms, jit \S+ ms .*", lines[-1])
