"""``torch.nested``: tensors of tensors of differing sizes. fusegrad has no
nested tensor type (its tensors are one strided numpy array each); making
one raises a RuntimeError saying so. Pad the tensors to one size
(``torch.nn.utils.rnn.pad_sequence``) or keep them in a list instead."""

from __future__ import annotations

from .eager.sparse import layout

# the layout PyTorch recommends for nested tensors, named by scripts that make them
jagged = layout("jagged")


def _no_nested_tensors(function: str) -> RuntimeError:
    return RuntimeError(
        f"torch.nested.{function}: fusegrad has no nested tensors (tensors of tensors of "
        "differing sizes); pad them to one size with torch.nn.utils.rnn.pad_sequence, "
        "or keep a list of tensors"
    )


def nested_tensor(tensor_list, *, dtype=None, layout=None, device=None, **kwargs):
    raise _no_nested_tensors("nested_tensor")


def as_nested_tensor(ts, dtype=None, device=None, layout=None):
    raise _no_nested_tensors("as_nested_tensor")
