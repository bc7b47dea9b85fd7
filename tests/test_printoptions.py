"""torch.set_printoptions, read by the tensor printer."""

import pytest

import fusegrad as fg


@pytest.fixture(autouse=True)
def default_options():
    yield
    fg.set_printoptions(profile="default")


@pytest.mark.parametrize(
    "options, values, printed",
    [
        ({"precision": 2}, [1.23456, 2.5], "tensor([1.23, 2.50])"),
        ({"sci_mode": True}, [1.5, 2.5], "tensor([1.5000e+00, 2.5000e+00])"),
        # the widths of the scientific format the values chose stay, as in PyTorch
        ({"sci_mode": False}, [1e-6, 1.0], "tensor([    0.0000,     1.0000])"),
        ({"threshold": 5, "edgeitems": 1}, list(range(10)), "tensor([0,  ..., 9])"),
        ({"profile": "short"}, [1.23456, 2.5], "tensor([1.23, 2.50])"),
        ({"profile": "full"}, list(range(1001)), None),
        ({"linewidth": 30}, [1.5] * 4, "tensor([1.5000, 1.5000,\n        1.5000, 1.5000])"),
    ],
)
def test_options_shape_the_print(options, values, printed):
    fg.set_printoptions(**options)
    text = repr(fg.tensor(values))
    if printed is None:
        assert "..." not in text
    else:
        assert text == printed


def test_get_printoptions_and_the_default_profile():
    fg.set_printoptions(precision=7, sci_mode=True)
    assert fg.get_printoptions()["precision"] == 7 and fg.get_printoptions()["sci_mode"]
    fg.set_printoptions(profile="default")  # sci_mode is always set: back to None
    assert fg.get_printoptions() == {
        "precision": 4,
        "threshold": 1000,
        "edgeitems": 3,
        "linewidth": 80,
        "sci_mode": None,
    }
