"""Contextual position attention (CoPE, encodings/contextual.py) in memory linear in the length, on any device.

Query i counts its way back to key j ≤ i with gates: p_ij = Σ_{j≤m≤i} σ(q_i·k_m/√d), a fractional position
(clamped to the table's last row) that only the keys the gates open advance. Its logit is read from the
learned table e (Dh, P) by interpolation, q_i·e[p] between the floor and ceiling rows, and added to the score
before the scaling: s_ij = (q_i·k_j + q_i·e[p_ij])/√d, then a causal softmax.

p_ij is a sum over the keys from j to i, which depends on the query: the kernel walks each query block's keys
in blocks from the diagonal backwards, keeping the gates' sum over the keys already passed (`passed`,
(B, H, rows) float32), and merges the blocks' softmaxes online (a running maximum, sum and output), so no
tensor has more than a block of scores and the (rows, P) table logits.
"""

from __future__ import annotations

import torch

from extrapolate.kernels.flash import attend
from extrapolate.kernels.heads import expand_kv_heads
from extrapolate.kernels.walk import key_blocks, walk_shape


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, table: torch.Tensor, block_elements: int | None
) -> torch.Tensor:
    """q: (B, H, Tq, Dh); k, v: (B, Hkv, Tk, Dh), the queries the last Tq of the Tk positions; table (Dh, P),
    the position embeddings every head of the layer shares -> (B, H, Tq, Dh).

    `block_elements=None`: one block of every query against every key (the reference kernel)."""
    batch, heads, length, dim = q.shape
    keys, last_row = k.shape[2], table.shape[-1] - 1
    offset = keys - length  # absolute position of the first query
    k, v = expand_kv_heads(k, heads), expand_kv_heads(v, heads)  # (B, H, Tk, Dh)
    side, largest = walk_shape(batch * heads, block_elements, length, keys)  # query rows a block, keys at most
    scale = dim**-0.5
    work = torch.promote_types(q.dtype, torch.float32)  # float32 at least (float64 inputs stay float64)
    pieces = []
    for q0 in range(0, length, side):
        q1 = min(length, q0 + side)
        rows = torch.arange(offset + q0, offset + q1, device=q.device)  # (rows,) absolute query positions
        query = q[:, :, q0:q1].to(work)  # (B, H, rows, Dh)
        # matmuls' outputs back to `work`: under CPU autocast they come out in bf16, where a sum of gates is
        # whole past 128 and CoPE's interpolation between rows is lost (the reference's float32 mask restores it)
        table_logits = (query @ table.to(work)).to(work)  # (B, H, rows, P): q_i·e[p] at every whole position p
        passed = query.new_zeros(batch, heads, q1 - q0)  # Σ of the gates over the keys walked
        parts = []  # (out, log-sum-exp) of the softmax over each block of keys
        for k0, k1 in key_blocks(offset + q1, q1 - q0, largest):  # back from the block's last query (j ≤ i)
            if not passed.requires_grad and bool((passed >= last_row).all()):
                # every farther key sits at the table's last row: its logit a constant of the row, so the rest
                # is plain attention with that constant added to its log-sum-exp
                parts.append(_plain(query, k[:, :, :k1], v[:, :, :k1], scale, table_logits[..., last_row], largest))
                break
            # the block's keys and values nearest first: a forward cumulative sum is then the count from the key
            # to the query, and the (rows, keys) scores are never flipped
            raw = (query @ k[:, :, k0:k1].flip(2).to(work).transpose(-1, -2)).to(work)  # (B, H, rows, k1-k0) q·k
            gates = torch.sigmoid(raw * scale)
            after = None
            if k1 > offset + q0 + 1:  # keys past some row's own position: masked (j ≤ i only)
                after = torch.arange(k1 - 1, k0 - 1, -1, device=q.device)[None, :] > rows[:, None]  # (rows, keys)
                gates = gates.masked_fill(after, 0.0)
            position = (gates.cumsum(-1) + passed[..., None]).clamp(max=last_row)
            floor = position.floor()
            above = position - floor  # the ceiling row's weight, through which the gates learn
            low = table_logits.gather(-1, floor.long())  # (B, H, rows, k1-k0)
            high = table_logits.gather(-1, position.ceil().long())
            score = (raw + high * above + low * (1 - above)) * scale
            if after is not None:
                score = score.masked_fill(after, float("-inf"))
            lse = score.logsumexp(-1)  # finite: each block holds a seen key for every row
            parts.append(((score - lse[..., None]).exp() @ v[:, :, k0:k1].flip(2).to(work), lse))
            passed = passed + gates.sum(-1)
        pieces.append(_merged(parts).to(q.dtype))
    return torch.cat(pieces, dim=2)


def _plain(query, k, v, scale: float, constant: torch.Tensor, side: int):
    """(out, lse) of softmax((q·k + constant)·scale) over every key given: the CPU flash op in one call where
    it runs (evaluation on the CPU), else blocks of `side` keys; `constant` (B, H, rows)."""
    if flash_usable(query):
        out, lse = attend(query, k.to(query.dtype), v.to(query.dtype), False, scale)
        return out.to(query.dtype), lse.to(query.dtype) + constant * scale
    parts = []
    for k0 in range(0, k.shape[2], side):
        score = query @ k[:, :, k0 : k0 + side].to(query.dtype).transpose(-1, -2) * scale  # (B, H, rows, keys)
        lse = score.logsumexp(-1)
        parts.append(((score - lse[..., None]).exp() @ v[:, :, k0 : k0 + side].to(query.dtype), lse + constant * scale))
    return _merged(parts), torch.logsumexp(torch.stack([lse for _, lse in parts]), 0)


def flash_usable(query: torch.Tensor) -> bool:
    """Whether the CPU flash op (no backward, float32 and bf16 only) can take these queries."""
    return query.device.type == "cpu" and query.dtype == torch.float32 and not torch.is_grad_enabled()


def _merged(parts):
    """The softmax over the union of disjoint key sets, from each set's (out, log-sum-exp)."""
    if len(parts) == 1:
        return parts[0][0]
    total = torch.logsumexp(torch.stack([lse for _, lse in parts]), 0)  # (B, H, rows)
    return sum(out * (lse - total).exp()[..., None] for out, lse in parts)
