"""The legacy Tensor.new: a tensor of the receiver's dtype."""

import pytest

import fusegrad as fg


@pytest.mark.parametrize(
    "args, kwargs, shape, values",
    [
        ((2, 3), {}, (2, 3), None),
        ((fg.Size([3, 1]),), {}, (3, 1), None),
        ((), {"size": (4,)}, (4,), None),
        ((), {}, (0,), []),
        (([1, 2],), {}, (2,), [1.0, 2.0]),
        (((2, 3),), {}, (2,), [2.0, 3.0]),  # a tuple is data, as in PyTorch
    ],
)
def test_new(args, kwargs, shape, values):
    made = fg.ones(1, dtype=fg.float64).new(*args, **kwargs)
    assert made.dtype == fg.float64 and tuple(made.shape) == shape
    assert not made.requires_grad
    if values is not None:
        assert made.tolist() == values
