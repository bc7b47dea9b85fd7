"""The examples run and print what PyTorch prints."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_autograd_tutorial_prints_what_pytorch_prints():
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "autograd_tutorial.py")],
        capture_output=True,
        text=True,
        check=True,
    )
    printed = re.sub(r"0x[0-9a-f]+", "0x...", result.stdout)
    assert printed == (ROOT / "tests" / "golden" / "autograd_tutorial.txt").read_text()
