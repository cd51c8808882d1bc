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

from extrapolate.kernels.heads import expand_kv_heads
from extrapolate.kernels.stick_breaking import block_size


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
    side = max(keys, 1) if block_elements is None else block_size(batch * heads, block_elements)
    scale = dim**-0.5
    work = torch.promote_types(q.dtype, torch.float32)  # float32 at least (float64 inputs stay float64)
    pieces = []
    for q0 in range(0, length, side):
        q1 = min(length, q0 + side)
        rows = torch.arange(offset + q0, offset + q1, device=q.device)  # (rows,) absolute query positions
        query = q[:, :, q0:q1].to(work)  # (B, H, rows, Dh)
        table_logits = query @ table.to(work)  # (B, H, rows, P): q_i·e[p] at every whole position p
        passed = query.new_zeros(batch, heads, q1 - q0)  # Σ of the gates over the keys walked
        top = query.new_full((batch, heads, q1 - q0), float("-inf"))  # running maximum score
        total = query.new_zeros(batch, heads, q1 - q0)  # running Σ exp(score - top)
        out = query.new_zeros(batch, heads, q1 - q0, dim)  # running Σ exp(score - top)·v
        for k1 in range(offset + q1, 0, -side):  # keys [k0, k1), the last one the block's last query (j ≤ i)
            k0 = max(0, k1 - side)
            raw = query @ k[:, :, k0:k1].to(work).transpose(-1, -2)  # (B, H, rows, k1-k0) q·k
            seen = torch.arange(k0, k1, device=q.device)[None, :] <= rows[:, None]  # (rows, k1-k0): j ≤ i
            gates = torch.sigmoid(raw * scale).masked_fill(~seen, 0.0)
            position = (gates.flip(-1).cumsum(-1).flip(-1) + passed[..., None]).clamp(max=last_row)
            floor = position.floor()
            above = position - floor  # the ceiling row's weight, through which the gates learn
            low = table_logits.gather(-1, floor.long())  # (B, H, rows, k1-k0)
            high = table_logits.gather(-1, position.ceil().long())
            score = ((raw + high * above + low * (1 - above)) * scale).masked_fill(~seen, float("-inf"))
            new_top = torch.maximum(top, score.amax(-1))  # finite: each block holds a seen key for every row
            rescale = (top - new_top).exp()
            weights = (score - new_top[..., None]).exp()
            total = total * rescale + weights.sum(-1)
            out = out * rescale[..., None] + weights @ v[:, :, k0:k1].to(work)
            top, passed = new_top, passed + gates.sum(-1)
        pieces.append((out / total[..., None]).to(q.dtype))
    return torch.cat(pieces, dim=2)
