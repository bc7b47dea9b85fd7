"""Writes the goldens of the real-program corpus: what each program in
tests/programs/ computes with PyTorch, run eagerly, into
tests/golden/programs/<program>.json.

    python tools/make_goldens.py [PROGRAM ...]

Needs PyTorch (the CPU build: ``pip install torch==2.13.0``). Each program runs in a
process of its own; its numbers are kept to 12 significant digits, so that the
rounding stays far below the tolerance of the float64 programs (1e-9).
"""

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
RUN = ROOT / "tests" / "programs" / "run.py"
GOLDEN = ROOT / "tests" / "golden" / "programs"

sys.path.insert(0, str(RUN.parent))
from run import program_names  # noqa: E402


def rounded(value):
    """value with every float kept to 12 significant digits."""
    if isinstance(value, dict):
        return {key: rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [rounded(item) for item in value]
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.12g}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", help="default: all of them")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("the goldens come from PyTorch: pip install torch==2.13.0")
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for program in args.programs or program_names():
        output = subprocess.run(
            [sys.executable, str(RUN), program, "torch"], capture_output=True, text=True
        )
        if output.returncode != 0:
            sys.exit(f"{program} failed with PyTorch:\n{output.stderr}")
        golden = {"torch": torch.__version__, "result": rounded(json.loads(output.stdout))}
        (GOLDEN / f"{program}.json").write_text(json.dumps(golden, indent=1) + "\n")
        print(f"wrote {(GOLDEN / f'{program}.json').relative_to(ROOT)}")


if __name__ == "__main__":
    main()
