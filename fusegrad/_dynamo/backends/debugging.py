"""``torch._dynamo.backends.debugging``: the path scripts import ``ExplainOutput`` from."""

from ..explain import ExplainOutput

__all__ = ["ExplainOutput"]
