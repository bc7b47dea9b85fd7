"""The eager autograd engine: recording backward nodes, saved tensors,
running the backward pass, and ``backward``/``grad`` (their arguments
checked, the roots seeded).

A node is one recorded operation. Its ``edges`` point at the nodes that
produced its inputs (an ``AccumulateGrad`` for a leaf), so the recorded graph
is walked backward from the outputs, each node run once all its consumers
have sent their cotangents, exactly as PyTorch's engine does.

The engine sits below the eager ``Tensor``, which registers itself
(``register_tensor_type``): the engine makes seeds and rebuilds saved
outputs with it, and adds gradients into leaves through
``Tensor._accumulate_grad`` (which knows about tracing).
"""

from __future__ import annotations

import heapq
import itertools
import re
import threading
import warnings
import weakref

import numpy as np

from ..ir.primitives import unbroadcast
from . import grad_mode, saved_attributes

_sequence = itertools.count()
_tensor = None  # the eager Tensor class
_plain = None  # what VJP rules run on when the backward pass records nothing


def register_tensor_type(cls) -> None:
    """Makes ``cls`` the engine's tensor type (the eager Tensor registers itself)."""
    global _tensor
    _tensor = cls


def register_plain_type(cls) -> None:
    """Makes ``cls`` (``eager/plain.py``) the type VJP rules run on outside
    ``create_graph`` and traces."""
    global _plain
    _plain = cls


def _records_nothing() -> bool:
    """Whether a backward's operations record nothing now (no create_graph,
    no trace): its rules may then run on plain values."""
    return not grad_mode._state.enabled and _plain.usable()


def sequence_mark() -> int:
    """A number below the sequence number of every node recorded from now on."""
    return next(_sequence)


FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


class RemovableHandle:
    _ids = itertools.count()

    def __init__(self, hooks: dict):
        self.id = next(self._ids)
        self._hooks = weakref.ref(hooks) if hasattr(hooks, "__weakref__") else (lambda: hooks)

    def remove(self) -> None:
        hooks = self._hooks()
        if hooks is not None:
            hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def modified_message(shape, type_name, node, current, expected) -> str:
    op = re.sub(r"Backward\d*$", "", node.name()) if node is not None else None
    where = f", which is output 0 of {op}," if op else ""
    return (
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: [{type_name} {list(shape)}]{where} is at version {current}; "
        f"expected version {expected} instead. Hint: the tensor was saved for the backward "
        "pass and modified in place afterwards; clone() it before the in-place operation, "
        "or use the out-of-place op."
    )


def unpack_saved(tensor, version):
    """A saved input, checked against in-place modification since it was saved."""
    if tensor._version_counter[0] != version:
        raise RuntimeError(
            modified_message(
                tensor.shape, tensor.type(), tensor.grad_fn, tensor._version_counter[0], version
            )
        )
    return tensor


def next_sequence_number() -> int:
    """A number above every node recorded so far, below every later one's."""
    return next(_sequence)


def stale_saved(node, since: int):
    """The error the engine raises on reaching, from ``node``, a node numbered
    above ``since`` that saved a tensor modified in place since; None when
    there is none. A compiled call's backward raises it where eager's would."""
    pending, seen = [node], set()
    while pending:
        node = pending.pop()
        if node is None or node.sequence_nr <= since or node in seen:
            continue
        seen.add(node)
        if isinstance(node, PrimitiveBackward) and not node.freed:
            for tensor, version in (node.saved or {}).values():
                current = tensor._version_counter[0]
                if current != version:
                    return modified_message(
                        tensor.shape, tensor.type(), tensor.grad_fn, current, version
                    )
            if node.saved_out is not None:
                data, dtype, counter, version = node.saved_out
                if counter[0] != version:
                    type_name = _tensor._make(data, dtype).type()
                    return modified_message(data.shape, type_name, node, counter[0], version)
        pending.extend(edge[0] for edge in node.edges if edge is not None)
    return None


def keep_originals(node, mark: int, tensor, copy) -> None:
    """Before an in-place op overwrites ``tensor``: the nodes the op recorded
    (those numbered above ``mark``, from ``node`` back) that saved
    ``tensor`` or a view of it keep ``copy`` of it instead, as PyTorch's
    in-place ops save their original ``self``."""
    counter = tensor._version_counter
    copies: dict = {}
    pending, seen = [node], set()
    while pending:
        node = pending.pop()
        if not isinstance(node, PrimitiveBackward) or node.sequence_nr <= mark or node in seen:
            continue
        seen.add(node)
        for i, (saved, _) in list((node.saved or {}).items()):
            if saved._version_counter is counter:
                if id(saved) not in copies:
                    copies[id(saved)] = copy(saved)
                original = copies[id(saved)]
                node.saved[i] = (original, original._version_counter[0])
        pending.extend(inner for inner, _ in node.edges)


class Node:
    """Base of all backward nodes. Subclasses implement ``apply`` (a list of
    cotangents per output -> a list of cotangents per input) and ``release``."""

    __slots__ = (
        "edges",
        "shown_edges",
        "sequence_nr",
        "tensor_hooks",
        "retained",
        "user_metadata",  # made on first read of ``metadata``
        "__weakref__",
    )
    num_outputs = 1
    # output_nr -> outputs computed from it inside the node, whose gradients
    # never arrive at it (a compiled call's): see CompiledFunctionBackward
    inner_dependents = None

    def __init__(self, edges: tuple):
        self.edges = edges
        self.shown_edges = None
        self.sequence_nr = next(_sequence)
        self.tensor_hooks = None  # output_nr -> {handle id: hook}, made on first use
        self.retained = None  # output_nr -> weakref of a tensor that retains its grad

    @property
    def next_functions(self) -> tuple:
        """The nodes that made this node's inputs, as PyTorch shows them: for
        the last node of a composite op (``mse_loss``), the nodes of the op's
        own inputs, not of its inner steps, which the engine follows."""
        return self.edges if self.shown_edges is None else self.shown_edges

    @property
    def metadata(self) -> dict:
        """A dict for the user's notes on the node, as PyTorch's ``grad_fn.metadata``."""
        try:
            return self.user_metadata
        except AttributeError:
            self.user_metadata = {}
            return self.user_metadata

    def name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{self.name()} object at {hex(id(self))}>"

    def hooks_for(self, output_nr: int):
        hooks = self.tensor_hooks.get(output_nr) if self.tensor_hooks else None
        return list(hooks.values()) if hooks else ()

    def hooks_dict(self, output_nr: int) -> dict:
        if self.tensor_hooks is None:
            self.tensor_hooks = {}
        return self.tensor_hooks.setdefault(output_nr, {})

    def retain(self, output_nr: int, tensor) -> None:
        if self.retained is None:
            self.retained = {}
        self.retained[output_nr] = weakref.ref(tensor)

    def release(self) -> None:
        pass


class PrimitiveBackward(Node):
    """The backward of one primitive application: runs the primitive's VJP rules.

    Nodes are instances of a subclass named as PyTorch names the node
    (``MulBackward0``, see ``backward_class``), since tools read
    ``type(t.grad_fn).__name__``; an op ending in a primitive whose node
    PyTorch names otherwise renames it by setting ``label``."""

    __slots__ = (
        "prim",
        "params",
        "plan",
        "in_shapes",
        "in_dtypes",
        "saved",
        "saved_out",
        "saved_tangents",  # forward AD: the output's tangents, given it by its op
        "freed",
        "op_call",  # a composite op's call, for its _saved_ attributes (saved_attributes.py)
    )

    def __init__(self, prim, params, inputs, output, plan):
        # Written out for one and two inputs, without comprehensions: this
        # runs once per recorded operation, and is most of eager mode's cost.
        needs_grad = plan.needs_grad
        if len(inputs) == 2:
            a, b = inputs
            self.edges = (
                _edge_to(a) if needs_grad[0] else _NO_EDGE,
                _edge_to(b) if needs_grad[1] else _NO_EDGE,
            )
            self.in_shapes = (a._data.shape, b._data.shape)
            self.in_dtypes = (a._dtype, b._dtype)
        elif len(inputs) == 1:
            (a,) = inputs
            self.edges = (_edge_to(a) if needs_grad[0] else _NO_EDGE,)
            self.in_shapes = (a._data.shape,)
            self.in_dtypes = (a._dtype,)
        else:
            self.edges = tuple(
                [_edge_to(t) if need else _NO_EDGE for t, need in zip(inputs, needs_grad)]
            )
            self.in_shapes = tuple([t._data.shape for t in inputs])
            self.in_dtypes = tuple([t._dtype for t in inputs])
        self.sequence_nr = next(_sequence)
        self.tensor_hooks = self.retained = self.shown_edges = None
        self.prim = prim
        self.params = params
        self.plan = plan
        if plan.saved_inputs:
            if grad_mode.inference_tensors_exist:
                _refuse_saving_inference_tensors(inputs, plan.saved_inputs)
            saved = {}
            for i in plan.saved_inputs:
                t = inputs[i]
                saved[i] = (t, t._version_counter[0])
            self.saved = saved
        else:
            self.saved = None
        # The output is kept as its data and rebuilt on unpack, so the node
        # does not hold the tensor that holds the node.
        self.saved_out = (
            (output._data, output._dtype, output._version_counter, output._version_counter[0])
            if plan.saves_output
            else None
        )
        self.saved_tangents = None
        self.freed = False

    @property
    def label(self) -> str:
        return self.__class__.__name__

    @label.setter
    def label(self, name: str) -> None:
        self.__class__ = backward_class(name)

    def unpack_output(self):
        data, dtype, counter, version = self.saved_out
        if counter[0] != version:
            type_name = _tensor._make(data, dtype).type()
            raise RuntimeError(modified_message(data.shape, type_name, self, counter[0], version))
        return _tensor._from_saved_output(data, dtype, counter, self, 0)

    def release(self) -> None:
        if self.saved is not None or self.saved_out is not None:
            self.saved = self.saved_out = self.saved_tangents = self.op_call = None
            self.freed = True

    def apply(self, grads):
        g = grads[0]
        if self.freed:
            raise RuntimeError(FREED_MESSAGE)
        plain = _records_nothing()
        if plain:
            g = _plain(g._data, g._dtype, g._holds_bfloat16())
            out, value = self._plain_output, self._plain_saved_value
        else:
            out, value = self.unpack_output, self.unpack_input
        result = []
        count = len(self.in_shapes)
        for i, (need, rule) in enumerate(zip(self.plan.needs_grad, self.plan.rules)):
            if not need:
                result.append(None)
                continue
            kwargs = self.prim.vjp_arguments(
                i, count, g, out, value, self.in_shapes, self.in_dtypes, self.params
            )
            grad = rule(**kwargs)
            if grad is not None:
                grad = unbroadcast(grad, self.in_shapes[i], self.in_dtypes[i])
                if plain:
                    grad = _tensor._from_plain(grad)
            result.append(grad)
        return result

    # not _saved_<name>: that prefix is PyTorch's saved attributes' (saved_attributes.py)
    def unpack_input(self, position: int):
        return unpack_saved(*self.saved[position])

    def _plain_saved_value(self, position: int):
        saved = unpack_saved(*self.saved[position])
        return _plain(saved._data, saved._dtype, saved._holds_bfloat16())

    def _plain_output(self):
        data, dtype, counter, version = self.saved_out
        if counter[0] != version:
            self.unpack_output()  # raises
        return _plain(data, dtype)


def _refuse_saving_inference_tensors(inputs, positions) -> None:
    """PyTorch's error for a backward that would read an inference tensor
    (made in inference mode, used for a gradient outside it)."""
    if grad_mode._state.inference:  # there PyTorch records no graph at all, even with grad on
        return
    for i in positions:
        if inputs[i]._inference:
            raise RuntimeError(
                "Inference tensors cannot be saved for backward. To work around you can make "
                "a clone to get a normal tensor and use it in autograd."
            )


_backward_classes: dict = {}  # node name -> its PrimitiveBackward subclass


def backward_class(name: str) -> type:
    """The subclass of PrimitiveBackward called ``name``, made once."""
    cls = _backward_classes.get(name)
    if cls is None:
        namespace = {"__slots__": (), "__module__": __name__}
        cls = type(name, (PrimitiveBackward,), {**namespace, **saved_attributes.properties(name)})
        _backward_classes[name] = cls
    return cls


class RecordingPlan:
    """For one primitive and one pattern of inputs requiring grad: which inputs
    get a gradient, and which values the backward node must save."""

    __slots__ = (
        "needs_grad",
        "saved_inputs",
        "saves_output",
        "rules",
        "node_class",
    )

    def __init__(self, prim, requires_grad: tuple):
        count = len(requires_grad)
        self.node_class = backward_class(prim.backward_name)
        self.needs_grad = tuple(
            r and prim.rule_for(i) is not None for i, r in enumerate(requires_grad)
        )
        self.rules = tuple(prim.rule_for(i) for i in range(count))
        names = set()
        for i, need in enumerate(self.needs_grad):
            if need:
                names.update(prim.rule_args[prim.input_name(i)])
        positions = set()
        for name in names:
            kind, *payload = prim.rule_argument(name, count)
            if kind == "value":
                positions.add(payload[0])
            elif kind == "values":
                positions.update(payload[0])
        self.saved_inputs = tuple(sorted(positions))
        self.saves_output = "out" in names


_plans: dict = {}


def recording_plan(prim, requires_grad: tuple):
    """The cached plan, or None when no input of this pattern gets a gradient."""
    key = (prim, requires_grad)
    plan = _plans.get(key, False)
    if plan is False:
        plan = RecordingPlan(prim, requires_grad)
        plan = _plans[key] = plan if True in plan.needs_grad else None
    return plan


class AccumulateGrad(Node):
    """The node of a leaf: hooks registered on the leaf run, then the cotangent
    is added into ``leaf.grad``, then the leaf's post-accumulate-grad hooks
    run. The leaf owns its node (which refers back weakly), so a leaf keeps
    one node for its whole life."""

    __slots__ = ("variable_ref",)

    def __init__(self, variable):
        super().__init__(())
        self.variable_ref = weakref.ref(variable)
        self.sequence_nr = float("inf")  # run as soon as ready, as PyTorch does

    @property
    def variable(self):
        return self.variable_ref()

    def hooks_for(self, output_nr):
        variable = self.variable_ref()
        hooks = variable._hooks if variable is not None else None
        return list(hooks.values()) if hooks else ()

    def apply(self, grads):
        variable = self.variable_ref()
        if variable is not None:
            accumulate_into(variable, grads[0])
            if variable._post_accumulate_hooks:
                for hook in tuple(variable._post_accumulate_hooks.values()):
                    hook(variable)
        return []


def accumulate_into(tensor, grad) -> None:
    if grad is not None:
        tensor._accumulate_grad(grad)


_NO_EDGE = (None, 0)


def record(prim, params, inputs, output, requires_grad: tuple) -> None:
    """Gives ``output`` (``prim`` applied to ``inputs`` now) its backward
    node, when one of the inputs that ``requires_grad`` gets a gradient."""
    plan = _plans.get((prim, requires_grad), False)
    if plan is False:
        plan = recording_plan(prim, requires_grad)
    if plan is None:
        return
    for t in inputs:
        if t._base is not None and t._requires_grad and t._version_counter[0] != t._view_version:
            raise RuntimeError(
                "a view of a tensor that was since modified in-place is used in a computation "
                "that requires grad; take the view again after the in-place operation"
            )
    output.grad_fn = plan.node_class(prim, params, inputs, output, plan)
    output._requires_grad = True


def gradient_edge(tensor):
    """The (node, output_nr) where ``tensor``'s gradient arrives."""
    if tensor.grad_fn is not None:
        return (tensor.grad_fn, tensor._output_nr)
    return (tensor._grad_accumulator(), 0)


def _edge_to(tensor):
    """``gradient_edge``, for a tensor that requires grad (its accumulator read first)."""
    node = tensor.grad_fn
    if node is not None:
        return (node, tensor._output_nr)
    return (tensor._accumulator or tensor._grad_accumulator(), 0)


class _Passes(threading.local):
    """The backward passes running in this thread, innermost last: for each,
    the callbacks queued to run when it ends."""

    def __init__(self):
        self.callbacks: list = []


_passes = _Passes()


def queue_callback(callback) -> None:
    """Calls ``callback()`` when the backward pass now running has computed
    every gradient, before its ``backward()`` returns (PyTorch's
    ``Variable._execution_engine.queue_callback``); callbacks run in the
    order queued, and may queue more."""
    if not _passes.callbacks:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    _passes.callbacks[-1].append(callback)


def execute(
    roots, root_grads, *, retain_graph: bool, create_graph: bool, capture=None, accumulate_only=None
):
    """Runs the backward pass from ``roots`` (edges) seeded with ``root_grads``,
    then the callbacks queued during it.

    ``capture``: edges whose incoming gradient is returned instead of
    accumulated (``autograd.grad``). ``accumulate_only``: the tensors whose
    ``.grad`` receives gradients (``backward(inputs=...)``). Either restricts
    the walk to the nodes that lead to them.
    """
    callbacks: list = []
    _passes.callbacks.append(callbacks)
    try:
        captured = _run(roots, root_grads, retain_graph, create_graph, capture, accumulate_only)
        for callback in callbacks:  # by index: one may queue another
            callback()
    finally:
        _passes.callbacks.pop()
    return captured


def _run(roots, root_grads, retain_graph, create_graph, capture, accumulate_only):
    """The backward pass of ``execute``."""
    accumulate_edges = None
    if accumulate_only is not None:
        accumulate_edges = [(gradient_edge(t), t) for t in accumulate_only]
        targets = [edge for edge, _ in accumulate_edges]
    else:
        targets = capture
    dependencies, needed = _walk(roots, targets)
    captured = [None] * len(capture) if capture is not None else None
    arrivals = _arrivals(capture, accumulate_edges)
    accumulate_nodes = (
        None if accumulate_edges is None else {edge[0] for edge, _ in accumulate_edges}
    )
    buffers: dict = {}  # node -> the cotangents of its outputs so far
    for edge, grad in zip(roots, root_grads):
        _add_to(buffers, edge, grad)
    ready = [(-node.sequence_nr, id(node), node) for node in buffers if not dependencies.get(node)]
    heapq.heapify(ready)
    with grad_mode.set_grad_enabled(create_graph):
        while ready:
            node = heapq.heappop(ready)[2]
            grads = buffers.pop(node)
            is_leaf_node = node.__class__ is AccumulateGrad
            if node.inner_dependents:
                _refuse_partial_reads(node, grads, arrivals.get(node, ()))
            if node.tensor_hooks or node.retained or is_leaf_node:
                _run_tensor_hooks(node, grads)
            for nr, receiver in arrivals.get(node, ()):
                if isinstance(receiver, int):
                    captured[receiver] = grads[nr]
                else:
                    accumulate_into(receiver, grads[nr])
            if is_leaf_node:
                run = capture is None and (accumulate_nodes is None or node in accumulate_nodes)
            else:
                run = needed is None or node in needed
            outputs = ()
            if run and (grads[0] is not None or any(g is not None for g in grads)):
                outputs = node.apply(grads)
                if not retain_graph:
                    node.release()
            for k, edge in enumerate(node.edges):
                if edge[0] is not None:
                    _add_to(buffers, edge, outputs[k] if outputs else None)
                    dependencies[edge[0]] -= 1
                    if dependencies[edge[0]] == 0:
                        heapq.heappush(ready, (-edge[0].sequence_nr, id(edge[0]), edge[0]))
    return captured


def _arrivals(capture, accumulate_edges) -> dict:
    """node -> [(output_nr, receiver)]: where a gradient arriving at a node
    also goes; a receiver is a position in ``capture`` or a non-leaf tensor
    whose ``.grad`` backward(inputs=...) asked for."""
    arrivals: dict = {}
    for k, (node, nr) in enumerate(capture or ()):
        arrivals.setdefault(node, []).append((nr, k))
    for (node, nr), tensor in accumulate_edges or ():
        if not isinstance(node, AccumulateGrad):
            arrivals.setdefault(node, []).append((nr, tensor))
    return arrivals


def _add_to(buffers: dict, edge, grad) -> None:
    """Adds ``grad`` (or nothing, but the node gets its buffer) to what the
    edge's node has received."""
    node, nr = edge
    slot = buffers.get(node)
    if slot is None:
        slot = buffers[node] = [None] * node.num_outputs
    if grad is not None:
        slot[nr] = grad if slot[nr] is None else _sum(slot[nr], grad)


def _sum(a, b):
    """Two cotangents of one value added, on plain values when nothing records."""
    if a._dtype is b._dtype and _records_nothing():
        total = _plain(a._data, a._dtype) + _plain(b._data, b._dtype)
        return _tensor._make(total._data, total._dtype)
    return a + b


def _refuse_partial_reads(node, grads, arrivals) -> None:
    """A gradient read at an output of ``node`` (a hook, retain_grad, a
    capture) that lacks what its inner dependents carry raises: eagerly it
    would hold it."""
    read = {nr for nr, _ in arrivals}
    read.update(node.tensor_hooks or ())
    read.update(node.retained or ())
    for nr in read:
        carrying = [k for k in node.inner_dependents.get(nr, ()) if grads[k] is not None]
        if carrying:
            raise RuntimeError(
                f"the gradient of output {nr} of a compiled call cannot be read (a hook, "
                "retain_grad(), autograd.grad or backward(inputs=...) with respect to it) "
                f"while outputs computed from it inside the call ({carrying}) carry "
                "gradients: the compiled backward passes those on to the call's inputs "
                "directly. Read it from a call that does not return both, or run the "
                "function eagerly (jit(fn, eager=True))"
            )


def _run_tensor_hooks(node, grads) -> None:
    """Hooks registered on the tensors this node produced, then retain_grad."""
    for nr in range(node.num_outputs):
        if grads[nr] is None:
            continue
        for hook in node.hooks_for(nr):
            replaced = hook(grads[nr])
            if replaced is not None:
                grads[nr] = replaced
        if node.retained and nr in node.retained:
            tensor = node.retained[nr]()
            if tensor is not None:
                accumulate_into(tensor, grads[nr])


def _walk(roots, targets):
    """Counts each node's consumers; with targets, also finds the nodes that lead to one."""
    dependencies: dict = {}
    seen = set()
    order = []
    # once each: outputs of one node (a compiled function's) are several roots
    stack = list(dict.fromkeys(node for node, _ in roots if node is not None))
    seen.update(stack)
    while stack:
        node = stack.pop()
        order.append(node)
        for next_node, _ in node.edges:
            if next_node is None:
                continue
            dependencies[next_node] = dependencies.get(next_node, 0) + 1
            if next_node not in seen:
                seen.add(next_node)
                stack.append(next_node)
    if targets is None:
        return dependencies, None
    # A target's own node runs only if it leads to another target: the
    # gradient is taken where it arrives (PyTorch leaves that node's saved
    # values alone, so a later backward through it still works).
    target_nodes = {edge[0] for edge in targets}
    needed = set()
    # reverse topological order: a node's inputs are decided before the node
    for node in sorted(order, key=lambda n: n.sequence_nr):
        if any(n in needed or n in target_nodes for n, _ in node.edges):
            needed.add(node)
    return dependencies, needed


# ------------------------------------------------------- backward() and grad()


def _grad_arguments(outputs, inputs, grad_outputs) -> tuple:
    """grad()'s tensors as tuples, checked."""
    outputs = _as_tuple(outputs, "outputs")
    inputs = _as_tuple(inputs, "inputs")
    grad_outputs = _as_tuple(grad_outputs, "grad_outputs")
    if grad_outputs is not None and len(grad_outputs) != len(outputs):
        raise RuntimeError(
            f"grad requires one grad_output per output: got "
            f"{len(grad_outputs)} for {len(outputs)} outputs"
        )
    for t in inputs:
        if not isinstance(t, _tensor):
            raise TypeError(f"inputs must be Tensors, got {type(t).__name__}")
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    return outputs, inputs, grad_outputs


def _as_tuple(value, name):
    if value is None:
        return None
    if isinstance(value, _tensor):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(value)
    raise TypeError(f"{name} must be a Tensor or a sequence of Tensors, not {type(value).__name__}")


def _make_grads(outputs, grad_outputs):
    grads = []
    for i, out in enumerate(outputs):
        if not isinstance(out, _tensor):
            raise TypeError(f"element {i} of tensors is a {type(out).__name__}, not a Tensor")
        grad = grad_outputs[i] if grad_outputs is not None else None
        if grad is None:
            if out.requires_grad:
                if out.numel() != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                grad = _tensor._new(np.ones(out.shape, out.dtype.np), out.dtype)
        elif isinstance(grad, _tensor):
            if grad.shape != out.shape:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of "
                    f"{grad.shape} and output[{i}] has a shape of {out.shape}."
                )
            if grad.dtype is not out.dtype:
                grad = grad.to(out.dtype)
        else:
            raise TypeError(
                f"gradients can be either Tensors or None, but got {type(grad).__name__}"
            )
        grads.append(grad)
    return grads


def _roots(outputs, grads):
    edges, seeds = [], []
    for i, (out, grad) in enumerate(zip(outputs, grads)):
        if not out.requires_grad:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn"
            )
        edges.append(gradient_edge(out))
        seeds.append(grad)
    return edges, seeds


def backward(
    tensors,
    grad_tensors=None,
    retain_graph=None,
    create_graph=False,
    grad_variables=None,
    inputs=None,
):
    """Accumulates the gradients of ``tensors`` into the leaves' ``.grad``."""
    outputs = _as_tuple(tensors, "tensors")
    grad_outputs = _as_tuple(
        grad_tensors if grad_tensors is not None else grad_variables, "grad_tensors"
    )
    if grad_outputs is not None and len(grad_outputs) != len(outputs):
        raise RuntimeError(f"got {len(grad_outputs)} gradients for {len(outputs)} outputs")
    inputs = _as_tuple(inputs, "inputs")
    if inputs is not None and not inputs:
        raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    for t in inputs or ():
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    if retain_graph is None:
        retain_graph = create_graph
    edges, seeds = _roots(outputs, _make_grads(outputs, grad_outputs))
    execute(
        edges, seeds, retain_graph=retain_graph, create_graph=create_graph, accumulate_only=inputs
    )


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph=None,
    create_graph=False,
    only_inputs=True,
    allow_unused=None,
    is_grads_batched=False,
    materialize_grads=False,
):
    """Returns the gradients of ``outputs`` with respect to ``inputs`` (nothing is
    accumulated into ``.grad``).

    >>> import fusegrad
    >>> x = fusegrad.tensor(3.0, requires_grad=True)
    >>> fusegrad.autograd.grad(x * x, x)
    (tensor(6.),)
    """
    if not only_inputs:
        warnings.warn(
            "only_inputs argument is deprecated and is ignored now (defaults to "
            "True). To accumulate gradient for other parts of the graph, please use "
            "fusegrad.autograd.backward.",
            stacklevel=2,
        )
    if is_grads_batched:
        raise NotImplementedError("is_grads_batched=True is not supported by fusegrad")
    if allow_unused is None:
        allow_unused = materialize_grads
    outputs, inputs, grad_outputs = _grad_arguments(outputs, inputs, grad_outputs)
    if retain_graph is None:
        retain_graph = create_graph
    edges, seeds = _roots(outputs, _make_grads(outputs, grad_outputs))
    captured = execute(
        edges,
        seeds,
        retain_graph=retain_graph,
        create_graph=create_graph,
        capture=[gradient_edge(t) for t in inputs],
    )
    result = []
    for index, (t, g) in enumerate(zip(inputs, captured)):
        if g is None:
            if materialize_grads:
                g = _tensor._new(np.zeros(t.shape, t.dtype.np), t.dtype)
            elif not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {index} appears to not "
                    "have been used in the graph. Set allow_unused=True if this is "
                    "the desired behavior."
                )
        result.append(g)
    return tuple(result)
