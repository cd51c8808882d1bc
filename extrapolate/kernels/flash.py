"""The CPU flash kernel with its log-sum-exp: partial attentions over disjoint key sets, merged exactly. The
fused bias kernels, the CPU cache continuation and the two-part kernels are built from these."""

from __future__ import annotations

import torch

_FLASH_LSE = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def _attend(q, k, v, causal: bool, scale: float):
    """(out (B, H, Tq, D), lse (B, H, Tq) float32) of fused attention; q, k and v share one head size."""
    out, lse = _FLASH_LSE(q, k, v, 0.0, causal, scale=scale)
    return out, lse.float()


def _attend_band(q, k, v, bias, scale: float):
    """(out, lse) of fused attention with an additive bias (H, Tq, Tk) holding -inf where masked: the band of
    keys near a block, where T5's bias still varies with distance."""
    out, lse = _FLASH_LSE(q, k, v, 0.0, False, attn_mask=bias.unsqueeze(0), scale=scale)
    return out, lse.float()


def _merge(parts):
    """Combine partial attentions over disjoint key sets from their (out, lse)."""
    lse = torch.stack([l for _, l in parts])  # (P, B, H, Tq)
    total = torch.logsumexp(lse, dim=0)
    out = sum(o.float() * (l - total).exp()[..., None] for o, l in parts)
    return out.to(parts[0][0].dtype)
