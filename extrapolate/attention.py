"""Causal attention kernels. Encodings without a bias use fused SDPA; bias encodings use a blocked path
whose memory grows linearly with length: queries in blocks, keys past the block's end skipped (causal),
and the bias of each block built from the (H, n) distance table as a Toeplitz view, never an n×n tensor.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .encodings.base import PositionalEncoding

KERNELS = ("auto", "sdpa", "blocked", "reference")
BLOCK_ELEMENTS = 1 << 23  # bias + scores per block: B·H·Bq·K elements (32 MiB in float32)


def kernel_for(encoding: PositionalEncoding, requested: str = "auto") -> str:
    """The kernel a forward pass will use (recorded with every result)."""
    if requested not in KERNELS:
        raise ValueError(f"unknown kernel {requested!r}; valid: {', '.join(KERNELS)}")
    if requested == "auto":
        return "blocked" if encoding.has_bias else "sdpa"
    if requested == "sdpa" and encoding.has_bias:
        return "blocked"  # the fused causal call cannot take a bias; blocked is its exact equivalent
    return requested


def causal_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    encoding: PositionalEncoding,
    kernel: str = "auto",
    block_elements: int = BLOCK_ELEMENTS,
) -> torch.Tensor:
    """q: (B, H, Tq, Dh); k, v: (B, Hkv, Tk, Dh), H a multiple of Hkv, Tk ≥ Tq -> (B, H, Tq, Dh).

    The queries are the last Tq of the Tk positions (Tk > Tq when earlier keys come from a cache)."""
    kernel = kernel_for(encoding, kernel)
    gqa = q.shape[1] != k.shape[1]
    if kernel == "sdpa" and q.shape[2] != k.shape[2]:
        kernel = "blocked"  # fused causal SDPA aligns queries to the first keys, not the last
    if kernel == "sdpa":
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    if kernel == "reference":
        return reference_attention(q, k, v, encoding)
    return blocked_attention(q, k, v, encoding, block_elements)


def toeplitz_bias(table: torch.Tensor, q0: int, q1: int, dtype: torch.dtype) -> torch.Tensor:
    """(H, q1-q0, q1) bias for queries q0 … q1-1 against keys 0 … q1-1, with -inf above the diagonal.

    Entry (r, c) is table[:, q0 + r - c]: a Toeplitz block, cut as a strided view of one (H, Bq + q1 - 1)
    strip of distances instead of gathering through an index matrix.
    """
    rows = q1 - q0
    # strip[t] holds the bias at distance q0 + rows - 1 - t, for t = 0 … rows + q1 - 2
    distances = torch.arange(q0 + rows - 1, q0 - q1, -1, device=table.device)  # (rows + q1 - 1,)
    strip = table[:, distances.clamp(min=0)].masked_fill(distances < 0, float("-inf"))  # (H, rows + q1 - 1)
    # unfold: window t = strip[t : t + q1]; row r of the block is window rows - 1 - r
    return strip.to(dtype).unfold(-1, q1, 1).flip(-2)  # (H, rows, q1)


def blocked_attention(q, k, v, encoding, block_elements: int = BLOCK_ELEMENTS):
    batch, heads, length, _ = q.shape
    keys = k.shape[2]
    offset = keys - length  # absolute position of the first query
    table = encoding.bias_table(keys, device=q.device)  # (H, Tk) float32
    if table is None:  # no bias: a zero table still gives the causal mask
        table = torch.zeros(1, keys, device=q.device)
    rows = max(16, min(length, block_elements // max(1, batch * heads * keys)))
    out = torch.empty_like(q)
    gqa = q.shape[1] != k.shape[1]
    for q0 in range(0, length, rows):
        q1 = min(length, q0 + rows)
        end = offset + q1  # keys past the block's last query are masked: skip them
        bias = toeplitz_bias(table, offset + q0, end, q.dtype)  # (H, rows, end)
        out[:, :, q0:q1] = F.scaled_dot_product_attention(
            q[:, :, q0:q1], k[:, :, :end], v[:, :, :end], attn_mask=bias.unsqueeze(0), enable_gqa=gqa
        )
    return out


def reference_attention(q, k, v, encoding):
    """Plain softmax(q·kᵀ/√d + bias + causal mask)·v with the full matrix: the slow ground truth for tests."""
    keys = k.shape[2]
    if q.shape[1] != k.shape[1]:
        repeat = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
    scores = (q.float() @ k.float().transpose(-1, -2)) / q.shape[-1] ** 0.5  # (B, H, Tq, Tk)
    k_pos = torch.arange(keys, device=q.device)
    q_pos = k_pos[keys - q.shape[2] :]
    bias = encoding.bias(q_pos, k_pos)
    if bias is not None:
        scores = scores + bias
    causal = k_pos[None, :] > q_pos[:, None]
    scores = scores.masked_fill(causal, float("-inf"))
    return (scores.softmax(-1) @ v.float()).to(q.dtype)
