"""The names of ``torch.distributed``'s parts that fusegrad does not have
(RPC, FSDP, DTensor and tensor parallelism, distributed autograd): they
exist, so that code importing or probing them runs on, and using one raises
a RuntimeError naming what is missing and why."""

from __future__ import annotations

WHY = {
    "rpc": "remote procedure calls between processes or machines (RPC), which needs "
    "PyTorch's TensorPipe agent",
    "fsdp": "fully sharded data parallelism (FSDP), which shards parameters across processes; "
    "it trains data-parallel with torch.nn.parallel.DistributedDataParallel",
    "tensor": "distributed tensors (DTensor) or tensor parallelism over device meshes",
    "autograd": "distributed autograd, which differentiates across RPC calls",
    "optim": "DistributedOptimizer, which steps optimizers over RPC",
}


def unsupported(name: str, part: str) -> RuntimeError:
    return RuntimeError(f"torch.distributed.{name}: fusegrad has no {WHY[part]}")


def unsupported_function(name: str, part: str):
    def refuse(*args, **kwargs):
        raise unsupported(name, part)

    refuse.__name__ = refuse.__qualname__ = name.rpartition(".")[2]
    return refuse


def unsupported_class(name: str, part: str, module: str) -> type:
    """A class that exists (for ``isinstance`` and annotations) and cannot be made."""

    def refuse(self, *args, **kwargs):
        raise unsupported(name, part)

    short = name.rpartition(".")[2]
    return type(short, (), {"__init__": refuse, "__module__": module, "__qualname__": short})
