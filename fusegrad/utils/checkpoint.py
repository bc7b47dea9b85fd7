"""Activation checkpointing (``torch.utils.checkpoint``): a segment of the
forward keeps only its inputs, and the backward runs it again for its
gradients, trading compute for memory.

Eagerly, the segment runs once recording its graph, only to learn where
its gradients go (the inputs, and the parameters and other tensors it
reads); its outputs are then tied to one ``CheckpointBackward`` node and
its own graph, with everything it saved, is dropped. The node's backward
runs the function again from the kept inputs, with the random state and
autocast state of the forward (so dropout draws the same mask), and
passes the gradients of that run on: the same operations as without
checkpointing, so the same numbers.

Under ``fusegrad.jit`` the function runs as it is and its equations are
marked: the compiled forward saves what the minimum cut chooses once
those equations may be computed again in the backward (the segment's
inputs, or less), and the backward recomputes the rest.
"""

from __future__ import annotations

import contextlib
import warnings

from ..amp.autocast_mode import (
    autocast,
    get_autocast_dtype,
    is_autocast_cache_enabled,
    is_autocast_enabled,
)
from ..autograd.transforms import track
from ..eager import grad_mode
from ..eager.autograd import (
    FREED_MESSAGE,
    AccumulateGrad,
    Node,
    execute,
    gradient_edge,
    sequence_mark,
    unpack_saved,
)
from ..eager.random import get_rng_state, set_rng_state
from ..eager.tensor import Tensor, recording
from ..nn.modules.module import Module
from ._pytree import tree_flatten

_UNSET_WARNING = (
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting "
    "in PyTorch 2.9, calling checkpoint without use_reentrant will raise an exception. "
    "use_reentrant=False is recommended, but if you need to preserve the current default "
    "behavior, you can pass use_reentrant=True. Refer to docs for more details on the "
    "differences between the two variants."
)
_SEQUENTIAL_UNSET_WARNING = (
    "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be passed "
    "explicitly. In version 2.9 we will raise an exception if use_reentrant is not passed. "
    "use_reentrant=False is recommended, but if you need to preserve the current default "
    "behavior, you can pass use_reentrant=True. Refer to docs for more details on the "
    "differences between the two variants."
)


class CheckpointError(RuntimeError):
    """The function run again in the backward did not compute what it
    computed in the forward."""


def noop_context_fn():
    return contextlib.nullcontext(), contextlib.nullcontext()


def checkpoint(
    function,
    *args,
    use_reentrant=None,
    context_fn=noop_context_fn,
    determinism_check: str = "default",
    debug: bool = False,
    early_stop: bool = True,
    preserve_rng_state: bool = True,
    **kwargs,
):
    """``function(*args, **kwargs)``, its activations recomputed in the
    backward rather than kept (see the module's docstring).

    ``use_reentrant`` is PyTorch's choice of implementation; both give the
    same gradients here, by the non-reentrant one's rules (kwargs, any
    output structure, ``autograd.grad``), except that as in PyTorch
    ``use_reentrant=True`` takes no keyword arguments and, when no input
    requires grad, warns and gives outputs that do not require grad. Left
    unset, it warns as PyTorch 2.13 does and means True. ``context_fn``
    gives two context managers, the first entered around the forward, the
    second around the recomputation. ``determinism_check="default"`` checks
    that the recomputed outputs have the forward's shapes and dtypes.
    ``preserve_rng_state``: the recomputation draws the forward's random
    numbers. ``debug`` and ``early_stop`` shape PyTorch's error reports and
    how far it recomputes, not the results.

    >>> import fusegrad
    >>> from fusegrad.utils.checkpoint import checkpoint
    >>> x = fusegrad.tensor([1.0, 2.0], requires_grad=True)
    >>> checkpoint(lambda x: (x.sin() * x).sum(), x, use_reentrant=False).backward()
    >>> x.grad
    tensor([1.3818, 0.0770])
    """
    if use_reentrant is None:
        warnings.warn(_UNSET_WARNING, stacklevel=2)
        use_reentrant = True
    if determinism_check not in ("default", "none"):
        raise ValueError(
            f"determinism_check should be one of ['default', 'none'], but got {determinism_check}"
        )
    if use_reentrant:
        if context_fn is not noop_context_fn or debug:
            raise ValueError(
                "Passing `context_fn` or `debug` is only supported when use_reentrant=False."
            )
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if grad_mode.is_grad_enabled() and not any(
            isinstance(a, Tensor) and a.requires_grad for a in args
        ):
            warnings.warn(
                "None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2
            )
            with grad_mode.no_grad():
                return function(*args)
    forward_context, recompute_context = context_fn()
    trace = recording.trace
    if not grad_mode.is_grad_enabled() or trace is not None:
        start = len(trace.eqns) if trace is not None else 0
        with forward_context:
            outputs = function(*args, **kwargs)
        if trace is not None and grad_mode.is_grad_enabled():
            # a collective computed again would communicate again
            trace.checkpointed.update(e for e in trace.eqns[start:] if not e.prim.collective)
        return outputs
    call = _Call(function, args, kwargs, recompute_context, preserve_rng_state)
    with forward_context:
        return call.forward(determinism_check == "default")


class _Call:
    """What a checkpointed call keeps to run again: the function, its
    arguments (tensors at the version they had), the random and autocast
    state, and which arguments' gradients it passes on."""

    def __init__(self, function, args, kwargs, recompute_context, preserve_rng_state):
        self.function = function
        self.leaves, self.spec = tree_flatten((args, kwargs))
        self.versions = [
            x._version_counter[0] if isinstance(x, Tensor) else None for x in self.leaves
        ]
        self.differentiated = [isinstance(x, Tensor) and x.requires_grad for x in self.leaves]
        self.context = recompute_context
        self.rng_state = get_rng_state() if preserve_rng_state else None
        self.autocast = (
            is_autocast_enabled("cpu"),
            get_autocast_dtype("cpu"),
            is_autocast_cache_enabled(),
        )

    def _run(self, inputs: list):
        args, kwargs = self.spec.unflatten(inputs)
        return self.function(*args, **kwargs)

    def forward(self, check: bool):
        """The forward: the function's outputs, those requiring grad tied to a
        new ``CheckpointBackward``."""
        mark = sequence_mark()
        inputs = [
            x.detach().requires_grad_() if needed else x
            for x, needed in zip(self.leaves, self.differentiated)
        ]
        outputs, spec = tree_flatten(self._run(inputs))
        # an argument returned as it is stays itself; so does anything made
        # before the call
        originals = {id(t): x for t, x, d in zip(inputs, self.leaves, self.differentiated) if d}
        outputs = [originals.get(id(o), o) for o in outputs]
        positions = [
            k
            for k, o in enumerate(outputs)
            if isinstance(o, Tensor) and o.grad_fn is not None and o.grad_fn.sequence_nr > mark
        ]
        if not positions:
            return spec.unflatten(outputs)
        input_of = {
            id(gradient_edge(t)[0]): i for i, t in enumerate(inputs) if self.differentiated[i]
        }
        ends = []  # an argument's position, or the edge to what the function read
        for edge in _edges_leaving(mark, [gradient_edge(outputs[k]) for k in positions]):
            ends.append(input_of.get(id(edge[0]), edge))
        node = CheckpointBackward(
            self, ends, [(k, outputs[k].shape, outputs[k].dtype) for k in positions], check
        )
        for nr, k in enumerate(positions):
            out = outputs[k].detach()
            out.grad_fn, out._output_nr, out._requires_grad = node, nr, True
            outputs[k] = out
        return spec.unflatten(outputs)

    def recompute(self, connected: bool) -> tuple:
        """The function run again on the kept arguments, as in the forward:
        (its arguments, its outputs' leaves). ``connected``: gradients of the
        run reach the original arguments (create_graph)."""
        leaves = [
            unpack_saved(x, v) if isinstance(x, Tensor) else x
            for x, v in zip(self.leaves, self.versions)
        ]
        inputs = [
            track(x, connected) if needed else x for x, needed in zip(leaves, self.differentiated)
        ]
        enabled, dtype, cache = self.autocast
        with (
            _random_state(self.rng_state),
            grad_mode.enable_grad(),
            autocast("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache),
            self.context,
        ):
            outputs = self._run(inputs)
        return inputs, tree_flatten(outputs)[0]


@contextlib.contextmanager
def _random_state(state):
    """The default generator at ``state`` inside, at its own state again after."""
    if state is None:
        yield
        return
    current = get_rng_state()
    set_rng_state(state)
    try:
        yield
    finally:
        set_rng_state(current)


def _edges_leaving(mark: int, roots: list) -> list:
    """The edges from the nodes recorded since ``mark`` (reachable from
    ``roots``) to nodes recorded before it or to leaves: where the
    gradients of that part of the graph go."""
    leaving, seen, stack = {}, set(), list(roots)
    while stack:
        node, nr = edge = stack.pop()
        if node is None:
            continue
        if isinstance(node, AccumulateGrad) or node.sequence_nr < mark:
            leaving.setdefault((id(node), nr), edge)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.extend(node.edges)
    return list(leaving.values())


class CheckpointBackward(Node):
    """The backward of a checkpointed call: runs it again and passes that
    run's gradients to the call's arguments and to what it read."""

    def __init__(self, call: _Call, ends: list, outputs: list, check: bool):
        super().__init__(
            tuple(gradient_edge(call.leaves[end]) if isinstance(end, int) else end for end in ends)
        )
        self.call = call
        self.ends = ends
        self.outputs = outputs  # (position among the output's leaves, shape, dtype)
        self.num_outputs = len(outputs)
        self.check = check

    def release(self) -> None:
        self.call = None

    def apply(self, grads):
        if self.call is None:
            raise RuntimeError(FREED_MESSAGE)
        create_graph = grad_mode.is_grad_enabled()
        inputs, outputs = self.call.recompute(create_graph)
        if self.check:
            self._check(outputs)
        roots, seeds = [], []
        for (k, _, _), grad in zip(self.outputs, grads):
            if grad is not None:
                roots.append(gradient_edge(outputs[k]))
                seeds.append(grad)
        capture = [gradient_edge(inputs[e]) if isinstance(e, int) else e for e in self.ends]
        # retained: the engine runs a captured node, and one from before the
        # call (a tensor the function read) is the outer backward's to free
        return execute(roots, seeds, retain_graph=True, create_graph=create_graph, capture=capture)

    def _check(self, outputs: list) -> None:
        wrong = []
        for position, (k, shape, dtype) in enumerate(self.outputs):
            out = outputs[k] if k < len(outputs) else None
            if not (isinstance(out, Tensor) and out.requires_grad):
                wrong.append((position, shape, dtype, None))
            elif out.shape != shape or out.dtype is not dtype:
                wrong.append((position, shape, dtype, out))
        if wrong:
            raise CheckpointError(
                "torch.utils.checkpoint: Recomputed values for the following tensors have "
                "different metadata than during the forward pass.\n"
                + "".join(_mismatch(*w) for w in wrong)
            )


def _mismatch(position, shape, dtype, recomputed) -> str:
    def metadata(shape, dtype):
        return f"{{'shape': {shape}, 'dtype': {dtype}, 'device': device(type='cpu')}}"

    again = (
        "no tensor requiring grad"
        if recomputed is None
        else metadata(recomputed.shape, recomputed.dtype)
    )
    return (
        f"tensor at position {position}:\nsaved metadata: {metadata(shape, dtype)}\n"
        f"recomputed metadata: {again}\n"
    )


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """``functions`` (a Sequential or a list of modules or functions) applied
    in turn to ``input``, in ``segments`` parts of equal length: every part
    but the last checkpointed (the last one's activations are needed first
    in the backward anyway). ``preserve_rng_state`` as for ``checkpoint``.

    >>> import fusegrad
    >>> from fusegrad.utils.checkpoint import checkpoint_sequential
    >>> net = fusegrad.nn.Sequential(fusegrad.nn.Tanh(), fusegrad.nn.Tanh())
    >>> x = fusegrad.zeros(2, requires_grad=True)
    >>> checkpoint_sequential(net, 2, x, use_reentrant=False)
    tensor([0., 0.], grad_fn=<TanhBackward0>)
    """
    if use_reentrant is None:
        warnings.warn(_SEQUENTIAL_UNSET_WARNING, stacklevel=2)
        use_reentrant = True
    preserve_rng_state = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if isinstance(functions, Module):
        functions = list(functions.children())
    size = len(functions) // segments

    def run(part):
        def segment(x):
            for function in part:
                x = function(x)
            return x

        return segment

    end = 0
    for start in range(0, size * (segments - 1), size):
        end = start + size
        input = checkpoint(
            run(functions[start:end]),
            input,
            use_reentrant=use_reentrant,
            preserve_rng_state=preserve_rng_state,
        )
    return run(functions[end:])(input)
