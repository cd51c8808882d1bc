"""Stick-breaking attention (encodings/stick_breaking.py) in memory linear in the length, on any device.

Query i gives key j < i the weight A_ij = σ(z_ij)·Π_{j<m<i} (1 - σ(z_im)), z_ij = q_i·k_j/√d: the nearest key
breaks off its share of the stick first, each farther key a share of what is left. No softmax normalises the
row; what no key took, Π_{j<i} (1 - σ(z_ij)), goes to the query's own value (the authors' `rem`), so
out_i = Σ_j A_ij v_j + rem_i·v_i.

In log space log A_ij = log σ(z_ij) + Σ_{j<m<i} log(1 - σ(z_im)), a sum over the keys between, which depends on
the query: the kernel walks each query block's keys in blocks from the diagonal backwards, keeping the sum over
the keys already passed (`passed`, (B, H, rows) float32: the stick spent, as -log of what is left) and adding
each block's own sums (kernels/walk.py). Once every row of a block has given away all but e^-STOP of its stick,
farther keys cannot move the output in float32, and the walk stops: at long lengths a model's attention costs
what its reach costs, not what the length does.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from extrapolate.kernels.heads import expand_kv_heads
from extrapolate.kernels.walk import key_blocks, walk_shape

STOP = 60.0  # a row that kept e^-60 of its stick (1e-26) takes nothing measurable from farther keys


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_elements: int | None) -> torch.Tensor:
    """q: (B, H, Tq, Dh); k, v: (B, Hkv, Tk, Dh), the queries the last Tq of the Tk positions -> (B, H, Tq, Dh).

    `block_elements=None`: one block of every query against every key (the reference kernel)."""
    batch, heads, length, dim = q.shape
    keys = k.shape[2]
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
        passed = q.new_zeros(batch, heads, q1 - q0, dtype=work)  # Σ -log(1 - σ) over the keys walked
        out = q.new_zeros(batch, heads, q1 - q0, dim, dtype=work)
        for k0, k1 in key_blocks(offset + q1 - 1, q1 - q0, largest):  # back from the last query's j < i
            # the block's keys and values nearest first: a forward cumulative sum is then the sum over the keys
            # between, and the (rows, keys) scores are never flipped
            keys_back = k[:, :, k0:k1].flip(2).to(work)  # (B, H, k1-k0, Dh), key k1-1 first
            # back to `work` after the matmul (bf16 under CPU autocast), as the reference's `logits.float()`
            z = (query @ keys_back.transpose(-1, -2)).to(work) * scale  # (B, H, rows, k1-k0)
            spent = F.softplus(z)  # -log(1 - σ(z)): what each key takes from the stick, in log space
            log_share = z - spent  # log σ(z)
            if k1 > offset + q0:  # keys at or past some row's own position: mask them (j < i only)
                after = torch.arange(k1 - 1, k0 - 1, -1, device=q.device)[None, :] >= rows[:, None]  # (rows, keys)
                spent, log_share = spent.masked_fill(after, 0.0), log_share.masked_fill(after, float("-inf"))
            taken = spent.cumsum(-1)  # Σ over this block's keys from the nearest to j, j's own included
            log_weight = log_share - (taken - spent) - passed[..., None]  # log σ(z_ij) + Σ_{j<m<i} log(1 - σ(z_im))
            out = out + log_weight.exp() @ v[:, :, k0:k1].flip(2).to(work)
            passed = passed + taken[..., -1]
            if not passed.requires_grad and bool((passed > STOP).all()):
                break
        own = v[:, :, offset + q0 : offset + q1].to(work)  # (B, H, rows, Dh): the stick no key took
        pieces.append((out + (-passed).exp()[..., None] * own).to(q.dtype))
    return torch.cat(pieces, dim=2)
