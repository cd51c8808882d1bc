"""Attention with a forget gate (FoX, encodings/forget.py) in memory linear in the length: the score of query i
and key j is q·k/√d + c_i - c_j, c the cumulative log forget gate of each head over the positions (`decay`,
(B, H, Tk) float32, the queries the last Tq positions). The row's c_i cancels in its softmax; what stays is a
bias per key, -c_j, which every kernel takes without an n × n tensor:

- fused (CPU evaluation, float32 and bf16): query blocks [a0, a1) through the CPU flash op, the bias
  c_{a0} - c_j a float32 mask of one row per head (`fused_bias.key_bias_attention`, ALiBi's form): anchored
  at the block's first row, the values that carry weight stay small;
- flex (CUDA): the bias as a score modification reading `decay`, which gradients flow into;
- rows (CUDA, a few queries): one SDPA call with those rows' (B, H, Tq, Tk) bias, linear in the keys;
- blocked (CPU training, any device): explicit score blocks with c_i - c_j added, differentiable.
"""

from __future__ import annotations

import torch

from extrapolate.kernels.blocked import block_rows
from extrapolate.kernels.fused_bias import key_bias_attention
from extrapolate.kernels.heads import expand_kv_heads

ROWS = 1024  # query rows per block of the fused kernel (as ALiBi's, whose bias it shares the form of)


def fused_attention(q, k, v, decay: torch.Tensor, rows: int = ROWS) -> torch.Tensor:
    """q: (B, H, Tq, Dh); k, v: (B, Hkv, Tk, Dh); decay (B, H, Tk) -> (B, H, Tq, Dh)."""
    heads = q.shape[1]
    k, v = expand_kv_heads(k, heads), expand_kv_heads(v, heads)  # (B, H, Tk, Dh)

    def block_bias(a0: int, end: int) -> torch.Tensor:  # c_{a0} - c_j: (B, H, 1, end) float32
        return (decay[..., a0 : a0 + 1] - decay[..., :end]).float()[:, :, None]

    return key_bias_attention(q, k, v, block_bias, rows)


def row_bias(decay: torch.Tensor, q0: int, q1: int, end: int, dtype) -> torch.Tensor:
    """(B, H, q1-q0, end) bias c_i - c_j of absolute query rows q0 … q1-1 against keys 0 … end-1, -inf where
    j > i."""
    rows = torch.arange(q0, q1, device=decay.device)
    bias = decay[..., q0:q1, None] - decay[..., None, :end]  # (B, H, rows, end)
    causal = torch.arange(end, device=decay.device)[None, :] > rows[:, None]  # (rows, end)
    return bias.masked_fill(causal, float("-inf")).to(dtype)


def blocked_attention(q, k, v, decay: torch.Tensor, block_elements: int | None) -> torch.Tensor:
    """Explicit score blocks (B, H, rows, keys) with the gate's bias added: any device, differentiable.
    `block_elements=None`: one block holding the whole score matrix (the reference kernel)."""
    batch, heads, length, dim = q.shape
    keys = k.shape[2]
    offset = keys - length
    k, v = expand_kv_heads(k, heads), expand_kv_heads(v, heads)
    scale = dim**-0.5
    rows = block_rows(q, keys, block_elements)
    pieces = []
    for q0 in range(0, length, rows):
        q1 = min(length, q0 + rows)
        end = offset + q1  # keys past the block's last query are masked: skip them
        scores = q[:, :, q0:q1].float() @ k[:, :, :end].float().transpose(-1, -2) * scale  # (B, H, rows, end)
        weights = (scores + row_bias(decay, offset + q0, end, end, torch.float32)).softmax(-1)
        pieces.append((weights @ v[:, :, :end].float()).to(q.dtype))
    return torch.cat(pieces, dim=2)


def rows_attention(q, k, v, decay: torch.Tensor, sdpa) -> torch.Tensor:
    """A few queries (decoding) in one SDPA call, their (B, H, Tq, Tk) bias as its additive mask."""
    queries, keys = q.shape[2], k.shape[2]
    bias = row_bias(decay, keys - queries, keys, keys, q.dtype)
    return sdpa(q, k, v, attn_mask=bias, enable_gqa=q.shape[1] != k.shape[1])
