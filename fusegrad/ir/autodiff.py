"""The adjoint pass: reverse-mode differentiation of a graph, as a graph.

``adjoint`` walks a graph's equations backward and applies each primitive's
VJP rules — the same functions eager autograd runs — to IR values, so the
rules emit the backward equations. Cotangents start as symbolic zeros (a var
has none until some use sends one); broadcasting and promotion are undone in
one place (``unbroadcast``). Because the result is an ordinary graph, the
pass applies to its own output: that is higher order.

``split_at_min_cut`` splits the joint graph into the forward program (which also
returns the residuals the backward reads) and the backward program.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from .graph import Const, Graph, GraphBuilder, Var, building
from .primitives import unbroadcast


@dataclass
class CustomVJP:
    """A call whose gradient is given rather than derived (a custom
    ``autograd.Function``): its equations compute ``outputs`` from
    ``inputs`` and pass no gradient; ``eqns``, the given backward, compute
    ``grads`` (one per input, None for none) from ``cotangents`` (vars
    standing for the outputs' cotangents) and forward values."""

    inputs: list
    outputs: list  # None for an output that gets no gradient
    cotangents: list
    eqns: list
    grads: list


@dataclass
class CotangentHook:
    """A hook on a value's gradient (``register_hook``): its equations compute
    ``result`` from ``cotangent`` (a var standing for the value's complete
    cotangent), which replaces that cotangent. ``function`` is the hook
    itself, registered again where a backward is traced (create_graph), as
    eager mode runs it in every backward pass that reaches the value."""

    var: Var
    cotangent: Var
    eqns: list
    result: object  # a Var or a Const
    function: object


def _emitted(eqns: list, values: dict):
    """``eqns`` emitted again with ``values`` standing for some of their vars
    (a traced backward's stand-in cotangents); returns the reader of what
    each var became."""

    def read(v):
        return values.get(v, v) if isinstance(v, Var) else v

    for eqn in eqns:
        values[eqn.out] = eqn.prim(*[read(v) for v in eqn.inputs], **eqn.params)
    return read


def _apply_hooks(hooks: list, v, cotangents: dict) -> None:
    """``v``'s hooks, in the order registered, on its complete cotangent
    (none where no gradient reaches it, as in eager mode)."""
    g = cotangents.get(v)
    if g is None:
        return
    for hook in hooks:
        g = _emitted(hook.eqns, {hook.cotangent: g})(hook.result)
    cotangents[v] = g


def active_values(graph: Graph, wrt: list, stopped=frozenset(), customs=()) -> set:
    """The vars that depend differentiably on the inputs at positions ``wrt``.
    Equations in ``stopped`` (ones eager mode recorded no gradient for, such
    as work under no_grad) pass nothing on; a custom call's outputs are
    active when one of its inputs is."""
    return differentiable_from(graph, {graph.inputs[i] for i in wrt}, stopped, customs)


def differentiable_from(graph: Graph, start: set, stopped=frozenset(), customs=()) -> set:
    """``start`` and the vars that depend differentiably on it (see ``active_values``)."""
    active = set(start)
    custom_of = {v: c for c in customs for v in c.outputs if v is not None}
    for eqn in graph.eqns:
        custom = custom_of.get(eqn.out)
        if custom is not None and any(v in active for v in custom.inputs if v is not None):
            active.add(eqn.out)
        if eqn in stopped or not eqn.out.dtype.is_floating_point:
            continue
        for position, v in enumerate(eqn.inputs):
            if isinstance(v, Var) and v in active and eqn.prim.rule_for(position) is not None:
                active.add(eqn.out)
                break
    return active


def _apply_custom(custom: CustomVJP, cotangents: dict, send) -> None:
    """The given backward of a custom call, its cotangent vars standing for
    the outputs' cotangents (zeros for an output that got none, as PyTorch
    materializes them), its gradients sent to the call's inputs."""
    values: dict = {}
    for out, placeholder in zip(custom.outputs, custom.cotangents):
        if placeholder is not None:
            ct = cotangents.get(out) if out is not None else None
            zeros = Const(np.zeros(placeholder.shape, placeholder.dtype.np), placeholder.dtype)
            values[placeholder] = zeros if ct is None else ct
    read = _emitted(custom.eqns, values)
    for v, g in zip(custom.inputs, custom.grads):
        if v is not None and g is not None:
            send(v, unbroadcast(read(g), v.shape, v.dtype))


def adjoint(
    graph: Graph, wrt: list, stopped=frozenset(), seeded=None, customs=(), hooks=()
) -> Graph:
    """The joint graph: inputs are ``graph``'s inputs then one cotangent per
    output; outputs are ``graph``'s outputs then the gradient of each input
    in ``wrt`` (a zeros constant where none reaches it). ``seeded`` says
    which outputs' cotangents are sent (all by default); the others are
    symbolic zeros, which unlike a zeros array add nothing where the
    backward of an output would be 0 * inf. ``customs``: calls whose
    backward is given (``CustomVJP``), applied once their outputs'
    cotangents are complete (at the earliest output's equation); ``hooks``
    (``CotangentHook``) change a value's cotangent once it is complete."""
    active = active_values(graph, wrt, stopped, customs)
    hooks_of: dict = {}
    for hook in hooks:
        hooks_of.setdefault(hook.var, []).append(hook)
    due = _customs_due(graph, customs)
    cotangent_inputs = [Var(v.shape, v.dtype) for v in graph.outputs]
    builder = GraphBuilder()
    cotangents: dict = {}

    def send(v, ct):
        if isinstance(v, Var) and v in active:
            cotangents[v] = cotangents[v] + ct if v in cotangents else ct

    with building(builder):
        for k, (out, ct) in enumerate(zip(graph.outputs, cotangent_inputs)):
            if out.dtype.is_floating_point and (seeded is None or seeded[k]):
                send(out, ct)
        for k in range(len(graph.eqns) - 1, -1, -1):
            eqn = graph.eqns[k]
            if eqn.out in hooks_of:
                _apply_hooks(hooks_of[eqn.out], eqn.out, cotangents)
            for custom in due.get(k, ()):
                _apply_custom(custom, cotangents, send)
            g = cotangents.get(eqn.out)
            if g is not None and eqn not in stopped:
                _send_through_rules(eqn, g, active, send)
        for custom in due.get(-1, ()):  # outputs no equation makes
            _apply_custom(custom, cotangents, send)
        for v in graph.inputs:
            if v in hooks_of:
                _apply_hooks(hooks_of[v], v, cotangents)
    grads = []
    for i in wrt:
        v = graph.inputs[i]
        grads.append(cotangents.get(v) or Const(np.zeros(v.shape, v.dtype.np), v.dtype))
    return Graph(graph.inputs + cotangent_inputs, graph.eqns + builder.eqns, graph.outputs + grads)


def _customs_due(graph: Graph, customs) -> dict:
    """Equation index -> the custom calls applied there: at the earliest of
    their outputs' equations (-1 for a call with an output no equation makes)."""
    position_of = {eqn.out: k for k, eqn in enumerate(graph.eqns)}
    due: dict = {}
    for custom in customs:
        made = [position_of.get(v, -1) for v in custom.outputs if v is not None]
        due.setdefault(min(made, default=-1), []).append(custom)
    return due


def _send_through_rules(eqn, g, active: set, send) -> None:
    """The cotangent ``g`` of ``eqn``'s output through the VJP rule of each
    active input, sent to that input."""
    for position, v in enumerate(eqn.inputs):
        rule = eqn.prim.rule_for(position)
        if rule is None or not (isinstance(v, Var) and v in active):
            continue
        kwargs = eqn.prim.vjp_arguments(
            position,
            len(eqn.inputs),
            g,
            lambda: eqn.out,
            lambda p: eqn.inputs[p],
            tuple(v.shape for v in eqn.inputs),
            tuple(v.dtype for v in eqn.inputs),
            eqn.params,
        )
        ct = rule(**kwargs)
        if ct is not None:
            send(v, unbroadcast(ct, v.shape, v.dtype))


@dataclass
class Partition:
    forward: Graph  # inputs -> outputs + residuals
    backward: Graph  # residuals + cotangents -> gradients
    num_residuals: int


def split_at_min_cut(
    joint: Graph,
    num_inputs: int,
    num_outputs: int,
    num_forward_eqns: int,
    recomputable=lambda eqn: False,
) -> Partition:
    """Splits a joint graph from ``adjoint``: the backward program reads the
    forward values it needs (the residuals) as inputs. Values whose equation
    is ``recomputable`` (cheap, elementwise) may instead be computed again in
    the backward from what is saved (rematerialization). What is saved is a
    minimum cut, in bytes, between the values only the forward can make (a
    matrix product, a reduction) and the values the backward reads; inputs
    and outputs are kept anyway, so saving them costs nothing. So
    ``tanh(a @ w + b)`` saves the product (one array) and recomputes the
    rest, while ``tanh(a @ w + c @ v)`` saves the sum rather than the two
    products."""
    forward_eqns = joint.eqns[:num_forward_eqns]
    backward_eqns = joint.eqns[num_forward_eqns:]
    primal_inputs = joint.inputs[:num_inputs]
    cotangents = joint.inputs[num_inputs:]
    outputs = joint.outputs[:num_outputs]
    grads = joint.outputs[num_outputs:]
    producer = {e.out: e for e in forward_eqns}
    forward_values = set(primal_inputs) | set(producer)
    needed = [v for e in backward_eqns for v in e.inputs] + grads
    needed = [v for v in needed if isinstance(v, Var) and v in forward_values]
    free = set(primal_inputs) | {v for v in outputs if isinstance(v, Var)}
    saved = _cheapest_to_save(forward_eqns, primal_inputs, free, needed, recomputable)
    residuals, again = _reading(forward_eqns, primal_inputs, needed, saved, recomputable)
    forward = Graph(primal_inputs, forward_eqns, outputs + residuals)
    backward = Graph(residuals + cotangents, again + backward_eqns, grads)
    return Partition(forward, backward, len(residuals))


def backward_reading(
    joint: Graph, num_inputs: int, num_forward_eqns: int, residuals: list, recomputable
) -> Graph:
    """The backward program of ``joint`` (from ``adjoint``) that reads the
    given ``residuals`` (another partition's: a backward seeded by fewer
    outputs reads fewer forward values), computing the rest again."""
    forward_eqns = joint.eqns[:num_forward_eqns]
    inputs = joint.inputs[:num_inputs]
    num_outputs = len(joint.inputs) - num_inputs
    forward_values = set(inputs) | {e.out for e in forward_eqns}
    needed = [v for e in joint.eqns[num_forward_eqns:] for v in e.inputs]
    needed += joint.outputs[num_outputs:]
    needed = [v for v in needed if isinstance(v, Var) and v in forward_values]
    available = set(residuals)
    reads, again = _reading(forward_eqns, inputs, needed, available, recomputable)
    missing = [v for v in reads if v not in available]
    if missing:
        raise ValueError(f"the backward reads forward values not among the residuals: {missing}")
    return Graph(
        residuals + joint.inputs[num_inputs:],
        again + joint.eqns[num_forward_eqns:],
        joint.outputs[num_outputs:],
    )


def _reading(forward_eqns: list, inputs: list, needed: list, saved: set, recomputable) -> tuple:
    """What a backward needing ``needed`` reads from the forward (``saved``
    values, inputs, and values no recomputable equation makes) and the
    forward equations it runs again for the rest."""
    producer = {e.out: e for e in forward_eqns}
    forward_values = set(inputs) | set(producer)
    stack = list(reversed(needed))
    reads, recomputed, seen = [], set(), set()
    while stack:
        value = stack.pop()
        if value in seen:
            continue
        seen.add(value)
        eqn = producer.get(value)
        if eqn is not None and value not in saved and recomputable(eqn):
            recomputed.add(value)
            operands = [v for v in eqn.inputs if isinstance(v, Var) and v in forward_values]
            stack.extend(reversed(operands))
        else:
            reads.append(value)
    return reads, [e for e in forward_eqns if e.out in recomputed]


def _cheapest_to_save(eqns: list, inputs: list, free: set, needed: list, recomputable) -> set:
    """The forward values to save so that the backward can make every
    ``needed`` value, saving the fewest bytes. A flow network as in
    AOTAutograd's min-cut partitioner: each value is an edge (its "in" node
    to its "out" node) costing its bytes (nothing if ``free``); the values
    a non-recomputable equation makes (and the inputs) hang from the source,
    the needed values from the sink, and every use is an edge no cut may
    take. The saved values are the cut's value edges."""
    network = _FlowNetwork()

    def value_edge(v):
        cost = 0 if v in free else prod(v.shape) * v.dtype.np.itemsize
        network.edge(("in", v), ("out", v), cost)

    for v in inputs:
        value_edge(v)
        network.edge("source", ("in", v), INFINITE)
    for eqn in eqns:
        value_edge(eqn.out)
        if not recomputable(eqn):
            network.edge("source", ("in", eqn.out), INFINITE)
        for u in eqn.inputs:
            if isinstance(u, Var) and ("out", u) in network.edges:
                network.edge(("out", u), ("in", eqn.out), INFINITE)
    for v in dict.fromkeys(needed):
        network.edge(("out", v), "sink", INFINITE)
    reached = network.source_side_of_min_cut()
    return {
        node[1]
        for node in reached
        if isinstance(node, tuple) and node[0] == "in" and ("out", node[1]) not in reached
    }


INFINITE = float("inf")


class _FlowNetwork:
    """Directed edges with capacities between hashable nodes, among them
    "source" and "sink"."""

    def __init__(self):
        self.capacity: dict = {}  # (node, node) -> remaining capacity
        self.edges: dict = {}  # node -> nodes it has an edge to (either way, for residual flow)

    def edge(self, a, b, capacity) -> None:
        self.capacity[(a, b)] = self.capacity.get((a, b), 0) + capacity
        self.capacity.setdefault((b, a), 0)
        self.edges.setdefault(a, []).append(b)
        self.edges.setdefault(b, []).append(a)

    def source_side_of_min_cut(self) -> set:
        """The nodes the source still reaches once a maximum flow runs
        (Edmonds-Karp: shortest augmenting paths first)."""
        while True:
            parent = self._shortest_path()
            if "sink" not in parent:
                return set(parent)
            path, node = [], "sink"
            while parent[node] is not None:
                path.append((parent[node], node))
                node = parent[node]
            pushed = min(self.capacity[e] for e in path)
            for a, b in path:
                self.capacity[(a, b)] -= pushed
                self.capacity[(b, a)] += pushed

    def _shortest_path(self) -> dict:
        """Breadth first from the source over edges with capacity left:
        each reached node's predecessor."""
        parent = {"source": None}
        queue = ["source"]
        for node in queue:
            for following in self.edges.get(node, ()):
                if following not in parent and self.capacity[(node, following)] > 0:
                    parent[following] = node
                    queue.append(following)
            if "sink" in parent:
                break
        return parent
