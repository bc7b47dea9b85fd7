"""Every public op has a row in the op table (tests/op_table.py), or a
written reason below why it has none.

The public ops are the names of ``fusegrad.eager.ops.FUNCTIONS``: what
``fusegrad.<name>`` is. How names count:

- Tensor-only methods (``x.add_``, ``x.float()``, ``x.item()``, ...) are not
  public ops: in-place variants and conversions, which tests/test_tensor_ops.py
  and tests/test_autograd.py check. A method that is a public op's function
  (``x.sum()`` is ``fusegrad.sum``) counts as that op.
- An alias, a public name whose function is another's (``fusegrad.absolute``
  is ``fusegrad.abs``: one function, two names), is covered when its target
  has a row: what a row tests is the function, whichever name it calls it by.

A row covers an op when the row has the op's name, when the row's function
is the op's, or when the row's code calls the op itself: as
``fusegrad.<op>``, ``fusegrad.linalg/special/nn.functional.<op>``,
``Tensor.<op>`` or an operator that is the op. Every row runs once, eagerly,
with those attributes recording the calls made from tests/op_table.py. Calls
from inside fusegrad do not count: an op composed of another does not check
the other's argument handling.
"""

from __future__ import annotations

import inspect
import sys
import warnings

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn.functional as F
from fusegrad.eager.ops import FUNCTIONS

import op_table
from test_ops import _tensors

# Public ops with no op-table row, and why. A row is better: the table checks
# values, gradients and second derivatives, eagerly and compiled.
RETURNS_PYTHON = "returns a Python value, not a tensor: test_ops_returning_python_values below"
NO_ROW = {
    "allclose": RETURNS_PYTHON,
    "broadcast_shapes": RETURNS_PYTHON,
    "equal": RETURNS_PYTHON,
    "is_complex": RETURNS_PYTHON,
    "is_floating_point": RETURNS_PYTHON,
    "is_inference": RETURNS_PYTHON,
    "is_nonzero": RETURNS_PYTHON,
    "is_tensor": RETURNS_PYTHON,
    "numel": RETURNS_PYTHON,
}

# Where a row's code may call an op by its public name.
NAMESPACES = (fg, fg.linalg, fg.special, F)


def _function(op):
    """The function an op is, under its ``out=`` and numpy-name wrappers."""
    return inspect.unwrap(op)


def _names_of_functions() -> dict:
    """Each public op's function -> its public names (several for an alias)."""
    names: dict = {}
    for name, op in FUNCTIONS.items():
        names.setdefault(_function(op), set()).add(name)
    return names


def _recording(original, function, called: set):
    def recording(*args, **kwargs):
        if sys._getframe(1).f_code.co_filename == op_table.__file__:
            called.add(function)
        return original(*args, **kwargs)

    return recording


def _calls_from_the_rows(monkeypatch, names_of: dict) -> set:
    """The public ops' functions each row's code calls, running every sample once."""
    called: set = set()
    for namespace in NAMESPACES:
        for attr, value in list(vars(namespace).items()):
            if callable(value) and _function(value) in names_of:
                recording = _recording(value, _function(value), called)
                monkeypatch.setattr(namespace, attr, recording)
    for attr in dir(fg.Tensor):
        # plain functions only: a property or a static method would bind otherwise
        value = inspect.getattr_static(fg.Tensor, attr)
        if inspect.isfunction(value) and _function(value) in names_of:
            monkeypatch.setattr(fg.Tensor, attr, _recording(value, _function(value), called))
    with warnings.catch_warnings():  # tests/test_ops.py checks the values; here, the calls
        warnings.simplefilter("ignore")
        for op in op_table.OPS:
            for sample in op.samples:
                op.op(*_tensors(op, sample, fg.float64), **sample.kwargs)
    return called


@pytest.fixture(scope="module")
def ops_with_rows() -> set:
    names_of = _names_of_functions()
    covered = set()
    for op in op_table.OPS:
        if op.name in FUNCTIONS:
            covered.add(_function(FUNCTIONS[op.name]))
        if _function(op.op) in names_of:
            covered.add(_function(op.op))
    with pytest.MonkeyPatch.context() as monkeypatch:
        covered |= _calls_from_the_rows(monkeypatch, names_of)
    return set().union(*(names_of[function] for function in covered))


def test_every_public_op_has_an_op_table_row_or_a_reason(ops_with_rows):
    missing = sorted(set(FUNCTIONS) - ops_with_rows - set(NO_ROW))
    assert not missing, (
        f"public ops with neither a row in tests/op_table.py nor a reason in "
        f"tests/test_op_coverage.py's NO_ROW: {missing}"
    )


def test_every_reason_is_for_a_public_op_with_no_row(ops_with_rows):
    """The list stays true: an op given a row leaves it."""
    with_rows = sorted(set(NO_ROW) & ops_with_rows)
    assert not with_rows, f"ops in NO_ROW that now have an op-table row: {with_rows}"
    not_public = sorted(set(NO_ROW) - set(FUNCTIONS))
    assert not not_public, f"ops in NO_ROW that are not public ops: {not_public}"
    assert all(reason.strip() and "\n" not in reason for reason in NO_ROW.values())


# (op, call, PyTorch's answer): an answer of PyTorch's type, compared by value
PYTHON_VALUES = [
    ("allclose", lambda: fg.allclose(fg.tensor([1.0, 2.0]), fg.tensor([1.0, 2.0 + 1e-9])), True),
    ("allclose", lambda: fg.allclose(fg.tensor([1.0, 2.0]), fg.tensor([1.0, 2.1])), False),
    ("equal", lambda: fg.equal(fg.tensor([1.0, 2.0]), fg.tensor([1.0, 2.0])), True),
    ("equal", lambda: fg.equal(fg.tensor([1.0, 2.0]), fg.tensor([1.0, 2.5])), False),
    ("broadcast_shapes", lambda: fg.broadcast_shapes((3, 1), (4,)), (3, 4)),
    ("broadcast_shapes", lambda: fg.broadcast_shapes(2, (5, 1)), (5, 2)),
    ("is_complex", lambda: fg.is_complex(fg.ones(2)), False),
    ("is_floating_point", lambda: fg.is_floating_point(fg.ones(2, dtype=fg.float16)), True),
    ("is_floating_point", lambda: fg.is_floating_point(fg.tensor([1, 2])), False),
    ("is_inference", lambda: fg.is_inference(fg.ones(2)), False),
    ("is_nonzero", lambda: fg.is_nonzero(fg.tensor([0.5])), True),
    ("is_nonzero", lambda: fg.is_nonzero(fg.tensor(0.0)), False),
    ("is_tensor", lambda: fg.is_tensor(fg.ones(1)), True),
    ("is_tensor", lambda: fg.is_tensor(np.ones(1)), False),
    ("numel", lambda: fg.numel(fg.ones(2, 3)), 6),
    ("numel", lambda: fg.numel(fg.tensor(1.5)), 1),
]


@pytest.mark.parametrize("name,call,answer", PYTHON_VALUES, ids=[p[0] for p in PYTHON_VALUES])
def test_ops_returning_python_values(name, call, answer):
    got = call()
    assert isinstance(got, type(answer)) and got == answer
