"""``fusegrad.distributed``: data-parallel training over processes, shaped
like ``torch.distributed`` with its "mpi" backend. ``mpiexec -n 2 python
train.py`` starts the processes; ``init_process_group("mpi")`` joins them.

Collectives are also primitives of the IR: inside a ``fusegrad.jit``
function they are traced like any operation, so a compiled training step
holds its gradient averaging, and gradients flow through them. Needs the
``distributed`` extra (mpi4py and an MPI); ``import fusegrad`` does not.
"""

from .collectives import all_gather, all_gather_into_tensor, all_reduce, broadcast, reduce
from .objects import (
    all_gather_object,
    broadcast_object_list,
    gather,
    gather_object,
    get_default_backend_for_device,
    scatter_object_list,
)
from .process_group import (
    ProcessGroup,
    ReduceOp,
    Work,
    barrier,
    destroy_process_group,
    get_backend,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_available,
    is_gloo_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
)

__all__ = [
    "ProcessGroup",
    "ReduceOp",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_reduce",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "destroy_process_group",
    "gather",
    "gather_object",
    "get_default_backend_for_device",
    "get_backend",
    "get_rank",
    "get_world_size",
    "group",
    "init_process_group",
    "is_available",
    "is_gloo_available",
    "is_initialized",
    "is_mpi_available",
    "is_nccl_available",
    "reduce",
    "scatter_object_list",
]
