"""Adding an elementwise primitive touches three places, and nothing else:

1. its block in fusegrad/ir/primitives.py (implementation, shape rule, VJP rules);
2. its lowering row in fusegrad/codegen/lowering.py (``LOWERINGS``);
3. a row of the op table, tests/op_table.py, that reaches it: the row is what
   checks the other two (values, gradients, second derivatives, eager and
   compiled to native kernels).

The test here holds the second to the third: a primitive lowered with no row
reaching it fails naming it. tests/test_codegen.py holds the first to the
second: every elementwise primitive has a lowering row, and each primitive
is lowered, fused as a reduction or run in numpy, in one way only.
"""

from __future__ import annotations

import warnings

import pytest

from fusegrad.codegen.lowering import LOWERINGS
from fusegrad.ir.autodiff import adjoint

import op_table
from test_passes import _traced


def _primitives_reached(op, sample) -> set:
    """The primitives of the row's traced forward graph and of its adjoint
    (forward and backward), as tests/test_passes.py builds them, in float64."""
    graph, _ = _traced(op, sample)
    reached = {eqn.prim for eqn in graph.eqns}
    floats = [i for i, v in enumerate(graph.inputs) if v.dtype.is_floating_point]
    if op.differentiable and floats and graph.outputs[0].dtype.is_floating_point:
        reached |= {eqn.prim for eqn in adjoint(graph, floats).eqns}
    return reached


@pytest.fixture(scope="module")
def reached_by_compiled_rows() -> set:
    """Lowerings run only compiled: rows the jit refuses (``jit=False``) reach none."""
    reached = set()
    with warnings.catch_warnings():  # tests/test_ops.py checks the values; here, the graphs
        warnings.simplefilter("ignore")
        for op in op_table.OPS:
            if op.jit:
                for sample in op.samples:
                    reached |= _primitives_reached(op, sample)
    return reached


def test_every_lowered_primitive_is_reached_by_an_op_table_row(reached_by_compiled_rows):
    unreached = sorted(prim.name for prim in LOWERINGS if prim not in reached_by_compiled_rows)
    assert not unreached, (
        f"primitives with a lowering row in codegen/lowering.py that no compiled row of "
        f"tests/op_table.py reaches (add a row that uses them): {unreached}"
    )
