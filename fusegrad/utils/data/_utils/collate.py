"""``torch.utils.data._utils.collate``: where PyTorch defines the collate functions."""

from ..collate import default_collate, default_convert

__all__ = ["default_collate", "default_convert"]
