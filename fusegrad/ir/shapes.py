"""Shape arithmetic shared by the shape rules and the tensor front end.

Error messages follow PyTorch's wording, since users meet them first.
"""

from __future__ import annotations

import operator
from math import prod

# Sizes that are no ints: a traced dynamic size (the tracer registers its
# type). Shape arithmetic keeps them as they are; they compare and compute
# as ints do.
SYMBOLIC_SIZES: tuple = ()


def register_symbolic_size(size_type: type) -> None:
    global SYMBOLIC_SIZES
    SYMBOLIC_SIZES = (*SYMBOLIC_SIZES, size_type)


def is_symbolic(value) -> bool:
    """Whether ``value`` (a size, or a tuple of them, as index specs hold) varies between calls."""
    if isinstance(value, tuple):
        return any(is_symbolic(v) for v in value)
    return isinstance(value, SYMBOLIC_SIZES)


def _is_size(value) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(
        value, SYMBOLIC_SIZES
    )


def broadcast_shapes(*shapes: tuple) -> tuple:
    result = shapes[0]
    for shape in shapes[1:]:
        if len(shape) == len(result) and shape == result:
            continue
        if len(shape) > len(result):
            result, shape = shape, result
        merged = list(result)
        offset = len(result) - len(shape)
        for i, size in enumerate(shape):
            current = merged[offset + i]
            if size == current or size == 1:
                continue
            if current == 1:
                merged[offset + i] = size
            else:
                raise RuntimeError(
                    f"The size of tensor a ({current}) must match the size of tensor b ({size}) "
                    f"at non-singleton dimension {offset + i}"
                )
        result = tuple(merged)
    return result


def normalize_dim(dim, ndim: int) -> int:
    if dim.__class__ is not int:  # numpy's integers (and 0-d integer tensors) are ints too
        if isinstance(dim, bool) or not hasattr(dim, "__index__"):
            raise TypeError(f"dim must be an int, not {type(dim).__name__}")
        dim = operator.index(dim)
    bound = max(ndim, 1)  # a 0-d tensor accepts dim 0 and -1, as in PyTorch
    if not -bound <= dim < bound:
        raise IndexError(
            f"Dimension out of range (expected to be in range of "
            f"[{-bound}, {bound - 1}], but got {dim})"
        )
    return dim % bound if ndim else 0


def normalize_axes(dim, ndim: int) -> tuple:
    """`dim` as given to a reduction (None, an int, or a sequence) to sorted axes."""
    if dim is None:
        return tuple(range(ndim))
    if dim.__class__ is int and ndim:
        return (normalize_dim(dim, ndim),)
    if isinstance(dim, (tuple, list)):
        dims = tuple(dim)
    elif hasattr(dim, "__index__") and not isinstance(dim, bool):
        dims = (dim,)
    else:
        raise TypeError(f"dim must be an int or a sequence of ints, not {type(dim).__name__}")
    if not dims:
        return tuple(range(ndim))  # PyTorch: sum(dim=[]) reduces everything
    axes = [normalize_dim(d, ndim) for d in dims]
    if ndim == 0:
        return ()
    if len(set(axes)) != len(axes):
        raise RuntimeError(f"dim {axes} appears multiple times in the list of dims")
    return tuple(sorted(axes))


def reduced_shape(shape: tuple, axes: tuple, keepdims: bool = False) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def infer_reshape(shape, numel: int) -> tuple:
    """Resolves one -1 in a requested shape, checking the element count."""
    shape = tuple(shape)
    for s in shape:
        if not _is_size(s):
            raise TypeError(f"shape must be a sequence of ints, got {shape!r}")
    unknown = [i for i, s in enumerate(shape) if s == -1]
    if len(unknown) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if any(s < -1 for s in shape):
        raise RuntimeError(f"invalid shape dimension {min(shape)}")
    known = prod(s for s in shape if s != -1)
    if unknown:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = shape[: unknown[0]] + (numel // known,) + shape[unknown[0] + 1 :]
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def sizes_from_args(args, name: str = "size") -> tuple:
    """Sizes given as varargs `f(2, 3)`, a tuple `f((2, 3))` or a list."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    try:
        args = tuple(s if isinstance(s, SYMBOLIC_SIZES) else operator.index(s) for s in args)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of ints, got {args!r}") from None
    for s in args:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(args)}")
    return tuple(args)


FULL_SLICE = ("slice", None, None, None)


def indexed_shape(shape: tuple, spec: tuple, index_shapes: list) -> tuple:
    """The shape of ``x[spec]`` as numpy gives it (``spec`` as the index
    primitive holds it: slice, int, none, array and ellipsis entries), by
    size arithmetic alone, so that sizes may be symbolic. Integers count as
    index arrays when arrays are present, as in numpy: the arrays' broadcast
    shape takes their place when they are adjacent, else comes first."""
    used = sum(entry[0] in ("slice", "int", "array") for entry in spec)
    if used > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    entries = []
    for entry in spec:
        entries += [FULL_SLICE] * (len(shape) - used) if entry[0] == "ellipsis" else [entry]
    if ("ellipsis",) not in spec:
        entries += [FULL_SLICE] * (len(shape) - used)
    kinds = ("array", "int") if index_shapes else ("array",)
    advanced = [k for k, entry in enumerate(entries) if entry[0] in kinds]
    together = broadcast_shapes(*index_shapes) if index_shapes else ()
    adjacent = advanced == list(range(advanced[0], advanced[-1] + 1)) if advanced else True
    out = [] if adjacent else list(together)
    dim = 0
    for k, entry in enumerate(entries):
        kind = entry[0]
        if kind == "none":
            out.append(1)
            continue
        size = shape[dim]
        dim += 1
        if kind == "slice":
            out.append(slice_length(size, *entry[1:]))
        elif kind == "int" and not (-size <= entry[1] < size):
            raise IndexError(
                f"index {entry[1]} is out of bounds for dimension {dim - 1} with size {size}"
            )
        if advanced and adjacent and k == advanced[0]:
            out.extend(together)
    return tuple(out)


def slice_length(size, start, stop, step) -> int:
    """How many elements ``slice(start, stop, step)`` takes of ``size``."""
    step = 1 if step is None else step
    if step != 1:  # a symbolic size is then needed as an int
        return len(range(*slice(start, stop, step).indices(operator.index(size))))
    start = 0 if start is None else start
    stop = size if stop is None else stop
    if start < 0:
        start = start + size
    if stop < 0:
        stop = stop + size
    start = 0 if start < 0 else size if start > size else start
    stop = 0 if stop < 0 else size if stop > size else stop
    return stop - start if stop > start else 0
