"""fusegrad.save / fusegrad.load: what round-trips, and what a default load refuses."""

import io
import pickle
import zipfile
from collections import Counter, OrderedDict

import numpy as np
import pytest

import fusegrad as fg
import fusegrad.nn as nn
from fusegrad import serialization


class Custom:
    def __init__(self, value=3):
        self.value = value


class RunsCode:
    def __reduce__(self):
        return (print, ("a pickle ran this",))


def round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    fg.save(obj, buffer)
    buffer.seek(0)
    return fg.load(buffer, **load_kwargs)


@pytest.mark.parametrize("dtype", [fg.float32, fg.float64, fg.int64, fg.int32, fg.bool])
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3)])
def test_tensors_round_trip_with_dtype_shape_and_values(dtype, shape):
    values = np.arange(int(np.prod(shape))).reshape(shape) % 3
    t = fg.tensor(values, dtype=dtype)
    loaded = round_trip(t)
    assert loaded.dtype == dtype and loaded.shape == t.shape
    np.testing.assert_array_equal(loaded.numpy(), t.numpy())


def test_containers_numbers_strings_and_tensor_flags_round_trip():
    w = fg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    obj = {
        "nested": [1, 2.5, "three", None, True, (4, [5])],
        "ordered": OrderedDict(b=1, a=2),
        "counts": Counter([1, 1, 2]),
        "weight": w,
        "transposed": w.detach().t(),
        "parameter": nn.Parameter(fg.ones(2)),
        "dtype": fg.float64,
        "size": w.shape,
        "device": fg.device("cpu"),
        "set": {1, 2},
    }
    loaded = round_trip(obj)
    assert loaded["nested"] == [1, 2.5, "three", None, True, (4, [5])]
    assert isinstance(loaded["ordered"], OrderedDict) and list(loaded["ordered"]) == ["b", "a"]
    assert loaded["counts"] == Counter([1, 1, 2])
    assert loaded["weight"].requires_grad and loaded["weight"].is_leaf
    assert loaded["weight"].tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert loaded["transposed"].tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert isinstance(loaded["parameter"], nn.Parameter)
    assert loaded["dtype"] is fg.float64 and loaded["size"] == fg.Size([2, 2])
    assert loaded["device"] == fg.device("cpu") and loaded["set"] == {1, 2}


def test_a_tensor_saved_twice_loads_as_one_and_loads_are_independent_copies():
    t = fg.ones(3)
    loaded = round_trip({"a": t, "b": [t]})
    assert loaded["a"] is loaded["b"][0]
    loaded["a"].add_(1)
    assert t.tolist() == [1.0, 1.0, 1.0]


def test_paths_and_file_objects(tmp_path):
    path = tmp_path / "model.pt"
    model = nn.Linear(3, 2)
    fg.save(model.state_dict(), path)
    other = nn.Linear(3, 2)
    other.load_state_dict(fg.load(str(path)))
    assert fg.equal(other.weight, model.weight) and fg.equal(other.bias, model.bias)
    with open(path, "rb") as f:
        assert list(fg.load(f)) == ["weight", "bias"]
    with pytest.raises(FileNotFoundError):
        fg.load(tmp_path / "missing.pt")


def test_a_default_load_refuses_other_globals_and_runs_no_code(capsys):
    with pytest.raises(pickle.UnpicklingError, match=r"Unsupported global: GLOBAL .*Custom"):
        round_trip({"x": Custom()})
    with pytest.raises(pickle.UnpicklingError, match=r"builtins\.print"):
        round_trip(RunsCode())
    assert "a pickle ran this" not in capsys.readouterr().out
    assert round_trip({"x": Custom(5)}, weights_only=False)["x"].value == 5


def test_safe_globals_allow_a_class():
    with serialization.safe_globals([Custom]):
        assert round_trip(Custom(7)).value == 7
    with pytest.raises(pickle.UnpicklingError):
        round_trip(Custom())
    serialization.add_safe_globals([Custom])
    try:
        assert serialization.get_safe_globals() == [Custom]
        assert round_trip(Custom(8)).value == 8
    finally:
        serialization.clear_safe_globals()


def test_map_location_to_the_cpu_only():
    t = fg.ones(2)
    assert round_trip(t, map_location="cpu").tolist() == [1.0, 1.0]
    assert round_trip(t, map_location=fg.device("cpu")).tolist() == [1.0, 1.0]
    assert round_trip(t, map_location={"cuda:0": "cpu"}).tolist() == [1.0, 1.0]
    assert round_trip(t, map_location=lambda storage, location: storage * 2).tolist() == [2, 2]
    with pytest.raises(RuntimeError, match="CUDA"):
        round_trip(t, map_location="cuda")


def test_files_not_written_by_save_are_refused(tmp_path):
    with pytest.raises(RuntimeError, match=r"not a file written by fusegrad\.save"):
        fg.load(io.BytesIO(b"not a zip"))
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({}))
    archive.seek(0)
    with pytest.raises(RuntimeError, match=r"not a file written by fusegrad\.save"):
        fg.load(archive)


@pytest.mark.parametrize("weights_only", [True, False])
def test_a_file_saved_before_the_eager_package_moved_loads(weights_only):
    """Sizes and devices were pickled as fusegrad.tracer.tensor.Size and
    fusegrad.tracer.devices.device; those modules are fusegrad.eager's now."""
    buffer = io.BytesIO()
    fg.save({"shape": fg.Size([2, 3]), "device": fg.device("cpu")}, buffer)
    with zipfile.ZipFile(buffer) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    data = files["archive/data.pkl"]
    for now, then in [
        (b"fusegrad.eager.tensor", b"fusegrad.tracer.tensor"),
        (b"fusegrad.eager.devices", b"fusegrad.tracer.devices"),
    ]:
        assert now in data
        data = data.replace(now, then)  # protocol 2 writes a module name on a line of its own
    files["archive/data.pkl"] = data
    old = io.BytesIO()
    with zipfile.ZipFile(old, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    old.seek(0)
    loaded = fg.load(old, weights_only=weights_only)
    assert loaded == {"shape": fg.Size([2, 3]), "device": fg.device("cpu")}
