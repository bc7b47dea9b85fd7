"""A module called with other tensors as its parameters and buffers
(``functional_call``), and several models' state stacked for one call over
all of them (``stack_module_state``)."""

from __future__ import annotations

from ..eager import grad_mode, ops
from ..eager.tensor import Tensor
from ..nn.modules.module import Module


def _merged(parameter_and_buffer_dicts) -> dict:
    if isinstance(parameter_and_buffer_dicts, dict):
        return dict(parameter_and_buffer_dicts)
    if isinstance(parameter_and_buffer_dicts, (list, tuple)) and all(
        isinstance(d, dict) for d in parameter_and_buffer_dicts
    ):
        merged: dict = {}
        repeated = set()
        for d in parameter_and_buffer_dicts:
            repeated.update(key for key in d if key in merged)
            merged.update(d)
        if repeated:
            raise ValueError(
                f"{sorted(repeated)} appeared in multiple dictionaries; behavior of functional "
                "call is ambiguous"
            )
        return merged
    raise ValueError(
        "Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
        f"{type(parameter_and_buffer_dicts)}"
    )


def _state_names(module: Module) -> list:
    """Every name a parameter or buffer is reachable by, tied ones each time."""
    return [
        name
        for named in (module.named_parameters, module.named_buffers)
        for name, _ in named(remove_duplicate=False)
    ]


def _tied(module: Module, values: dict) -> dict:
    """``values`` with each tensor given for a tied parameter or buffer also
    given for the other names of it."""
    names_of: dict = {}  # id of the tensor -> the names it is registered under
    for named in (module.named_parameters, module.named_buffers):
        for name, tensor in named(remove_duplicate=False):
            names_of.setdefault(id(tensor), []).append(name)
    tied = dict(values)
    for names in names_of.values():
        given = [name for name in names if name in values]
        if len(given) > 1 and any(values[n] is not values[given[0]] for n in given):
            raise ValueError(
                f"functional_call got multiple values for keys {sorted(given)}, which are "
                "tied. Consider using tie_weights=False"
            )
        if given and len(names) > 1:
            tied.update((name, values[given[0]]) for name in names)
    return tied


def _check_strict(module: Module, values: dict) -> None:
    expected = _state_names(module)
    unexpected = sorted(set(values) - set(expected))
    missing = sorted(set(expected) - set(values))
    if unexpected or missing:
        lines = [f"Error(s) in reparametrizing for {module._get_name()}:"]
        if unexpected:
            lines.append(f"\tUnexpected key(s): {', '.join(repr(k) for k in unexpected)}.")
        if missing:
            lines.append(f"\tMissing key(s): {', '.join(repr(k) for k in missing)}.")
        raise RuntimeError("\n".join(lines))


_ABSENT = object()


def _owner(module: Module, name: str) -> tuple:
    """(the submodule a dotted name's last part belongs to, that part)."""
    *path, leaf = name.split(".")
    for part in path:
        child = getattr(module, part, _ABSENT)
        if child is _ABSENT:
            raise AttributeError(f"{module._get_name()} has no attribute `{part}`")
        if not isinstance(child, Module):
            raise TypeError(f"submodule `{part}`: {child} is not an instance of torch.nn.Module")
        module = child
    return module, leaf


def _swap(module: Module, name: str, value):
    """Puts ``value`` where ``module``'s ``name`` is (its parameter or buffer
    slot, else a plain attribute); returns what restores it."""
    if value is not None and not isinstance(value, Tensor):
        raise TypeError(f"{value} is not an instance of torch.Tensor")
    for registry in (module._parameters, module._buffers):
        if name in registry:
            original = registry[name]
            registry[name] = value

            def restore(registry=registry, original=original):
                registry[name] = original

            return restore
    original = module.__dict__.get(name, _ABSENT)
    object.__setattr__(module, name, value)

    def restore_attribute():
        if original is _ABSENT:
            del module.__dict__[name]
        else:
            module.__dict__[name] = original

    return restore_attribute


def functional_call(
    module: Module,
    parameter_and_buffer_dicts,
    args=None,
    kwargs=None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
):
    """``module(*args, **kwargs)`` with the given tensors in place of its
    parameters and buffers (by their names in ``named_parameters()`` and
    ``named_buffers()``; a dict, or a tuple or list of dicts with distinct
    keys), which it has again afterwards, also when the call raises. With
    ``tie_weights``, a tensor given for a tied parameter replaces it under
    all its names; ``strict`` requires exactly the module's names.

    >>> import fusegrad
    >>> from fusegrad.func import functional_call
    >>> layer = fusegrad.nn.Linear(2, 1)
    >>> weights = {"weight": fusegrad.ones(1, 2), "bias": fusegrad.zeros(1)}
    >>> functional_call(layer, weights, fusegrad.tensor([[1.0, 2.0]]))
    tensor([[3.]])
    """
    values = _merged(parameter_and_buffer_dicts)
    if tie_weights:
        values = _tied(module, values)
    if strict:
        _check_strict(module, values)
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    restores = []
    try:
        for name, value in values.items():
            restores.append(_swap(*_owner(module, name), value))
        return module(*args, **(kwargs or {}))
    finally:
        for restore in reversed(restores):
            restore()


def _stacked_parameter(tensors: list, name: str) -> Tensor:
    requires_grad = tensors[0].requires_grad
    if any(t.requires_grad != requires_grad for t in tensors):
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    with grad_mode.no_grad():
        stacked = ops.stack(tensors)
    return stacked.requires_grad_() if requires_grad else stacked


def stack_module_state(models) -> tuple:
    """``(params, buffers)``: each of the models' parameters and buffers (by
    name) stacked along a new first dimension, for one ``functional_call``
    over all the models at once. Stacked parameters are new leaves, requiring
    grad where the models' do.

    >>> import fusegrad
    >>> from fusegrad.func import stack_module_state
    >>> params, buffers = stack_module_state([fusegrad.nn.Linear(3, 2) for _ in range(4)])
    >>> params["weight"].shape
    fusegrad.Size([4, 2, 3])
    """
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if len({model.training for model in models}) != 1:
        raise RuntimeError(
            "stack_module_state: Expected all models to have the same training/eval mode."
        )
    if len({type(model) for model in models}) != 1:
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    each = [dict(model.named_parameters()) for model in models]
    params = {name: _stacked_parameter([p[name] for p in each], name) for name in each[0]}
    each = [dict(model.named_buffers()) for model in models]
    with grad_mode.no_grad():
        buffers = {name: ops.stack([b[name] for b in each]) for name in each[0]}
    return params, buffers
