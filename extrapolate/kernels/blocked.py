"""The explicit kernels: each query block's scores built against the keys up to its own, the bias cut from the
(H, n) distance table as a Toeplitz view (never an n×n tensor), soft-capped where the encoding caps its scores;
and the reference kernel, the full score matrix, the slow ground truth for tests. Any device, differentiable:
the portable fallback of the fused kernels in `attention.py`."""

from __future__ import annotations

import functools

import torch
from torch.utils.checkpoint import checkpoint

from extrapolate.encodings.softcap import soft_cap
from extrapolate.kernels.heads import expand_kv_heads
from extrapolate.kernels.sdpa import compute_dtype, sdpa

BLOCK_ELEMENTS = 1 << 23  # bias + scores per block: B·H·Bq·K elements (32 MiB in float32)


def toeplitz_bias(
    table: torch.Tensor, q0: int, q1: int, dtype: torch.dtype, k0: int = 0, below: int | None = None
) -> torch.Tensor:
    """(H, q1-q0, q1-k0) bias for queries q0 … q1-1 against keys k0 … q1-1, with -inf above the diagonal
    (and, given `below`, wherever the key is `below` or more tokens back).

    Entry (r, c) is table[:, (q0 + r) - (k0 + c)]: a Toeplitz block, cut as a strided view of one
    (H, rows + keys - 1) strip of distances instead of gathering through an index matrix.
    """
    rows, keys = q1 - q0, q1 - k0
    # strip[t] holds the bias at distance (q0 + rows - 1 - k0) - t, for t = 0 … rows + keys - 2
    top = q0 + rows - 1 - k0
    distances = torch.arange(top, top - (rows + keys - 1), -1, device=table.device)  # (rows + keys - 1,)
    hidden = distances < 0 if below is None else (distances < 0) | (distances >= below)
    strip = table[:, distances.clamp(min=0)].masked_fill(hidden, float("-inf"))  # (H, rows + keys - 1)
    # unfold: window t = strip[t : t + keys]; row r of the block is window rows - 1 - r
    return strip.to(dtype).unfold(-1, keys, 1).flip(-2)  # (H, rows, keys)


def distance_table(encoding, keys: int, device) -> torch.Tensor | None:
    """(H, keys) float32, the encoding's bias over distances, or (1, keys) zeros where it has none (which still
    give the blocks their causal mask); None for a bias of the query's position too (`bias_rows` computes
    those rows)."""
    if not encoding.toeplitz:
        return None
    table = encoding.bias_table(keys, device=device)  # (H, keys) float32
    return torch.zeros(1, keys, device=device) if table is None else table


def first_key(encoding, table, q0: int) -> int:
    """The first key a query block starting at absolute position q0 can see: keys beyond the horizon (a sliding
    window) of its first query are masked for all its queries, so the blocked kernels skip them."""
    if encoding.horizon is None or table is None:
        return 0
    return max(0, q0 - encoding.horizon + 1)


def block_bias(encoding, table, q0: int, q1: int, first: int, dtype, device) -> torch.Tensor:
    """(H, q1-q0, q1-first) bias of queries q0 … q1-1 (absolute) against keys first … q1-1, -inf above the
    diagonal: a Toeplitz cut of `table`, or the encoding's rows (`bias_rows`) where no key is skipped."""
    if first:
        return toeplitz_bias(table, q0, q1, dtype, k0=first)
    return bias_rows(encoding, table, q0, q1, dtype, device)


def block_rows(q: torch.Tensor, keys: int, block_elements: int | None) -> int:
    """Query rows of a block so that B·H·rows·keys stays within `block_elements` (16 rows at least); all of
    them for `block_elements=None` (the reference kernels' one block)."""
    batch, heads, length, _ = q.shape
    if block_elements is None:
        return length
    return max(16, min(length, block_elements // max(1, batch * heads * keys)))


def query_blocks(q: torch.Tensor, keys: int, encoding, table, block_elements: int):
    """The query blocks of the blocked kernels, as (q0, q1, start, first, end): rows q0 … q1-1 of q (B, H, Tq,
    Dh), the last Tq of `keys` positions, at absolute positions start … end-1, seeing keys first … end-1 (keys
    past the block's last query are masked, and so are those beyond its first query's horizon: both skipped).
    B·H·rows·keys stays within `block_elements` (16 rows at least)."""
    length = q.shape[2]
    offset = keys - length  # absolute position of the first query
    rows = block_rows(q, keys, block_elements)
    for q0 in range(0, length, rows):
        q1 = min(length, q0 + rows)
        yield q0, q1, offset + q0, first_key(encoding, table, offset + q0), offset + q1


def blocked_attention(q, k, v, encoding, block_elements: int = BLOCK_ELEMENTS):
    table = distance_table(encoding, k.shape[2], q.device)  # (H or 1, Tk) or None
    out = torch.empty_like(q)
    gqa = q.shape[1] != k.shape[1]
    for q0, q1, start, first, end in query_blocks(q, k.shape[2], encoding, table, block_elements):
        dtype = compute_dtype(q, end - first)
        bias = block_bias(encoding, table, start, end, first, dtype, q.device)  # (H, rows, end - first)
        out[:, :, q0:q1] = sdpa(
            q[:, :, q0:q1], k[:, :, first:end], v[:, :, first:end], attn_mask=bias.unsqueeze(0), enable_gqa=gqa
        )
    return out


def bias_rows(encoding, table, q0: int, q1: int, dtype, device) -> torch.Tensor:
    """(H, q1-q0, q1) bias of queries q0 … q1-1 against every key up to the last of them, -inf above the
    diagonal: cut from the distance `table` (H, ≥ q1), or, for a bias of i as well as i - j (FIRE, `table`
    None), computed by the encoding for these rows only. Linear in the keys either way."""
    if table is not None:
        return toeplitz_bias(table, q0, q1, dtype)
    return encoding.bias_block(q0, q1, device=device).to(dtype)


def capped_blocked_attention(q, k, v, encoding, block_elements: int = BLOCK_ELEMENTS, backward: bool = False):
    """q: (B, H, Tq, Dh); k, v: (B, Hkv, Tk, Dh) -> (B, H, Tq, Dh), every score soft-capped at the encoding's
    `score_cap` before its bias and the causal mask are added. No fused kernel takes a function of the scores,
    so each query block's scores are computed explicitly in float32 (`capped_block`), against the keys up to
    its last query and from its first query's horizon on, B·H·rows·keys at most `block_elements` (16 rows at
    least). `backward`: each block is recomputed in the backward pass instead of keeping its scores, so training
    holds one block's scores at a time, never the n×n of all blocks."""
    table = distance_table(encoding, k.shape[2], q.device)  # (H or 1, Tk) or None
    out = torch.empty_like(q)
    for q0, q1, start, first, end in query_blocks(q, k.shape[2], encoding, table, block_elements):
        block = functools.partial(capped_block, encoding, table, start, first)
        inputs = (q[:, :, q0:q1], k[:, :, first:end], v[:, :, first:end])
        out[:, :, q0:q1] = checkpoint(block, *inputs, use_reentrant=False) if backward else block(*inputs)
    return out


def capped_block(encoding, table, q0: int, first: int, q, k, v) -> torch.Tensor:
    """One query block of `capped_blocked_attention`: q (B, H, rows, Dh) at absolute positions q0 … q0+rows-1
    against k, v (B, Hkv, keys, Dh) at positions first … q0+rows-1 -> (B, H, rows, Dh) in q's dtype."""
    batch, heads, rows, dim = q.shape
    kv_heads, keys = k.shape[1], k.shape[2]
    # the g = H / Hkv query heads of a key head stacked as g·rows queries (heads h = j·g + i use key head j):
    # the keys are never copied per query head
    stacked = q.float().reshape(batch, kv_heads, -1, dim)  # (B, Hkv, g·rows, Dh)
    scores = (stacked @ k.float().transpose(-1, -2)) * dim**-0.5  # (B, Hkv, g·rows, keys)
    bias = block_bias(encoding, table, q0, q0 + rows, first, torch.float32, q.device)  # (H or 1, rows, keys)
    capped = soft_cap(scores.view(batch, heads, rows, keys), encoding.score_cap) + bias  # (B, H, rows, keys)
    out = capped.softmax(-1).view(batch, kv_heads, -1, keys) @ v.float()  # (B, Hkv, g·rows, Dh)
    return out.view(batch, heads, rows, dim).to(q.dtype)


def reference_attention(q, k, v, encoding):
    """Plain softmax(q·kᵀ/√d + bias + causal mask)·v with the full matrix, the scores soft-capped first where
    the encoding caps them: the slow ground truth for tests."""
    keys = k.shape[2]
    k, v = expand_kv_heads(k, q.shape[1]), expand_kv_heads(v, q.shape[1])  # (B, H, Tk, Dh)
    scores = (q.float() @ k.float().transpose(-1, -2)) / q.shape[-1] ** 0.5  # (B, H, Tq, Tk)
    if encoding.score_cap is not None:
        scores = soft_cap(scores, encoding.score_cap)
    k_pos = torch.arange(keys, device=q.device)
    q_pos = k_pos[keys - q.shape[2] :]
    bias = encoding.bias(q_pos, k_pos)
    if bias is not None:
        scores = scores + bias
    causal = k_pos[None, :] > q_pos[:, None]
    scores = scores.masked_fill(causal, float("-inf"))
    return (scores.softmax(-1) @ v.float()).to(q.dtype)
