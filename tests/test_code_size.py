"""The compile pipeline stays readable: in ir/, codegen/, runtime/ and
tracer/ no function is over 60 lines and no class over 300, so each step
is a function a reader can find and each class does one thing. A failure
names each one over, with its length."""

from __future__ import annotations

import ast
from pathlib import Path

import fusegrad

PACKAGE = Path(fusegrad.__file__).parent
PIPELINE = ("ir", "codegen", "runtime", "tracer")
LONGEST_FUNCTION, LONGEST_CLASS = 60, 300


def _too_long() -> list:
    found = []
    for folder in PIPELINE:
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    limit = LONGEST_FUNCTION
                elif isinstance(node, ast.ClassDef):
                    limit = LONGEST_CLASS
                else:
                    continue
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    where = path.relative_to(PACKAGE.parent)
                    found.append(f"{where}:{node.lineno} {node.name}: {lines} lines")
    return found


def test_no_function_or_class_in_the_pipeline_is_too_long():
    too_long = _too_long()
    assert not too_long, (
        f"over {LONGEST_FUNCTION} lines (a function) or {LONGEST_CLASS} (a class):\n"
        + "\n".join(too_long)
    )
