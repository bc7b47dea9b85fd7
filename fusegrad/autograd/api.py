"""``backward`` and ``grad``: checking the arguments and seeding the engine."""

from __future__ import annotations

import warnings

from ..runtime import autograd as engine
from ..tracer.creation import ones_like, zeros_like
from ..tracer.tensor import Tensor


def _as_tuple(value, name):
    if value is None:
        return None
    if isinstance(value, Tensor):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(value)
    raise TypeError(f"{name} must be a Tensor or a sequence of Tensors, not {type(value).__name__}")


def _make_grads(outputs, grad_outputs):
    grads = []
    for i, out in enumerate(outputs):
        if not isinstance(out, Tensor):
            raise TypeError(f"element {i} of tensors is a {type(out).__name__}, not a Tensor")
        grad = grad_outputs[i] if grad_outputs is not None else None
        if grad is None:
            if out.requires_grad:
                if out.numel() != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                grad = ones_like(out)
        elif isinstance(grad, Tensor):
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
        edges.append(engine.gradient_edge(out))
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
    engine.execute(
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
    outputs = _as_tuple(outputs, "outputs")
    inputs = _as_tuple(inputs, "inputs")
    grad_outputs = _as_tuple(grad_outputs, "grad_outputs")
    if grad_outputs is not None and len(grad_outputs) != len(outputs):
        raise RuntimeError(
            f"grad requires one grad_output per output: got "
            f"{len(grad_outputs)} for {len(outputs)} outputs"
        )
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TypeError(f"inputs must be Tensors, got {type(t).__name__}")
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    if retain_graph is None:
        retain_graph = create_graph
    edges, seeds = _roots(outputs, _make_grads(outputs, grad_outputs))
    captured = engine.execute(
        edges,
        seeds,
        retain_graph=retain_graph,
        create_graph=create_graph,
        capture=[engine.gradient_edge(t) for t in inputs],
    )
    result = []
    for index, (t, g) in enumerate(zip(inputs, captured)):
        if g is None:
            if materialize_grads:
                g = zeros_like(t)
            elif not allow_unused:
                raise RuntimeError(
                    f"The differentiated Tensor at index {index} appears to not "
                    "have been used in the graph. Set allow_unused=True if this is "
                    "the desired behavior."
                )
        result.append(g)
    return tuple(result)
