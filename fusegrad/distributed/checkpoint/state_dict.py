"""``torch.distributed.checkpoint.state_dict``: a model's and its
optimizers' state dicts in the form distributed checkpoints keep, for
models whose parameters are whole in every process (fusegrad shards none).

The model's keys are its parameters' and buffers' names, without the
prefixes of the wrappers around it (``torch.compile``'s ``_orig_mod.``,
``DistributedDataParallel``'s ``module.``); the optimizers' state and
parameter groups name parameters by those names too, rather than by their
index, so the state reloads into any optimizer over the same model."""

from __future__ import annotations

import dataclasses

from ...compiler import OptimizedModule
from ...nn.parallel import DataParallel, DistributedDataParallel

__all__ = [
    "StateDictOptions",
    "get_model_state_dict",
    "get_optimizer_state_dict",
    "get_state_dict",
    "set_model_state_dict",
    "set_optimizer_state_dict",
    "set_state_dict",
]


@dataclasses.dataclass
class StateDictOptions:
    """``full_state_dict`` and ``cpu_offload`` ask for whole tensors in CPU
    memory, which every fusegrad tensor is; ``ignore_frozen_params`` leaves
    out parameters that do not require grad; ``strict`` is
    ``load_state_dict``'s."""

    full_state_dict: bool = False
    cpu_offload: bool = False
    ignore_frozen_params: bool = False
    keep_submodule_prefixes: bool = True
    strict: bool = True
    broadcast_from_rank0: bool = False
    flatten_optimizer_state_dict: bool = False
    dsd_fqn_modifiers: str = "_fqn_modifiers"


def _unwrapped(model):
    while isinstance(model, (OptimizedModule, DataParallel, DistributedDataParallel)):
        model = model._orig_mod if isinstance(model, OptimizedModule) else model.module
    return model


def _optimizers(optimizers) -> list:
    return list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers]


def _parameter_names(model) -> dict:
    return {id(p): name for name, p in _unwrapped(model).named_parameters()}


def get_model_state_dict(model, *, submodules=None, options: StateDictOptions | None = None):
    options = options or StateDictOptions()
    model = _unwrapped(model)
    state = model.state_dict()
    if options.ignore_frozen_params:
        for name, parameter in model.named_parameters():
            if not parameter.requires_grad:
                state.pop(name, None)
    return state


def set_model_state_dict(model, model_state_dict, *, options: StateDictOptions | None = None):
    options = options or StateDictOptions()
    return _unwrapped(model).load_state_dict(model_state_dict, strict=options.strict)


def get_optimizer_state_dict(
    model, optimizers, *, submodules=None, options: StateDictOptions | None = None
) -> dict:
    names = _parameter_names(model)
    state, groups = {}, []
    for optimizer in _optimizers(optimizers):
        saved = optimizer.state_dict()
        parameters = [p for group in optimizer.param_groups for p in group["params"]]
        name_of_index = {index: names[id(p)] for index, p in enumerate(parameters)}
        state.update({name_of_index[index]: value for index, value in saved["state"].items()})
        for group in saved["param_groups"]:
            groups.append({**group, "params": [name_of_index[i] for i in group["params"]]})
    return {"state": state, "param_groups": groups}


def set_optimizer_state_dict(
    model, optimizers, optim_state_dict, *, options: StateDictOptions | None = None
) -> None:
    names = _parameter_names(model)
    saved_groups = iter(optim_state_dict["param_groups"])
    for optimizer in _optimizers(optimizers):
        parameters = [p for group in optimizer.param_groups for p in group["params"]]
        index_of_name = {names[id(p)]: index for index, p in enumerate(parameters)}
        groups = [next(saved_groups) for _ in optimizer.param_groups]
        optimizer.load_state_dict(
            {
                "state": {
                    index_of_name[name]: value
                    for name, value in optim_state_dict["state"].items()
                    if name in index_of_name
                },
                "param_groups": [
                    {**group, "params": [index_of_name[name] for name in group["params"]]}
                    for group in groups
                ],
            }
        )


def get_state_dict(model, optimizers, *, submodules=None, options=None) -> tuple:
    return (
        get_model_state_dict(model, options=options),
        get_optimizer_state_dict(model, optimizers, options=options),
    )


def set_state_dict(model, optimizers, *, model_state_dict, optim_state_dict, options=None):
    set_optimizer_state_dict(model, optimizers, optim_state_dict, options=options)
    return set_model_state_dict(model, model_state_dict, options=options)
