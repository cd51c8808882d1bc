"""A partial rotation on top of a rotary encoding: RoPE rotates the first `rotary_dim` features of each query and
key head and passes the rest through unrotated (Phi-4-mini's partial_rotary_factor, as transformers' Phi-3
attention computes it). The inner encoding is built for `rotary_dim` features, so every RoPE scaling computes
its frequencies for the rotated part alone, as transformers' RoPE functions do; every other hook passes through.
"""

from __future__ import annotations

import torch

from extrapolate.core.errors import UserError
from extrapolate.encodings.base import PositionalEncoding, Wrapped


class PartialRotary(Wrapped):
    def __init__(self, inner: PositionalEncoding, rotary_dim: int):
        if inner.kind != "rotary" or inner.two_part_form() is not None or inner.chunk_form() is not None:
            raise UserError(
                f"{inner.name} does not rotate queries and keys alone: the model rotates {rotary_dim} features of "
                "each head, which only RoPE and its scalings compute"
            )
        super().__init__(inner)
        self.rotary_dim = rotary_dim

    def rotate(self, q, k, pos, seq_len=None):
        """q: (B, H, T, Dh), k: (B, Hkv, T, Dh): the first rotary_dim features rotated by the inner encoding, the
        last Dh - rotary_dim as they are."""
        n = self.rotary_dim
        q_rotated, k_rotated = self.inner.rotate(q[..., :n], k[..., :n], pos, seq_len)  # (B, H|Hkv, T, n)
        passed = q[..., n:]
        scale = self.inner.query_scale(pos) if hasattr(self.inner, "query_scale") else None
        if scale is not None:  # the query's scale covers its unrotated features too
            passed = passed * scale.to(q.dtype)[:, None]  # (T, 1)
        return torch.cat((q_rotated, passed), dim=-1), torch.cat((k_rotated, k[..., n:]), dim=-1)

    def describe(self) -> dict:
        return {**self.inner.describe(), "rotary_dim": self.rotary_dim}


def partially_rotated(encoding: PositionalEncoding, rotary_dim: int | None) -> PositionalEncoding:
    """`encoding` (built for `rotary_dim` features) rotating the first `rotary_dim` features of each head;
    itself where `rotary_dim` is None (the whole head rotates)."""
    if rotary_dim is None:
        return encoding
    return PartialRotary(encoding, rotary_dim)
