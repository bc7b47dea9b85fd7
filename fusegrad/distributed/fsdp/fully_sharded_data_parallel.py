"""``torch.distributed.fsdp.fully_sharded_data_parallel``: the wrapper,
which fusegrad cannot make (it has no sharded parameters)."""

from __future__ import annotations

from .._unsupported import unsupported
from .api import (
    BackwardPrefetch,
    CPUOffload,
    FullStateDictConfig,
    MixedPrecision,
    ShardingStrategy,
    StateDictConfig,
    StateDictType,
)

__all__ = [
    "BackwardPrefetch",
    "CPUOffload",
    "FullStateDictConfig",
    "FullyShardedDataParallel",
    "MixedPrecision",
    "ShardingStrategy",
    "StateDictConfig",
    "StateDictType",
]


class FullyShardedDataParallel:
    """Exists for ``isinstance`` and its settings' names; no module is one."""

    def __init__(self, module, *args, **kwargs):
        raise unsupported("fsdp.FullyShardedDataParallel", "fsdp")

    @staticmethod
    def state_dict_type(
        module, state_dict_type, state_dict_config=None, optim_state_dict_config=None
    ):
        raise unsupported("fsdp.FullyShardedDataParallel.state_dict_type", "fsdp")
