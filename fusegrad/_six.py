"""``torch._six``: the Python 2/3 compatibility names older PyTorch code
imports. PyTorch 2.0 removed the module; it stays here so that such code
runs."""

import collections.abc as container_abcs
import math

inf = math.inf
nan = math.nan
string_classes = (str, bytes)
int_classes = int

__all__ = ["container_abcs", "inf", "int_classes", "nan", "string_classes"]
