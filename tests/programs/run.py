"""Runs one program of the corpus and prints what it returns, as JSON.

    python tests/programs/run.py PROGRAM LIBRARY [--compiled]

LIBRARY is ``torch`` (for the goldens) or ``fusegrad``; the program receives it as
its ``torch``. ``--compiled`` hands the program ``fusegrad.jit`` to compile its
training step with; without it every step runs eagerly.
"""

import argparse
import importlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).parent


def program_names() -> list[str]:
    """Every program of the corpus: the modules beside this one."""
    return sorted(path.stem for path in HERE.glob("*.py") if path.stem != "run")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("program", choices=program_names())
    parser.add_argument("library", choices=["torch", "fusegrad"])
    parser.add_argument("--compiled", action="store_true")
    args = parser.parse_args()
    if args.compiled and args.library != "fusegrad":
        parser.error("--compiled means fusegrad.jit; the goldens are eager PyTorch's numbers")
    library = importlib.import_module(args.library)
    program = importlib.import_module(args.program)  # this directory is sys.path[0]
    result = program.run(library, compile=library.jit if args.compiled else None)
    json.dump(result, sys.stdout, allow_nan=True)
    print()


if __name__ == "__main__":
    main()
