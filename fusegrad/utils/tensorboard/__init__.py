"""``fusegrad.utils.tensorboard``: ``SummaryWriter``, as in
``torch.utils.tensorboard``, writing TensorBoard's event files itself: it
needs neither the tensorboard nor the protobuf package (TensorBoard is
needed only to look at the files)."""

from .writer import FileWriter, SummaryWriter

__all__ = ["FileWriter", "SummaryWriter"]
