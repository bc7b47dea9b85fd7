"""The ``Optimizer`` base: parameter groups, per-parameter state, ``zero_grad``,
``state_dict``/``load_state_dict`` in PyTorch's layout, and ``step`` (closure
evaluation, then an update per parameter with a gradient).

A training step that calls ``step()`` compiles under ``jit``: the update is
tensor operations on the parameters and on state tensors updated in place, and
what the trace read from Python (hyperparameters, which parameters and state
tensors there are) is guarded, so a scheduler's new learning rate, a new
parameter group or loaded state retraces rather than being ignored. With
``fused=True`` an eager ``step()`` compiles that same update itself: one
program for all parameters, its elementwise work fused into a kernel per
parameter shape, in place of an eager operation per term.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from copy import deepcopy
from itertools import chain

from ..eager.grad_mode import enable_grad, no_grad
from ..eager.tensor import Tensor, recording, tensor_type_name
from ..ir import dtypes
from ..tracer.jit import jit
from ..tracer.numbers import TracedFloat, TracedNumber


def typename(obj) -> str:
    """A name for ``obj``'s type in errors, as ``torch.typename`` gives it."""
    if isinstance(obj, Tensor):
        return tensor_type_name(obj._dtype)
    module = getattr(type(obj), "__module__", "") or ""
    name = type(obj).__qualname__
    return name if module in ("", "builtins") else f"{module}.{name}"


def lerp(start: Tensor, end: Tensor, weight: float) -> Tensor:
    """``start.lerp(end, weight)`` as PyTorch computes it: from the nearer end,
    for accuracy."""
    if abs(weight) < 0.5:
        return start + weight * (end - start)
    return end - (end - start) * (1 - weight)


def with_weight_decay(group: dict, p: Tensor, grad: Tensor) -> Tensor:
    """The gradient an update uses: plus ``weight_decay * p`` (L2), or, with
    ``decoupled_weight_decay`` (AdamW), unchanged after ``p`` is shrunk by
    ``1 - lr * weight_decay`` now."""
    weight_decay = group["weight_decay"]
    if weight_decay == 0:
        return grad
    if group.get("decoupled_weight_decay"):
        p.mul_(1 - group["lr"] * weight_decay)
        return grad
    return grad + weight_decay * p


def step_count(step: Tensor):
    """A parameter's step count, for the scalar factors of its update: a
    Python float eagerly, where each operation on a 0-d tensor would cost an
    eager op; the float64 tensor while a trace records, so that a compiled
    step reads no Python number that changes every step. The factors are
    float64 either way (Python's pow and numpy's power may differ in the last
    bit), rounded to the parameter's dtype where they meet it."""
    return step.item() if recording.trace is None else step.double()


def in_dtype(factor, dtype):
    """A float64 factor (a float, or a 0-d tensor under a trace) in ``dtype``:
    a float takes the tensor's dtype where it meets one."""
    return factor if isinstance(factor, float) else factor.to(dtype)


def check_flags(differentiable: bool = False, capturable: bool = False) -> None:
    """PyTorch's ``foreach`` and ``fused`` choose kernels for the same update
    (``fused=True`` compiles it, see ``Optimizer.step``); these two change what
    a step is."""
    if differentiable:
        raise RuntimeError(
            "differentiable=True is not supported by fusegrad's optimizers: their steps run "
            "under no_grad"
        )
    if capturable:
        raise RuntimeError(
            "capturable=True is for CUDA graphs; fusegrad runs on the CPU (a training step "
            "compiles with fusegrad.jit as it is)"
        )


class Optimizer:
    """Base class of the optimizers.

    ``params`` is an iterable of tensors, of ``(name, tensor)`` pairs, or of
    dicts each holding a group's ``params`` and options that override
    ``defaults`` for that group. Subclasses define ``_update(group, p, grad,
    state)``, the update of one parameter, and ``_initial_state(group, p)``.
    """

    def __init__(self, params, defaults: dict):
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors "
                "or dicts, but got " + typename(params)
            )
        self.defaults = defaults
        self._compiled_update = None  # fused=True: the update compiled, made on the first step
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {key}: {group[key]}" for key in sorted(group) if key != "params"]
        return "\n".join(lines) + "\n)"

    def add_param_group(self, param_group: dict) -> None:
        """Adds a group of parameters, with options of its own, to ``param_groups``."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs. Please use a list instead."
            )
        else:
            params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        param_group["params"] = [p[1] if isinstance(p, tuple) else p for p in params]
        if names:
            if len(names) != len(params):
                raise ValueError(
                    "all optimizer params should be with/without names. Some param names are "
                    "missing"
                )
            param_group["param_names"] = names
        for p in param_group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(
                    "optimizer can only optimize Tensors, but one of the params is " + typename(p)
                )
            if not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            param_group.setdefault(name, default)
        if param_group.get("fused"):
            if param_group.get("foreach"):
                raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
            for p in param_group["params"]:
                if p.dtype not in (dtypes.float32, dtypes.float64):
                    raise RuntimeError(
                        "`fused=True` requires all the params to be float32 or float64 "
                        f"Tensors, but one is {p.dtype}"
                    )
        ids = [id(p) for p in param_group["params"]]
        if len(ids) != len(set(ids)):
            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in future, "
                "this will cause an error; see github.com/pytorch/pytorch/issues/40967 for "
                "more information",
                stacklevel=3,
            )
        for group in self.param_groups:
            if ("param_names" in param_group) != ("param_names" in group):
                which = "with names" if "param_names" in param_group else "without names"
                raise ValueError(
                    "all optimizer param groups should be with/without names. "
                    f"cannot add param group {which} to the optimizer"
                )
            if not {id(p) for p in group["params"]}.isdisjoint(ids):
                raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Resets the parameters' gradients: to None (the default), or to zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        if p.grad.grad_fn is not None:
                            p.grad.detach_()
                        else:
                            p.grad.requires_grad_(False)
                        p.grad.zero_()

    # ------------------------------------------------------------------ stepping

    def step(self, closure=None):
        """Updates the parameters that have a gradient. ``closure``, if given,
        is called first (with gradients enabled) and its loss returned."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        if recording.trace is None and any(group.get("fused") for group in self.param_groups):
            self._update_compiled()
        else:
            self._update_all()
        return loss

    def _update_all(self) -> None:
        groups = self.param_groups
        if recording.trace is not None:
            self._guard_trace()
            groups = [self._traced_group(k) for k in range(len(groups))]
        with no_grad():
            for group in groups:
                for p in group["params"]:
                    grad = p.grad
                    if grad is not None:
                        state = self.state.get(p)
                        if state is None:
                            state = self._initial_state(group, p)
                            if state:
                                self._add_state(p, state)
                        self._update(group, p, grad if not group["maximize"] else -grad, state)

    def _update_compiled(self) -> None:
        """``_update_all`` as a compiled program. A parameter's first update
        makes its state; made here first, so the program traced then is the
        one later steps run (their state exists)."""
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None and self.state.get(p) is None:
                        state = self._initial_state(group, p)
                        if state:
                            self._add_state(p, state)
        if self._compiled_update is None:
            self._compiled_update = jit(self._update_all)
        self._compiled_update()

    def __getstate__(self) -> dict:
        """What a copy or a pickle keeps: not the compiled update (the copy
        compiles its own, for its own tensors), nor a scheduler's wrapper of
        ``step``, which steps the optimizer it was made for."""
        state = self.__dict__.copy()
        state["_compiled_update"] = None
        state.pop("step", None)
        return state

    def _add_state(self, p: Tensor, state: dict) -> None:
        self.state[p] = state
        if recording.trace is not None:  # lower() or a failed trace takes the step back
            recording.trace.undo.append(lambda: self.state.pop(p, None))

    def _initial_state(self, group: dict, p: Tensor) -> dict:
        """A parameter's state before its first update (its keys are PyTorch's);
        an empty dict keeps no state."""
        return {}

    def _update(self, group: dict, p: Tensor, grad: Tensor, state: dict) -> None:
        raise NotImplementedError

    def _guard_trace(self) -> None:
        """A traced step is valid while the optimizer looks as it did when it was
        traced: the same options that are not numbers, and the same parameters
        and state tensors (a first step creates the state, load_state_dict
        replaces it). Read before the step, so the call after a first step,
        which creates state in Python, is traced again. Numbers (lr, betas,
        eps, weight decay...) are inputs of the program instead, read on every
        call: a scheduler changes no program."""
        recording.trace.guard_python(self._options, "optimizer options")
        recording.trace.guard_python(self._tensors, "optimizer parameters and state")

    def _options(self) -> list:
        """What is not a number among the groups' options, and where numbers are."""
        return [
            {k: _shape_of_numbers(v) for k, v in group.items() if k != "params"}
            for group in self.param_groups
        ]

    def _traced_group(self, k: int) -> dict:
        """Group ``k`` with its numbers (and tuples of numbers) as traced
        numbers: inputs of the program, read on every call."""
        group = self.param_groups[k]
        traced = {}
        for name, value in group.items():
            if name == "params" or _shape_of_numbers(value) == value:
                traced[name] = value
            elif isinstance(value, tuple):
                traced[name] = tuple(
                    self._read(
                        k,
                        name,
                        lambda k=k, name=name, i=i: self.param_groups[k][name][i],
                        (value, i),
                    )
                    for i in range(len(value))
                )
            else:
                traced[name] = self._read(
                    k, name, lambda k=k, name=name: self.param_groups[k][name], (group, name)
                )
        return traced

    def _read(self, k: int, name: str, read, place):
        key = (id(self), k, name, read.__defaults__)
        origin = f"optimizer param_groups[{k}][{name!r}]"
        return recording.trace.read_number(key, read, origin, place)

    def _tensors(self) -> list:
        found = []
        for group in self.param_groups:
            for p in group["params"]:
                found.append(id(p))
                state = self.state.get(p, {})
                found += [(k, id(v) if isinstance(v, Tensor) else v) for k, v in state.items()]
        return found

    # ------------------------------------------------------------------ state dicts

    def state_dict(self) -> dict:
        """``state`` (each parameter's state, keyed by the parameter's index over
        all groups) and ``param_groups`` (each group's options, with ``params``
        as those indices). The state's tensors are the optimizer's own."""
        index: dict = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {(index[id(k)] if isinstance(k, Tensor) else k): v for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Loads what ``state_dict()`` returned: the groups' options, and each
        parameter's state (floating tensors cast to the parameter's dtype)."""
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(self.param_groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for group, saved in zip(self.param_groups, saved_groups):
            if len(group["params"]) != len(saved["params"]):
                raise ValueError(
                    "loaded state dict contains a parameter group that doesn't match the size "
                    "of optimizer's group"
                )
        params = dict(
            zip(
                chain.from_iterable(g["params"] for g in saved_groups),
                chain.from_iterable(g["params"] for g in self.param_groups),
            )
        )
        state: defaultdict = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if key in params:
                state[params[key]] = _cast(params[key], value)
            else:
                state[key] = value
        for group, saved in zip(self.param_groups, saved_groups):
            saved["params"] = group["params"]
            if "param_names" in group and "param_names" not in saved:
                saved["param_names"] = group["param_names"]
        self.state = state
        self.param_groups = saved_groups


def _shape_of_numbers(value):
    """``value`` with its Python numbers (alone or in a tuple) replaced by
    their kinds: what a guard compares when the numbers themselves are
    program inputs."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return type(value).__name__
    if isinstance(value, TracedNumber):  # a number jit made an input where it is
        return "float" if isinstance(value, TracedFloat) else "int"
    if isinstance(value, tuple) and any(isinstance(v, (int, float, TracedNumber)) for v in value):
        return tuple(_shape_of_numbers(v) for v in value)
    return value


def _cast(param: Tensor, value, key=None):
    """A loaded state value for ``param``: floating tensors take the parameter's
    dtype, except the step count (kept as saved, as PyTorch keeps it)."""
    if isinstance(value, Tensor):
        return value.to(param.dtype) if key != "step" and param.is_floating_point() else value
    if isinstance(value, dict):
        return {k: _cast(param, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(param, v) for v in value)
    return value
