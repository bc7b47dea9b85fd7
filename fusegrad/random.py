"""``torch.random``: the default generator's seeding and state, and
``fork_rng``, which gives a block the generator's state back when it ends."""

import contextlib

from .eager.random import (
    Generator,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)

__all__ = [
    "Generator",
    "default_generator",
    "fork_rng",
    "get_rng_state",
    "initial_seed",
    "manual_seed",
    "seed",
    "set_rng_state",
]


@contextlib.contextmanager
def fork_rng(
    devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices", device_type=None
):
    """Draws inside the block leave the default generator as it was before
    (with ``enabled=False``, the block draws from it as usual). There is no
    device generator to fork: ``devices`` are the CPU's.

    >>> import fusegrad
    >>> _ = fusegrad.manual_seed(0)
    >>> with fusegrad.random.fork_rng():
    ...     inside = fusegrad.rand(1)
    >>> bool(fusegrad.rand(1) == inside)
    True
    """
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
