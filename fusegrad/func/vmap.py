"""``vmap`` (``torch.func.vmap``): a function of one example, run on a batch.

The function runs once, as under torch.func, but on one batch element: a
trace (tracer/element_trace.py) records it as a graph of primitives, and
the graph is run again on the whole batch, each equation by its
primitive's batching rule (ir/batching.py). So every tensor method and
module works inside, what is computed is recorded as usual (eager autograd
on the batch, an enclosing jit's trace: batched kernels, not a loop, an
enclosing vmap), and transforms nest: ``vmap(grad(f))`` batches the
gradient's own equations.
"""

from __future__ import annotations

import functools

import numpy as np

from ..eager import grad_mode
from ..eager.ops.joining import cat
from ..eager.random import get_rng_state, set_rng_state
from ..eager.tensor import Tensor, constant_array
from ..ir.batching import RANDOMNESS, Batch, needed_eqns, run_batched
from ..tracer.element_trace import CONTROL_FLOW, ElementTrace
from ..tracer.trace import active
from ..utils._pytree import tree_flatten, tree_unflatten


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None, chunks=None):
    """``func`` mapped over a batch axis of its arguments: ``in_dims`` says
    which axis of each positional argument (a pytree prefix of them; None:
    not batched), ``out_dims`` where the batch axis goes in each output.
    ``randomness``: "error" (a random draw inside raises), "same" (one draw
    for the whole batch) or "different" (one per element). ``chunk_size``:
    the batch is run that many elements at a time, to bound memory.

    >>> import fusegrad
    >>> from fusegrad.func import vmap
    >>> vmap(fusegrad.dot)(fusegrad.ones(3, 2), fusegrad.ones(3, 2))
    tensor([2., 2., 2.])
    """
    if randomness not in RANDOMNESS:
        raise RuntimeError(
            "Only allowed values for randomness are 'error', 'different', or 'same'. "
            f"Got {randomness}"
        )
    if chunks is not None:  # functorch's older spelling
        chunk_size = chunks
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def vmapped(*args, **kwargs):
        size, dims, flat, spec = _batched_inputs(func, in_dims, args)
        call = functools.partial(_vmap_call, func, spec, out_dims, randomness, kwargs)
        if chunk_size is None or chunk_size >= size:
            return call(size, dims, flat)
        return _in_chunks(call, size, dims, flat, chunk_size, out_dims, randomness)

    return vmapped


def _name(func) -> str:
    if isinstance(func, functools.partial):
        return f"functools.partial({_name(func.func)}, ...)"
    return getattr(func, "__name__", repr(func))


def _prefix_flattened(prefix, tree):
    """The leaves of ``prefix`` repeated over the leaves of ``tree`` below
    them (a prefix tree's leaf stands for a whole subtree), or None when
    ``prefix`` is not a prefix of ``tree``."""
    leaves, spec = tree_flatten(prefix)
    try:
        subtrees = spec.flatten_up_to(tree)
    except ValueError:
        return None
    return [leaf for leaf, sub in zip(leaves, subtrees) for _ in tree_flatten(sub)[0]]


def _batched_inputs(func, in_dims, args) -> tuple:
    """(batch size, in_dim of each leaf of args, the leaves, args' spec),
    checked as torch.func checks them."""
    where = f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>)"
    if not isinstance(in_dims, (int, tuple)):
        raise ValueError(
            f"{where}: expected `in_dims` to be int or a (potentially nested) tuple matching "
            f"the structure of inputs, got: {type(in_dims)}."
        )
    if not args:
        raise ValueError(
            f"vmap({_name(func)})(<inputs>): got no inputs. Maybe you forgot to add inputs, "
            "or you are trying to vmap over a function with no inputs. The latter is "
            "unsupported."
        )
    flat, spec = tree_flatten(args)
    dims = _prefix_flattened(in_dims, args)
    if dims is None:
        raise ValueError(
            f"{where}: in_dims is not compatible with the structure of `inputs`. in_dims has "
            f"structure {tree_flatten(in_dims)[1]} but inputs has structure {spec}."
        )
    for k, (arg, dim) in enumerate(zip(flat, dims)):
        if dim is None:
            continue
        if not isinstance(dim, int):
            raise ValueError(
                f"{where}: Got in_dim={dim} for an input but in_dim must be either an integer "
                "dimension or None."
            )
        if not isinstance(arg, Tensor):
            raise ValueError(
                f"{where}: Got in_dim={dim} for an input but the input is of type "
                f"{type(arg)}. We cannot vmap over non-Tensor arguments, please use None as "
                "the respective in_dim"
            )
        if not -arg.dim() <= dim < arg.dim():
            raise ValueError(
                f"{where}: Got in_dim={dim} for some input, but that input is a Tensor of "
                f"dimensionality {arg.dim()} so expected in_dim to satisfy "
                f"-{arg.dim()} <= in_dim < {arg.dim()}."
            )
        dims[k] = dim % arg.dim()
    sizes = [arg.shape[dim] for arg, dim in zip(flat, dims) if dim is not None]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(
            "vmap: Expected all tensors to have the same size in the mapped dimension, got "
            f"sizes {sizes} for the mapped dimension"
        )
    return sizes[0], dims, flat, spec


def _element(batched: Tensor) -> Tensor:
    """A fresh tensor like one element of ``batched`` (batch axis in front),
    for the trace: its first element (zeros for an empty batch)."""
    data = batched._data[0] if batched.shape[0] else np.zeros(batched._data.shape[1:])
    element = Tensor._make(np.array(data, batched._data.dtype), batched._dtype)
    if batched.requires_grad:
        with active(None):  # a leaf of the element's trace, not of an enclosing one
            element.requires_grad_(True)
    return element


def _vmap_call(func, spec, out_dims, randomness: str, kwargs: dict, size: int, dims, flat):
    fronts = [
        arg if dim is None else (arg if dim == 0 else arg.movedim(dim, 0))
        for arg, dim in zip(flat, dims)
    ]
    samples = [arg if dim is None else _element(arg) for arg, dim in zip(fronts, dims)]
    trace = ElementTrace(randomness)
    for sample, dim in zip(samples, dims):
        if dim is not None:
            trace.add_batched_input(sample)
    with active(trace):
        output = func(*tree_unflatten(samples, spec), **kwargs)
    flat_out, out_spec = tree_flatten(output)
    out_vars = [trace.var_of(o) if isinstance(o, Tensor) else None for o in flat_out]
    written = _written(trace, samples, fronts, dims)
    trace.restore(python_too=False)  # the batched run makes the changes again
    _refuse_what_cannot_batch(trace)

    inputs = {}
    for sample, front, dim in zip(samples, fronts, dims):
        if dim is not None:
            inputs[trace.initial_vars[id(sample)][1]] = (front, True)
    for captured, var in zip(trace.captured, trace.captured_vars):
        inputs[var] = (captured.tensor, False)
    decided = [var for var, _ in trace.batched_guards]
    wanted = [v for v in out_vars if v is not None] + [var for _, var, _ in written] + decided
    batch = Batch(size, constant_array)
    stopped = trace.stopped
    env = run_batched(
        needed_eqns(trace.graph(wanted), wanted),
        inputs,
        batch,
        randomness,
        lambda eqn: grad_mode.no_grad() if eqn in stopped else None,
    )
    for var, observed in trace.batched_guards:
        if not bool((env[var][0] == constant_array(observed, env[var][0].dtype)).all()):
            raise RuntimeError(CONTROL_FLOW)
    for target, var, batched_target in written:
        if env[var][1] and not batched_target:
            raise RuntimeError(
                "vmap: an in-place operation wrote a batched value into a tensor that is not "
                f"batched: output with shape {list(target.shape)} doesn't match the broadcast "
                f"shape {[size, *target.shape]}"
            )
    for target, var, _ in written:
        target.copy_(env[var][0])
    results = [
        env[var] if var is not None and var in env else (o, False)
        for o, var in zip(flat_out, out_vars)
    ]
    return _outputs(func, results, out_spec, out_dims, size)


def _written(trace, samples, fronts, dims) -> list:
    """(the tensor the caller holds, the var of its new value, whether it is
    batched) for each input or captured tensor the function changed in place."""
    written = []
    targets = {id(s): (f, d is not None) for s, f, d in zip(samples, fronts, dims)}
    for tensor, var in trace.initial_vars.values():
        now = trace.vars.get(id(tensor))
        if now is not None and now is not var:
            target, batched = targets.get(id(tensor), (tensor, False))
            written.append((target, now, batched))
    return written


def _refuse_what_cannot_batch(trace) -> None:
    if trace.grad_writes:
        raise RuntimeError(
            "vmap: a vmapped function cannot call backward() or assign .grad; "
            "use torch.func.grad or torch.autograd.grad inside it"
        )
    if trace.customs:
        raise RuntimeError(
            "vmap: an autograd.Function inside a vmapped function is not supported; "
            "write it with tensor operations"
        )


def _outputs(func, results: list, out_spec, out_dims, size: int):
    """The outputs with their batch axis moved to ``out_dims``; an unbatched
    output is repeated along it."""
    name = _name(func)
    dims = _flat_out_dims(out_dims, out_spec)
    if dims is None:
        raise ValueError(
            f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible "
            f"with the structure of `outputs`. out_dims has structure "
            f"{tree_flatten(out_dims)[1]} but outputs has structure {out_spec}."
        )
    flat = []
    for (value, is_batched), dim in zip(results, dims):
        if dim is not None and not isinstance(dim, int):
            raise ValueError(
                f"vmap({name}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a "
                "python collection of ints representing where in the outputs the vmapped "
                "dimension should appear."
            )
        if dim is None:
            if is_batched:
                raise ValueError(
                    f"vmap({name}, ...): `{name}` can not return a BatchedTensor when "
                    "out_dim is None"
                )
            flat.append(value)
            continue
        if not isinstance(value, Tensor):
            raise ValueError(
                f"vmap({name}, ...): `{name}` must only return Tensors, got type "
                f"{type(value)}. Did you mean to set out_dims= to None for output?"
            )
        if not is_batched:
            value = value.unsqueeze(0).expand(size, *value.shape)
        flat.append(value if dim % value.dim() == 0 else value.movedim(0, dim))
    return tree_unflatten(flat, out_spec)


def _flat_out_dims(out_dims, out_spec):
    """The out_dim of each output leaf (``out_spec``: the outputs' structure),
    or None when ``out_dims`` does not fit it. A single output takes an int,
    None or a 1-tuple, as torch.func's does."""
    if out_spec.is_leaf():
        if isinstance(out_dims, tuple) and len(out_dims) == 1:
            out_dims = out_dims[0]
        return [out_dims] if out_dims is None or isinstance(out_dims, int) else None
    return _prefix_flattened(out_dims, tree_unflatten([0] * out_spec.num_leaves, out_spec))


def _in_chunks(call, size, dims, flat, chunk_size, out_dims, randomness):
    """The call on ``chunk_size`` elements at a time, the outputs joined
    (with "same" randomness, every chunk draws the same numbers)."""
    state = get_rng_state() if randomness == "same" else None
    outputs = []
    for start in range(0, size, chunk_size):
        length = min(chunk_size, size - start)
        part = [a if d is None else a.narrow(d, start, length) for a, d in zip(flat, dims)]
        if state is not None:
            set_rng_state(state)
        outputs.append(call(length, dims, part))
    leaves, spec = tree_flatten(outputs[0])
    parts = [tree_flatten(o)[0] for o in outputs]
    joined = [
        leaves[k] if dim is None else cat([p[k] for p in parts], dim=dim)
        for k, dim in enumerate(_flat_out_dims(out_dims, spec))
    ]
    return tree_unflatten(joined, spec)
