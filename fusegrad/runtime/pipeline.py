"""The compile pipeline: what a traced graph goes through to become the
programs a compiled call runs, one named step each.

    derive      ir/autodiff.adjoint: the backward equations, from the
                primitives' VJP rules, appended to the forward's (the joint
                graph); its products of bfloat16 values marked (before the
                split hides where a saved operand came from)
    split       ir/autodiff.split_at_min_cut: the joint graph cut into a
                forward and a backward program where the fewest bytes cross
                (elementwise values, and any value of a checkpointed call,
                may be recomputed rather than saved)
    simplify    ir/simplify: stop-gradients dropped, constants folded, exact
                identities, products of bfloat16 values marked, common
                subexpressions, dead code
    verify      ir/graph.verify: each value defined once before it is used,
                every equation's types what its shape rule says
    round       ir/simplify.rounded_products: a product of bfloat16 pairs
                whose result is only rounded to bfloat16 and made float32
                again rounds it itself, as it stores (after every derivative)
    group       runtime/executor.grouped (ir/fusion.group_into_kernels):
                elementwise ops, broadcasts and reductions as kernels, other
                equations one a step
    lower       runtime/executor.lowered (codegen/kernels.KernelCode): a
                kernel's LLVM IR and machine code, behind a launcher
    plan        runtime/plan.Plan: made by an executor's first run for a
                layout of the inputs; straight-line steps, consecutive native
                launches one driver call

``tracer/compiled.py`` calls these for the forward and backward programs of
each trace; nothing here knows of tensors.
"""

from __future__ import annotations

from ..ir.autodiff import adjoint, backward_reading, split_at_min_cut
from ..ir.fusion import is_elementwise
from ..ir.graph import Graph, verify
from ..ir.shapes import is_symbolic
from ..ir.simplify import bfloat16_products, rounded_products, simplify, without_stop_gradients
from . import packed_gemm
from .executor import Executor


def derive(graph: Graph, wrt: list, stopped, customs, hooks, seeded=None) -> Graph:
    """The joint graph: ``graph``'s outputs, then the gradients of the inputs
    at positions ``wrt`` given cotangents of its outputs (of the ``seeded``
    ones alone when given; the others are symbolic zeros)."""
    return bfloat16_products(adjoint(graph, wrt, stopped, seeded, customs, hooks))


def _recomputable(checkpointed):
    return lambda eqn: is_elementwise(eqn) or eqn in checkpointed


def split(joint: Graph, graph: Graph, num_outputs: int, checkpointed=frozenset()):
    """The forward program (outputs, then residuals) and the backward one
    (residuals and cotangents to gradients), cut where the fewest bytes cross;
    the ``checkpointed`` equations may be computed again in the backward."""
    return split_at_min_cut(
        joint,
        len(graph.inputs),
        num_outputs,
        len(graph.eqns),
        recomputable=_recomputable(checkpointed),
    )


def split_reading(joint: Graph, graph: Graph, residuals: list, checkpointed=frozenset()) -> Graph:
    """The backward program of ``joint`` reading the ``residuals`` an earlier
    split chose (a backward for some outputs' cotangents only)."""
    return backward_reading(
        joint, len(graph.inputs), len(graph.eqns), residuals, _recomputable(checkpointed)
    )


def simplified(graph: Graph) -> Graph:
    return simplify(without_stop_gradients(graph))


def verified(graph: Graph) -> Graph:
    verify(graph)
    return graph


def executable(graph: Graph) -> Executor:
    """The graph grouped into kernels and lowered (by the executor, which
    makes its plans as it runs), its products rounded to bfloat16 as they
    are stored where they run as bfloat16 pairs (``rounded_products``: a
    graph no derivative reads)."""
    return Executor(rounded_products(graph, _rounds_as_it_stores))


def _rounds_as_it_stores(product) -> bool:
    """Whether the runtime computes this product of bfloat16 values as
    bfloat16 pairs, rounding as it stores: other routes round in numpy,
    several passes over the result (a GPT-mini step under autocast took 6%
    longer with its attention's stacked products rounded so than by a
    kernel's one pass)."""
    shapes = [v.shape for v in product.inputs]
    if any(is_symbolic(shape) for shape in shapes):
        return False
    return packed_gemm.BFLOAT16_PAIRS and len(shapes[1]) == 2 and packed_gemm.runs_packed(*shapes)


__all__ = [
    "derive",
    "split",
    "split_reading",
    "simplified",
    "verified",
    "executable",
]
