"""The CPU flash kernel with its log-sum-exp: partial attentions over disjoint key sets, merged exactly. The
fused bias kernels, the CPU cache continuation and the two-part kernels are built from `attend`, `attend_band`
and `merge`. The op is private to torch (SDPA returns no log-sum-exp) and has no grouped-query path: callers
expand the key heads (`kernels.heads`), or stack the query heads of each key head as rows (`attend_grouped`)."""

from __future__ import annotations

import torch

_FLASH_WITH_LSE = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu


def attend(q, k, v, causal: bool, scale: float, mask: torch.Tensor | None = None):
    """(out (B, H, Tq, D), lse (B, H, Tq) float32) of fused attention; q, k and v share one head size.
    `mask`: None, or an additive mask broadcastable to (B, H, Tq, Tk) (the op reads a dimension of size 1
    with stride 0, never expanding it), float32 or q's dtype; with `causal`, Tq = Tk."""
    out, lse = _FLASH_WITH_LSE(q, k, v, 0.0, causal, attn_mask=mask, scale=scale)
    return out, lse.float()


def attend_band(q, k, v, bias, scale: float):
    """(out, lse) of fused attention with an additive bias (H, Tq, Tk) holding -inf where masked: the band of
    keys near a block, where T5's bias still varies with distance."""
    out, lse = _FLASH_WITH_LSE(q, k, v, 0.0, False, attn_mask=bias.unsqueeze(0), scale=scale)
    return out, lse.float()


def attend_grouped(q, k, v, mask, scale: float):
    """(out (B, H, R, D), lse (B, H, R)) of q (B, H, R, D) against k, v (B, Hkv, K, D), H a multiple of Hkv,
    without copying the keys per query head: the g = H / Hkv query heads of key head j (heads j·g … j·g + g - 1)
    are stacked as g·R rows of one call. `mask`: None (every key seen), or (R, K) additive, -inf where masked,
    every row seeing at least one key."""
    batch, heads, rows, dim = q.shape
    kv_heads = k.shape[1]
    group = heads // kv_heads
    stacked = q.reshape(batch, kv_heads, group * rows, dim)  # row i·R + r: head j·g + i, query r
    if mask is None:
        out, lse = attend(stacked, k, v, False, scale)
    else:
        out, lse = attend_band(stacked, k, v, mask.repeat(group, 1)[None], scale)  # (1, g·R, K): every head's rows
    return out.reshape(batch, heads, rows, dim), lse.reshape(batch, heads, rows)


def merge(parts):
    """Combine partial attentions over disjoint key sets from their (out (B, H, Tq, D), lse (B, H, Tq))."""
    lse = torch.stack([part_lse for _, part_lse in parts])  # (P, B, H, Tq)
    total = torch.logsumexp(lse, dim=0)  # (B, H, Tq)
    out = sum(part_out.float() * (part_lse - total).exp()[..., None] for part_out, part_lse in parts)
    return out.to(parts[0][0].dtype)
