"""``MultiheadAttention``, with PyTorch's parameters (``in_proj_weight`` packing
the query, key and value projections, ``out_proj``) and arithmetic."""

from __future__ import annotations

import math

from ...eager import creation, ops
from ...eager.tensor import Tensor
from ...ir import dtypes
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import NonDynamicallyQuantizableLinear
from .module import Module, check_device


def _additive(mask: Tensor | None, name: str, dtype) -> Tensor | None:
    """A mask as MultiheadAttention applies it: added to the scores, a True of
    a bool mask (a position that may not be attended to) becoming -inf."""
    if mask is None:
        return None
    if mask.dtype is dtypes.bool_:
        return ops.where(mask, -math.inf, creation.zeros((), dtype=dtype))
    if not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask


class MultiheadAttention(Module):
    """Attention from ``query`` to ``key``/``value`` in ``num_heads`` heads of
    embed_dim / num_heads each. Inputs are (L, N, E) ((N, L, E) with
    ``batch_first``) or unbatched (L, E). ``forward`` returns the output and,
    with ``need_weights``, the attention weights (averaged over heads unless
    ``average_attn_weights=False``)."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        check_device(device)
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} "
                f"and num_heads={num_heads} instead"
            )
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads, self.dropout, self.batch_first = num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(creation.empty(3 * embed_dim, embed_dim, dtype=dtype))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            for name, width in (("q", embed_dim), ("k", self.kdim), ("v", self.vdim)):
                weight = creation.empty(embed_dim, width, dtype=dtype)
                self.register_parameter(f"{name}_proj_weight", Parameter(weight))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(creation.empty(3 * embed_dim, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias, dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(creation.empty(1, 1, embed_dim, dtype=dtype))
            self.bias_v = Parameter(creation.empty(1, 1, embed_dim, dtype=dtype))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple:
        """The query, key and value projections: one product when they are one tensor."""
        e = self.embed_dim
        bias = self.in_proj_bias
        biases = (None,) * 3 if bias is None else (bias[:e], bias[e : 2 * e], bias[2 * e :])
        if self._qkv_same_embed_dim:
            weight = self.in_proj_weight
            if query is key and key is value:
                return ops.chunk(F.linear(query, weight, bias), 3, -1)
            weights = (weight[:e], weight[e : 2 * e], weight[2 * e :])
        else:
            weights = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        return tuple(F.linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple:
        if is_causal and attn_mask is None:
            raise RuntimeError(
                "Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                "module method `generate_square_subsequent_mask` to create this mask."
            )
        batched = query.dim() == 3
        # (length, batch, embed), the same tensor kept the same: self-attention
        # projects with one product
        inputs = {}
        for t in (query, key, value):
            if id(t) not in inputs:
                if not batched:
                    inputs[id(t)] = ops.unsqueeze(t, 1)
                else:
                    inputs[id(t)] = ops.transpose(t, 0, 1) if self.batch_first else t
        query, key, value = (inputs[id(t)] for t in (query, key, value))
        if not batched and key_padding_mask is not None:
            key_padding_mask = ops.unsqueeze(key_padding_mask, 0)
        target_length, batch, _ = query.shape
        heads, head_dim = self.num_heads, self.head_dim
        dtype = query.dtype
        padding = _additive(key_padding_mask, "key_padding_mask", dtype)
        mask = _additive(attn_mask, "attn_mask", dtype)
        if mask is not None and mask.dim() == 2:
            if tuple(mask.shape) != (target_length, key.shape[0]):
                raise RuntimeError(
                    f"The shape of the 2D attn_mask is {mask.shape}, but should be "
                    f"{(target_length, key.shape[0])}."
                )
            mask = ops.unsqueeze(mask, 0)
        q, k, v = self._project(query, key, value)
        if self.bias_k is not None:
            k = ops.cat([k, ops.expand(self.bias_k, 1, batch, self.embed_dim)])
            v = ops.cat([v, ops.expand(self.bias_v, 1, batch, self.embed_dim)])
            mask = None if mask is None else F.pad(mask, (0, 1))
            padding = None if padding is None else F.pad(padding, (0, 1))
        # (length, batch, embed) -> (batch * heads, length, head_dim)
        q, k, v = (
            ops.transpose(ops.reshape(t, (t.shape[0], batch * heads, head_dim)), 0, 1)
            for t in (q, k, v)
        )
        if self.add_zero_attn:
            zeros = creation.zeros(batch * heads, 1, head_dim, dtype=dtype)
            k, v = ops.cat([k, zeros], 1), ops.cat([v, zeros], 1)
            mask = None if mask is None else F.pad(mask, (0, 1))
            padding = None if padding is None else F.pad(padding, (0, 1))
        source_length = k.shape[1]
        if padding is not None:
            padding = ops.reshape(
                ops.expand(ops.reshape(padding, (batch, 1, 1, source_length)), -1, heads, -1, -1),
                (batch * heads, 1, source_length),
            )
            mask = padding if mask is None else mask + padding
        dropout = self.dropout if self.training else 0.0
        if need_weights:
            scores = ops.matmul(q * math.sqrt(1.0 / head_dim), ops.transpose(k, -2, -1))
            weights = F.softmax(scores if mask is None else mask + scores, -1)
            if dropout > 0.0:
                weights = F.dropout(weights, dropout)
            out = ops.reshape(ops.transpose(ops.matmul(weights, v), 0, 1), (-1, self.embed_dim))
            weights = ops.reshape(weights, (batch, heads, target_length, source_length))
            if average_attn_weights:
                weights = ops.mean(weights, 1)
        else:
            if mask is not None and mask.shape[0] == 1:
                mask = ops.unsqueeze(mask, 0)
            elif mask is not None:
                mask = ops.reshape(mask, (batch, heads, -1, source_length))
            q, k, v = (ops.reshape(t, (batch, heads, t.shape[1], head_dim)) for t in (q, k, v))
            out = F.scaled_dot_product_attention(q, k, v, mask, dropout)
            out = ops.reshape(ops.permute(out, 2, 0, 1, 3), (-1, self.embed_dim))
            weights = None
        out = ops.reshape(self.out_proj(out), (target_length, batch, self.embed_dim))
        if not batched:
            out = ops.squeeze(out, 1)
            weights = None if weights is None else ops.squeeze(weights, 0)
        elif self.batch_first:
            out = ops.transpose(out, 0, 1)
        return out, weights
