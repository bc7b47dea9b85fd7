"""The cache key of a jit function's call: the structure of the arguments,
each tensor's shape, dtype and requires_grad flag, static arguments by
value, Python numbers by value once a trace decided something on them
(else they are program inputs), grad mode, autocast's state (the casts
a trace recorded) and the default dtype (the dtype of the floats and
tensors it made); with dynamic sizes, the dimensions traced as symbols
stand for any size."""

from __future__ import annotations

import inspect
import threading
import types

import numpy as np

from ..eager import autocast_state, devices, grad_mode, sparse
from ..eager import memory_format as memory_formats
from ..eager.complex_tensor import ComplexTensor
from ..eager.tensor import Tensor, storage_pattern
from ..ir import dtypes
from ..runtime import threads
from .python_state import walk_enters

# numpy's scalars too: the traced function gets them as they are (a numpy
# scalar is an operand as a Python number is)
_SCALARS = (bool, int, float, complex, str, type(None), np.bool_, np.number)
# what an argument chooses the program by, as torch.compile guards on it:
# keyed by value, a program each
_SETTINGS = (dtypes.DType, devices.device, memory_formats.memory_format, sparse.layout)
_NUMBERS = (int, float, np.integer, np.floating)  # program inputs, unless decided on by value
_NOT_NUMBERS = (bool, np.bool_)  # bools decide control flow: keyed by value
# arguments the key holds as they are (a loss function, a class, a module)
_HELD_BY_IDENTITY = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.ModuleType,
    type,
    np.ufunc,
)
_FLOATS = (float, np.floating)


class Signatures:
    """The keys of one jit function's calls, and what its traces decided
    about them: the numbers keyed by value and the dynamic dimensions.
    ``log``: the function's CompileLog."""

    def __init__(self, static_argnums: tuple, dynamic: bool | None, names: list, log):
        self.static_argnums = static_argnums
        self.dynamic = dynamic
        self._names = names  # the positional parameters' names
        self._log = log
        self._lock = threading.Lock()  # for what traces decide, never held in user code
        threads.renew_in_forked_child(self)
        # number arguments (by path) a trace decided something on by value:
        # later keys hold their value rather than making them program inputs
        self.by_value: frozenset = frozenset()
        # dynamic sizes: the dimensions (by argument path) traced as symbols,
        # those that cannot be (a trace needed their value), and each
        # argument's shape when first traced
        self.dynamic_dims: dict = {}  # path -> frozenset of dimensions
        self._fixed_dims: set = set()  # (path, dimension)
        self._first_shapes: dict = {}  # path -> shape
        self.static_because: dict = {}  # argument label -> why its sizes are static

    def forked_in_child(self) -> None:
        self._lock = threading.Lock()

    def of(self, args, kwargs, paths=None, by_value=None):
        """The leaves (tensors and the numbers that are program inputs, in
        order; with ``paths``, each leaf's path is appended there) and the
        cache key: the structure of the arguments, each tensor's shape,
        dtype and requires_grad flag, static arguments and other Python
        values by value, grad mode, autocast's state and the default dtype."""
        leaves: list = []
        parts = []
        static = self.static_argnums
        by_value = self.by_value if by_value is None else by_value
        for i, arg in enumerate(args):
            if static and i in static:
                try:
                    hash(arg)
                except TypeError:
                    raise TypeError(
                        f"jit: static argument {i} of {self._log.name} must be "
                        f"hashable, got {type(arg).__name__}"
                    ) from None
                parts.append(("static", arg))
            elif type(arg) is Tensor and paths is None and not self.dynamic_dims:  # common
                leaves.append(arg)
                parts.append(_tensor_key(arg))
            else:
                parts.append(self._flatten_input(arg, leaves, (i,), paths, by_value))
        if kwargs:
            for name in sorted(kwargs):
                part = self._flatten_input(kwargs[name], leaves, (name,), paths, by_value)
                parts.append(("keyword", name, part))
        if len(leaves) > 1:
            # a tensor passed twice is one input of the trace; a view and its
            # base are two, which the trace refuses to write through
            shared = storage_pattern([leaf for leaf in leaves if isinstance(leaf, Tensor)])
            if shared:
                parts.append(("sharing memory", shared))
        return leaves, (
            tuple(parts),
            grad_mode.is_grad_enabled(),
            autocast_state.key(),
            dtypes.default_float(),
        )

    def _flatten_input(self, value, leaves: list, path: tuple, paths, by_value):
        if isinstance(value, Tensor):
            if value.is_sparse:  # its indices and values are the trace's inputs
                parts = {"indices": value._indices(), "values": value._values_t}
                flat = [
                    self._flatten_input(t, leaves, (*path, k), paths, by_value)
                    for k, t in parts.items()
                ]
                return ("sparse", value.shape, value.is_coalesced(), *flat)
            if isinstance(value, ComplexTensor):  # its pair is the trace's input
                return ("complex", self._flatten_input(value._pair, leaves, path, paths, by_value))
            leaves.append(value)
            if paths is not None:
                paths.append(path)
            dims = self.dynamic_dims.get(path)
            if dims is None or value._data.ndim != len(self._first_shapes[path]):
                return _tensor_key(value)  # dynamic dimensions are those of one rank
            return _dynamic_tensor_key(value, dims)
        if isinstance(value, _NUMBERS) and not isinstance(value, _NOT_NUMBERS):
            if path not in by_value:
                leaves.append(value)
                if paths is not None:
                    paths.append(path)
                return ("number", "float" if isinstance(value, _FLOATS) else "int")
            return ("value", type(value), value)
        if isinstance(value, _SCALARS + _SETTINGS):
            return ("value", type(value), value)  # the type: np.bool_ and bool share a name
        if isinstance(value, (tuple, list)):
            return (
                type(value).__name__,
                tuple(
                    self._flatten_input(v, leaves, (*path, k), paths, by_value)
                    for k, v in enumerate(value)
                ),
            )
        if isinstance(value, dict):
            return (
                "dict",
                tuple(
                    (k, self._flatten_input(value[k], leaves, (*path, k), paths, by_value))
                    for k in sorted(value)
                ),
            )
        if isinstance(value, np.ndarray):
            return ("ndarray", value.dtype.str, value.shape)  # its values: guarded (python_state)
        if walk_enters(value):
            return ("object", type(value))  # what the function reads of it: guarded
        if isinstance(value, _HELD_BY_IDENTITY):
            return ("the object", value)
        raise TypeError(
            f"jit: {self.where(path)} is a {type(value).__name__}, which cannot be traced; pass "
            "tensors, numbers, or tuples/lists/dicts of them, or mark the argument "
            "static with static_argnums"
        )

    def where(self, path: tuple) -> str:
        """An argument's path, for people: ``argument 'x'``, ``argument 'lr'[1]``
        (positional arguments by their parameter's name when it has one)."""
        head, *rest = path
        if isinstance(head, int):
            names = self._names
            head = names[head] if head < len(names) else head
        where = f"argument {head!r}" if isinstance(head, str) else f"argument {head}"
        return where + "".join(f"[{k!r}]" for k in rest)

    def decided_by_value(self, paths: set) -> None:
        """The numbers at ``paths`` are keyed by value from now on."""
        with self._lock:
            self.by_value |= paths

    def dynamic_sizes(self, path: tuple, tensor: Tensor) -> tuple:
        """The dimensions of the argument at ``path`` a trace makes symbols:
        those whose size differs from the first trace's (all with
        ``dynamic=True``), unless fixed."""
        shape = tensor._data.shape
        if self.dynamic is False:
            return ()
        with self._lock:
            first = self._first_shapes.setdefault(path, shape)
            if len(first) != len(shape):
                return ()  # another rank: traced with static sizes
            dims = set(self.dynamic_dims.get(path, ()))
            if self.dynamic:
                dims.update(range(len(shape)))
            elif len(first) == len(shape):
                dims.update(d for d, (a, b) in enumerate(zip(first, shape)) if a != b)
            dims.difference_update(d for p, d in self._fixed_dims if p == path)
            if dims and dims != self.dynamic_dims.get(path):
                self.dynamic_dims[path] = frozenset(dims)
                self._log.note(
                    f"{self.where(path)} has dynamic dimensions {sorted(dims)} from now on"
                )
        return tuple(sorted(dims))

    def fix_sizes(self, trace, paths: list, reason: str, symbols=None) -> None:
        """The dimensions ``trace`` made symbols (of ``symbols``, or all) are
        static from now on."""
        dims = [
            (p, d) for p, d, symbol in trace.symbol_dims if symbols is None or symbol in symbols
        ]
        with self._lock:
            for position, dim in dims:
                path = paths[position]
                self._fixed_dims.add((path, dim))
                remaining = self.dynamic_dims.get(path, frozenset()) - {dim}
                if remaining:
                    self.dynamic_dims[path] = remaining
                else:
                    self.dynamic_dims.pop(path, None)
        where = ", ".join(f"{self.where(paths[p])} dimension {d}" for p, d in dims)
        with self._lock:
            for position, _ in dims:
                self.static_because[self.where(paths[position])] = reason
        self._log.note(f"{where}: static from now on ({reason})")


def _tensor_key(t: Tensor) -> tuple:
    return ("tensor", t._data.shape, t._dtype.name, t._requires_grad)


def _dynamic_tensor_key(t: Tensor, dims: frozenset) -> tuple:
    """The key of a tensor with dynamic dimensions: -1 for their sizes (but
    0 and 1, which are never symbols)."""
    shape = tuple(-1 if d in dims and n >= 2 else n for d, n in enumerate(t._data.shape))
    return ("tensor", shape, t._dtype.name, t._requires_grad)


def parameter_names(fn) -> list:
    """The names of ``fn``'s positional parameters (none for what has no signature)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
