"""fusegrad.utils.data: datasets, samplers, DataLoader and collation, as PyTorch's."""

from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import fusegrad as fg
from fusegrad.utils.data import (
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    StackDataset,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    default_convert,
    get_worker_info,
    random_split,
)


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": np.array([i, i * i], dtype=np.float32), "label": i % 2, "name": f"s{i}"}


class Counting(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


def test_tensor_dataset_and_a_loader_with_a_short_last_batch():
    x, y = fg.arange(10.0).reshape(5, 2), fg.arange(5)
    data = TensorDataset(x, y)
    assert len(data) == 5 and data[1][0].tolist() == [2.0, 3.0] and data[1][1].item() == 1
    loader = DataLoader(data, batch_size=2)
    assert len(loader) == 3
    batches = list(loader)
    assert [len(b[0]) for b in batches] == [2, 2, 1]
    assert isinstance(batches[0], list) and batches[0][0].tolist() == [[0.0, 1.0], [2.0, 3.0]]
    assert batches[2][1].tolist() == [4] and batches[2][1].dtype == fg.int64
    dropped = DataLoader(data, batch_size=2, drop_last=True)
    assert len(dropped) == 2 and len(list(dropped)) == 2
    with pytest.raises(AssertionError, match="Size mismatch"):
        TensorDataset(fg.ones(3), fg.ones(4))


def test_default_collate_recurses_into_dicts_and_converts_numbers():
    batch = next(iter(DataLoader(Squares(4), batch_size=3)))
    assert batch["x"].tolist() == [[0.0, 0.0], [1.0, 1.0], [2.0, 4.0]]
    assert batch["x"].dtype == fg.float32
    assert batch["label"].tolist() == [0, 1, 0] and batch["label"].dtype == fg.int64
    assert batch["name"] == ["s0", "s1", "s2"]
    floats = default_collate([1.5, 2.5])
    assert floats.dtype == fg.float64
    assert default_collate([True, False]).dtype == fg.bool
    assert default_collate([np.float32(1), np.float32(2)]).dtype == fg.float32
    Point = namedtuple("Point", "x y")
    points = default_collate([Point(1, 2.0), Point(3, 4.0)])
    assert isinstance(points, Point) and points.x.tolist() == [1, 3]
    ordered = default_collate([OrderedDict(a=1), OrderedDict(a=2)])
    assert isinstance(ordered, OrderedDict)
    assert default_collate([[1, 2], [3, 4]])[0].tolist() == [1, 3]
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="batch must contain tensors"):
        default_collate([object()])
    with pytest.raises(TypeError, match="batch must contain tensors"):
        default_collate([np.array(["a"])])


def test_batch_size_none_converts_without_batching():
    loader = DataLoader(Squares(3), batch_size=None)
    first = next(iter(loader))
    assert isinstance(first["x"], fg.Tensor) and first["label"] == 0
    assert len(loader) == 3
    assert default_convert((np.ones(2), "a"))[1] == "a"


def test_shuffling_is_reproducible_with_manual_seed_and_differs_between_epochs():
    loader = DataLoader(TensorDataset(fg.arange(20)), batch_size=5, shuffle=True)
    fg.manual_seed(0)
    first = [b[0].tolist() for b in loader]
    second = [b[0].tolist() for b in loader]
    fg.manual_seed(0)
    assert [b[0].tolist() for b in loader] == first
    assert first != second
    assert sorted(i for batch in first for i in batch) == list(range(20))


def test_samplers():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    fg.manual_seed(1)
    order = list(RandomSampler(range(6)))
    assert sorted(order) == list(range(6))
    longer = list(RandomSampler(range(4), num_samples=10))
    assert len(longer) == 10 and sorted(longer[:4]) == [0, 1, 2, 3]
    drawn = list(RandomSampler(range(3), replacement=True, num_samples=70))
    assert len(drawn) == 70 and set(drawn) <= {0, 1, 2}
    assert sorted(SubsetRandomSampler([5, 7, 9])) == [5, 7, 9]
    assert list(BatchSampler(range(7), 3, drop_last=False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert len(BatchSampler(range(7), 3, drop_last=True)) == 2
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        BatchSampler(range(3), 0, False)
    with pytest.raises(TypeError, match="replacement should be a boolean"):
        RandomSampler(range(3), replacement=1)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        RandomSampler(range(3), num_samples=0)


def test_weighted_sampler_draws_in_proportion_and_never_a_zero_weight():
    fg.manual_seed(2)
    weights = [0.0, 1.0, 3.0, 0.0]
    draws = np.array(list(WeightedRandomSampler(weights, 4000)))
    assert set(draws) <= {1, 2}
    assert 0.72 < np.mean(draws == 2) < 0.78
    unique = list(WeightedRandomSampler([1.0, 0.0, 5.0, 2.0], 3, replacement=False))
    assert sorted(unique) == [0, 2, 3]
    with pytest.raises(RuntimeError, match="not enough non-negative category"):
        list(WeightedRandomSampler([1.0, 0.0], 2, replacement=False))
    with pytest.raises(ValueError, match="1d sequence"):
        WeightedRandomSampler([[1.0]], 1)


def test_datasets_combine_and_split():
    a, b = TensorDataset(fg.arange(3)), TensorDataset(fg.arange(10, 12))
    both = a + b
    assert isinstance(both, ConcatDataset) and len(both) == 5
    assert [both[i][0].item() for i in range(5)] == [0, 1, 2, 10, 11]
    assert both[-1][0].item() == 11
    sub = Subset(both, [4, 0])
    assert len(sub) == 2 and sub[0][0].item() == 11
    stacked = StackDataset(a, a)
    assert stacked[1][0][0].item() == 1 and len(stacked) == 3
    assert list(ChainDataset([Counting(2), Counting(3)])) == [0, 1, 0, 1, 2]
    with pytest.raises(AssertionError, match="IterableDataset"):
        ConcatDataset([Counting(2)])


def test_random_split_by_lengths_and_fractions():
    data = TensorDataset(fg.arange(10))
    fg.manual_seed(3)
    parts = random_split(data, [7, 3])
    assert [len(p) for p in parts] == [7, 3]
    assert sorted(parts[0].indices + parts[1].indices) == list(range(10))
    fg.manual_seed(3)
    assert random_split(data, [7, 3])[0].indices == parts[0].indices
    assert [len(p) for p in random_split(data, [0.5, 0.25, 0.25])] == [6, 2, 2]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(data, [5, 6])


def test_iterable_datasets_batch_in_order():
    loader = DataLoader(Counting(7), batch_size=3)
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5], [6]]
    assert len(loader) == 3
    assert len(list(DataLoader(Counting(7), batch_size=3, drop_last=True))) == 2
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        DataLoader(Counting(3), shuffle=True)


def test_workers_load_in_this_process_with_the_same_batches():
    data = TensorDataset(fg.arange(10))
    plain = [b[0].tolist() for b in DataLoader(data, batch_size=4)]
    workers = DataLoader(
        data, batch_size=4, num_workers=2, pin_memory=True, persistent_workers=True
    )
    assert [b[0].tolist() for b in workers] == plain
    assert get_worker_info() is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_workers": -1}, "num_workers option should be non-negative"),
        ({"prefetch_factor": 2}, "prefetch_factor option could only be specified"),
        ({"persistent_workers": True}, "persistent_workers option needs num_workers > 0"),
        ({"sampler": [0, 1], "shuffle": True}, "mutually exclusive with shuffle"),
        ({"batch_sampler": [[0]], "batch_size": 2}, "batch_sampler option is mutually exclusive"),
        ({"batch_size": None, "drop_last": True}, "disables auto-batching"),
    ],
)
def test_loader_arguments_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DataLoader(TensorDataset(fg.arange(3)), **kwargs)


def test_a_batch_sampler_and_a_collate_fn():
    data = TensorDataset(fg.arange(6))
    loader = DataLoader(data, batch_sampler=[[5, 0], [1]], collate_fn=lambda s: len(s))
    assert list(loader) == [2, 1] and len(loader) == 2
