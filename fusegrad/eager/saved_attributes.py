"""PyTorch's ``_saved_<name>`` attributes of backward nodes, which graph
drawing tools (torchviz's ``make_dot(show_saved=True, show_attrs=True)``)
read: each name and meaning as PyTorch's derivatives.yaml gives it, for the
common ops.

A node of one primitive reads its saved inputs, saved output, input shapes
and parameters. A node that ends a composite op (softmax, addmm, layer_norm:
``ops/composite._named``) reads the op's call, which ``record_call`` keeps
holding the tensors PyTorch's node saves and, of those it does not save, only
their sizes; the op's output is held as its data and rebuilt when read, as
the engine keeps a saved output, since the output holds the node.
"""

from __future__ import annotations

import inspect

# PyTorch's enum for nll_loss's reduction
_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


class _Sizes:
    """A tensor argument the node reads only the sizes of."""

    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = shape

    def numel(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count


class _Call:
    """A composite op's call: its function, arguments and output's data."""

    __slots__ = ("fn", "args", "kwargs", "out", "tensor_type")

    def arguments(self) -> dict:
        """The call's arguments by parameter name, defaults filled in."""
        bound = inspect.signature(self.fn).bind(*self.args, **self.kwargs)
        bound.apply_defaults()
        return bound.arguments


def _sized(value, tensor_type):
    return _Sizes(value.shape) if isinstance(value, tensor_type) else value


def record_call(node, fn, args, kwargs, out, tensor_type) -> None:
    """Keeps ``fn(*args, **kwargs) -> out`` on ``node``, the node it ends in.
    Runs on every such op recorded, so it only keeps what it is given."""
    if node.__class__.__name__ in _READS_SIZES:
        args = tuple([_sized(a, tensor_type) for a in args])
        kwargs = {k: _sized(v, tensor_type) for k, v in kwargs.items()}
    call = _Call()
    call.fn, call.args, call.kwargs = fn, args, kwargs
    call.out = (out._data, out._dtype, out._version_counter)
    call.tensor_type = tensor_type
    node.op_call = call


def _checked(node) -> None:
    if node.freed:
        raise RuntimeError(
            "Trying to backward through the graph a second time (or directly access saved "
            "tensors after they have already been freed)."
        )


def _input(position: int):
    def read(node):
        _checked(node)
        return node.unpack_input(position) if position in (node.saved or {}) else None

    return read


def _result(node):
    _checked(node)
    if node.saved_out is not None:
        return node.unpack_output()
    call = getattr(node, "op_call", None)
    return call.tensor_type._from_saved_output(*call.out, node, 0) if call is not None else None


def _sizes(position: int):
    return lambda node: tuple(node.in_shapes[position])


def _strides(position: int):
    """The saved input's strides, or those of a contiguous input of its shape."""

    def read(node):
        saved = node.saved and node.saved.get(position)
        if saved:
            return tuple(saved[0].stride())
        strides, step = [], 1
        for size in reversed(node.in_shapes[position]):
            strides.append(step)
            step *= size
        return tuple(reversed(strides))

    return read


def _constant(value):
    return lambda node: value


def _call_arguments(node) -> dict | None:
    """The arguments of the composite op ``node`` ends, None for another node."""
    _checked(node)
    call = getattr(node, "op_call", None)
    return call.arguments() if call is not None else None


def _argument(name: str, convert=lambda value: value):
    def read(node):
        arguments = _call_arguments(node)
        return convert(arguments[name]) if arguments is not None else None

    return read


def _numel(name: str):
    return _argument(name, lambda t: t.numel())


def _shape(name: str):
    return _argument(name, lambda t: tuple(t.shape))


def _exponent(node):
    exponent = _input(1)(node)
    return exponent.item() if exponent is not None and exponent.ndim == 0 else exponent


def _transposed_dims(node):
    moved = [i for i, axis in enumerate(node.params["perm"]) if i != axis]
    return moved if len(moved) == 2 else [None, None]


def _approximate(node):
    if node.prim.name == "gelu":
        return "none"
    return _argument("approximate")(node)


def _layer_norm_statistics(node):
    """PyTorch's result1 and result2: the mean and 1/std of each normalized row."""
    arguments = _call_arguments(node)
    if arguments is None:
        return None, None
    x, shape = arguments["input"].detach(), arguments["normalized_shape"]
    dims = tuple(range(x.ndim - (1 if isinstance(shape, int) else len(shape)), x.ndim))
    mean = x.mean(dims, keepdim=True)
    variance = ((x - mean) ** 2).mean(dims, keepdim=True)
    return mean, (variance + arguments["eps"]) ** -0.5


def _total_weight(node):
    """nll_loss's divisor for reduction='mean': the weight of the targets counted."""
    arguments = _call_arguments(node)
    if arguments is None:
        return None
    input, target, weight = arguments["input"], arguments["target"], arguments["weight"]
    counted = target != arguments["ignore_index"]
    if weight is None:
        return counted.sum().to(input.dtype)
    return (weight.detach()[target.clamp(0)] * counted).sum()


def _gelu_input(node):
    return _input(0)(node) if node.prim.name == "gelu" else _argument("input")(node)


def _call_strides(name: str):
    return _argument(name, lambda t: tuple(t.stride()))


_RESULT = {"result": _result}

SAVED = {
    "AddBackward0": {"alpha": _constant(1)},
    "SubBackward0": {"alpha": _constant(1)},
    "MulBackward0": {"self": _input(0), "other": _input(1)},
    "DivBackward0": {"self": _input(0), "other": _input(1)},
    "MmBackward0": {
        "self": _input(0),
        "mat2": _input(1),
        "self_sym_sizes": _sizes(0),
        "self_sym_strides": _strides(0),
        "mat2_sym_sizes": _sizes(1),
        "mat2_sym_strides": _strides(1),
    },
    "AddmmBackward0": {
        "alpha": _argument("alpha"),
        "beta": _argument("beta"),
        "mat1": _argument("mat1"),
        "mat1_sym_sizes": _shape("mat1"),
        "mat1_sym_strides": _call_strides("mat1"),
        "mat2": _argument("mat2"),
        "mat2_sym_sizes": _shape("mat2"),
        "mat2_sym_strides": _call_strides("mat2"),
    },
    "ReluBackward0": _RESULT,
    "TanhBackward0": _RESULT,
    "SigmoidBackward0": _RESULT,
    "ExpBackward0": _RESULT,
    "LogBackward0": {"self": _input(0)},
    "PowBackward0": {"self": _input(0), "exponent": _exponent},
    "PowBackward1": {"self": _input(0), "exponent": _input(1), **_RESULT},
    "SumBackward0": {"self_sym_sizes": _sizes(0)},
    "SumBackward1": {
        "dim": lambda node: tuple(node.params["axes"]),
        "keepdim": _constant(False),
        "self_sym_sizes": _sizes(0),
    },
    "MeanBackward0": {"self_sym_numel": _numel("input"), "self_sym_sizes": _shape("input")},
    "MeanBackward1": {
        "dim": _argument("dim", lambda dim: (dim,) if isinstance(dim, int) else tuple(dim)),
        "keepdim": _argument("keepdim"),
        "self_sym_numel": _numel("input"),
        "self_sym_sizes": _shape("input"),
    },
    "ViewBackward0": {"self_sym_sizes": _sizes(0)},
    "TransposeBackward0": {
        "dim0": lambda node: _transposed_dims(node)[0],
        "dim1": lambda node: _transposed_dims(node)[1],
    },
    "SoftmaxBackward0": {"dim": _argument("dim"), **_RESULT},
    "LogSoftmaxBackward0": {"dim": _argument("dim"), **_RESULT},
    "NllLossBackward0": {
        "ignore_index": _argument("ignore_index"),
        "reduction": _argument("reduction", _REDUCTIONS.get),
        "self": _argument("input"),
        "target": _argument("target"),
        "total_weight": _total_weight,
        "weight": _argument("weight"),
    },
    "EmbeddingBackward0": {
        "indices": _argument("input"),
        "padding_idx": _argument("padding_idx", lambda index: -1 if index is None else index),
        "scale_grad_by_freq": _argument("scale_grad_by_freq"),
        "sparse": _argument("sparse"),
        "weight_sym_argsize_0": _argument("weight", lambda w: w.shape[0]),
    },
    "NativeLayerNormBackward0": {
        "bias": _argument("bias"),
        "input": _argument("input"),
        "normalized_shape": _argument(
            "normalized_shape", lambda s: (s,) if isinstance(s, int) else tuple(s)
        ),
        "result1": lambda node: _layer_norm_statistics(node)[0],
        "result2": lambda node: _layer_norm_statistics(node)[1],
        "weight": _argument("weight"),
    },
    "GeluBackward0": {"approximate": _approximate, "self": _gelu_input},
}

# the composite ops whose node reads only the sizes of their tensor arguments
_READS_SIZES = frozenset(
    {"MeanBackward0", "MeanBackward1", "SoftmaxBackward0", "LogSoftmaxBackward0"}
)

# the composite ops whose node reads their call
READS_CALL = frozenset(
    {
        "AddmmBackward0",
        "MeanBackward0",
        "MeanBackward1",
        "SoftmaxBackward0",
        "LogSoftmaxBackward0",
        "NllLossBackward0",
        "EmbeddingBackward0",
        "NativeLayerNormBackward0",
        "GeluBackward0",
    }
)


def properties(node_name: str) -> dict:
    """The ``_saved_<name>`` properties of the node class called ``node_name``."""
    return {f"_saved_{name}": property(read) for name, read in SAVED.get(node_name, {}).items()}
