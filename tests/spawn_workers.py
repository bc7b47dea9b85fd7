"""Functions for processes that tests/test_multiprocessing.py spawns: a
spawned child imports them by this module's name."""

import fusegrad as fg


def put_a_tensor(index, queue, scale):
    queue.put((index, fg.arange(3.0) * scale + index))


def raise_in_the_last(index, count):
    if index == count - 1:
        raise ValueError(f"boom in {index}")
