"""SDPA in the dtype the CPU runs it fastest: `sdpa` wraps torch's scaled_dot_product_attention, computing in
`compute_dtype` (float32 for bf16 inputs where that is the faster CPU kernel)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

# The CPU flash kernel is faster in float32 than in bfloat16 for short rows of small heads, where its bf16
# path spends more on converting blocks than on arithmetic. Forward + backward, float32 vs bf16 time:
# (B, H, T, Dh) = (64, 4, 128, 16) 0.32×, (32, 4, 256, 32) 0.81×, (16, 4, 512, 32) 0.98×, (10, 4, 768, 32) 1.28×,
# (32, 8, 256, 64) 1.15×. Within these bounds CPU attention runs in float32, which is also the more exact.
CPU_FLOAT32_MAX_KEYS = 512
CPU_FLOAT32_MAX_HEAD_DIM = 32


def compute_dtype(q: torch.Tensor, keys: int) -> torch.dtype:
    """The dtype `sdpa` computes in for q (B, H, Tq, Dh) against `keys` keys: float32 for bf16 where that is
    the faster CPU kernel (see the bounds above), else q's own."""
    short_and_narrow = keys <= CPU_FLOAT32_MAX_KEYS and q.shape[-1] <= CPU_FLOAT32_MAX_HEAD_DIM
    upcast = q.device.type == "cpu" and q.dtype == torch.bfloat16 and short_and_narrow
    return torch.float32 if upcast else q.dtype


def sdpa(q, k, v, **options) -> torch.Tensor:
    """F.scaled_dot_product_attention in `compute_dtype`; the result keeps q's dtype. An additive
    `attn_mask` should already be in that dtype."""
    if compute_dtype(q, k.shape[2]) == q.dtype:
        return F.scaled_dot_product_attention(q, k, v, **options)
    with torch.autocast("cpu", enabled=False):  # autocast would cast the inputs straight back to bf16
        return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), **options).to(q.dtype)
