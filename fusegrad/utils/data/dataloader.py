"""``DataLoader``: batches of a dataset, in a sampler's order, collated into tensors.

Batches are loaded in the calling process, one when the loop asks for it.
``num_workers > 0`` is accepted and loads the same batches in the same order
in this process too: fusegrad's tensors live in numpy arrays in this process,
and the samples a worker process would make must come back to it anyway, so
a training loop written for PyTorch's worker processes runs unchanged (and
gives the same numbers). ``pin_memory`` is accepted: there is no device memory
to pin for.
"""

from __future__ import annotations

from .collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler


def get_worker_info():
    """None: data is loaded in the main process (see the module's docstring)."""
    return None


class DataLoader:
    """Iterates over ``dataset`` in batches of ``batch_size`` samples (the last
    one shorter unless ``drop_last``), in order, or shuffled each epoch
    (``shuffle=True``, drawn from ``generator`` or fusegrad's global generator),
    or in the order of ``sampler``; ``batch_sampler`` gives whole batches of
    indices. ``collate_fn`` makes a batch from a list of samples
    (``default_collate``); ``batch_size=None`` turns batching off.

    >>> import fusegrad
    >>> from fusegrad.utils.data import DataLoader, TensorDataset
    >>> loader = DataLoader(TensorDataset(fusegrad.arange(5)), batch_size=2)
    >>> [batch for batch, in loader]
    [tensor([0, 1]), tensor([2, 3]), tensor([4])]
    """

    def __init__(
        self,
        dataset,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler=None,
        batch_sampler=None,
        num_workers: int = 0,
        collate_fn=None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn=None,
        multiprocessing_context=None,
        generator=None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ):
        if num_workers < 0:
            raise ValueError(
                "num_workers option should be non-negative; use num_workers=0 to disable "
                "multiprocessing."
            )
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing.let "
                "num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None."
            )
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        if isinstance(dataset, IterableDataset):
            if shuffle not in (None, False):
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified shuffle option, but "
                    f"got shuffle={shuffle}"
                )
            if sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified sampler option, but "
                    f"got sampler={sampler}"
                )
            if batch_sampler is not None:
                raise ValueError(
                    "DataLoader with IterableDataset: expected unspecified batch_sampler "
                    f"option, but got batch_sampler={batch_sampler}"
                )
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, "
                    "sampler, and drop_last"
                )
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError(
                "batch_size=None option disables auto-batching and is mutually exclusive with "
                "drop_last"
            )
        if sampler is None and not isinstance(dataset, IterableDataset):
            sampler = (
                RandomSampler(dataset, generator=generator)
                if shuffle
                else SequentialSampler(dataset)
            )
        if batch_size is not None and batch_sampler is None and sampler is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self._batching = batch_size is not None or batch_sampler is not None
        if collate_fn is None:
            collate_fn = default_collate if self._batching else default_convert
        self.collate_fn = collate_fn

    def __iter__(self):
        if isinstance(self.dataset, IterableDataset):
            return self._iterable_batches()
        return self._map_batches()

    def _map_batches(self):
        fetch_many = getattr(self.dataset, "__getitems__", None)
        if not self._batching:
            for index in self.sampler:
                yield self.collate_fn(self.dataset[index])
            return
        for indices in self.batch_sampler:
            samples = fetch_many(indices) if fetch_many else [self.dataset[i] for i in indices]
            yield self.collate_fn(samples)

    def _iterable_batches(self):
        if not self._batching:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            length = len(self.dataset)
            if self.batch_size is not None:
                if self.drop_last:
                    return length // self.batch_size
                return -(-length // self.batch_size)
            return length
        return len(self.batch_sampler if self._batching else self.sampler)
