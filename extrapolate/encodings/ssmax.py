"""Scalable-Softmax trained in (`ssmax`; Nakanishi 2025, "Scalable-Softmax Is Superior for Attention"): RoPE,
with each query scaled by s·log n before attention, n the number of keys it sees (i + 1 for the query at
position i, causal), s learned per layer and head. Softmax(s·log n · q·k/√d) = n^(s·z) / Σ n^(s·z): the
largest weight no longer fades as n grows, which the paper finds to carry retrieval past the training length.

s starts at 1/ln L in every head, so the model begins as plain softmax at n = L (the paper does not fix an
initial value; at this one the trained-in form starts where Qwen's untrained `logn` option is exact at L).
The query at position 0 sees one key and is scaled by log 1 = 0: its one weight is 1 either way.

The queries are scaled after rotation, so every kernel that runs RoPE (fused SDPA, flex, blocked) runs this
unchanged. The model asks the encoding for each layer's own (`for_layer`), which holds that layer's s.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from extrapolate.core.errors import UserError
from extrapolate.encodings.base import PositionalEncoding
from extrapolate.encodings.rotary import Rotary
from extrapolate.encodings.spec import EncodingSpec, ShowQuery


def length_scale(pos: torch.Tensor) -> torch.Tensor:
    """(T,) float32 log n of each query position p (n = p + 1 keys seen)."""
    return torch.log1p(pos.float())


class SSMaxLayer(PositionalEncoding):
    """One layer's SSMax: RoPE, then each head's queries times s_h·log n."""

    name, kind = "ssmax", "rotary"

    def __init__(self, rope: Rotary, n_heads: int, initial: float):
        super().__init__()
        self._rope = (rope,)  # shared with the other layers: held outside the module tree (no duplicate buffers)
        self.scale = nn.Parameter(torch.full((n_heads,), float(initial)))  # (H,) s

    def rotate(self, q, k, pos, seq_len=None):
        q, k = self._rope[0].rotate(q, k, pos, seq_len)
        factor = self.scale[:, None] * length_scale(pos)[None, :]  # (H, T)
        return q * factor[None, :, :, None].to(q.dtype), k  # q (B, H, T, Dh)


class SSMax(PositionalEncoding):
    name, kind = "ssmax", "rotary"

    def __init__(self, head_dim: int, n_heads: int, n_layers: int, train_len: int, base: float = 10000.0):
        super().__init__()
        self.rope = Rotary(head_dim, "rope", base=base)
        self.initial = 1.0 / math.log(train_len)
        self.layers = nn.ModuleList(SSMaxLayer(self.rope, n_heads, self.initial) for _ in range(n_layers))

    def rotate(self, q, k, pos, seq_len=None):
        """The first layer's: the model calls each layer's own (`for_layer`)."""
        return self.layers[0].rotate(q, k, pos, seq_len)

    def for_layer(self, index: int) -> PositionalEncoding:
        return self.layers[index]

    def describe(self) -> dict:
        return {"base": self.rope.base, "initial_scale": self.initial}


def show_ssmax(query: ShowQuery) -> dict:
    """The query scale s·log n at the initial s = 1/ln L for n = 1, L/4, L, 4L, 16L keys."""
    if query.original_len < 2:
        raise UserError(
            f"ssmax needs an original length of at least 2 (its initial s is 1/ln L), got {query.original_len}"
        )
    initial = 1.0 / math.log(query.original_len)
    keys = sorted(
        {1, max(1, query.original_len // 4), query.original_len, 4 * query.original_len, 16 * query.original_len}
    )
    return {"initial_scale": initial, "keys": keys, "query_scale": [initial * math.log(n) for n in keys]}


SSMAX = EncodingSpec(
    "ssmax",
    "rotary",
    "RoPE with Scalable-Softmax trained in: queries × s·log n, s learned per layer and head (Nakanishi 2025)",
    lambda shape: SSMax(shape.head_dim, shape.n_heads, shape.n_layers, shape.max_len, base=shape.base),
    {"base": 10000.0, "s": "learned per layer and head, from 1/ln L"},
    colour="#fb8072",
    show=show_ssmax,
    trained_parameters=True,
)
