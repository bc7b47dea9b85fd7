"""``nn.Parameter``: a tensor a Module registers as one of its parameters; and
the uninitialized parameters and buffers of lazy modules."""

from __future__ import annotations

import numpy as np

from ..eager import creation
from ..eager.devices import check_device
from ..eager.tensor import Tensor
from ..ir import dtypes


class Parameter(Tensor):
    """A tensor that requires grad by default and that a Module assigned it to
    registers, so ``parameters()`` finds it. It shares ``data``'s storage."""

    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = creation.empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter data must be a Tensor, not {type(data).__name__}")
        p = cls._make(data._data, data.dtype)
        p._version_counter = data._version_counter
        p.requires_grad = requires_grad
        return p

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol):
        return (Parameter, (Tensor._make(self._data.copy(), self.dtype), self.requires_grad))

    def __deepcopy__(self, memo):
        p = Parameter(Tensor._make(self._data.copy(), self.dtype), self.requires_grad)
        if self._grad is not None:
            p._grad = self._grad.detach().clone()
        memo[id(self)] = p
        return p


_DATA = Tensor.__dict__["_data"]  # the slot holding a tensor's array


class UninitializedTensorMixin:
    """A parameter or buffer whose shape is not known yet (a lazy module's,
    until its first input): it has a dtype and a requires_grad flag, and
    ``materialize(shape)`` makes it a tensor of that shape, of the class
    ``cls_to_become``. It stays the same object, so an optimizer made
    before holds the materialized parameter. Using it before is an error."""

    __slots__ = ()
    cls_to_become: type

    @classmethod
    def _uninitialized(cls, requires_grad: bool, dtype):
        dtype = dtypes.default_float() if dtype is None else dtypes.as_dtype(dtype)
        t = cls._make(np.empty(0, dtype.np), dtype)
        t._requires_grad = requires_grad
        return t

    @property
    def _data(self):
        raise ValueError(
            "Attempted to use an uninitialized parameter. This error happens when you are "
            "using a `LazyModule` or explicitly manipulating "
            "`torch.nn.parameter.UninitializedParameter` objects. When using LazyModules Call "
            "`forward` with a dummy batch to initialize the parameters before calling torch "
            "functions"
        )

    @_data.setter
    def _data(self, array) -> None:
        _DATA.__set__(self, array)

    @property
    def shape(self):
        raise RuntimeError(
            "Can't access the shape of an uninitialized parameter or buffer. This error "
            "usually happens in `load_state_dict` when trying to load an uninitialized "
            "parameter into an initialized one. Call `forward` to initialize the parameters "
            "before accessing their attributes."
        )

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Becomes a tensor of ``shape`` (uninitialized values, as ``empty``)
        and of ``cls_to_become``, in ``dtype`` if given."""
        check_device(device)
        dtype = self._dtype if dtype is None else dtypes.as_dtype(dtype)
        made = creation.empty(*((shape,) if isinstance(shape, int) else shape), dtype=dtype)
        self.__class__ = self.cls_to_become
        self._data, self._dtype = made._data, dtype

    def _convert_like(self, convert) -> None:
        """Takes the dtype ``convert`` (a module's ``to``, ``double``, ...)
        gives a tensor of its dtype, for the tensor ``materialize`` makes."""
        self._dtype = convert(creation.empty(0, dtype=self._dtype)).dtype

    def detach(self):
        return type(self)._uninitialized(False, self._dtype)

    def __deepcopy__(self, memo):
        copied = type(self)._uninitialized(self._requires_grad, self._dtype)
        memo[id(self)] = copied
        return copied

    def __reduce_ex__(self, protocol):
        return (type(self), (self._requires_grad, None, self._dtype))

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A lazy module's parameter before its first input; materialized, a Parameter."""

    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        check_device(device)
        return cls._uninitialized(requires_grad, dtype)

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A lazy module's buffer (running statistics) before its first input;
    materialized, a Tensor."""

    __slots__ = ()
    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        check_device(device)
        return cls._uninitialized(requires_grad, dtype)

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        pass


def is_lazy(tensor) -> bool:
    """Whether ``tensor`` is an uninitialized parameter or buffer."""
    return isinstance(tensor, UninitializedTensorMixin)
