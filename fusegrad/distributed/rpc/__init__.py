"""``torch.distributed.rpc``: names only; fusegrad has no RPC framework."""

from . import api, functions
from .api import (
    RRef,
    TensorPipeRpcBackendOptions,
    get_worker_info,
    init_rpc,
    remote,
    rpc_async,
    rpc_sync,
    shutdown,
)

__all__ = [
    "RRef",
    "TensorPipeRpcBackendOptions",
    "api",
    "functions",
    "get_worker_info",
    "init_rpc",
    "is_available",
    "remote",
    "rpc_async",
    "rpc_sync",
    "shutdown",
]


def is_available() -> bool:
    return False
