"""The fusion pass: partitions a graph into kernels and single operations.

A kernel is a group of elementwise equations over one iteration shape: every
equation in it defines a value of that shape, and operands of other shapes
(broadcasts) come from outside the kernel and are read with broadcast
strides, so they cost no copy. An equation joins the kernel of one of its
operands' producers, or else any kernel of its shape, when that keeps the
kernels acyclic. A sum, max or min over a kernel's trailing dimensions (all of
them, or the rows of a matrix) or leading ones (the columns) joins the kernel
that produces its operand, so the reduced values never go to memory (or,
when no kernel does, starts one that reads the operand once); a
kernel's reductions split its dimensions at one place (rows and columns of
one matrix can mix), and their results exist only after the kernel, so
nothing in it reads them.
Which equations may be fused or reduced is the caller's choice
(``fusible``, ``reducible``): the IR knows nothing of what a code generator
can lower.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .graph import Eqn, Graph, Var

ELEMENTWISE = frozenset(
    "neg exp log log1p expm1 sqrt sin cos tanh sigmoid softplus erf abs sign relu convert "
    "stop_gradient logical_not add sub mul div pow maximum minimum eq ne lt le gt ge "
    "logical_and logical_or where broadcast_to".split()
)


@dataclass
class Kernel:
    """Fused equations, their external operands and the values they export."""

    eqns: list = field(default_factory=list)
    shape: tuple = ()
    reductions: list = field(default_factory=list)  # full reductions of values in the kernel
    inputs: list = field(default_factory=list)  # Vars and Consts read from outside
    outputs: list = field(default_factory=list)  # elementwise values used outside the kernel

    @property
    def name(self) -> str:
        names = [e.prim.name for e in self.eqns + self.reductions]
        return "fused_" + "_".join(dict.fromkeys(names))


@dataclass
class Single:
    """One equation run on its own (a matrix product, a reduction, a gather...)."""

    eqn: Eqn


def is_elementwise(eqn: Eqn) -> bool:
    return eqn.prim.name in ELEMENTWISE


def is_fusible_reduction(eqn: Eqn) -> bool:
    """A sum, max or min over the last k axes (all of them included: rows) or
    the first k (columns), which a kernel accumulates as it walks its operand."""
    if eqn.prim.name not in ("reduce_sum", "reduce_max", "reduce_min") or not eqn.params["axes"]:
        return False
    ndim = len(eqn.inputs[0].shape)
    axes = tuple(eqn.params["axes"])
    return axes in (tuple(range(ndim - len(axes), ndim)), tuple(range(len(axes))))


def is_whole_reduction(eqn: Eqn) -> bool:
    return len(eqn.params["axes"]) == len(eqn.inputs[0].shape)


def is_column_reduction(eqn: Eqn) -> bool:
    """Over leading axes, not all of them (a sum of rows: a bias's gradient)."""
    axes = tuple(eqn.params["axes"])
    return axes == tuple(range(len(axes))) and not is_whole_reduction(eqn)


def reduction_split(eqn: Eqn) -> int:
    """Where a fusible reduction splits its operand's dimensions: kept before,
    reduced after (rows); or reduced before, kept after (columns). A row and
    a column reduction with the same split walk their operand the same way
    and can share a kernel."""
    ndim, count = len(eqn.inputs[0].shape), len(eqn.params["axes"])
    return count if is_column_reduction(eqn) else ndim - count


def _splits_agree(reductions: list) -> bool:
    """Reductions share a kernel when they split its dimensions at one place;
    a reduction of everything fits with any split."""
    return len({reduction_split(r) for r in reductions if not is_whole_reduction(r)}) <= 1


def partition(graph: Graph, fusible=is_elementwise, reducible=is_fusible_reduction) -> list:
    """The graph's equations as an ordered list of ``Kernel``s and ``Single``s."""
    groups: list = []  # Kernel or Single, in creation order
    group_of: dict = {}  # Var -> index of the group that defines it
    uses: dict = {}  # index -> indices of groups it reads from
    reduced: set = set()  # results of reductions fused into kernels

    def depends_on(start: int, target: int) -> bool:
        stack, seen = [start], set()
        while stack:
            g = stack.pop()
            if g == target:
                return True
            if g not in seen:
                seen.add(g)
                stack.extend(uses[g])
        return False

    def can_join(g: int, eqn: Eqn, sources: set) -> bool:
        return (
            isinstance(groups[g], Kernel)
            and groups[g].shape == eqn.out.shape
            and not any(depends_on(other, g) for other in sources if other != g)
            and not any(v in reduced and group_of[v] == g for v in eqn.inputs if isinstance(v, Var))
        )

    for eqn in graph.eqns:
        sources = {group_of[v] for v in eqn.inputs if isinstance(v, Var) and v in group_of}
        operand = eqn.inputs[0] if eqn.inputs else None
        producer = group_of.get(operand) if isinstance(operand, Var) else None
        if (
            reducible(eqn)
            and producer is not None
            and isinstance(groups[producer], Kernel)
            and groups[producer].shape == operand.shape
            and operand.shape
            and _splits_agree(groups[producer].reductions + [eqn])
        ):
            groups[producer].reductions.append(eqn)
            group_of[eqn.out] = producer
            reduced.add(eqn.out)
            continue
        if reducible(eqn) and isinstance(operand, Var) and operand.shape:
            # no kernel produces the operand at its shape (an input, a matrix
            # product): the reduction starts a kernel that reads it
            home = len(groups)
            groups.append(Kernel(shape=operand.shape, reductions=[eqn]))
            uses[home] = set(sources)
            group_of[eqn.out] = home
            reduced.add(eqn.out)
            continue
        home = None
        if fusible(eqn):
            # an operand's producer first (the most recent), then any kernel of this shape
            candidates = sorted(sources, reverse=True) + [
                g for g in range(len(groups) - 1, -1, -1) if g not in sources
            ]
            home = next((g for g in candidates if can_join(g, eqn, sources)), None)
        if home is None:
            home = len(groups)
            groups.append(Kernel(shape=eqn.out.shape) if fusible(eqn) else Single(eqn))
            uses[home] = set()
        if isinstance(groups[home], Kernel):
            groups[home].eqns.append(eqn)
        uses[home] |= sources - {home}
        group_of[eqn.out] = home
    _fill_boundaries(graph, groups, group_of)
    return [groups[g] for g in _topological(uses)]


def _fill_boundaries(graph: Graph, groups: list, group_of: dict) -> None:
    needed_outside: set = set()
    for index, group in enumerate(groups):
        eqns = group.eqns + group.reductions if isinstance(group, Kernel) else [group.eqn]
        for eqn in eqns:
            for v in eqn.inputs:
                if isinstance(v, Var) and group_of.get(v) != index:
                    needed_outside.add(v)
    for v in graph.outputs:
        if isinstance(v, Var):
            needed_outside.add(v)
    for group in groups:
        if not isinstance(group, Kernel):
            continue
        defined = {e.out for e in group.eqns}
        seen = set()
        for eqn in group.eqns + group.reductions:
            for v in eqn.inputs:
                if (not isinstance(v, Var) or v not in defined) and id(v) not in seen:
                    seen.add(id(v))
                    group.inputs.append(v)
        group.outputs = [e.out for e in group.eqns if e.out in needed_outside]


def _topological(uses: dict) -> list:
    order, state = [], {}
    for start in sorted(uses):
        stack = [(start, False)]
        while stack:
            node, done = stack.pop()
            if done:
                order.append(node)
                state[node] = 2
                continue
            if state.get(node):
                continue
            state[node] = 1
            stack.append((node, True))
            stack.extend((d, False) for d in sorted(uses[node]) if not state.get(d))
    return order
