"""``torch._utils``' helpers that distributed training code calls: a list of
tensors packed into one flat tensor and unpacked into views of it, and
tensors grouped into buckets of a byte size (as gradients are for their
all-reduce)."""

from .eager import ops

__all__ = ["_flatten_dense_tensors", "_take_tensors", "_unflatten_dense_tensors"]


def _flatten_dense_tensors(tensors):
    """The tensors' elements, one after another, in one 1-d tensor (a copy;
    of a single contiguous tensor, a view of it).

    >>> import fusegrad
    >>> _flatten_dense_tensors([fusegrad.ones(2, 2), fusegrad.zeros(1)])
    tensor([1., 1., 1., 1., 0.])
    """
    if len(tensors) == 1:
        return tensors[0].contiguous().view(-1)
    return ops.cat([t.contiguous().view(-1) for t in tensors])


def _unflatten_dense_tensors(flat, tensors):
    """``flat`` cut into views shaped as ``tensors``, in their order (a tuple)."""
    views = []
    offset = 0
    for t in tensors:
        count = t.numel()
        views.append(flat.narrow(0, offset, count).view_as(t))
        offset += count
    return tuple(views)


def _take_tensors(tensors, size_limit: int):
    """Yields lists of tensors of one type, in order, each list holding
    tensors until the next would take its bytes beyond ``size_limit`` (a
    tensor larger than the limit alone makes a list); the lists not yet full
    come last, in the order their types first appeared."""
    buckets: dict = {}  # type -> [tensors, their bytes]
    for tensor in tensors:
        size = tensor.numel() * tensor.element_size()
        bucket = buckets.setdefault(tensor.type(), [[], 0])
        if bucket[0] and bucket[1] + size > size_limit:
            yield bucket[0]
            bucket[:] = [[], 0]
        bucket[0].append(tensor)
        bucket[1] += size
    for bucket, _ in buckets.values():
        if bucket:
            yield bucket
