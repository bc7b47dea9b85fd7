"""Where the profiler records: while a profiler records, wrappers stand in
for the library's own functions (as tests swap ``primitives._dispatch``);
when the last one stops, the originals are back. So an eager operation or a
compiled call pays nothing for the profiler when none records.

The wrappers: every primitive applied to tensors or to a backward pass's
plain values (``aten::<name>``); every autograd node's ``apply``; an
optimizer's ``step`` and ``zero_grad``; a jit function's call; a compiled
program's run, which goes step by step (a plan's runs of kernels are one
native call) so that each kernel, routine, BLAS product and numpy step is
a span; each compile phase of ``fusegrad.timing`` and each LLVM module's
compilation.
"""

from __future__ import annotations

import functools
import weakref
from contextlib import contextmanager

from .. import timing
from ..codegen.target import CompiledModule
from ..eager import autograd
from ..eager.plain import PlainValue, plain_bind
from ..eager.tensor import Tensor, eager_bind
from ..ir import primitives as P
from ..optim.optimizer import Optimizer
from ..runtime import executor, routines
from ..runtime.launch import Launcher
from ..tracer.jit import JitFunction
from .spans import begin, end, innermost, options, shape_of

_undo: list = []  # what puts each original back, in the order the wrappers went in


def install() -> None:
    for value_type, bind in ((Tensor, eager_bind), (PlainValue, plain_bind)):
        P.register_value_type(value_type, _recording_primitive(bind))
        _undo.append(functools.partial(P.register_value_type, value_type, bind))
    for cls in _with_subclasses(autograd.Node):
        if "apply" in vars(cls):
            _replace(cls, "apply", _recording_node)
    for cls in _with_subclasses(Optimizer):
        for method in ("step", "zero_grad"):
            if method in vars(cls):
                _replace(cls, method, _recording_optimizer)
    _replace(JitFunction, "__call__", _recording_jit_call)
    _replace(executor.Executor, "_run", _step_by_step)
    _replace(Launcher, "__call__", _recording_kernel)
    _replace(executor, "run_equation", _recording_equation)
    _replace(timing, "phase", _recording_phase)
    _replace(CompiledModule, "__init__", _recording_compilation)


def uninstall() -> None:
    while _undo:
        _undo.pop()()


def _replace(owner, attribute: str, wrapper_of) -> None:
    original = vars(owner)[attribute]
    setattr(owner, attribute, wrapper_of(original))
    _undo.append(functools.partial(setattr, owner, attribute, original))


def _with_subclasses(cls) -> list:
    found = [cls]
    for sub in cls.__subclasses__():
        found += [c for c in _with_subclasses(sub) if c not in found]
    return found


def _recording_primitive(bind):
    def recorded(prim, args, params):
        shapes = [shape_of(a) for a in args] if options["shapes"] else None
        span = begin(_aten_name(prim, args), "cpu_op", shapes)
        try:
            out = bind(prim, args, params)
        finally:
            end(span)
        if options["memory"]:
            span.memory = _allocated(out._data)
        if options["flops"]:
            span.flops = _flops(prim, args, out)
        return out

    return recorded


def _flops(prim, args, out) -> int:
    """What PyTorch's profiler counts: 2 per multiply-add of a matrix
    product, 1 per element of a sum or product of two tensors."""
    if prim is P.matmul:
        return 2 * out._data.size * args[0].shape[-1]
    if prim is P.add or prim is P.mul:
        return out._data.size
    return 0


# PyTorch's names for primitives whose names differ from their aten op's
_ATEN_NAMES = {
    "reduce_sum": "sum",
    "reduce_max": "amax",
    "reduce_min": "amin",
    "reduce_prod": "prod",
    "concatenate": "cat",
    "transpose": "permute",
    "broadcast_to": "expand",
    "convert": "to",
    "stop_gradient": "detach",
    "index_put": "index_put_",
}


def _aten_name(prim, args) -> str:
    if prim is P.matmul:  # PyTorch's matmul calls mm for matrices, bmm for stacks of them
        ndims = {len(a.shape) for a in args}
        return "aten::mm" if ndims == {2} else "aten::bmm" if ndims == {3} else "aten::matmul"
    return "aten::" + _ATEN_NAMES.get(prim.name, prim.name)


def _recording_node(apply):
    @functools.wraps(apply)
    def recorded(node, grads):
        name = node.name()
        if name == "AccumulateGrad":
            name = "torch::autograd::AccumulateGrad"
        span = begin(f"autograd::engine::evaluate_function: {name}")
        try:
            return apply(node, grads)
        finally:
            end(span)

    return recorded


def _recording_optimizer(method):
    @functools.wraps(method)
    def recorded(optimizer, *args, **kwargs):
        action = method.__name__
        name = f"Optimizer.{action}#{type(optimizer).__name__}.{action}"
        outer = innermost()
        if outer is not None and outer.name == name:  # a subclass's method calling its base's
            return method(optimizer, *args, **kwargs)
        span = begin(name, "user_annotation")
        try:
            return method(optimizer, *args, **kwargs)
        finally:
            end(span)

    return recorded


def _recording_jit_call(call):
    @functools.wraps(call)
    def recorded(function, *args, **kwargs):
        # The direct path runs a plan, whose kernels would show as one
        # driver call; the checked path runs them step by step.
        function._direct = None
        span = begin(f"fusegrad::compiled {function.__name__}", "fusegrad")
        try:
            return call(function, *args, **kwargs)
        finally:
            end(span)

    return recorded


def _step_by_step(run):
    @functools.wraps(run)
    def steps(program_executor, inputs):
        return program_executor.run_steps(inputs)

    return steps


# launcher -> its span's name: a kernel's name is made from its equations each time it is asked
_kernel_names: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _recording_kernel(call):
    @functools.wraps(call)
    def recorded(launcher, arrays):
        name = _kernel_names.get(launcher)
        if name is None:
            name = _kernel_names[launcher] = f"fusegrad::kernel {launcher.name}"
        shapes = [shape_of(a) for a in arrays] if options["shapes"] else None
        span = begin(name, "fusegrad", shapes)
        try:
            results = call(launcher, arrays)
        finally:
            end(span)
        if options["memory"]:
            span.memory = sum(_allocated(r) for r in results)
        return results

    return recorded


def _recording_equation(run_equation):
    @functools.wraps(run_equation)
    def recorded(eqn, values):
        if values and routines.runs_natively(eqn.prim, values[0]):
            how = "routine"
        elif eqn.prim is P.matmul:
            how = "blas"
        else:
            how = "numpy"
        shapes = [shape_of(v) for v in values] if options["shapes"] else None
        span = begin(f"fusegrad::{how} {eqn.prim.name}", "fusegrad", shapes)
        try:
            result = run_equation(eqn, values)
        finally:
            end(span)
        if options["memory"]:
            span.memory = _allocated(result)
        return result

    return recorded


def _allocated(array) -> int:
    """The bytes of an array a step made: none for a view of another's."""
    return array.nbytes if array.base is None else 0


def _recording_phase(phase):
    @contextmanager
    def recorded(name: str):
        span = begin("fusegrad::" + name.lower().replace(" ", "_"), "fusegrad")
        try:
            with phase(name):
                yield
        finally:
            end(span)

    return recorded


def _recording_compilation(init):
    @functools.wraps(init)
    def recorded(module, *args, **kwargs):
        span = begin("fusegrad::llvm_compile", "fusegrad")
        try:
            init(module, *args, **kwargs)
        finally:
            end(span)

    return recorded
