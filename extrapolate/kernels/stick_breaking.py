"""Stick-breaking attention (encodings/stick_breaking.py) in memory linear in the length, on any device.

Query i gives key j < i the weight A_ij = σ(z_ij)·Π_{j<m<i} (1 - σ(z_im)), z_ij = q_i·k_j/√d: the nearest key
breaks off its share of the stick first, each farther key a share of what is left. No softmax normalises the
row; what no key took, Π_{j<i} (1 - σ(z_ij)), goes to the query's own value (the authors' `rem`), so
out_i = Σ_j A_ij v_j + rem_i·v_i.

In log space log A_ij = log σ(z_ij) + Σ_{j<m<i} log(1 - σ(z_im)), a sum over the keys between, which depends on
the query: the kernel walks each query block's keys in blocks from the diagonal backwards, keeping the sum over
the keys already passed (`passed`, (B, H, rows) float32) and adding each block's own suffix sums. Once every row
of a block has given away all but e^-STOP of its stick, farther keys cannot move the output in float32, and the
walk stops: at long lengths a trained model's attention costs what its reach costs, not what the length does.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from extrapolate.kernels.heads import expand_kv_heads

STOP = 60.0  # a row that kept e^-60 of its stick (1e-26) takes nothing measurable from farther keys
MIN_BLOCK, MAX_BLOCK = 16, 1024  # square blocks of queries and keys, sized from the element budget


def block_size(batch_heads: int, block_elements: int) -> int:
    """The side of the square (rows × keys) score blocks B·H·side² ≤ block_elements, within its bounds."""
    return max(MIN_BLOCK, min(MAX_BLOCK, math.isqrt(max(1, block_elements // max(1, batch_heads)))))


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_elements: int | None) -> torch.Tensor:
    """q: (B, H, Tq, Dh); k, v: (B, Hkv, Tk, Dh), the queries the last Tq of the Tk positions -> (B, H, Tq, Dh).

    `block_elements=None`: one block of every query against every key (the reference kernel)."""
    batch, heads, length, dim = q.shape
    keys = k.shape[2]
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
        passed = q.new_zeros(batch, heads, q1 - q0, dtype=work)  # Σ log(1 - σ) over the keys walked
        out = q.new_zeros(batch, heads, q1 - q0, dim, dtype=work)
        for k1 in range(offset + q1 - 1, 0, -side):  # keys [k0, k1), the last one the block's last query's j < i
            k0 = max(0, k1 - side)
            z = query @ k[:, :, k0:k1].to(work).transpose(-1, -2) * scale  # (B, H, rows, k1-k0)
            before = torch.arange(k0, k1, device=q.device)[None, :] < rows[:, None]  # (rows, k1-k0): j < i
            log_keep = (-F.softplus(z)).masked_fill(~before, 0.0)  # log(1 - σ(z)), 0 where no key
            between = log_keep.flip(-1).cumsum(-1).flip(-1) - log_keep  # Σ over this block's keys after j
            log_weight = (F.logsigmoid(z) + between + passed[..., None]).masked_fill(~before, float("-inf"))
            out = out + log_weight.exp() @ v[:, :, k0:k1].to(work)
            passed = passed + log_keep.sum(-1)
            if not passed.requires_grad and bool((passed < -STOP).all()):
                break
        own = v[:, :, offset + q0 : offset + q1].to(work)  # (B, H, rows, Dh): the stick no key took
        pieces.append((out + passed.exp()[..., None] * own).to(q.dtype))
    return torch.cat(pieces, dim=2)
