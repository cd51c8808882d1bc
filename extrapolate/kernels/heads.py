"""Grouped-query attention's key and value heads, expanded for the kernels that pair every query head with a
key head of its own: the CPU flash op, SDPA with a lower-right causal mask and the explicit score matrices of
the reference and two-part kernels have no grouped-query path."""

from __future__ import annotations

import torch


def expand_kv_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, Hkv, T, Dh) -> (B, H, T, Dh), H a multiple of Hkv: key head j serves query heads j·g … j·g + g - 1
    (g = H / Hkv), the pairing of SDPA's `enable_gqa`. x itself, uncopied, when H = Hkv."""
    if x.shape[1] == heads:
        return x
    return x.repeat_interleave(heads // x.shape[1], dim=1)
