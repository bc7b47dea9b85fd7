"""The fusion pass: partitions a graph into kernels and single operations.

A kernel is a group of elementwise equations over one iteration shape: every
equation in it defines a value of that shape, and operands of other shapes
(broadcasts) come from outside the kernel and are read with broadcast
strides, so they cost no copy. An equation joins the kernel of one of its
operands' producers, or else a kernel of its shape that reads one of its
operands (one made of constants alone joins any), when that keeps the
kernels acyclic.

A sum, max or min over a kernel's trailing dimensions (all of them, or the
rows of a matrix) or leading ones (the columns) joins the kernel that
produces its operand, so the reduced values never go to memory (or, when no
kernel does, starts one that reads the operand once). A kernel's reductions
split its dimensions at one place (rows and columns of one matrix can mix).

What consumes a row's totals can join the kernel too, as later passes over
the same row: the kernel walks a row once per *phase*, and a value's phase
is how many row reductions lie between it and the inputs. Between passes,
"row equations" compute on one value per row (layer_norm's mean and rstd,
softmax's log of its sum), and elementwise equations of the next pass read
those per-row values. A row stays in cache between its passes, so memory
sees each operand once. The results of column reductions, and of reductions
of everything beside rows, exist only after the kernel: nothing in it reads
them.

Collectives stay in the order traced: each one's group reads the previous
collective's, so every process, running the same collectives, runs them in
the same order whatever else its graph holds.

Which equations may be fused, reduced or computed per row is the caller's
choice (``fusible``, ``reducible``, ``per_row``): the IR knows nothing of
what a code generator can lower.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

from .graph import Eqn, Graph, Var


@dataclass
class Kernel:
    """Fused equations, their external operands and the values they export."""

    eqns: list = field(default_factory=list)  # elementwise over ``shape``
    shape: tuple = ()
    reductions: list = field(default_factory=list)
    row_eqns: list = field(default_factory=list)  # elementwise over one value per row
    phase: dict = field(default_factory=dict)  # Var -> the pass over a row that knows it
    inputs: list = field(default_factory=list)  # Vars and Consts read from outside
    row_inputs: list = field(default_factory=list)  # read per row, in row coordinates
    outputs: list = field(default_factory=list)  # elementwise values used outside the kernel
    row_outputs: list = field(default_factory=list)  # per-row values used outside
    reduction_of: dict = field(default_factory=dict)  # Var -> the reduction defining it
    row_values: set = field(default_factory=set)  # defined by row equations

    def add(self, eqn: Eqn, phase: int, role: str) -> None:
        """Takes ``eqn`` as an "elementwise", "row" or "reduction" equation,
        whose result is known from pass ``phase`` on."""
        if role == "reduction":
            self.reductions.append(eqn)
            self.reduction_of[eqn.out] = eqn
        elif role == "row":
            self.row_eqns.append(eqn)
            self.row_values.add(eqn.out)
        else:
            self.eqns.append(eqn)
        self.phase[eqn.out] = phase

    @property
    def name(self) -> str:
        names = [e.prim.name for e in self.eqns + self.reductions + self.row_eqns]
        return "fused_" + "_".join(dict.fromkeys(names))

    @property
    def split(self) -> int | None:
        return _split_of(self.reductions)

    @property
    def last_phase(self) -> int:
        return max(
            [self.phase[e.out] for e in self.eqns]
            + [self.phase_of_operand(r) for r in self.reductions]
            + [0]
        )

    def phase_of_operand(self, reduction: Eqn) -> int:
        return self.phase.get(reduction.inputs[0], 0)

    def row_shapes(self) -> tuple:
        """A row value's shapes: the kept dimensions, without or with the
        reduced ones as 1s (keepdims)."""
        kept = self.shape[: self.split]
        return kept, kept + (1,) * (len(self.shape) - len(kept))

    def is_row_value(self, v) -> bool:
        """A value known once per row, which later passes may read."""
        if v in self.row_values:
            return True
        reduction = self.reduction_of.get(v)
        return (
            reduction is not None
            and not is_column_reduction(reduction)
            and (self.split == 0 or not is_whole_reduction(reduction))
        )

    def is_elementwise_value(self, v) -> bool:
        return v in self.phase and v not in self.row_values and v not in self.reduction_of

    def phased(self) -> bool:
        return bool(self.row_eqns) or any(self.phase[e.out] for e in self.eqns)

    def ordered(self) -> list:
        """Every equation, in an order that computes operands first: pass by
        pass, the row equations, the elementwise ones, then the reductions."""
        order = []
        for p in range(self.last_phase + 2):
            order += [e for e in self.row_eqns if self.phase[e.out] == p]
            order += [e for e in self.eqns if self.phase[e.out] == p]
            order += [r for r in self.reductions if self.phase_of_operand(r) == p]
        return order


@dataclass
class Single:
    """One equation run on its own (a matrix product, a reduction, a gather...)."""

    eqn: Eqn


def is_elementwise(eqn: Eqn) -> bool:
    return eqn.prim.elementwise


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


def _split_of(reductions: list) -> int | None:
    """Where reductions split the dimensions; 0 when they all reduce
    everything, None when there are none."""
    partial = [r for r in reductions if not is_whole_reduction(r)]
    if partial:
        return reduction_split(partial[0])
    return 0 if reductions else None


def _all_ones(shape: tuple) -> bool:
    return all(s == 1 for s in shape)


def _may_join_reductions(kernel: Kernel, eqn: Eqn) -> bool:
    """Splits agree, and once something reads the kernel's row totals, the
    split that defines its rows stays where it is."""
    if not _splits_agree(kernel.reductions + [eqn]):
        return False
    if not kernel.phased():
        return True
    return _split_of(kernel.reductions + [eqn]) == kernel.split


def reductions_in_two_steps(graph: Graph) -> Graph:
    """A sum, max or min over leading and trailing axes with kept axes
    between them (a bias's gradient: (N, H, W) of (N, C, H, W)) as a
    reduction of the trailing axes, then of the leading ones: each one a
    kernel can run. Its sums add in another order, as any kernel's do."""
    eqns = []
    for eqn in graph.eqns:
        split = _leading_and_trailing(eqn)
        if split is None:
            eqns.append(eqn)
            continue
        leading, trailing = split
        (x,) = eqn.inputs
        rows = Var(tuple(x.shape[: len(x.shape) - trailing]), eqn.out.dtype)
        first = tuple(range(len(x.shape) - trailing, len(x.shape)))
        eqns.append(Eqn(eqn.prim, (x,), {"axes": first}, rows))
        eqns.append(Eqn(eqn.prim, (rows,), {"axes": tuple(range(leading))}, eqn.out))
    return Graph(graph.inputs, eqns, graph.outputs)


def _leading_and_trailing(eqn: Eqn) -> tuple | None:
    """(how many leading, how many trailing axes) a reduction reduces, when
    those are all it reduces and axes in between are kept."""
    if eqn.prim.name not in ("reduce_sum", "reduce_max", "reduce_min"):
        return None
    ndim, axes = len(eqn.inputs[0].shape), sorted(eqn.params["axes"])
    leading = next((k for k, a in enumerate(axes) if a != k), len(axes))
    trailing = len(axes) - leading
    if not leading or not trailing or axes[leading:] != list(range(ndim - trailing, ndim)):
        return None
    return leading, trailing


def group_into_kernels(
    graph: Graph, fusible=is_elementwise, reducible=is_fusible_reduction, per_row=None
) -> list:
    """The graph's equations as an ordered list of ``Kernel``s and ``Single``s.
    ``per_row`` says which equations may compute on per-row values (by default
    those that may fuse)."""
    grouping = _Grouping(fusible, reducible, fusible if per_row is None else per_row)
    for eqn in graph.eqns:
        grouping.place(eqn)
    _recompute_in_readers(graph, grouping)
    _fill_boundaries(graph, grouping.groups, grouping.group_of)
    groups = [grouping.groups[g] for g in _topological(grouping.uses)]
    return [g for g in groups if not isinstance(g, Kernel) or g.eqns or g.reductions]


class _Grouping:
    """Groups (kernels and single equations) as equations are placed in
    program order, with what each group reads from the others, so that a
    join that would make the groups cyclic is refused."""

    def __init__(self, fusible, reducible, per_row):
        self.fusible, self.reducible, self.per_row = fusible, reducible, per_row
        self.groups: list = []  # Kernel or Single, in creation order
        self.group_of: dict = {}  # Var -> index of the group that defines it
        self.uses: dict = {}  # index -> indices of groups it reads from
        self.readers: dict = {}  # Var -> indices of the kernels that read it
        self.last_collective: int | None = None  # the group of the latest collective

    def place(self, eqn: Eqn) -> None:
        """As a reduction of a kernel's values, a row equation, an
        elementwise equation of a kernel, or on its own."""
        sources = {
            self.group_of[v] for v in eqn.inputs if isinstance(v, Var) and v in self.group_of
        }
        if self.reducible(eqn) and self._place_reduction(eqn, sources):
            return
        rows = next(
            (g for g in sorted(sources, reverse=True) if self._can_join_rows(g, eqn, sources)),
            None,
        )
        if rows is not None:
            self._join(rows, eqn, sources, self._operand_phase(rows, eqn), "row")
            return
        home = self._kernel_for(eqn, sources) if self.fusible(eqn) else None
        if home is None:
            home = self._new_group(
                Kernel(shape=eqn.out.shape) if self.fusible(eqn) else Single(eqn)
            )
        if isinstance(self.groups[home], Kernel):
            self._join(home, eqn, sources, self._operand_phase(home, eqn), "elementwise")
        else:
            self.uses[home] |= sources - {home}
            self.group_of[eqn.out] = home
            if eqn.prim.collective:
                if self.last_collective is not None:
                    self.uses[home].add(self.last_collective)
                self.last_collective = home

    def _place_reduction(self, eqn: Eqn, sources: set) -> bool:
        """Into the kernel producing its operand; or, when no kernel produces
        the operand at its shape (an input, a matrix product), into a new
        kernel that reads it. False for a reduction of a 0-d value."""
        operand = eqn.inputs[0]
        producer = self.group_of.get(operand) if isinstance(operand, Var) else None
        if (
            producer is not None
            and isinstance(self.groups[producer], Kernel)
            and self.groups[producer].is_elementwise_value(operand)
            and _may_join_reductions(self.groups[producer], eqn)
        ):
            phase = self.groups[producer].phase[operand] + 1
            self._join(producer, eqn, sources, phase, "reduction")
            return True
        if isinstance(operand, Var) and operand.shape:
            home = self._new_group(Kernel(shape=operand.shape))
            self._join(home, eqn, sources, 1, "reduction")
            return True
        return False

    def _kernel_for(self, eqn: Eqn, sources: set) -> int | None:
        """An operand's producer first (the most recent), then a kernel
        reading one of its operands, which it then reads once for both; a
        value made of constants and single numbers alone (a gradient's seed)
        goes with any kernel. Unrelated work stays apart: merging it saves
        no memory traffic and makes kernels unique (60 layers' gradients in
        one kernel took LLVM 2.4 s; per layer they are one kernel, compiled
        once)."""
        operands = [v for v in eqn.inputs if isinstance(v, Var) and prod(v.shape) > 1]
        sharing = {g for v in operands for g in self.readers.get(v, ())}
        if not operands:
            sharing = set(range(len(self.groups)))
        candidates = sorted(sources, reverse=True) + sorted(sharing - sources, reverse=True)
        return next((g for g in candidates if self._can_join(g, eqn, sources)), None)

    def _new_group(self, group) -> int:
        self.groups.append(group)
        self.uses[len(self.groups) - 1] = set()
        return len(self.groups) - 1

    def _join(self, g: int, eqn: Eqn, sources: set, phase: int, role: str) -> None:
        self.groups[g].add(eqn, phase, role)
        self.uses[g] |= sources - {g}
        self.group_of[eqn.out] = g
        for v in eqn.inputs:
            if isinstance(v, Var):
                self.readers.setdefault(v, set()).add(g)

    def _can_join(self, g: int, eqn: Eqn, sources: set) -> bool:
        """As an elementwise equation over the kernel's shape: it reads the
        kernel's elementwise values, and row values with the reduced
        dimensions kept (so they broadcast along the row)."""
        kernel = self.groups[g]
        if not isinstance(kernel, Kernel) or kernel.shape != eqn.out.shape:
            return False
        for v in self._own(g, eqn):
            if kernel.is_elementwise_value(v):
                continue
            if not kernel.is_row_value(v) or not (
                len(v.shape) == len(kernel.shape) or _all_ones(v.shape)
            ):
                return False
        return self._acyclic(g, sources)

    def _can_join_rows(self, g: int, eqn: Eqn, sources: set) -> bool:
        """As a row equation: it reads the kernel's row values and defines one."""
        kernel = self.groups[g]
        if not isinstance(kernel, Kernel) or kernel.split is None:
            return False
        if eqn.out.shape not in kernel.row_shapes():
            return False
        if eqn.out.shape == kernel.shape and eqn.prim.name != "reshape":
            return False  # reduced dimensions of size 1: as good as elementwise
        if eqn.prim.name == "reshape":
            ok = eqn.inputs[0].shape in kernel.row_shapes()
        else:
            ok = self.per_row(eqn)
        mine = self._own(g, eqn)
        return (
            ok
            and bool(mine)
            and all(kernel.is_row_value(v) for v in mine)
            and self._acyclic(g, sources)
        )

    def _own(self, g: int, eqn: Eqn) -> list:
        return [v for v in eqn.inputs if isinstance(v, Var) and self.group_of.get(v) == g]

    def _operand_phase(self, g: int, eqn: Eqn) -> int:
        return max([self.groups[g].phase[v] for v in self._own(g, eqn)] + [0])

    def _acyclic(self, g: int, sources: set) -> bool:
        """Whether ``g`` may take an equation reading ``sources``: no other
        source depends on ``g`` (the equation would read a value made after
        it, through a group in between)."""
        return not any(self._depends_on(other, g) for other in sources if other != g)

    def _depends_on(self, start: int, target: int) -> bool:
        stack, seen = [start], set()
        while stack:
            g = stack.pop()
            if g == target:
                return True
            if g not in seen:
                seen.add(g)
                stack.extend(self.uses[g])
        return False


def _recompute_in_readers(graph: Graph, grouping: _Grouping) -> None:
    """Equations are placed before their readers are known: an elementwise
    value joins its operands' kernel, which then writes it for the one later
    kernel that reads it (a tanh's derivative 1 - h*h, computed where h is
    and read by the backward's kernel). Where the value comes from values in
    memory anyway, it is computed in that reader instead, from them: the
    write and its read are saved, for at most as many arrays read instead."""
    groups = grouping.groups
    outputs = {v for v in graph.outputs if isinstance(v, Var)}
    readers: dict = {}  # Var -> {id(eqn): (group index, eqn)} of the equations reading it
    for index, group in enumerate(groups):
        for eqn in group.ordered() if isinstance(group, Kernel) else [group.eqn]:
            for v in eqn.inputs:
                if isinstance(v, Var):
                    readers.setdefault(v, {})[id(eqn)] = (index, eqn)
    for k, kernel in enumerate(groups):
        if not isinstance(kernel, Kernel):
            continue
        for eqn in reversed(list(kernel.eqns)):
            if eqn in kernel.eqns and eqn.out not in outputs:
                _move_to_reader(eqn, k, grouping, readers, outputs)
        _merge_into_reader(k, grouping, readers)


def _merge_into_reader(k: int, grouping: _Grouping, readers: dict) -> None:
    """An elementwise kernel whose values one later kernel of its shape reads
    (besides the graph's outputs) joins that kernel, which then writes what
    it wrote: the reader takes them from registers rather than memory. An
    optimizer's first moment, an output, is read by the parameter's update,
    made apart as it reads none of the moment's operands."""
    groups, group_of = grouping.groups, grouping.group_of
    kernel = groups[k]
    if not kernel.eqns or kernel.reductions or kernel.row_eqns:
        return
    made = {e.out for e in kernel.eqns}
    reading = [entry for v in made for entry in readers.get(v, {}).values()]
    outside = {g for g, _ in reading} - {k}
    if len(outside) != 1:
        return
    (target,) = outside
    reader = groups[target]
    if not isinstance(reader, Kernel) or reader.shape != kernel.shape:
        return
    if any(e in reader.row_eqns for g, e in reading if g == target):
        return  # read in row coordinates
    moving = list(kernel.eqns)
    kernel.eqns.clear()
    for eqn in moving:
        del kernel.phase[eqn.out]
        group_of[eqn.out] = target
        reader.phase[eqn.out] = 0
        for v in eqn.inputs:
            if isinstance(v, Var):
                readers[v][id(eqn)] = (target, eqn)
    reader.eqns[:0] = moving
    grouping.uses[target] |= grouping.uses[k] - {target}
    grouping.uses[target].discard(k)
    grouping.uses[k] = set()


def _move_to_reader(end: Eqn, k: int, grouping: _Grouping, readers: dict, outputs: set) -> None:
    """Moves ``end``, with the equations of kernel ``k`` only it needs, into
    the one kernel that reads it, where that saves memory traffic."""
    groups, group_of = grouping.groups, grouping.group_of
    kernel = groups[k]
    outside = {g for g, _ in readers.get(end.out, {}).values()}
    if len(outside) != 1 or k in outside or kernel.phase[end.out] != 0:
        return
    (target,) = outside
    reader = groups[target]
    if not isinstance(reader, Kernel) or reader.shape != end.out.shape:
        return
    if any(e in reader.row_eqns for _, e in readers[end.out].values()):
        return  # read in row coordinates
    moving, frontier = [end], [end]
    while frontier:
        eqn = frontier.pop()
        for u in eqn.inputs:
            if not isinstance(u, Var) or group_of.get(u) != k or u in outputs:
                continue
            if any(g != k for g, _ in readers[u].values()):
                continue  # in memory anyway: read it there
            producer = next((e for e in kernel.eqns if e.out is u), None)
            if producer is None or kernel.phase[u] != 0:
                return  # a row value or a total: not to be computed again
            if not all(any(e is m for m in moving) for _, e in readers[u].values()):
                return  # the kernel needs it too: it would be written instead
            if all(producer is not m for m in moving):
                moving.append(producer)
                frontier.append(producer)
    if len(moving) == len(kernel.eqns) and not kernel.reductions and not kernel.row_eqns:
        return  # nothing would be left
    made = {e.out for e in moving}
    read = {v for e in moving for v in e.inputs if isinstance(v, Var) and v not in made}
    new_reads = [
        v
        for v in read
        if prod(v.shape) == prod(end.out.shape)
        and all(g != target for g, _ in readers.get(v, {}).values())
    ]
    if len(new_reads) > 1:
        return  # more arrays to read than the one no longer written
    order = {id(e): i for i, e in enumerate(kernel.eqns)}
    moving.sort(key=lambda e: order[id(e)])
    for eqn in moving:
        kernel.eqns.remove(eqn)
        del kernel.phase[eqn.out]
        group_of[eqn.out] = target
        for v in eqn.inputs:
            if isinstance(v, Var):
                readers[v][id(eqn)] = (target, eqn)
    reader.eqns[:0] = moving
    for eqn in moving:
        reader.phase[eqn.out] = 0
    grouping.uses[target] |= {group_of[v] for v in read if v in group_of} - {target}


def _fill_boundaries(graph: Graph, groups: list, group_of: dict) -> None:
    needed_outside: set = set()
    for index, group in enumerate(groups):
        eqns = group.ordered() if isinstance(group, Kernel) else [group.eqn]
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
        seen: set = set()
        for eqn in group.ordered():
            row_form = eqn.out in group.row_values and len(eqn.out.shape) < len(group.shape)
            for v in eqn.inputs:
                if isinstance(v, Var) and v in group.phase:
                    continue
                # a row equation over the kept dimensions alone reads its
                # operands in row coordinates; all-1 shapes read the same either way
                into = group.row_inputs if row_form and not _all_ones(v.shape) else group.inputs
                if (id(into), id(v)) not in seen:
                    seen.add((id(into), id(v)))
                    into.append(v)
        group.outputs = [e.out for e in group.eqns if e.out in needed_outside]
        group.row_outputs = [e.out for e in group.row_eqns if e.out in needed_outside]


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
