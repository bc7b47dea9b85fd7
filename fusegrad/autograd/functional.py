"""Higher-order helpers: jacobian, hessian, vjp and vhp in terms of ``grad``,
jvp and hvp in forward mode."""

from __future__ import annotations

from ..eager import grad_mode, ops
from ..eager.autograd import grad
from ..eager.creation import zeros_like
from ..eager.tensor import Tensor
from . import forward_ad
from .transforms import jacobian_blocks, track


def _prepare(inputs, create_graph):
    single = isinstance(inputs, Tensor)
    tensors = (inputs,) if single else tuple(inputs)
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(
                f"The inputs given to the function must be Tensors, got {type(t).__name__}"
            )
    return single, tuple(track(t, create_graph) for t in tensors)


def _outputs(func, inputs):
    out = func(*inputs)
    single = isinstance(out, Tensor)
    outs = (out,) if single else tuple(out)
    for o in outs:
        if not isinstance(o, Tensor):
            raise TypeError(
                f"The outputs of the user-provided function must be Tensors, got {type(o).__name__}"
            )
    return single, outs


def _grads(outputs, inputs, grad_outputs, create_graph, strict):
    needs = [o for o in outputs if o.requires_grad]
    if not needs:
        if strict:
            raise RuntimeError(
                "The output of the user-provided function is independent of the "
                "inputs. This is not allowed in strict mode."
            )
        return tuple(zeros_like(x) for x in inputs)
    seeds = [g for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    result = grad(
        needs, inputs, seeds, retain_graph=True, create_graph=create_graph, allow_unused=True
    )
    if strict and any(r is None for r in result):
        raise RuntimeError(
            "The output of the user-provided function is independent of input "
            f"{[r is None for r in result].index(True)}. This is not allowed in "
            "strict mode."
        )
    return tuple(zeros_like(x) if r is None else r for x, r in zip(inputs, result))


def _finish(values, create_graph):
    return tuple(v if create_graph else v.detach() for v in values)


def _vector(v, like, what):
    v = (v,) if isinstance(v, Tensor) else tuple(v)
    if len(v) != len(like):
        raise RuntimeError(
            f"The given {what} should have the same number of elements as the "
            f"inputs: got {len(v)} for {len(like)}"
        )
    for a, b in zip(v, like):
        if a.shape != b.shape:
            raise RuntimeError(
                f"Mismatch in shape: {what} has shape {list(a.shape)} where "
                f"{list(b.shape)} was expected"
            )
    return v


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J)."""
    with grad_mode.enable_grad():
        single_in, inputs = _prepare(inputs, create_graph)
        single_out, outputs = _outputs(func, inputs)
        if v is None:
            if len(outputs) != 1 or outputs[0].numel() != 1:
                raise RuntimeError(
                    "The vector v can only be None if the user-provided function "
                    "returns a single Tensor with a single element."
                )
            v = (ops.reshape(zeros_like(outputs[0]) + 1, outputs[0].shape),)
        v = _vector(v, outputs, "v")
        result = _grads(outputs, inputs, v, create_graph, strict)
    outs = _finish(outputs, create_graph)
    result = _finish(result, create_graph)
    return (outs[0] if single_out else outs), (result[0] if single_in else result)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v), in forward mode."""
    with grad_mode.enable_grad():
        _, inputs = _prepare(inputs, create_graph)
        if v is None:
            if len(inputs) != 1 or inputs[0].numel() != 1:
                raise RuntimeError(
                    "The vector v can only be None if the input to the "
                    "user-provided function is a single Tensor with a single "
                    "element."
                )
            v = (zeros_like(inputs[0]) + 1,)
        v = _vector(v, inputs, "v")
        with forward_ad.dual_level():
            duals = tuple(forward_ad.make_dual(x, d) for x, d in zip(inputs, v))
            single_out, outputs = _outputs(func, duals)
            unpacked = [forward_ad.unpack_dual(o) for o in outputs]
        outputs = tuple(primal for primal, _ in unpacked)
        result = _tangents(unpacked, strict)
    outs = _finish(outputs, create_graph)
    result = _finish(result, create_graph)
    return (outs[0] if single_out else outs), (result[0] if single_out else result)


def _tangents(unpacked, strict: bool) -> tuple:
    """The tangent of each (primal, tangent) pair, zeros where it has none."""
    if strict and all(tangent is None for _, tangent in unpacked):
        raise RuntimeError(
            "The output of the user-provided function is independent of the inputs. "
            "This is not allowed in strict mode."
        )
    return tuple(zeros_like(p) if t is None else t for p, t in unpacked)


def jacobian(
    func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"
):
    """The Jacobian, one reverse pass per output element: for a single input
    and output a tensor of shape ``out.shape + in.shape``, else nested tuples."""
    with grad_mode.enable_grad():
        single_in, inputs = _prepare(inputs, create_graph)
        single_out, outputs = _outputs(func, inputs)

        def vjp_at(k, cotangent):
            if not outputs[k].requires_grad:
                return (None,) * len(inputs)
            return grad(
                outputs[k],
                inputs,
                cotangent,
                retain_graph=True,
                create_graph=create_graph,
                allow_unused=True,
            )

        blocks, independent = jacobian_blocks(vjp_at, outputs, inputs)
    if strict and independent:
        k, j = min(independent)
        raise RuntimeError(
            f"Output {k} of the user-provided function is independent of input {j}. "
            "This is not allowed in strict mode."
        )
    blocks = [_finish(block, create_graph) for block in blocks]
    if single_out:
        return blocks[0][0] if single_in else blocks[0]
    return tuple(b[0] for b in blocks) if single_in else tuple(blocks)


def hessian(
    func,
    inputs,
    create_graph=False,
    strict=False,
    vectorize=False,
    outer_jacobian_strategy="reverse-mode",
):
    """The Hessian of a function returning a single element."""
    single_in = isinstance(inputs, Tensor)

    def gradient(*xs):
        _, out = _outputs(func, xs)
        if len(out) != 1 or out[0].numel() != 1:
            raise RuntimeError(
                "The Tensor returned by the function given to hessian should "
                "contain a single element"
            )
        grads = _grads(out, xs, (ops.reshape(zeros_like(out[0]) + 1, out[0].shape),), True, strict)
        return grads[0] if single_in else grads

    return jacobian(gradient, inputs, create_graph=create_graph, strict=strict)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v) for a function returning a single element: the
    jvp of its gradient (forward over reverse)."""
    with grad_mode.enable_grad():
        single_in, inputs = _prepare(inputs, create_graph)
        v = _vector(v if v is not None else tuple(zeros_like(x) + 1 for x in inputs), inputs, "v")
        with forward_ad.dual_level():
            duals = tuple(forward_ad.make_dual(x, d) for x, d in zip(inputs, v))
            _, outputs = _outputs(func, duals)
            if len(outputs) != 1 or outputs[0].numel() != 1:
                raise RuntimeError(
                    "The function given to hvp should return a single Tensor with a single element."
                )
            grads = _grads(outputs, duals, (zeros_like(outputs[0]) + 1,), create_graph, strict)
            unpacked = [forward_ad.unpack_dual(g) for g in grads]
            output = forward_ad.unpack_dual(outputs[0]).primal
        result = _tangents(unpacked, False)
    outs = _finish((output,), create_graph)
    result = _finish(result, create_graph)
    return outs[0], (result[0] if single_in else result)


vhp = hvp  # the Hessian of a scalar function is symmetric
