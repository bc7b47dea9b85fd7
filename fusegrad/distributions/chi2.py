"""``Chi2``."""

from __future__ import annotations

from typing import ClassVar

from . import constraints
from .distribution import _broadcast
from .gamma import Gamma


class Chi2(Gamma):
    """Gamma(df / 2, 1 / 2)."""

    arg_constraints: ClassVar[dict] = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        (df,) = _broadcast(df)
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    df = property(lambda self: self.concentration * 2)

    def _shown_parameters(self):
        return [("df", self.df)]
