"""Samplers: the order in which a DataLoader visits a dataset's indices, and
``BatchSampler``, which groups them into batches."""

from __future__ import annotations

import numpy as np

from ...eager.creation import as_tensor, rand, randint, randperm
from ...ir import dtypes


def drawn(sample, *args, generator=None, **kwargs):
    """``sample(*args, **kwargs)`` drawn from ``generator``, or from the global
    generator (which ``fusegrad.manual_seed`` seeds) when it is None."""
    if generator is None:
        return sample(*args, **kwargs)
    return sample(*args, generator=generator, **kwargs)


class Sampler:
    """Iterates over dataset indices (or batches of them)."""

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """The indices in a random order (a new one each pass); with
    ``replacement``, ``num_samples`` indices drawn uniformly with repetition.
    ``num_samples`` beyond the dataset's length without replacement takes
    several permutations in a row."""

    def __init__(self, data_source, replacement: bool = False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError(
                f"replacement should be a boolean value, but got replacement={replacement}"
            )
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(
                f"num_samples should be a positive integer value, but got "
                f"num_samples={self.num_samples}"
            )

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        if self.replacement:
            for _ in range(self.num_samples // 32):
                yield from drawn(randint, n, size=(32,), generator=self.generator).tolist()
            rest = (self.num_samples % 32,)
            yield from drawn(randint, n, size=rest, generator=self.generator).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from drawn(randperm, n, generator=self.generator).tolist()
            last = drawn(randperm, n, generator=self.generator).tolist()
            yield from last[: self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in drawn(randperm, len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to
    ``weights`` (with ``replacement``, or each index at most once)."""

    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(
                f"num_samples should be a positive integer value, but got num_samples={num_samples}"
            )
        if not isinstance(replacement, bool):
            raise ValueError(
                f"replacement should be a boolean value, but got replacement={replacement}"
            )
        weights_tensor = as_tensor(weights, dtype=dtypes.float64)
        if weights_tensor.ndim != 1:
            raise ValueError(
                "weights should be a 1d sequence but given weights have shape "
                f"{tuple(weights_tensor.shape)}"
            )
        self.weights = weights_tensor
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        weights = self.weights.numpy()
        if (weights < 0).any() or not np.isfinite(weights).all():
            raise RuntimeError(
                "invalid multinomial distribution (encountering probability entry < 0)"
            )
        total = weights.sum()
        if total <= 0:
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        if self.replacement:
            # inverse CDF: an index with zero weight has an empty interval
            uniform = drawn(rand, self.num_samples, dtype=dtypes.float64, generator=self.generator)
            cdf = np.cumsum(weights) / total
            chosen = np.searchsorted(cdf, uniform.numpy(), side="right")
            chosen = np.minimum(chosen, np.flatnonzero(weights)[-1])
        else:
            if self.num_samples > np.count_nonzero(weights):
                raise RuntimeError(
                    "invalid multinomial distribution (with replacement=False, not enough "
                    "non-negative category to sample)"
                )
            # Efraimidis and Spirakis: the largest keys u ** (1 / w) are a draw
            # without replacement in proportion to the weights
            uniform = drawn(rand, len(weights), dtype=dtypes.float64, generator=self.generator)
            with np.errstate(divide="ignore"):
                keys = np.log(uniform.numpy()) / weights
            chosen = np.argsort(-keys, kind="stable")[: self.num_samples]
        return iter(chosen.tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler``; the last one shorter,
    or dropped with ``drop_last``."""

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size}"
            )
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
