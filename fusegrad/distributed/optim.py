"""``torch.distributed.optim``: names only; fusegrad has no optimizers over RPC."""

from ._unsupported import unsupported_class

DistributedOptimizer = unsupported_class("optim.DistributedOptimizer", "optim", __name__)
