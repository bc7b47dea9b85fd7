"""``torch.utils.data._utils``: the private path some code imports
``default_collate`` from."""

from . import collate

__all__ = ["collate"]
