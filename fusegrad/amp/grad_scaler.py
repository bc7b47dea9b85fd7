"""``torch.amp.GradScaler``: the loss multiplied by a scale so that small
gradients survive a reduced dtype, the gradients divided by it before the
optimizer steps, a step skipped when they hold an inf or a NaN, and the
scale backed off then, grown after ``growth_interval`` good steps. As
PyTorch's (torch/amp/grad_scaler.py), with its messages; the scale and the
count of good steps are tensors updated by tensor operations, so a traced
training step updates them as the eager one does.

A ``"cuda"`` scaler (the default device, and torch.cuda.amp's) warns and is
disabled, as in a CPU-only PyTorch build: then ``scale`` returns its
argument, ``step`` just steps, the rest do nothing.
"""

from __future__ import annotations

import warnings
from collections import abc, defaultdict
from enum import Enum

from .. import cuda
from ..eager import creation, ops
from ..eager.grad_mode import no_grad
from ..eager.tensor import Tensor
from ..ir import dtypes


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state() -> dict:
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class GradScaler:
    """Scales a loss (``scale``), unscales the gradients and steps unless one
    is inf or NaN (``step``, or ``unscale_`` first to clip them), and adapts
    the scale (``update``).

    >>> import fusegrad as torch
    >>> scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    >>> scaler.scale(torch.tensor(2.0))
    tensor(2048.)
    """

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        self._device = device
        self._enabled = enabled
        if self._device == "cuda" and enabled and not cuda.is_available():
            warnings.warn(
                "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                stacklevel=2,
            )
            self._enabled = False
        if self._enabled:
            assert growth_factor > 1.0, "The growth factor must be > 1.0."
            assert backoff_factor < 1.0, "The backoff factor must be < 1.0."
            self._init_scale = init_scale
            self._scale: Tensor | None = None  # made by the first scale()
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker: Tensor | None = None  # made with the scale
            self._per_optimizer_states: dict = defaultdict(_refresh_per_optimizer_state)

    def _check_scale_growth_tracker(self, funcname: str) -> tuple:
        fix = (
            "This may indicate your script did not use scaler.scale(loss or outputs) "
            "earlier in the iteration."
        )
        assert self._scale is not None, f"Attempted {funcname} but _scale is None.  " + fix
        assert self._growth_tracker is not None, (
            f"Attempted {funcname} but _growth_tracker is None.  " + fix
        )
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self) -> None:
        assert self._growth_tracker is None, "_growth_tracker initialized before _scale"
        self._scale = creation.full((), self._init_scale, dtype=dtypes.float32)
        self._growth_tracker = creation.full((), self._init_growth_tracker, dtype=dtypes.int32)

    def scale(self, outputs):
        """``outputs`` (a tensor, or an iterable of them) times the scale;
        ``outputs`` itself when disabled."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init_scale_growth_tracker()
            return outputs * self._scale

        def apply_scale(val):
            if isinstance(val, Tensor):
                if self._scale is None:
                    self._lazy_init_scale_growth_tracker()
                return val * self._scale
            if isinstance(val, abc.Iterable):
                iterable = map(apply_scale, val)
                if isinstance(val, (list, tuple)):
                    return type(val)(iterable)
                return iterable
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply_scale(outputs)

    def _unscale_grads_(self, optimizer, inv_scale: Tensor, found_inf: Tensor, allow_fp16: bool):
        """Multiplies the optimizer's gradients by ``inv_scale``, setting
        ``found_inf`` to 1 if one holds an inf or a NaN; the found-inf
        tensors by device (the CPU's, if any parameter has a gradient)."""
        grads = []
        with no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    assert isinstance(param, Tensor)
                    if param.grad is None:
                        continue
                    if not allow_fp16 and param.grad.dtype is dtypes.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    grads.append(param.grad)
            if not grads:
                return {}
            _non_finite_check_and_unscale_(grads, found_inf, inv_scale)
        return {grads[0].device: found_inf}

    def unscale_(self, optimizer) -> None:
        """Divides the optimizer's gradients by the scale (once per step), to
        inspect or clip them before ``step``."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.UNSCALED:
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update()."
            )
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        # the reciprocal in float64, as PyTorch: a float32 division may round differently
        inv_scale = ops.to(ops.reciprocal(ops.to(self._scale, dtypes.float64)), dtypes.float32)
        found_inf = creation.full((), 0.0, dtype=dtypes.float32)
        optimizer_state["found_inf_per_device"] = self._unscale_grads_(
            optimizer, inv_scale, found_inf, False
        )
        optimizer_state["stage"] = OptState.UNSCALED

    def _maybe_opt_step(self, optimizer, optimizer_state, *args, **kwargs):
        if not sum(v.item() for v in optimizer_state["found_inf_per_device"].values()):
            return optimizer.step(*args, **kwargs)
        return None

    def step(self, optimizer, *args, **kwargs):
        """Unscales the gradients (unless ``unscale_`` did) and runs
        ``optimizer.step(*args, **kwargs)`` unless one is inf or NaN;
        returns what it returns."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if optimizer_state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        assert len(optimizer_state["found_inf_per_device"]) > 0, (
            "No inf checks were recorded for this optimizer."
        )
        retval = self._maybe_opt_step(optimizer, optimizer_state, *args, **kwargs)
        optimizer_state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None) -> None:
        """Backs the scale off if a step was skipped, grows it after
        ``growth_interval`` steps in a row that were not; or sets it to
        ``new_scale`` (a float or a one-element tensor)."""
        if not self._enabled:
            return
        _scale, _growth_tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                _scale.fill_(new_scale)
            else:
                reason = (
                    "new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
                    "torch.FloatTensor with requires_grad=False."
                )
                assert new_scale.device.type == self._device, reason
                assert new_scale.numel() == 1, reason
                assert new_scale.requires_grad is False, reason
                _scale.copy_(new_scale)
        else:
            found_infs = [
                found_inf
                for state in self._per_optimizer_states.values()
                for found_inf in state["found_inf_per_device"].values()
            ]
            assert len(found_infs) > 0, "No inf checks were recorded prior to update."
            found_inf_combined = found_infs[0]
            for found_inf in found_infs[1:]:
                found_inf_combined += found_inf
            _update_scale_(
                _scale,
                _growth_tracker,
                found_inf_combined,
                self._growth_factor,
                self._backoff_factor,
                self._growth_interval,
            )
        # emptied where PyTorch makes a new one, which no one else holds: a
        # traced training step then leaves the scaler's objects as it found them
        self._per_optimizer_states.clear()

    def get_scale(self) -> float:
        """The scale as a Python float; 1.0 when disabled."""
        if self._enabled:
            return self._init_scale if self._scale is None else self._scale.item()
        return 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if self._enabled:
            if self._growth_tracker is None:
                return self._init_growth_tracker
            return self._growth_tracker.item()
        return 0

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict:
        """scale, growth_factor, backoff_factor, growth_interval and
        _growth_tracker; empty when disabled."""
        if self._enabled:
            return {
                "scale": self.get_scale(),
                "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker(),
            }
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved "
                "from a disabled instance of GradScaler."
            )
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        if self._enabled:
            assert len(self._per_optimizer_states) == 0, (
                "A GradScaler instance may only be pickled at the beginning "
                "of an iteration, or at the end after scaler.update()."
            )
            # the tensors are made again by the first scale() after unpickling
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def _check_inf_per_device(self, optimizer) -> dict:
        _scale, _ = self._check_scale_growth_tracker("_check_inf_per_device")
        dummy_inv_scale = creation.full((), 1.0, dtype=dtypes.float32)
        found_inf = creation.full((), 0.0, dtype=dtypes.float32)
        self._per_optimizer_states[id(optimizer)]["found_inf_per_device"] = self._unscale_grads_(
            optimizer, dummy_inv_scale, found_inf, True
        )
        return self._per_optimizer_states[id(optimizer)]["found_inf_per_device"]

    def _found_inf_per_device(self, optimizer) -> dict:
        return self._per_optimizer_states[id(optimizer)]["found_inf_per_device"]


def _non_finite_check_and_unscale_(grads: list, found_inf: Tensor, inv_scale: Tensor) -> None:
    """PyTorch's _amp_foreach_non_finite_check_and_unscale_: ``found_inf`` set
    to 1 if any gradient holds an inf or a NaN, every gradient multiplied by
    ``inv_scale`` (in its own dtype, computed in float32 or wider)."""
    for grad in grads:
        non_finite = ops.any(ops.logical_not(ops.isfinite(grad)))
        found_inf.copy_(ops.where(non_finite, 1.0, found_inf))
        grad.mul_(inv_scale)


def _update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor, interval):
    """PyTorch's _amp_update_scale_: with ``found_inf`` nonzero, the scale
    times ``backoff_factor`` and the count of good steps back to 0; else the
    count plus one, and once it reaches ``interval`` the scale times
    ``growth_factor`` (unless that overflows float32) and the count 0. The
    products in float64, rounded to float32 once, as PyTorch's kernel."""
    with no_grad():
        found = found_inf != 0
        successful = growth_tracker + 1
        grows = ops.logical_and(ops.logical_not(found), successful == interval)
        wide = ops.to(scale, dtypes.float64)
        backed_off = ops.to(wide * backoff_factor, dtypes.float32)
        grown = ops.to(wide * growth_factor, dtypes.float32)
        grown = ops.where(ops.isfinite(grown), grown, scale)
        scale.copy_(ops.where(found, backed_off, ops.where(grows, grown, scale)))
        growth_tracker.copy_(ops.where(ops.logical_or(found, grows), 0, successful))
