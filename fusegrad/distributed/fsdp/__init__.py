"""``torch.distributed.fsdp``: the settings' names are plain values,
wrapping or sharding a model raises: fusegrad has no fully sharded data
parallelism (``DistributedDataParallel`` trains data-parallel)."""

from __future__ import annotations

from .._unsupported import unsupported, unsupported_class
from . import api, fully_sharded_data_parallel
from .api import (
    BackwardPrefetch,
    CPUOffload,
    FullStateDictConfig,
    MixedPrecision,
    ShardingStrategy,
    StateDictConfig,
    StateDictType,
)
from .fully_sharded_data_parallel import FullyShardedDataParallel

__all__ = [
    "BackwardPrefetch",
    "CPUOffload",
    "FSDPModule",
    "FullStateDictConfig",
    "FullyShardedDataParallel",
    "MixedPrecision",
    "ShardingStrategy",
    "StateDictConfig",
    "StateDictType",
    "api",
    "fully_shard",
    "fully_sharded_data_parallel",
]

FSDPModule = unsupported_class("fsdp.FSDPModule", "fsdp", __name__)


def fully_shard(module, *args, **kwargs):
    raise unsupported("fsdp.fully_shard", "fsdp")
