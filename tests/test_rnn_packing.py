"""nn.utils.rnn: padding and packing sequences, and recurrent layers on packed input."""

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.nn.utils.rnn import (
    PackedSequence,
    pack_padded_sequence,
    pack_sequence,
    pad_packed_sequence,
    pad_sequence,
    unpack_sequence,
    unpad_sequence,
)


def _sequences(lengths, features=2):
    return [
        fg.arange(n * features, dtype=fg.float64).reshape(n, features) + 10 * k
        for k, n in enumerate(lengths)
    ]


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence(batch_first, padding_side):
    a, b = fg.tensor([1.0, 2.0, 3.0]), fg.tensor([4.0])
    padded = pad_sequence([a, b], batch_first, -1.0, padding_side)
    rows = [[1.0, 2.0, 3.0], [4.0, -1.0, -1.0] if padding_side == "right" else [-1.0, -1.0, 4.0]]
    assert padded.tolist() == (rows if batch_first else np.transpose(rows).tolist())


def test_packing_lays_sequences_out_by_time_step():
    packed = pack_sequence([fg.tensor([1, 2, 3]), fg.tensor([4, 5]), fg.tensor([6])])
    assert isinstance(packed, PackedSequence) and packed.data.tolist() == [1, 4, 6, 2, 5, 3]
    assert packed.batch_sizes.tolist() == [3, 2, 1] and packed.batch_sizes.dtype == fg.int64
    assert packed.sorted_indices is None and packed.unsorted_indices is None
    data, _, _, _ = packed  # a named tuple, as PyTorch's
    assert data is packed.data


@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_then_pad_gives_the_sequences_back_in_order(batch_first):
    sequences = _sequences([2, 4, 1])
    padded = pad_sequence(sequences, batch_first=batch_first)
    packed = pack_padded_sequence(padded, [2, 4, 1], batch_first, enforce_sorted=False)
    assert packed.sorted_indices.tolist() == [1, 0, 2]
    assert packed.unsorted_indices.tolist() == [1, 0, 2]
    again, lengths = pad_packed_sequence(packed, batch_first, total_length=5)
    assert lengths.tolist() == [2, 4, 1] and lengths.dtype == fg.int64
    expected = pad_sequence([*sequences, fg.zeros(5, 2, dtype=fg.float64)], batch_first)
    expected = expected[:3] if batch_first else expected[:, :3]  # without the 5-long one
    assert again.tolist() == expected.tolist()
    assert [s.tolist() for s in unpack_sequence(packed)] == [s.tolist() for s in sequences]
    assert [s.tolist() for s in unpad_sequence(padded, [2, 4, 1], batch_first)] == [
        s.tolist() for s in sequences
    ]


def test_gradients_flow_through_packing():
    x = fg.randn(3, 2, 4, dtype=fg.float64, requires_grad=True)
    packed = pack_padded_sequence(x, fg.tensor([3, 1]))
    padded, _ = pad_packed_sequence(packed, padding_value=7.0)
    (padded * padded).sum().backward()
    mask = np.zeros((3, 2, 1))
    mask[:, 0] = 1
    mask[0, 1] = 1
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.detach().numpy() * mask)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: pack_padded_sequence(fg.zeros(3, 2), [1, 3]),
            RuntimeError,
            "must be sorted in decreasing order when `enforce_sorted` is True",
        ),
        (
            lambda: pack_padded_sequence(fg.zeros(3, 2), [3, 0]),
            RuntimeError,
            "Length of all samples has to be greater than 0",
        ),
        (
            lambda: pack_padded_sequence(fg.zeros(3, 2), [3]),
            RuntimeError,
            r"Expected `len\(lengths\)` to be equal to batch_size, but got 1 \(batch_size=2\)",
        ),
        (
            lambda: pad_packed_sequence(pack_sequence([fg.ones(3)]), total_length=2),
            ValueError,
            "got total_length=2 and max sequence length being 3",
        ),
        (lambda: pad_sequence([]), RuntimeError, "received an empty list of sequences"),
        (lambda: pad_sequence(3), RuntimeError, "Expected iterable for input sequences"),
        (
            lambda: pad_sequence([fg.ones(2)], padding_side="up"),
            ValueError,
            "Expected padding_side to be one of left or right, but got up.",
        ),
    ],
)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("layer", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_a_packed_batch_runs_as_each_sequence_alone(layer, bidirectional):
    fg.manual_seed(0)
    rnn = getattr(fg.nn, layer)(
        3, 4, num_layers=2, bidirectional=bidirectional, batch_first=True, dtype=fg.float64
    )
    lengths = [2, 5, 3]
    sequences = [fg.randn(n, 3, dtype=fg.float64) for n in lengths]
    states = 2 * (2 if bidirectional else 1)
    h0 = fg.randn(states, 3, 4, dtype=fg.float64)
    hx = (h0, fg.randn(states, 3, 4, dtype=fg.float64)) if layer == "LSTM" else h0
    packed = pack_sequence(sequences, enforce_sorted=False)
    output, final = rnn(packed, hx)
    assert isinstance(output, PackedSequence) and output.batch_sizes is packed.batch_sizes
    padded, _ = pad_packed_sequence(output, batch_first=True)
    finals = final if layer == "LSTM" else (final,)
    for k, sequence in enumerate(sequences):
        alone_hx = tuple(s[:, k : k + 1] for s in (hx if layer == "LSTM" else (hx,)))
        alone, alone_final = rnn(sequence[None], alone_hx if layer == "LSTM" else alone_hx[0])
        np.testing.assert_allclose(
            padded[k, : lengths[k]].detach().numpy(), alone[0].detach().numpy()
        )
        alone_finals = alone_final if layer == "LSTM" else (alone_final,)
        for got, want in zip(finals, alone_finals):
            np.testing.assert_allclose(got[:, k].detach().numpy(), want[:, 0].detach().numpy())


def test_packed_lstm_gradients_match_finite_differences():
    fg.manual_seed(1)
    lstm = fg.nn.LSTM(2, 3, dtype=fg.float64)
    x = fg.randn(4, 3, 2, dtype=fg.float64, requires_grad=True)

    def loss(x):
        output, (h, c) = lstm(pack_padded_sequence(x, [4, 1, 3], enforce_sorted=False))
        return (output.data**2).sum() + h.sum() * c.sum()

    assert fg.autograd.gradcheck(loss, (x,))
