"""Attention without a bias for queries continuing a cache (decoding, a chunked pass): on CUDA the fused
kernel with the causal mask aligned to the last keys, on the CPU two fused calls merged by log-sum-exp."""

from __future__ import annotations

import torch.nn.functional as F

from extrapolate.kernels.flash import attend, attend_grouped, merge
from extrapolate.kernels.heads import expand_kv_heads
from extrapolate.kernels.sdpa import sdpa


def lower_right_sdpa(q, k, v):
    """Queries continuing a cache without a bias, on CUDA: fused SDPA with the causal mask aligned to the
    last keys (one decoding query sees every key: no mask at all). The aligned variant has no grouped-query
    path, so the key heads are expanded for it (the cache of one layer, for one call)."""
    queries, keys = q.shape[2], k.shape[2]
    if queries == 1:
        return sdpa(q, k, v, enable_gqa=q.shape[1] != k.shape[1])
    k, v = expand_kv_heads(k, q.shape[1]), expand_kv_heads(v, q.shape[1])
    from torch.nn.attention.bias import causal_lower_right

    return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(queries, keys))


def cached_sdpa(q, k, v):
    """Attention without a bias for queries continuing a cache: q (B, H, Tq, Dh) are the last Tq of the
    Tk positions of k, v (B, Hkv, Tk, Dh), H a multiple of Hkv. Every cached key is visible to every query:
    one fused call without a mask, where the g = H / Hkv query heads of a key head are stacked as g·Tq queries
    (the private fused op has no grouped-query path, and this never copies the cache g times; a decoding step
    at 32k runs 5× faster than the blocked kernel). The new keys are causal among themselves: a square fused
    call. The two merge by log-sum-exp."""
    heads, length, dim = q.shape[1], q.shape[2], q.shape[3]
    past = k.shape[2] - length
    scale = dim**-0.5
    cached = attend_grouped(q, k[:, :, :past], v[:, :, :past], None, scale)  # (B, H, Tq, Dh), (B, H, Tq)
    k_new, v_new = expand_kv_heads(k[:, :, past:], heads), expand_kv_heads(v[:, :, past:], heads)  # (B, H, Tq, Dh)
    return merge([cached, attend(q, k_new, v_new, True, scale)])
