"""Printed results and error messages, compared with PyTorch's (see parity.py)."""

from pathlib import Path

import fusegrad

from parity import run

GOLDEN = Path(__file__).parent / "golden" / "parity.txt"


def test_prints_and_errors_match_pytorch():
    fusegrad.manual_seed(0)
    expected = GOLDEN.read_text().split("\n### ")
    actual = run(fusegrad).split("\n### ")
    assert len(actual) == len(expected)
    mismatches = [(a, e) for a, e in zip(actual, expected) if a != e]
    assert not mismatches, "\n\n".join(f"GOT:\n{a}\nEXPECTED:\n{e}" for a, e in mismatches[:5])
