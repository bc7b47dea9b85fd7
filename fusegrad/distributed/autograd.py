"""``torch.distributed.autograd``: names only; fusegrad has no distributed autograd."""

from ._unsupported import unsupported_class, unsupported_function

context = unsupported_class("autograd.context", "autograd", __name__)
backward = unsupported_function("autograd.backward", "autograd")
get_gradients = unsupported_function("autograd.get_gradients", "autograd")
