"""DAPE's attention (encodings/dape.py) in memory linear in the length at evaluation, on any device (in
training autograd keeps each block's scores for the backward pass).

Each logit is the score, the bias and an MLP of both across the heads at that (query, key):
s_ij = a_ij + b_ij + f([a_ij; b_ij]), a = q·k/√d per head, b the KERPLE bias of i − j per head, f a two-layer
MLP from 2H channels to H. f mixes heads, never positions, so each block of query rows meets its keys in blocks
of any order, and the blocks' softmaxes merge exactly by their log-sum-exp once a row block's keys are done: no
tensor holds more than a block of scores and its MLP's hidden channels.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from extrapolate.kernels.heads import expand_kv_heads
from extrapolate.kernels.walk import walk_shape


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    bias: Callable[[torch.Tensor], torch.Tensor],
    mlp: nn.Module,
    block_elements: int | None,
) -> torch.Tensor:
    """q: (B, H, Tq, Dh); k, v: (B, Hkv, Tk, Dh), the queries the last Tq of the Tk positions; `bias` maps
    distances (rows, keys) ≥ 0 to (H, rows, keys); `mlp` maps (..., 2H) to (..., H) -> (B, H, Tq, Dh).

    `block_elements=None`: one block of every query against every key (the reference kernel)."""
    batch, heads, length, dim = q.shape
    keys = k.shape[2]
    offset = keys - length  # absolute position of the first query
    k, v = expand_kv_heads(k, heads), expand_kv_heads(v, heads)  # (B, H, Tk, Dh)
    hidden = next(m.out_features for m in mlp.modules() if isinstance(m, nn.Linear))
    # a block's work holds its scores, bias, the MLP's input and hidden channels: 3H + hidden values a pair
    side, largest = walk_shape(batch * (3 * heads + hidden), block_elements, length, keys)
    scale = dim**-0.5
    work = torch.promote_types(q.dtype, torch.float32)  # float32 at least (float64 inputs stay float64)
    weights = next(mlp.parameters()).dtype
    pieces = []
    for q0 in range(0, length, side):
        q1 = min(length, q0 + side)
        rows = torch.arange(offset + q0, offset + q1, device=q.device)  # (rows,) absolute query positions
        query = q[:, :, q0:q1].to(work)  # (B, H, rows, Dh)
        parts = []  # (out, log-sum-exp) of the softmax over each block of keys
        for k0 in range(0, offset + q1, largest):  # keys up to the block's last query (j ≤ i)
            k1 = min(offset + q1, k0 + largest)
            score = query @ k[:, :, k0:k1].to(work).transpose(-1, -2) * scale  # (B, H, rows, keys) a
            distance = rows[:, None] - torch.arange(k0, k1, device=q.device)[None, :]  # (rows, keys) i − j
            b = bias(distance.clamp(min=0).to(work)).to(work)  # (H, rows, keys); a future key's is masked below
            both = torch.cat((score, b.expand(batch, -1, -1, -1)), dim=1)  # (B, 2H, rows, keys): [a; b]
            mixed = mlp(both.permute(0, 2, 3, 1).to(weights)).permute(0, 3, 1, 2).to(work)  # (B, H, rows, keys)
            score = (score + b + mixed).masked_fill(distance < 0, float("-inf"))
            lse = score.logsumexp(-1)  # (B, H, rows); -inf for a row whose keys all lie ahead of it
            seen = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
            parts.append(((score - seen[..., None]).exp() @ v[:, :, k0:k1].to(work), lse))
        pieces.append(merged(parts).to(q.dtype))
    return torch.cat(pieces, dim=2)


def merged(parts: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """The softmax over the union of disjoint key sets, from each set's (out, log-sum-exp); a set with no key
    of a row (log-sum-exp -inf) weighs 0 there. The first set holds key 0, which every row sees."""
    if len(parts) == 1:
        return parts[0][0]
    total = torch.logsumexp(torch.stack([lse for _, lse in parts]), 0)  # (B, H, rows)
    return sum(out * (lse - total).exp()[..., None] for out, lse in parts)
