"""The eager Tensor: a numpy array plus what autograd needs to know about it.

Every operation on tensors goes through ``primitives.bind``; the handler here
runs the primitive's numpy implementation at once and, when a gradient is
needed, records a backward node. Tensor methods are thin: the ops themselves
live in ``ops/``.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np

from ..ir import dtypes
from ..ir import primitives as P
from ..runtime import native_eager, routines
from . import autograd, devices, grad_mode
from . import memory_format as memory_formats


def tensor_type_name(dtype) -> str:
    """PyTorch's name of a tensor type of ``dtype``: ``fusegrad.FloatTensor``."""
    return f"fusegrad.{dtype.scalar_name}Tensor"


class _Recording(threading.local):
    """The trace eager operations also record into, while a jit function is
    being traced (see trace.py); None otherwise. Per thread, like grad mode."""

    trace = None


recording = _Recording()

# While a forward-AD dual level is active, the module autograd/forward_ad.py:
# its ``propagate`` gives each op's output its tangents, ``commit_inplace``
# moves them with an in-place change
dual_levels = None


class Size(tuple):
    """A tensor's shape: a tuple that prints as ``fusegrad.Size([2, 3])``.
    Shapes of different lengths differ without comparing sizes, which with
    sizes that vary between calls would be decisions (symbolic.py)."""

    def __repr__(self) -> str:
        return f"fusegrad.Size({list(self)})"

    def __eq__(self, other):
        if isinstance(other, tuple) and len(other) != len(self):
            return False
        return tuple.__eq__(self, other)

    def __ne__(self, other):
        if isinstance(other, tuple) and len(other) != len(self):
            return True
        return tuple.__ne__(self, other)

    __hash__ = tuple.__hash__

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


class Tensor:
    """A multi-dimensional array that can record the operations applied to it.

    >>> import fusegrad
    >>> x = fusegrad.ones(2, 2, requires_grad=True)
    >>> y = (x + 2).mean()
    >>> y.backward()
    >>> x.grad
    tensor([[0.2500, 0.2500],
            [0.2500, 0.2500]])
    """

    # The fields ops set are slots; rarely-set ones live in the instance dict
    # (made on first use) and default to the class attributes below.
    __slots__ = (
        "_data",
        "_dtype",
        "_requires_grad",
        "grad_fn",
        "_output_nr",
        "_version_counter",
        "_base",  # the tensor whose storage a view shares, else None
        "_view_version",  # set with _base: the storage's version when the view was taken
        "_view_steps",  # set with _base: (prim, params, other operands) from the base on
        "__dict__",
        "__weakref__",
    )
    _grad = None
    _hooks = None
    _post_accumulate_hooks = None
    _accumulator = None
    _volatile = False
    _inference = False  # made in inference mode (grad_mode.inference_mode)
    # the version at which a base's shape last changed in place (t_(),
    # resize_(), ...): views taken before it hold steps from the old shape
    _layout_version = 0
    _tangents = None  # forward AD: the tangent at each dual level's key, when it has one
    # a float32 tensor's version when it held bfloat16 values (converted from
    # bfloat16, then perhaps moved: see ``BFLOAT16_OPERANDS``)
    _bfloat16_at = None
    __array_ufunc__ = None  # numpy defers to our reflected operators: np.float32(2) * t

    def __new__(cls, *args, **kwargs):
        return cls._legacy_constructor(cls, args, kwargs)  # creation.py sets it

    @classmethod
    def _make(cls, data: np.ndarray, dtype=None) -> Tensor:
        t = object.__new__(cls)
        t._data = data
        t._dtype = dtype or dtypes.from_numpy_dtype(data.dtype)
        t._requires_grad = False
        t.grad_fn = None
        t._output_nr = 0
        t._version_counter = [0]
        t._base = None
        return t

    @classmethod
    def _from_plain(cls, value) -> Tensor:
        """A tensor of a backward's plain value (eager/plain.py), keeping what it holds."""
        t = cls._make(value._data, value._dtype)
        if value._bfloat16:
            t._bfloat16_at = 0
        return t

    def _holds_bfloat16(self) -> bool:
        """Whether this float32 tensor holds bfloat16 values: it did, and has
        not been written since (nor has the storage it shares with views)."""
        return self._bfloat16_at is not None and self._bfloat16_at == self._version_counter[0]

    @classmethod
    def _new(cls, data: np.ndarray, dtype) -> Tensor:
        """A tensor made from nothing a trace knows: inside a traced function,
        a constant of the graph."""
        t = cls._make(data, dtype)
        if grad_mode.inference_tensors_exist and grad_mode._state.inference:
            t._inference = True
        if recording.trace is not None:
            recording.trace.created_tensor(t)
        return t

    @classmethod
    def _from_saved_output(cls, data, dtype, counter, node, output_nr) -> Tensor:
        t = cls._make(data, dtype)
        t._version_counter = counter
        t.grad_fn = node
        t._output_nr = output_nr
        t._requires_grad = True
        if node.saved_tangents is not None:  # forward over reverse: rules reading it
            t._tangents = node.saved_tangents
        return t

    # ------------------------------------------------------------ attributes

    @property
    def data(self) -> Tensor:
        """The same storage, detached from the graph (with its own version counter)."""
        if recording.trace is not None:
            return self._traced_alias(share_version=False)
        return Tensor._make(self._data, self._dtype)

    @data.setter
    def data(self, value: Tensor) -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be a Tensor, not {type(value).__name__}")
        if value._data is self._data and value._dtype is self._dtype:
            return  # p.data += d: the in-place update already wrote p's storage
        if recording.trace is not None:  # a storage swap is no value a program can compute
            recording.trace.unsupported("assigning .data")
        self._data = value._data
        self._dtype = value._dtype

    @property
    def grad(self):
        if recording.trace is not None:
            recording.trace.read_grad(self, self._grad)
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"assigned grad expected to be a Tensor or None but got "
                    f"grad of type {type(value).__name__}"
                )
            if value.shape != self.shape:
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value.shape)}' "
                    f"to a tensor of size '{list(self.shape)}'. Please ensure that "
                    "the gradient and the tensor are the same size"
                )
            if value.dtype is not self._dtype:
                raise RuntimeError(
                    f"attempting to assign a gradient with dtype "
                    f"'{value.dtype.name}' to a tensor with dtype "
                    f"'{self._dtype.name}'. Please ensure that the gradient and the "
                    "tensor have the same dtype"
                )
        if recording.trace is not None:
            recording.trace.write_grad(self)
        self._grad = value

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        flag = bool(flag)
        if self.grad_fn is not None:
            if flag:
                raise RuntimeError("you can only change requires_grad flags of leaf variables.")
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use "
                "a computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach()."
            )
        if flag and not self._dtype.is_floating_point:
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if flag and self._inference and not grad_mode._state.inference:
            raise RuntimeError(
                "Setting requires_grad=True on inference tensor outside InferenceMode is not "
                "allowed."
            )
        if recording.trace is not None and flag != self._requires_grad:
            recording.trace.requires_grad_set(self)
        self._requires_grad = flag

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self

    @property
    def _version(self) -> int:
        """How many in-place operations this tensor's storage has seen."""
        return self._version_counter[0]

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    def _is_view(self) -> bool:
        """Whether this tensor is a view of ``_base`` (PyTorch's name, read by torchviz)."""
        return self._base is not None

    @property
    def retains_grad(self) -> bool:
        node = self.grad_fn
        return node is not None and bool(node.retained) and self._output_nr in node.retained

    @property
    def shape(self) -> Size:
        trace = recording.trace
        if trace is not None and trace.sym_shapes:  # sizes that vary: symbolic.py
            shape = trace.symbolic_shape(self)
            if shape is not None:
                return Size(shape)
        return Size(self._data.shape)

    @property
    def dtype(self):
        return self._dtype

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def device(self):
        return devices.CPU

    # PyTorch's device and layout flags: fusegrad has dense tensors on the CPU only
    is_cpu = True
    is_cuda = is_xpu = is_mps = is_meta = is_mtia = is_maia = is_hpu = is_ipu = False
    is_xla = is_lazy = is_vulkan = is_mkldnn = is_quantized = is_nested = False
    is_sparse = is_sparse_csr = False

    def cuda(self, device=None, non_blocking: bool = False):
        return self.to(devices.device("cuda" if device is None else device))

    @property
    def T(self) -> Tensor:
        return P.transpose(self, perm=tuple(range(self._data.ndim))[::-1])

    @property
    def mT(self) -> Tensor:
        return self._matrices_transposed("mT", "This function is the identity in these cases.")

    @property
    def mH(self) -> Tensor:
        """The conjugate transpose of each matrix: of real ones, mT."""
        return self._matrices_transposed("mH", "Consider using x.conj().")

    @property
    def H(self) -> Tensor:
        if self._data.ndim not in (0, 2):
            hint = " For batches of matrices, consider using tensor.mH" if self.ndim > 2 else ""
            raise RuntimeError(
                "tensor.H is only supported on matrices (2-D tensors). Got "
                f"{self._data.ndim}-D tensor.{hint}"
            )
        return self._matrices_transposed("H", "Consider using x.conj().")

    def _matrices_transposed(self, name: str, hint: str) -> Tensor:
        ndim = self._data.ndim
        if ndim == 0:
            warnings.warn(f"Tensor.{name} is deprecated on 0-D tensors. {hint}", stacklevel=3)
            return self
        if ndim == 1:
            raise RuntimeError(
                f"tensor.{name} is only supported on matrices or batches of matrices. Got 1-D "
                "tensor."
            )
        return self.transpose(-2, -1)

    def size(self, dim=None):
        if dim is None:
            return self.shape
        from ..ir.shapes import normalize_dim

        return self.shape[normalize_dim(dim, self.ndim)]

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return self.shape.numel() if recording.trace is not None else self._data.size

    def nelement(self) -> int:
        return self.numel()

    def element_size(self) -> int:
        return self._dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        """The bytes of its elements (a view's or an expanded tensor's counted
        as if they were its own), as PyTorch counts them."""
        return self.numel() * self._dtype.itemsize

    def is_floating_point(self) -> bool:
        return self._dtype.is_floating_point

    def is_contiguous(self, memory_format=memory_formats.contiguous_format) -> bool:
        self._layout_read("is_contiguous()")
        memory_formats.check(memory_format, "is_contiguous")
        return memory_formats.is_laid_out(self._data, memory_format)

    def _layout_read(self, what: str) -> None:
        """A compiled program is shared by arguments of any layout: Python
        deciding on one cannot be compiled."""
        if recording.trace is not None:
            recording.trace.unsupported(what)

    def stride(self, dim=None):
        self._layout_read("stride()")
        strides = tuple(s // self._data.itemsize for s in self._data.strides)
        return strides if dim is None else strides[dim]

    # ---------------------------------------------------------- conversions

    def _guarded(self, how: str) -> None:
        """Python is about to depend on this tensor's value."""
        if recording.trace is not None:
            recording.trace.guard(self, how)

    def item(self):
        """The Python number; inside a traced function, a traced number (an
        output of the program if returned, a guard only if Python decides
        something with it; see numbers.py)."""
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar"
            )
        if recording.trace is not None:
            return recording.trace.number_of(self)
        return self._data.reshape(()).item()

    def tolist(self):
        self._guarded("tolist()")
        return self._data.tolist()

    def numpy(self) -> np.ndarray:
        if self._requires_grad:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use "
                "tensor.detach().numpy() instead."
            )
        self._guarded("numpy()")
        return self._data if not self._dtype.reduced else self._reduced_array()

    def __array__(self, dtype=None, copy=None):
        self._guarded("__array__")
        data = self._data if not self._dtype.reduced else self._reduced_array()
        return data if dtype is None else data.astype(dtype)

    def _reduced_array(self) -> np.ndarray:
        """A reduced tensor's values as numpy's type of its dtype (a copy: the
        storage is wider); numpy has no bfloat16, and PyTorch refuses to convert it."""
        if self._dtype.exchanged_as is None:
            raise TypeError(f"Got unsupported ScalarType {self._dtype.scalar_name}")
        return self._data.astype(self._dtype.exchanged_as)

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        if recording.trace is not None:  # the truth is what Python reads, not the value
            truth = self if self._dtype is dtypes.bool_ else self != 0
            recording.trace.guard(truth, "bool()")
        return bool(self._data.reshape(()))

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._dtype.category != dtypes.INTEGER or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return int(self.shape[0])

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        from .printing import tensor_repr

        suffixes = []
        if self.grad_fn is not None:
            suffixes.append(f"grad_fn=<{self.grad_fn.name()}>")
        elif self._requires_grad:
            suffixes.append("requires_grad=True")
        return tensor_repr(self._data, self._dtype, dtypes.default_float(), suffixes)

    def __format__(self, format_spec: str) -> str:
        """A 0-d tensor formats as its Python number (``f"{loss:.4f}"``);
        others only with an empty spec, as ``str``, as in PyTorch."""
        if self._data.ndim == 0 and type(self) is Tensor:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def __reduce_ex__(self, protocol):
        return (_rebuild, (self._data.copy(), self._requires_grad, self._dtype))

    def __deepcopy__(self, memo):
        if self.grad_fn is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) "
                "support the deepcopy protocol at the moment."
            )
        t = type(self)._make(self._data.copy(), self._dtype)
        t._requires_grad = self._requires_grad
        if self._grad is not None:
            t._grad = self._grad.detach().clone()
        memo[id(self)] = t
        return t

    # ---------------------------------------------------------- autograd API

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulates the gradient of this tensor into the leaves' ``.grad``."""
        autograd.backward(
            (self,),
            None if gradient is None else (gradient,),
            retain_graph,
            create_graph,
            inputs=inputs,
        )

    def detach(self) -> Tensor:
        if recording.trace is not None:
            return self._traced_alias(share_version=True)
        t = Tensor._make(self._data, self._dtype)
        t._version_counter = self._version_counter
        if grad_mode.inference_tensors_exist and self._inference:  # its alias is one too
            t._inference = True
        return t

    def _detached_keeping_tangents(self) -> Tensor:
        """detach() for reverse mode only: the copy keeps this tensor's
        forward-mode tangents (how torch.func's transforms take their
        inputs); a trace records it as forward_only, which passes them."""
        if recording.trace is None:
            t = self.detach()
            t._tangents = self._tangents
            return t
        return self._traced_alias(share_version=True, prim=P.forward_only)

    def _traced_alias(self, share_version: bool, prim=P.stop_gradient) -> Tensor:
        """detach() / .data while tracing: recorded as stop_gradient (or
        ``prim``), and known to the trace as sharing this tensor's storage."""
        t = prim(self)
        t._base = None  # an alias, not a view in autograd's sense
        t._version_counter = self._version_counter if share_version else [0]
        recording.trace.alias(t, self)
        return t

    def _accumulate_grad(self, grad) -> None:
        """``self.grad += grad`` as the engine does it: the first gradient is
        copied (it may also reach another leaf), later ones are added in place
        unless create_graph asks for a differentiable sum."""
        existing = self._grad
        trace = recording.trace
        if trace is not None:
            trace.read_grad(self, existing)
            trace.write_grad(self)
        if existing is None:
            if grad_mode.is_grad_enabled() and grad.grad_fn is not None:
                self._grad = grad  # create_graph: keep the graph of the gradient
            elif trace is not None:
                self._grad = P.convert(grad.detach(), dtype=grad._dtype)
            else:
                self._grad = Tensor._make(grad._data.copy(), grad._dtype)
        elif grad_mode.is_grad_enabled():
            self._grad = existing + grad
        elif trace is not None:
            existing._commit_inplace(P.add(existing, grad))
        else:
            np.add(existing._data, grad._data, out=existing._data)
            if existing._dtype.reduced:
                existing._data[...] = existing._dtype.round(existing._data)
            existing._version_counter[0] += 1

    def detach_(self) -> Tensor:
        if self._base is not None and self._base._requires_grad:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        trace = recording.trace
        if trace is not None:
            trace.detach_in_place(self)
        self.grad_fn = None
        self._output_nr = 0
        self._requires_grad = False
        return self

    def retain_grad(self) -> None:
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if recording.trace is not None:  # a compiled output retains its gradient too
            recording.trace.retained[id(self)] = self
        if self.grad_fn is not None:
            self.grad_fn.retain(self._output_nr, self)

    def register_hook(self, hook):
        """Calls ``hook(grad)`` when this tensor's gradient is computed; a
        returned tensor replaces the gradient. Returns a handle with ``remove()``."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is None:
            if self._hooks is None:
                self._hooks = {}
            hooks = self._hooks
        else:
            hooks = self.grad_fn.hooks_dict(self._output_nr)
        handle = autograd.RemovableHandle(hooks)
        hooks[handle.id] = hook
        if recording.trace is not None:  # the derived backward applies it too
            recording.trace.cotangent_hook(self, hook, handle)
        return handle

    def register_post_accumulate_grad_hook(self, hook):
        """Calls ``hook(self)`` each time a backward pass has added a gradient
        into this leaf's ``.grad``. Returns a handle with ``remove()``."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            raise RuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors"
            )
        if recording.trace is not None:  # registered once, by the trace, not on every call
            recording.trace.unsupported("register_post_accumulate_grad_hook")
        if self._post_accumulate_hooks is None:
            self._post_accumulate_hooks = {}
        handle = autograd.RemovableHandle(self._post_accumulate_hooks)
        self._post_accumulate_hooks[handle.id] = hook
        return handle

    def _grad_accumulator(self):
        node = self._accumulator
        if node is None:
            node = self._accumulator = autograd.AccumulateGrad(self)
        return node

    # -------------------------------------------------------- in-place ops

    def _check_inplace(self) -> None:
        if not grad_mode.is_grad_enabled():
            return
        if self.grad_fn is None and self._requires_grad:
            raise RuntimeError(
                "a leaf Variable that requires grad is being used in an in-place operation."
            )
        base = self._base
        if base is not None and base.grad_fn is None and base._requires_grad:
            raise RuntimeError(
                "a view of a leaf Variable that requires grad is being used in an in-place "
                "operation."
            )

    def _check_inference_update(self) -> None:
        if grad_mode.inference_tensors_exist and self._inference and not grad_mode._state.inference:
            raise RuntimeError(
                "Inplace update to inference tensor outside InferenceMode is not allowed."
                "You can make a clone to get a normal tensor before doing inplace update."
                "See https://github.com/pytorch/rfcs/pull/17 for more details."
            )

    def _commit_inplace(self, result: Tensor) -> Tensor:
        """Makes ``result`` (computed out of place from self) this tensor's value and history."""
        self._check_inference_update()
        if not np.can_cast(result._data.dtype, self._data.dtype, casting="same_kind"):
            raise RuntimeError(
                f"result type {result._dtype.scalar_name} can't be cast "
                f"to the desired output type {self._dtype.scalar_name}"
            )
        base = self._base
        if base is not None and (
            (
                grad_mode.is_grad_enabled()
                and (self._requires_grad or base._requires_grad or result._requires_grad)
            )
            or (dual_levels is not None and (result._tangents or base._tangents))
        ):
            return self._commit_through_base(result)
        if not self._data.flags.writeable:
            raise RuntimeError(_unwritable_reason(self._data))
        if base is not None and recording.trace is not None:
            # functionalized: the trace knows the base's new value, and the view's
            return self._commit_through_base(result, traced_only=True)
        if result._dtype is not self._dtype:  # the value stored, as the trace and autograd see it
            result = P.convert(result, dtype=self._dtype)
        if result.grad_fn is None and self._requires_grad and grad_mode.is_grad_enabled():
            result = _passing_zeros(self, result)
        if recording.trace is not None:  # first: the trace snapshots the old value
            recording.trace.rebind(self, result)
        np.copyto(self._data, result._data)
        self._version_counter[0] += 1
        if dual_levels is not None:
            dual_levels.commit_inplace(self, result)
        if result.grad_fn is not None:
            self.grad_fn = result.grad_fn
            self._output_nr = result._output_nr
            self._requires_grad = True
        return self

    def _commit_layout(self, view: Tensor) -> Tensor:
        """Makes ``view``, this tensor's elements in another shape (squeeze,
        transpose, ...), this tensor, as PyTorch's squeeze_(), t_(), ... do:
        the same storage and version counter, the view's history; a view
        stays a view of its base, one step further."""
        self._check_inference_update()
        if recording.trace is not None:
            recording.trace.relayout(self, view)
        self._data = view._data
        if dual_levels is not None:
            self._tangents = view._tangents
        if view.grad_fn is not None:
            self.grad_fn, self._output_nr = view.grad_fn, view._output_nr
            self._requires_grad = True
        self._version_counter[0] += 1
        if self._base is None:
            self._layout_version = self._version_counter[0]
        else:
            self._view_steps = view._view_steps
            self._view_version = self._version_counter[0]
        return self

    def _commit_through_base(self, result: Tensor, traced_only: bool = False) -> Tensor:
        """An in-place change of a view that autograd sees, as PyTorch's
        CopySlices: the base becomes the base with ``result`` written where
        the view is (its history with it), and the view is taken again from
        the new base (so gradients flow to both). ``traced_only``: autograd
        sees nothing, a trace records the change."""
        base, steps = self._base, self._view_steps
        if base._layout_version > self._view_version:
            what = "in-place modification of a view taken before its base's shape changed in place"
            if traced_only:
                recording.trace.unsupported(what)
            raise RuntimeError(f"{what} (t_(), squeeze_(), resize_(), ...); take the view again")
        try:
            written = _written_into(base, steps, result)
        except RuntimeError:
            if not traced_only:
                raise
            made_by = steps[0][0].name
            recording.trace.unsupported(f"in-place modification of a view made by {made_by}")
        base._commit_inplace(written)
        view = base
        for prim, params, others in steps:
            view = prim(view, *others, **params)
        if recording.trace is not None:
            recording.trace.rebind_view(self, view)
        self.grad_fn, self._output_nr = view.grad_fn, view._output_nr
        self._requires_grad = view._requires_grad
        if dual_levels is not None:
            dual_levels.commit_inplace(self, view)
        self._view_version = self._version_counter[0]
        return self


def _unwritable_reason(data: np.ndarray) -> str:
    if any(stride == 0 and size > 1 for stride, size in zip(data.strides, data.shape)):
        return (
            "unsupported operation: more than one element of the written-to tensor refers to "
            "a single memory location. Please clone() the tensor before performing the operation."
        )
    return "unsupported operation: the written-to tensor's memory is read-only. Please clone() it."


def _passing_zeros(tensor: Tensor, value: Tensor) -> Tensor:
    """``value``, an op's result with no gradient (sign, floor, ...) about
    to replace ``tensor``'s, as a function of ``tensor`` whose gradient is
    zeros: PyTorch's in-place op passes zeros to the history it replaces,
    where keeping that history would pass the old value's gradient."""
    return P.where(constant(False, dtypes.bool_), tensor, value)


def _written_into(base: Tensor, steps: tuple, value: Tensor) -> Tensor:
    """``base`` with ``value`` written where the view ``steps`` take lands,
    out of place and differentiable."""
    if not steps:
        return value if value._dtype is base._dtype else P.convert(value, dtype=base._dtype)
    (prim, params, others), rest = steps[0], steps[1:]
    inner = _written_into(prim(base, *others, **params), rest, value)
    if prim is P.index:
        return P.index_put(base, inner, *others, spec=params["spec"])
    if prim is P.reshape:
        return P.reshape(inner, shape=base._data.shape)
    if prim is P.transpose:
        perm = params["perm"]
        return P.transpose(inner, perm=tuple(sorted(range(len(perm)), key=perm.__getitem__)))
    raise RuntimeError(
        f"in-place modification of a view made by {prim.name} of a tensor that requires grad "
        "is not supported; apply the operation to the base tensor or clone() the view"
    )


def _rebuild(data, requires_grad, dtype=None):
    t = Tensor._make(data, dtype)
    t._requires_grad = requires_grad
    return t


_DTYPE_OF = {d.np: d for d in dtypes.ALL_DTYPES}


_constants: dict = {}
TRACED_NUMBERS: set = set()  # tracer/numbers.py's traced float and int classes


class NumberOperand:
    """The base of the tracer's numbers (tracer/numbers.py): a Python number a
    trace holds as an input. Eager ops take one wherever they take a float or
    an int, and know it by this class alone, so the eager library imports
    nothing of the tracer."""

    __slots__ = ()


def constant(value, dtype) -> Tensor:
    """A read-only 0-d tensor for a Python scalar operand, shared between uses
    (a traced number is the program's input, converted)."""
    if value.__class__ in TRACED_NUMBERS:  # never hashed: that would be a guard
        return value.operand(dtype)
    key = (value, value.__class__, dtype)
    found = _constants.get(key)
    if found is None:
        # wrapped around into a narrow integer type, as PyTorch converts a
        # scalar operand (a float one stays unrounded: float32 beside a half)
        data = dtype.round(value) if dtype.category == dtypes.INTEGER else np.array(value, dtype.np)
        data.flags.writeable = False
        found = Tensor._make(data, dtype)
        found._constant = True  # a trace records it as a constant, not an input
        if len(_constants) < 4096:
            _constants[key] = found
    return found


def constant_array(value: np.ndarray, dtype) -> Tensor:
    """An IR constant as a tensor operand (read-only, recorded as a constant)."""
    if value.ndim == 0:
        return constant(value.item(), dtype)
    data = np.array(value, dtype.np)
    data.flags.writeable = False
    t = Tensor._make(data, dtype)
    t._constant = True
    return t


def eager_bind(prim, args, params):
    """Runs a primitive on tensors now, recording a backward node when needed."""
    for a in args:
        if a.__class__ is not Tensor and not isinstance(a, Tensor):
            dtype = P.number_dtype([a._dtype for a in args if isinstance(a, Tensor)])
            args = tuple(a if isinstance(a, Tensor) else constant(a, dtype) for a in args)
            break
    first = args[0]
    recorded = params
    trace = recording.trace
    if trace is not None:
        recorded = params = trace.settled(params)
        if trace.symbol_hints:
            params = trace.hinted(params)  # numpy runs with this call's sizes
    if prim is P.matmul and first._holds_bfloat16() and args[1]._holds_bfloat16():
        params = recorded = BFLOAT16_OPERANDS
    data, dtype = computed(prim, args, params)
    out = Tensor._make(data, dtype)
    if (prim is P.convert or prim in P.MOVING) and dtype is dtypes.float32:
        if holds_bfloat16_after(prim, first):
            out._bfloat16_at = out._version_counter[0]
    if prim.view and _is_view_of(data, first._data):
        out._version_counter = first._version_counter
        out._base = first._base if first._base is not None else first
        out._view_version = first._version_counter[0]
        earlier = first._view_steps if first._base is not None else ()
        out._view_steps = (*earlier, (prim, recorded, args[1:]))
    if len(args) == 1:  # written out: this runs for every eager operation
        pattern = (first._requires_grad,)
        volatile = first._volatile
    elif len(args) == 2:
        second = args[1]
        pattern = (first._requires_grad, second._requires_grad)
        volatile = first._volatile or second._volatile
    else:
        pattern = tuple([t._requires_grad for t in args])
        volatile = _any_volatile(args)
    if volatile:
        out._volatile = True
    elif True in pattern and dtype.category == dtypes.FLOATING and grad_mode._state.enabled:
        autograd.record(prim, recorded, args, out, pattern)
        if recorded is not params and out.grad_fn is not None:  # sizes that vary
            out.grad_fn.in_shapes = tuple(a.shape for a in args)
    if grad_mode.inference_tensors_exist:
        _mark_inference(out)
    if trace is not None:
        trace.record(prim, args, recorded, out)
    if dual_levels is not None:
        dual_levels.propagate(prim, args, recorded, out)
    return out


# Eager products of float32 tensors holding bfloat16 values (an autocast
# product's operands, its cotangent) are marked as ir/simplify.py marks a
# graph's, so eager mode runs the routine a compiled program runs on them.
BFLOAT16_OPERANDS = {"operands": dtypes.bfloat16}


def holds_bfloat16_after(prim, first) -> bool:
    """Whether ``prim``'s float32 result on ``first`` (a tensor or a plain
    value) holds bfloat16 values: a conversion from bfloat16, or a move of
    a value that holds them."""
    if prim is P.convert:
        return first._dtype is dtypes.bfloat16
    return prim in P.MOVING and first._holds_bfloat16()


def _mark_inference(out: Tensor) -> None:
    """What inference mode makes is an inference tensor, and so is a view of
    one in any mode; a view of a normal tensor stays normal, as in PyTorch."""
    base = out._base
    if base._inference if base is not None else grad_mode._state.inference:
        out._inference = True


def storage_pattern(tensors) -> tuple:
    """Which of ``tensors`` share memory, as a cache key: () when none do,
    else for each tensor (the first with its memory, the first that is the
    same tensor). Memory is an array's owner, so a view of a tensor shares
    its memory even where their elements do not meet."""
    owners, ids = [], []
    for t in tensors:
        array = t._data
        while isinstance(array.base, np.ndarray):
            array = array.base
        owners.append(id(array))
        ids.append(id(t))
    if len(set(owners)) == len(owners):
        return ()
    return tuple((owners.index(o), ids.index(i)) for o, i in zip(owners, ids))


def _is_view_of(data: np.ndarray, array: np.ndarray) -> bool:
    """Whether ``data``, which a view primitive's numpy implementation made
    from ``array``, shares its memory: ``np.may_share_memory``, which costs a
    tenth of an eager operation, asked only when numpy's bases do not tell."""
    base = data.base
    if data is array or base is array or (base is not None and base is array.base):
        return True
    return base is not None and np.may_share_memory(data, array)


def computed(prim, args, params) -> tuple:
    """(data, dtype) of ``prim`` applied now to ``args`` (tensors or plain
    values): numpy's implementation, or the kernel or routine eager mode runs
    natively; float16 and bfloat16 computed in float32 and rounded once."""
    first = args[0]
    # Promotion made a reduced float operand the first or the last (where's
    # condition comes first); a conversion may make one.
    reduced = (
        first._dtype.reduced
        or args[-1]._dtype.reduced
        or ((prim is P.convert or prim is P.unrounded) and params["dtype"].reduced)
    )
    # Values and dtypes come from numpy; the shape rule (which tests check
    # against numpy over the op table) words the error when numpy refuses.
    try:
        if reduced:
            return _reduced_impl(prim, args, params)
        if len(args) == 1:
            if prim in _NATIVE and native_eager.runs_natively(prim, first._data):
                data = native_eager.run(prim, first._data, params)
            else:
                data = prim.impl(first._data, **params)
        elif len(args) == 2:
            if prim in _NATIVE and native_eager.runs_natively(prim, first._data):
                data = native_eager.run(prim, first._data, params, args[1]._data)
            else:
                data = prim.impl(first._data, args[1]._data, **params)
        else:
            data = prim.impl(*[t._data for t in args], **params)
    except (ValueError, IndexError, TypeError) as exc:
        prim.shape_rule(*args, **params)  # raises with PyTorch's wording where it has one
        # otherwise numpy's message, without numpy's frames, as PyTorch's exception types
        message = str(exc).replace(" axis ", " dimension ")
        raise (RuntimeError if isinstance(exc, ValueError) else type(exc))(message) from None
    if data.__class__ is not np.ndarray:
        data = np.asarray(data)
    return data, _DTYPE_OF[data.dtype]


_NATIVE = native_eager.PRIMITIVES  # eager primitives run as kernels on large arrays
_ROUTINES = routines.ROUTINES


def _reduced_impl(prim, args, params) -> tuple:
    """(data, dtype) of a primitive with float16 or bfloat16 operands (see
    ``Primitive.compute``), by the routine a compiled program runs where
    there is one."""
    _, dtype = prim.shape_rule(*args, **params)
    values = [t._data for t in args]
    operand_dtypes = [t._dtype for t in args]
    if dtype.reduced and prim in _ROUTINES and routines.runs_natively(prim, values[0]):
        return routines.run_reduced(prim, values, operand_dtypes, dtype, params), dtype
    data = prim.compute(values, operand_dtypes, dtype, params)
    return (data if data.__class__ is np.ndarray else np.asarray(data)), dtype


def _any_volatile(args) -> bool:
    for t in args:
        if t._volatile:
            return True
    return False


P.register_value_type(Tensor, eager_bind)
autograd.register_tensor_type(Tensor)
