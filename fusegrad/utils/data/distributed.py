"""``DistributedSampler``: each process of a data-parallel job visits its own
share of a dataset's indices."""

from __future__ import annotations

import math

from ... import distributed as dist
from ...eager.creation import randperm
from ...eager.random import Generator
from .sampler import Sampler


class DistributedSampler(Sampler):
    """Every ``num_replicas``-th index from position ``rank`` (by default the
    process group's size and this process's rank) of the dataset's indices,
    shuffled (with ``shuffle``) the same way in every process, from ``seed +
    epoch`` (``set_epoch`` before each epoch gives each its own order). So
    every process gets as many indices: ``drop_last`` leaves out the tail
    that does not divide evenly, otherwise the first indices are repeated to
    fill it up."""

    def __init__(
        self,
        dataset,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ):
        if num_replicas is None:
            num_replicas = dist.get_world_size()
        if rank is None:
            rank = dist.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(
                f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]"
            )
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        if drop_last:
            self.num_samples = len(dataset) // num_replicas
        else:
            self.num_samples = math.ceil(len(dataset) / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        if self.shuffle:
            generator = Generator().manual_seed(self.seed + self.epoch)
            indices = randperm(len(self.dataset), generator=generator).tolist()
        else:
            indices = list(range(len(self.dataset)))
        indices = indices[: self.total_size]  # drop_last
        while len(indices) < self.total_size:  # or the first ones again, as often as needed
            indices += indices[: self.total_size - len(indices)]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next pass is for: with ``shuffle``, each epoch's order differs."""
        self.epoch = epoch
