"""``torch.distributed.rpc.functions``."""


def async_execution(fn):
    """Marks a function as returning a Future when run by RPC; applied where
    a model file defines the function, so it only hands it back (no RPC
    will run it)."""
    return fn
