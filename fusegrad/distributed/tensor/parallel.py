"""``torch.distributed.tensor.parallel``: names only; fusegrad has no tensor parallelism."""

from .._unsupported import unsupported_class, unsupported_function

ColwiseParallel = unsupported_class("tensor.parallel.ColwiseParallel", "tensor", __name__)
RowwiseParallel = unsupported_class("tensor.parallel.RowwiseParallel", "tensor", __name__)
SequenceParallel = unsupported_class("tensor.parallel.SequenceParallel", "tensor", __name__)
parallelize_module = unsupported_function("tensor.parallel.parallelize_module", "tensor")
