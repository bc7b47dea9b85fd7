"""``add_graph``: a model's forward pass as a TensorFlow ``GraphDef``, which
TensorBoard's graph dashboard draws.

The model is traced by ``fusegrad.jit`` (in eval mode, without gradients),
and the traced program's forward graph is written: a node per input, per
parameter or buffer the model read (named by its path in the model, so the
dashboard groups them under the model's class name), per primitive applied
(its op the primitive's name) and per output. Nodes carry their output's
shape in ``_output_shapes``, as PyTorch's writer does; primitives their
parameters as text in ``attr``.
"""

from __future__ import annotations

from ...eager.grad_mode import no_grad
from ...ir.graph import Const, format_graph
from ...tracer.jit import jit
from . import protobuf as pb

PRODUCER_VERSION = 22  # the GraphDef version PyTorch's writer declares


def graph_def(model, input_to_model, verbose: bool = False) -> bytes:
    """The encoded GraphDef of ``model(*input_to_model)`` (a tuple is the
    arguments, anything else the one argument); ``verbose`` prints the
    traced forward program."""
    args = input_to_model if isinstance(input_to_model, tuple) else (input_to_model,)
    was_training = getattr(model, "training", False)
    if was_training:
        model.eval()
    try:
        with no_grad():
            program = jit(model).lower(*args).program
    finally:
        if was_training:
            model.train()
    forward = program.forward
    if verbose:
        print(format_graph(forward, type(model).__name__))
    parameter_names = _tensor_names(model)
    num_args = len(forward.inputs) - len(program.captured)
    names: dict = {}
    nodes = []
    for i, var in enumerate(forward.inputs):
        if i < num_args:
            names[var] = f"input/input.{i}"
            op = "IO Node"
        else:
            captured = program.captured[i - num_args].tensor
            names[var] = parameter_names.get(id(captured), f"captured/captured.{i - num_args}")
            op = "prim::GetAttr"
        nodes.append(_node(names[var], op, [], var.shape))

    def name_of(operand) -> str:
        if isinstance(operand, Const):
            name = f"constant/constant.{len(nodes)}"
            nodes.append(
                _node(name, "prim::Constant", [], operand.shape, repr(operand.value.tolist()))
            )
            return name
        return names[operand]

    for k, eqn in enumerate(forward.eqns):
        inputs = [name_of(operand) for operand in eqn.inputs]
        names[eqn.out] = f"{eqn.prim.name}.{k}"
        params = ", ".join(f"{key}={value}" for key, value in eqn.params.items())
        nodes.append(
            _node(names[eqn.out], eqn.prim.name, inputs, eqn.out.shape, "{" + params + "}")
        )
    for i, var in enumerate(forward.outputs):
        nodes.append(_node(f"output/output.{i}", "IO Node", [name_of(var)], var.shape))
    return pb.repeated(1, nodes) + pb.data(4, pb.integer(1, PRODUCER_VERSION))


def _tensor_names(model) -> dict:
    """id of each parameter and buffer -> its node name: the model's class,
    then its path with dots as slashes."""
    root = type(model).__name__
    named = list(getattr(model, "named_parameters", list)())
    named += list(getattr(model, "named_buffers", list)())
    return {id(tensor): f"{root}/{name.replace('.', '/')}" for name, tensor in named}


def _node(name: str, op: str, inputs: list, shape: tuple, attr: str = "") -> bytes:
    """A NodeDef; its ``attr`` map holds ``_output_shapes`` and, as text,
    ``attr``."""
    dims = pb.repeated(2, [pb.integer(1, int(size)) for size in shape])
    shapes = pb.data(1, pb.repeated(7, [dims]), always=True)  # AttrValue.list.shape
    attrs = [
        pb.string(1, "_output_shapes") + pb.data(2, shapes, always=True),
        pb.string(1, "attr") + pb.data(2, pb.data(2, attr.encode(), always=True), always=True),
    ]
    return (
        pb.string(1, name)
        + pb.string(2, op)
        + b"".join(pb.string(3, i, always=True) for i in inputs)
        + pb.repeated(5, attrs)
    )
