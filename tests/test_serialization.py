"""fusegrad.save / fusegrad.load: what round-trips, and what a default load refuses."""

import io
import pickle
import zipfile
from collections import Counter, OrderedDict
from pathlib import Path
from typing import ClassVar

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


# ------------------------------------------------------- PyTorch's checkpoints

GOLDEN = Path(__file__).parent / "golden"


def check_the_golden_state_dict(state):
    """What tests/golden/torch_state_dict*.pt hold: real torch.save output."""
    assert isinstance(state, OrderedDict)
    expected = {
        "linear.weight": (fg.float32, np.arange(6.0).reshape(2, 3) / 4),
        "linear.bias": (fg.float32, [-1.5, 2.0]),
        "half": (fg.float16, [0.5, -1.0, 65504.0]),
        "bf16": (fg.bfloat16, [1.5, -2.25]),
        "steps": (fg.int64, np.array(7)),
        "mask": (fg.bool, [True, False, True]),
        "bytes": (fg.uint8, [0, 128, 255]),
        "base": (fg.float64, np.arange(8.0)),
        "every_other": (fg.float64, np.arange(0.0, 8.0, 2)),  # a strided view of base's storage
        "transposed": (fg.int32, np.arange(6).reshape(2, 3).T),
    }
    assert list(state) == list(expected)
    for name, (dtype, values) in expected.items():
        assert state[name].dtype == dtype, name
        np.testing.assert_array_equal(state[name].float().numpy(), np.asarray(values, np.float32))
        assert not state[name].requires_grad


@pytest.mark.parametrize("name", ["torch_state_dict.pt", "torch_state_dict_legacy.pt"])
def test_reads_a_state_dict_that_torch_save_wrote(name):
    check_the_golden_state_dict(fg.load(GOLDEN / name))
    with open(GOLDEN / name, "rb") as f:
        check_the_golden_state_dict(fg.load(f, map_location="cpu"))


def test_a_pytorch_state_dict_loads_into_a_module():
    state = fg.load(GOLDEN / "torch_state_dict.pt")
    linear = nn.Linear(3, 2)
    linear.load_state_dict({"weight": state["linear.weight"], "bias": state["linear.bias"]})
    np.testing.assert_array_equal(linear(fg.ones(1, 3)).detach().numpy(), [[0.75 - 1.5, 3.0 + 2.0]])


class TorchName:
    """A name in torch, for a pickle that refers to it without torch imported."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):
        raise TypeError("only pickled: pickle takes a reduce's function to be callable")


class TorchTensor:
    """A tensor as torch pickles one: ``_rebuild_tensor_v2`` of a storage."""

    def __init__(self, storage, offset, size, stride, requires_grad=False):
        self.args = (storage, offset, size, stride, requires_grad, OrderedDict())

    def __reduce__(self):
        return TorchName("torch._utils", "_rebuild_tensor_v2"), self.args


class TorchParameter:
    def __init__(self, tensor):
        self.tensor = tensor

    def __reduce__(self):
        return TorchName("torch._utils", "_rebuild_parameter"), (self.tensor, True, OrderedDict())


class Storage:
    def __init__(self, key, values: np.ndarray, location="cpu"):
        self.key, self.values, self.location = key, values, location


class TorchPickler(pickle._Pickler):
    """Pickles as torch.save does: storages as persistent ids, torch's names
    as globals (written out, as the module is not to be imported)."""

    dispatch: ClassVar[dict] = dict(pickle._Pickler.dispatch)
    dispatch[TorchName] = lambda self, obj: self.write(
        pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode()
    )

    def __init__(self, file, storages):
        super().__init__(file, protocol=2)
        self.storages = storages

    def persistent_id(self, obj):
        if not isinstance(obj, Storage):
            return None
        self.storages[obj.key] = obj.values
        storage_type = {np.float32: "FloatStorage", np.int64: "LongStorage"}[obj.values.dtype.type]
        return ("storage", TorchName("torch", storage_type), obj.key, obj.location, obj.values.size)


def pytorch_zip(obj, prefix="checkpoint") -> io.BytesIO:
    """``obj`` in the zip format of torch.save."""
    storages: dict = {}
    data = io.BytesIO()
    TorchPickler(data, storages).dump(obj)
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(f"{prefix}/data.pkl", data.getvalue())
        z.writestr(f"{prefix}/byteorder", "little")
        for key, values in storages.items():
            z.writestr(
                f"{prefix}/data/{key}", values.astype(values.dtype.newbyteorder("<")).tobytes()
            )
        z.writestr(f"{prefix}/version", "3\n")
    archive.seek(0)
    return archive


def test_a_handwritten_pytorch_zip_with_shared_storage_and_a_parameter():
    shared = Storage("0", np.arange(6, dtype=np.float32))
    checkpoint = {
        "matrix": TorchTensor(shared, 0, (2, 3), (3, 1)),
        "column": TorchTensor(shared, 1, (2,), (3,)),
        "weight": TorchParameter(TorchTensor(Storage("1", np.array([5], np.float32)), 0, (), ())),
        "steps": TorchTensor(Storage("2", np.array([7], np.int64)), 0, (), ()),
        "epoch": 3,
    }
    loaded = fg.load(pytorch_zip(checkpoint))
    assert loaded["matrix"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert loaded["column"].tolist() == [1, 4]
    assert isinstance(loaded["weight"], nn.Parameter) and loaded["weight"].requires_grad
    assert loaded["weight"].item() == 5
    assert loaded["steps"].dtype == fg.int64 and loaded["steps"].item() == 7
    assert loaded["epoch"] == 3


def test_a_pytorch_checkpoint_saved_on_cuda_needs_a_map_location():
    checkpoint = {"w": TorchTensor(Storage("0", np.ones(2, np.float32), "cuda:0"), 0, (2,), (1,))}
    with pytest.raises(RuntimeError, match=r"map_location=torch.device\('cpu'\)"):
        fg.load(pytorch_zip(checkpoint))
    for map_location in ("cpu", {"cuda:0": "cpu"}, lambda tensor, location: tensor * 2):
        assert fg.load(pytorch_zip(checkpoint), map_location=map_location)["w"].sum().item() >= 2


def test_a_pytorch_checkpoint_of_other_objects_needs_weights_only_false():
    checkpoint = {"when": TorchName("datetime", "date")}
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        fg.load(pytorch_zip(checkpoint))
    import datetime

    assert fg.load(pytorch_zip(checkpoint), weights_only=False) == {"when": datetime.date}


def test_a_torchscript_archive_is_refused_with_the_reason():
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        for name in ("data.pkl", "constants.pkl", "version", "code/__torch__.py"):
            z.writestr(f"model/{name}", b"")
    archive.seek(0)
    with pytest.raises(RuntimeError, match="TorchScript"):
        fg.load(archive)
