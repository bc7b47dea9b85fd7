"""``torch.nn.utils.rnn``: batches of sequences of different lengths, padded to
one length or packed time step by time step, as PyTorch lays them out.

A ``PackedSequence`` holds the sequences' elements by time step: the elements
of step 0 of every sequence, then those of step 1 of the sequences that long,
and so on, with ``batch_sizes[t]`` the number at step t. The sequences are in
decreasing order of length; ``sorted_indices`` says where each came from
(None when they were given sorted). Every conversion is made of slices,
concatenations and stacks, so gradients flow through it.
"""

from __future__ import annotations

import itertools
from collections import namedtuple
from collections.abc import Iterable

from ...eager import creation, ops
from ...eager.tensor import Tensor
from ...ir import dtypes

__all__ = [
    "PackedSequence",
    "invert_permutation",
    "pack_padded_sequence",
    "pack_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpack_sequence",
    "unpad_sequence",
]


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    if permutation is None:
        return None
    inverse = creation.empty_like(permutation)
    inverse[permutation] = creation.arange(permutation.numel())
    return inverse


class PackedSequence(
    namedtuple("PackedSequence_", "data batch_sizes sorted_indices unsorted_indices")
):
    """``(data, batch_sizes, sorted_indices, unsorted_indices)``; made by
    ``pack_padded_sequence`` and ``pack_sequence``, taken and given back by
    the recurrent layers. ``unsorted_indices`` defaults to the inverse of
    ``sorted_indices``."""

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:  # PyTorch's older spelling: (data, batch_sizes) as one pair
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> PackedSequence:
        """The same packing with ``data`` converted (a dtype); the sizes and
        indices stay int64 on the CPU."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def float(self) -> PackedSequence:
        return self.to(dtype=dtypes.float32)

    def double(self) -> PackedSequence:
        return self.to(dtype=dtypes.float64)

    def cpu(self) -> PackedSequence:
        return self

    @property
    def is_cuda(self) -> bool:
        return False


def _int64_sizes(lengths) -> list:
    if isinstance(lengths, Tensor):
        return [int(n) for n in lengths.tolist()]
    return [int(n) for n in lengths]


def pack_padded_sequence(
    input: Tensor, lengths, batch_first: bool = False, enforce_sorted: bool = True
) -> PackedSequence:
    """Packs ``input`` (time, batch, *) (or batch first) holding sequences of
    the given ``lengths``, longest first unless ``enforce_sorted=False``."""
    lengths = _int64_sizes(lengths)
    batch_dim = 0 if batch_first else 1
    sorted_indices = None
    if not enforce_sorted:
        order = sorted(range(len(lengths)), key=lambda k: -lengths[k])  # stable, as torch.sort
        sorted_indices = creation.tensor(order, dtype=dtypes.int64)
        lengths = [lengths[k] for k in order]
        input = ops.index_select(input, batch_dim, sorted_indices)
    if input.numel() == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    if len(lengths) != input.shape[batch_dim]:
        raise RuntimeError(
            f"Expected `len(lengths)` to be equal to batch_size, but got {len(lengths)} "
            f"(batch_size={input.shape[batch_dim]})"
        )
    if lengths[-1] <= 0:
        raise RuntimeError(
            "Length of all samples has to be greater than 0, but found an element in 'lengths' "
            "that is <= 0"
        )
    if any(later > earlier for earlier, later in itertools.pairwise(lengths)):
        raise RuntimeError(
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
            "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
            "to sidestep this requirement if you do not need ONNX exportability."
        )
    if batch_first:
        input = ops.transpose(input, 0, 1)
    batch_sizes = [sum(1 for n in lengths if n > t) for t in range(lengths[0])]
    data = ops.cat([input[t, :size] for t, size in enumerate(batch_sizes)], 0)
    return PackedSequence(data, creation.tensor(batch_sizes, dtype=dtypes.int64), sorted_indices)


def pad_packed_sequence(
    sequence: PackedSequence,
    batch_first: bool = False,
    padding_value: float = 0.0,
    total_length: int | None = None,
) -> tuple:
    """The inverse of ``pack_padded_sequence``: (padded tensor, lengths), the
    sequences back in their original order, padded to ``total_length`` steps
    if it is given, else to the longest."""
    data, batch_sizes, _, unsorted_indices = sequence
    sizes = _int64_sizes(batch_sizes)
    steps = len(sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in "
                f"input, but got total_length={total_length} and max sequence length being {steps}"
            )
        steps = total_length
    batch, features = sizes[0], tuple(data.shape[1:])
    rows, start = [], 0
    for size in sizes:
        block = data[start : start + size]
        start += size
        if size < batch:
            padding = creation.full((batch - size, *features), padding_value, dtype=data.dtype)
            block = ops.cat([block, padding], 0)
        rows.append(block)
    if steps > len(sizes):
        rows.append(
            creation.full((steps - len(sizes), batch, *features), padding_value, dtype=data.dtype)
        )
        padded = ops.cat([ops.stack(rows[:-1], 0), rows[-1]], 0)
    else:
        padded = ops.stack(rows, 0)
    lengths = creation.tensor(
        [sum(1 for s in sizes if s > k) for k in range(batch)], dtype=dtypes.int64
    )
    if batch_first:
        padded = ops.transpose(padded, 0, 1)
    if unsorted_indices is not None:
        padded = ops.index_select(padded, 0 if batch_first else 1, unsorted_indices)
        lengths = lengths[unsorted_indices]
    return padded, lengths


def pad_sequence(
    sequences,
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Tensor:
    """Stacks sequences of shapes (length_k, *) into (longest, batch, *) (or
    batch first), each padded with ``padding_value`` on ``padding_side``."""
    if isinstance(sequences, Tensor):
        sequences = ops.unbind(sequences, 0)
    elif not isinstance(sequences, Iterable):
        raise RuntimeError(
            "pad_sequence: Expected iterable for input sequences, but got arg of type: "
            f"{type(sequences)}"
        )
    sequences = tuple(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise ValueError(
            f"Expected padding_side to be one of left or right, but got {padding_side}."
        )
    longest = max(s.shape[0] for s in sequences)
    features, dtype = tuple(sequences[0].shape[1:]), sequences[0].dtype
    padded = []
    for seq in sequences:
        missing = longest - seq.shape[0]
        if missing:
            padding = creation.full((missing, *features), padding_value, dtype=dtype)
            seq = ops.cat([seq, padding] if padding_side == "right" else [padding, seq], 0)
        padded.append(seq)
    return ops.stack(padded, 0 if batch_first else 1)


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Packs a list of sequences (length_k, *), longest first unless
    ``enforce_sorted=False``."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list:
    """The sequences ``pad_sequence`` stacked, each cut to its length."""
    if not batch_first:
        padded_sequences = ops.transpose(padded_sequences, 0, 1)
    return [seq[:length] for seq, length in zip(padded_sequences, _int64_sizes(lengths))]


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """The sequences ``pack_sequence`` packed, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
