"""Bias attention through `torch.nn.attention.flex_attention`: the bias is read from the (H, n) distance table
inside the compiled kernel (a score modification), fully masked blocks are skipped through a causal block mask,
and on CUDA gradients flow, so it serves training as well as evaluation (the CPU build has no backward).

It compiles (tens of seconds on first use per shape), so it is never picked for short runs on its own: `auto`
uses it on CUDA only, where it is the fast path; `--kernel flex` asks for it anywhere. Where it is missing or
fails to compile, callers fall back to the blocked kernel.
"""

from __future__ import annotations

import functools

import torch

try:  # torch ≥ 2.5
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
except ImportError:  # pragma: no cover - older torch
    create_block_mask = flex_attention = None


def available() -> bool:
    return flex_attention is not None


@functools.cache
def _compiled():
    return torch.compile(flex_attention, dynamic=False)


@functools.lru_cache(maxsize=8)
def _causal_mask(queries: int, keys: int, device: str):
    offset = keys - queries  # queries are the last `queries` positions

    def causal(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx + offset

    return create_block_mask(causal, B=None, H=None, Q_LEN=queries, KV_LEN=keys, device=device)


def flex_bias_attention(q, k, v, table):
    """q: (B, H, Tq, Dh); k, v: (B, Hkv, Tk, Dh); table: (H, Tk) bias by distance -> (B, H, Tq, Dh)."""
    queries, keys = q.shape[2], k.shape[2]
    offset = keys - queries
    table = table.to(q.dtype)

    def add_bias(score, b, h, q_idx, kv_idx):
        # causal positions only (the block mask drops the rest), so the distance is ≥ 0
        return score + table[h, q_idx + offset - kv_idx]

    mask = _causal_mask(queries, keys, str(q.device))
    return _compiled()(q, k, v, score_mod=add_bias, block_mask=mask, enable_gqa=q.shape[1] != k.shape[1])
