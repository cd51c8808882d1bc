"""Dual chunk attention (encodings/dual_chunk.py) in memory linear in the length.

Keys come rotated once, at their position in their chunk (j mod s), by the encoding's `rotate`, so a KV cache
keeps them rotated and a decoding step rotates only its own key; each query is rotated here three ways, by the
chunk its keys lie in. Each part is a softmax over its own keys; merged through their log-sum-exp, they are the one
softmax over all keys of the definition.

The fused kernel (CPU evaluation) takes the queries one chunk at a time, rows [a, b) of chunk n, in up to four
flash calls, none of them n × n: the chunk's own keys before the rows (whole) and the rows' own square
(causal), both with q at i mod s; the chunk before (whole) with q at its successive-chunk position; every
earlier key (whole) with q at the inter-chunk position. On CUDA the three parts run as one flex_attention
call over the keys three times (`side_by_side`; a few queries: one SDPA call with those rows' mask). The
blocked kernel (other devices, gradients, and
the reference in one block) builds the three score blocks explicitly, rows × keys at a time, and keeps each
pair's score from the part its chunks select.
"""

from __future__ import annotations

import torch

from extrapolate.encodings.base import ChunkedRotary
from extrapolate.kernels import flash as fused
from extrapolate.kernels.blocked import block_rows
from extrapolate.kernels.heads import expand_kv_heads


def rotated_parts(q, k, form: ChunkedRotary):
    """(q_intra, q_successive, q_inter): q (B, H, Tq, Dh) rotated for each part; the queries are the last Tq
    of the Tk positions of the keys (earlier keys come from a cache). The keys come rotated at j mod s."""
    keys, queries = k.shape[2], q.shape[2]
    q_pos = torch.arange(keys - queries, keys, device=q.device)  # (Tq,) int64
    inter = torch.full((queries,), form.inter_query, device=q.device)  # (Tq,) float32
    return (
        form.rotate(q, (q_pos % form.chunk).float()),
        form.rotate(q, form.successive_query(q_pos)),
        form.rotate(q, inter),
    )


def side_by_side(q, k, v, form: ChunkedRotary):
    """The three parts as one attention over the keys three times: q_all (B, H, Tq, 3·Dh) = [q_intra,
    q_successive, q_inter]; k_all (B, Hkv, 3·Tk, 3·Dh) = copy c holding k rotated in its c-th slot, zeros in the
    others; v_all (B, Hkv, 3·Tk, Dh) = [v; v; v]. A key of copy c scores that part's q against k, so with the mask
    of `flex.chunk_mask_function` (copy c where the chunks apart select part c) one softmax at scale Dh^-1/2
    is the dual chunk attention, and gradients need no log-sum-exp merge. Memory: three times the keys."""
    intra, successive, inter = rotated_parts(q, k, form)
    zeros = torch.zeros_like(k)
    q_all = torch.cat([intra, successive, inter], dim=-1)
    copies = [torch.cat([k if slot == copy else zeros for slot in range(3)], dim=-1) for copy in range(3)]
    return q_all, torch.cat(copies, dim=2), torch.cat([v, v, v], dim=2)


def fused_attention(q, k, v, form: ChunkedRotary) -> torch.Tensor:
    """q: (B, H, Tq, Dh) unrotated; k: (B, Hkv, Tk, Dh) rotated at j mod s; v: (B, Hkv, Tk, Dh) -> (B, H, Tq, Dh).
    Keys seen whole are never copied per query head: the query heads of a key head are stacked as rows
    (`flash.attend_grouped`)."""
    heads, length, dim = q.shape[1], q.shape[2], q.shape[3]
    keys, s = k.shape[2], form.chunk
    offset = keys - length  # absolute position of the first query
    intra, successive, inter = rotated_parts(q, k, form)
    scale = dim**-0.5
    out = torch.empty_like(q)
    a = offset
    while a < keys:  # rows [a, b): the queries of chunk n
        n = a // s
        start, b = n * s, min(keys, (n + 1) * s)
        rows = slice(a - offset, b - offset)
        # the rows' own keys, causal among themselves: a square no stacking keeps causal, so its few keys copied
        own_k, own_v = (expand_kv_heads(t[:, :, a:b], heads) for t in (k, v))
        parts = [fused.attend(intra[:, :, rows], own_k, own_v, True, scale)]
        if a > start:  # the chunk's keys before these rows (a cache continued mid-chunk): seen whole
            parts.append(fused.attend_grouped(intra[:, :, rows], k[:, :, start:a], v[:, :, start:a], None, scale))
        if n >= 1:
            before = slice(start - s, start)
            parts.append(fused.attend_grouped(successive[:, :, rows], k[:, :, before], v[:, :, before], None, scale))
        if n >= 2:
            earlier = slice(0, start - s)
            parts.append(fused.attend_grouped(inter[:, :, rows], k[:, :, earlier], v[:, :, earlier], None, scale))
        out[:, :, rows] = fused.merge(parts)
        a = b
    return out


def blocked_attention(q, k, v, form: ChunkedRotary, block_elements: int | None) -> torch.Tensor:
    """The same attention with explicit score blocks (B, H, rows, keys): any device, differentiable.
    `block_elements=None`: one block holding the whole score matrix (the reference kernel)."""
    batch, heads, length, _ = q.shape
    keys = k.shape[2]
    offset = keys - length
    intra, successive, inter = rotated_parts(q, k, form)
    k_rot, v = expand_kv_heads(k, heads), expand_kv_heads(v, heads)
    scale = q.shape[-1] ** -0.5
    rows = block_rows(q, keys, block_elements)
    k_pos = torch.arange(keys, device=q.device)
    pieces = []
    for q0 in range(0, length, rows):
        q1 = min(length, q0 + rows)
        end = offset + q1  # keys past the block's last query are masked: skip them
        q_pos = k_pos[offset + q0 : end, None]  # (rows, 1)
        apart = q_pos // form.chunk - k_pos[None, :end] // form.chunk  # (rows, end) chunks between query and key
        keys_t = k_rot[:, :, :end].float().transpose(-1, -2)  # (B, H, Dh, end)
        own, before, earlier = (part[:, :, q0:q1].float() @ keys_t for part in (intra, successive, inter))
        scores = torch.where(apart == 0, own, torch.where(apart == 1, before, earlier)) * scale  # (B, H, rows, end)
        weights = scores.masked_fill(k_pos[None, :end] > q_pos, float("-inf")).softmax(-1)
        pieces.append((weights @ v[:, :, :end].float()).to(q.dtype))
    return torch.cat(pieces, dim=2)
