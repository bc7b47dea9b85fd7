"""Recurrent layers ``RNN``, ``LSTM``, ``GRU`` and their cells, with PyTorch's
parameter names (``weight_ih_l0``, ``bias_hh_l1_reverse``, ...), gate order
(LSTM: input, forget, cell, output; GRU: reset, update, new) and arithmetic:
a layer multiplies its whole input sequence by ``weight_ih`` at once, then
steps through time adding the hidden state's product. Under jit the loop over
time unrolls into the trace. A layer takes a ``PackedSequence`` too, and gives
one back: at each time step only the sequences that long take a step, and
the others keep their state."""

from __future__ import annotations

import itertools
import math
import warnings

from ...eager import creation, ops
from ...eager.tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from .module import Module, check_device

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _lstm_cell(input_gates, state, w_hh, b_hh, w_hr=None):
    h, c = state
    gates = F.linear(h, w_hh, b_hh) + input_gates
    i, f, g, o = ops.chunk(gates, 4, 1)
    c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
    h = ops.sigmoid(o) * ops.tanh(c)
    if w_hr is not None:  # LSTM with projections: the hidden state is projected down
        h = ops.matmul(h, ops.t(w_hr))
    return h, c


def _gru_cell(input_gates, state, w_hh, b_hh):
    (h,) = state
    input_reset, input_update, input_new = ops.chunk(input_gates, 3, 1)
    hidden_reset, hidden_update, hidden_new = ops.chunk(F.linear(h, w_hh, b_hh), 3, 1)
    reset = ops.sigmoid(hidden_reset + input_reset)
    update = ops.sigmoid(hidden_update + input_update)
    new = ops.tanh(input_new + hidden_new * reset)
    return ((h - new) * update + new,)


def _rnn_cell(input_gates, state, w_hh, b_hh, relu=False):
    (h,) = state
    total = F.linear(h, w_hh, b_hh) + input_gates
    return (ops.relu(total) if relu else ops.tanh(total),)


def _advance(cell, input_gates, state, weights) -> tuple:
    """One time step of the first ``len(input_gates)`` sequences of the batch
    (the running ones: a packed batch is sorted longest first); the others
    keep their state. The new state, and the running sequences' output."""
    running = input_gates.shape[0]
    if running == state[0].shape[0]:
        state = cell(input_gates, state, *weights)
        return state, state[0]
    stepped = cell(input_gates, tuple(s[:running] for s in state), *weights)
    return tuple(ops.cat([new, old[running:]], 0) for new, old in zip(stepped, state)), stepped[0]


def _cell(mode: str):
    if mode == "LSTM":
        return _lstm_cell
    if mode == "GRU":
        return _gru_cell
    return lambda x, state, w_hh, b_hh: _rnn_cell(x, state, w_hh, b_hh, mode == "RNN_RELU")


def _time_steps(values: Tensor, batch_sizes: list | None) -> list:
    """Each time step's rows of ``values``: (time, batch, *) indexed by time,
    or packed rows cut by the batch sizes."""
    if batch_sizes is None:
        return [values[t] for t in range(values.shape[0])]
    starts = itertools.accumulate(batch_sizes, initial=0)
    return [values[start : start + size] for start, size in zip(starts, batch_sizes)]


class RNNBase(Module):
    """The layers, directions and parameters shared by RNN, LSTM and GRU."""

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        check_device(device)
        if (
            not isinstance(dropout, (int, float))
            or isinstance(dropout, bool)
            or not 0 <= dropout <= 1
        ):
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the probability of "
                "an element being zeroed"
            )
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                f"dropout expects num_layers greater than 1, but got dropout={dropout} and "
                f"num_layers={num_layers}",
                stacklevel=2,
            )
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError(
                "proj_size should be a positive integer or zero to disable projections"
            )
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode = mode
        self.input_size, self.hidden_size = input_size, hidden_size
        self.num_layers, self.bias = num_layers, bias
        self.batch_first, self.dropout = batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        gate_size = _GATES[mode] * hidden_size
        output_size = proj_size or hidden_size
        self._flat_weights_names = []
        for layer in range(num_layers):
            for direction in range(self._directions):
                layer_input = input_size if layer == 0 else output_size * self._directions
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = {
                    "weight_ih": (gate_size, layer_input),
                    "weight_hh": (gate_size, output_size),
                }
                if bias:
                    shapes.update(bias_ih=(gate_size,), bias_hh=(gate_size,))
                if proj_size:
                    shapes["weight_hr"] = (proj_size, hidden_size)
                for kind, shape in shapes.items():
                    setattr(self, kind + suffix, Parameter(creation.empty(shape, dtype=dtype)))
                    self._flat_weights_names.append(kind + suffix)
        self.reset_parameters()

    @property
    def _directions(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def all_weights(self) -> list:
        per_layer = len(self._flat_weights_names) // (self.num_layers * self._directions)
        names = self._flat_weights_names
        return [
            [getattr(self, name) for name in names[k : k + per_layer]]
            for k in range(0, len(names), per_layer)
        ]

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def flatten_parameters(self) -> None:
        """Packs the weights into one buffer for cuDNN in PyTorch; on the CPU
        there is nothing to pack, in PyTorch as here."""

    def _weights(self, layer: int, direction: int) -> tuple:
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        read = lambda kind: getattr(self, kind + suffix, None)  # noqa: E731
        extra = (read("weight_hr"),) if self.proj_size else ()
        return read("weight_ih"), read("bias_ih"), read("weight_hh"), read("bias_hh"), extra

    def _state_shapes(self, batch: int) -> list:
        """The expected (num_layers * directions, batch, size) of each state tensor."""
        layers = self.num_layers * self._directions
        if self.mode == "LSTM":
            return [
                (layers, batch, self.proj_size or self.hidden_size),
                (layers, batch, self.hidden_size),
            ]
        return [(layers, batch, self.hidden_size)]

    def _prepare(self, input: Tensor, hx):
        """(input as (time, batch, features), the state tensors, whether batched)."""
        name = type(self).__name__
        if input.dim() not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D instead")
        batched = input.dim() == 3
        states = [] if hx is None else list(hx) if isinstance(hx, (tuple, list)) else [hx]
        if not batched:
            if any(s.dim() != 2 for s in states):
                raise RuntimeError(
                    f"For unbatched 2-D input, hx{' and cx' if len(states) > 1 else ''} should "
                    f"also be 2-D but got ({', '.join(f'{s.dim()}-D' for s in states)}) tensors"
                )
            input = ops.unsqueeze(input, 0 if self.batch_first else 1)
            states = [ops.unsqueeze(s, 1) for s in states]
        elif any(s.dim() != 3 for s in states):
            raise RuntimeError(
                f"For batched 3-D input, hx{' and cx' if len(states) > 1 else ''} should also "
                f"be 3-D but got ({', '.join(f'{s.dim()}-D' for s in states)}) tensors"
            )
        if self.batch_first:
            input = ops.transpose(input, 0, 1)
        self._check_input_size(input)
        if input.shape[0] == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        return input, self._initial_states(states, input.shape[1], input.dtype), batched

    def _check_input_size(self, input: Tensor) -> None:
        if input.shape[-1] != self.input_size:
            raise RuntimeError(
                f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                f"got {input.shape[-1]}"
            )

    def _initial_states(self, states: list, batch: int, dtype) -> list:
        """The state tensors given, checked, or zeros."""
        shapes = self._state_shapes(batch)
        if not states:
            states = [creation.zeros(shape, dtype=dtype) for shape in shapes]
        for k, (state, shape) in enumerate(zip(states, shapes)):
            if tuple(state.shape) != shape:
                which = f"hidden[{k}]" if self.mode == "LSTM" else "hidden"
                raise RuntimeError(f"Expected {which} size {shape}, got {list(state.shape)}")
        return states

    def _run(self, input: Tensor, hx):
        """(output, final states) for ``forward``, in the caller's layout."""
        if isinstance(input, PackedSequence):
            return self._run_packed(input, hx)
        sequence, states, batched = self._prepare(input, hx)
        sequence, final = self._layers(sequence, states, None)
        if self.batch_first:
            sequence = ops.transpose(sequence, 0, 1)
        if not batched:
            sequence = ops.squeeze(sequence, 0 if self.batch_first else 1)
            final = [ops.squeeze(f, 1) for f in final]
        return sequence, final

    def _run_packed(self, packed: PackedSequence, hx):
        """(output, final states) for a packed input: the output packed alike,
        the states (given and final) in the sequences' original order."""
        data, batch_sizes, sorted_indices, unsorted_indices = packed
        if data.dim() != 2:
            raise RuntimeError(f"input must have 2 dimensions, got {data.dim()}")
        self._check_input_size(data)
        states = [] if hx is None else list(hx) if isinstance(hx, (tuple, list)) else [hx]
        if sorted_indices is not None:
            states = [ops.index_select(s, 1, sorted_indices) for s in states]
        sizes = [int(size) for size in batch_sizes.tolist()]
        states = self._initial_states(states, sizes[0], data.dtype)
        sequence, final = self._layers(data, states, sizes)
        if unsorted_indices is not None:
            final = [ops.index_select(f, 1, unsorted_indices) for f in final]
        return PackedSequence(sequence, batch_sizes, sorted_indices, unsorted_indices), final

    def _layers(self, sequence: Tensor, states: list, batch_sizes: list | None):
        """The layers over ``sequence``: (time, batch, features), or packed
        (rows, features) with ``batch_sizes`` sequences at each time step.
        (Their output, alike; the final states.)"""
        cell = _cell(self.mode)
        finals = []  # per layer and direction: the final state tensors
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(self._directions):
                index = layer * self._directions + direction
                w_ih, b_ih, w_hh, b_hh, extra = self._weights(layer, direction)
                # every step's input share of the gates in one product
                input_gates = F.linear(sequence, w_ih, b_ih)
                state = tuple(s[index] for s in states)
                steps = _time_steps(input_gates, batch_sizes)
                hidden = [None] * len(steps)
                for t in reversed(range(len(steps))) if direction else range(len(steps)):
                    state, hidden[t] = _advance(cell, steps[t], state, (w_hh, b_hh, *extra))
                outputs.append(ops.stack(hidden, 0) if batch_sizes is None else ops.cat(hidden, 0))
                finals.append(state)
            sequence = outputs[0] if len(outputs) == 1 else ops.cat(outputs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                sequence = F.dropout(sequence, self.dropout, True)
        return sequence, [ops.stack([f[k] for f in finals], 0) for k in range(len(states))]

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            text += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if self.bias is not True:
            text += f", bias={self.bias}"
        if self.batch_first is not False:
            text += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            text += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            text += f", bidirectional={self.bidirectional}"
        return text


class RNN(RNNBase):
    """h_t = tanh(x_t W_ih^T + b_ih + h_(t-1) W_hh^T + b_hh) (or relu), per layer."""

    def __init__(self, *args, nonlinearity: str = "tanh", **kwargs):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(
                f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'."
            )
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)

    def forward(self, input: Tensor, hx: Tensor | None = None):
        output, (h,) = self._run(input, hx)
        return output, h


class LSTM(RNNBase):
    """Long short-term memory: ``forward(input, (h_0, c_0))`` returns
    ``(output, (h_n, c_n))``; the states default to zeros."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input: Tensor, hx=None):
        output, (h, c) = self._run(input, hx)
        return output, (h, c)


class GRU(RNNBase):
    """Gated recurrent unit: ``forward(input, h_0)`` returns ``(output, h_n)``."""

    def __init__(self, *args, **kwargs):
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input: Tensor, hx: Tensor | None = None):
        output, (h,) = self._run(input, hx)
        return output, h


class RNNCellBase(Module):
    """One step of a recurrent layer: ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``."""

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device, dtype
    ):
        super().__init__()
        check_device(device)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        gates = num_chunks * hidden_size
        self.weight_ih = Parameter(creation.empty(gates, input_size, dtype=dtype))
        self.weight_hh = Parameter(creation.empty(gates, hidden_size, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(creation.empty(gates, dtype=dtype))
            self.bias_hh = Parameter(creation.empty(gates, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    def _prepare(self, input: Tensor, hx, count: int):
        """(input with a batch dimension, the state tensors, whether batched)."""
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        states = [] if hx is None else list(hx) if isinstance(hx, (tuple, list)) else [hx]
        for k, state in enumerate(states):
            if state.dim() not in (1, 2):
                which = f"hx[{k}]" if count > 1 else "hidden"
                raise ValueError(
                    f"{name}: Expected {which} to be 1D or 2D, got {state.dim()}D instead"
                )
        batched = input.dim() == 2
        if not batched:
            input = ops.unsqueeze(input, 0)
            states = [ops.unsqueeze(s, 0) for s in states]
        if input.shape[1] != self.input_size:
            raise RuntimeError(
                f"input has inconsistent input_size: got {input.shape[1]} expected "
                f"{self.input_size}"
            )
        if not states:
            zeros = creation.zeros(input.shape[0], self.hidden_size, dtype=input.dtype)
            states = [zeros] * count
        return input, tuple(states), batched

    def _step(self, cell, input: Tensor, hx, count: int) -> tuple:
        input, states, batched = self._prepare(input, hx, count)
        input_gates = F.linear(input, self.weight_ih, self.bias_ih)
        out = cell(input_gates, states, self.weight_hh, self.bias_hh)
        return out if batched else tuple(ops.squeeze(s, 0) for s in out)

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            text += f", bias={self.bias}"
        nonlinearity = getattr(self, "nonlinearity", "tanh")
        if nonlinearity != "tanh":
            text += f", nonlinearity={nonlinearity}"
        return text


class RNNCell(RNNCellBase):
    def __init__(
        self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None
    ):
        if nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        relu = self.nonlinearity == "relu"
        cell = lambda x, s, w, b: _rnn_cell(x, s, w, b, relu)  # noqa: E731
        return self._step(cell, input, hx, 1)[0]


class LSTMCell(RNNCellBase):
    """One LSTM step: ``forward(input, (h, c))`` returns ``(h', c')``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Tensor, hx=None) -> tuple:
        return self._step(_lstm_cell, input, hx, 2)


class GRUCell(RNNCellBase):
    """One GRU step: ``forward(input, h)`` returns ``h'``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._step(_gru_cell, input, hx, 1)[0]
