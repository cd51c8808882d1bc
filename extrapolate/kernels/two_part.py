"""Two-part rotary attention (Self-Extend, ReRoPE, StreamingLLM, LM-Infinite) in memory linear in the length.

Keys fewer than `window` tokens back are attended with q and k rotated at their own positions, keys further
back with q and k rotated at the encoding's far positions. Each part is a softmax over its own keys; the two
are merged through their log-sum-exp, so the result is the one softmax over all keys of the definition.

The fused kernel cuts every block of query rows [a0, a1) into three flash calls, none of them n × n:
- near: keys [a0 - w + 1, a1), an additive (rows × (rows + w - 1)) mask keeping i - w < j ≤ i;
- far, full: keys [0, a0 - w], which every row of the block sees whole: mask-free;
- far, staircase: the keys between, which row i sees up to i - w: a causal square shifted by one row;
- or, where the far part sees only its first few keys (attention sinks), one banded call over those keys.
On CUDA both parts run as one flex_attention call over the keys twice, laid out by `side_by_side` (a few
queries, as in decoding: one SDPA call with those rows' mask). The blocked kernel (other devices, CPU
gradients) builds both score blocks explicitly, rows × keys at a time.
"""

from __future__ import annotations

import torch

from extrapolate.encodings.base import TwoPartRotary
from extrapolate.kernels import flash as fused
from extrapolate.kernels.blocked import block_rows
from extrapolate.kernels.heads import expand_kv_heads

ROWS = 256  # query rows per block of the fused kernel: the near mask is rows × (rows + w - 1)


def rotated_parts(q, k, form: TwoPartRotary):
    """(q_near, k_near, q_far, k_far): q (B, H, Tq, Dh) and k (B, Hkv, Tk, Dh) rotated for each part; the
    queries are the last Tq of the Tk positions (earlier keys come from a cache, unrotated)."""
    keys, queries = k.shape[2], q.shape[2]
    k_pos = torch.arange(keys, device=q.device)  # (Tk,) int64
    q_pos = k_pos[keys - queries :]  # (Tq,)
    near = form.rotate(q, q_pos.float()), form.rotate(k, k_pos.float())
    far = form.rotate(q, form.far_query(q_pos)), form.rotate(k, form.far_key(k_pos))
    return (*near, *far)


def side_by_side(q, k, v, form: TwoPartRotary):
    """Both parts as one attention over the keys twice: q_both (B, H, Tq, 2·Dh) = [q_near, q_far];
    k_both (B, Hkv, 2·Tk, 2·Dh) = the near copy [k_near, 0] then the far copy [0, k_far]; v_both
    (B, Hkv, 2·Tk, Dh) = [v; v]. A near key scores q_near·k_near, a far key q_far·k_far, so with the mask of
    `flex.two_part_ranges` (near copy below the window, far copy from it on) one softmax at scale Dh^-1/2 is
    the two-part attention, and gradients need no log-sum-exp merge. Memory: twice the keys, linear in n."""
    q_near, k_near, q_far, k_far = rotated_parts(q, k, form)
    zeros = torch.zeros_like(k_near)
    q_both = torch.cat([q_near, q_far], dim=-1)
    k_both = torch.cat([torch.cat([k_near, zeros], dim=-1), torch.cat([zeros, k_far], dim=-1)], dim=2)
    return q_both, k_both, torch.cat([v, v], dim=2)


def near_mask(a0: int, a1: int, k0: int, window: int, dtype, device) -> torch.Tensor:
    """(1, a1 - a0, a1 - k0): 0 where query i sees key j in the near part (i - window < j ≤ i), else -inf."""
    distance = torch.arange(a0, a1, device=device)[:, None] - torch.arange(k0, a1, device=device)[None, :]
    keep = (distance >= 0) & (distance < window)
    return torch.zeros(keep.shape, dtype=dtype, device=device).masked_fill(~keep, float("-inf"))[None]


def fused_attention(q, k, v, form: TwoPartRotary, rows: int = ROWS) -> torch.Tensor:
    """q: (B, H, Tq, Dh) unrotated; k, v: (B, Hkv, Tk, Dh) unrotated -> (B, H, Tq, Dh)."""
    batch, heads, length, dim = q.shape
    offset = k.shape[2] - length  # absolute position of the first query
    q_near, k_near, q_far, k_far = rotated_parts(q, k, form)
    k_near, k_far, v = (expand_kv_heads(t, heads) for t in (k_near, k_far, v))
    scale, w = dim**-0.5, form.window
    out = torch.empty_like(q)
    for q0 in range(0, length, rows):
        q1 = min(length, q0 + rows)
        a0, a1, block = offset + q0, offset + q1, q1 - q0
        n0 = max(0, a0 - w + 1)  # first near key of the block's first row
        mask = near_mask(a0, a1, n0, w, q.dtype, q.device)
        parts = [fused.attend_band(q_near[:, :, q0:q1], k_near[:, :, n0:a1], v[:, :, n0:a1], mask, scale)]
        if form.far_keys is not None:  # a far part of a few keys (sinks): one banded call, no staircase
            parts += sink_part(q_far[:, :, q0:q1], k_far, v, a0, w, form.far_keys, scale)
        elif a0 - w >= 0:  # keys [0, a0 - w]: far for every row of the block
            far_keys = slice(0, a0 - w + 1)
            parts.append(fused.attend(q_far[:, :, q0:q1], k_far[:, :, far_keys], v[:, :, far_keys], False, scale))
        # keys [t0, a1 - w): row r of the block sees the first r - shift + 1 of them, rows before `shift` none
        t0 = max(0, a0 - w + 1)
        shift = t0 - (a0 - w)
        if shift < block and form.far_keys is None:
            stair_keys = slice(t0, t0 + block - shift)
            stair_out, stair_lse = fused.attend(
                q_far[:, :, q0 + shift : q1], k_far[:, :, stair_keys], v[:, :, stair_keys], True, scale
            )
            padded_out = stair_out.new_zeros(batch, heads, block, dim)  # rows without a staircase key weigh 0
            padded_lse = stair_lse.new_full((batch, heads, block), float("-inf"))
            padded_out[:, :, shift:], padded_lse[:, :, shift:] = stair_out, stair_lse
            parts.append((padded_out, padded_lse))
        out[:, :, q0:q1] = fused.merge(parts)
    return out


def sink_part(q_far, k_far, v, a0: int, window: int, far_keys: int, scale: float) -> list:
    """The far part of a block of query rows [a0, a0 + rows) limited to the first `far_keys` keys: [] where no
    row sees one, else one (out, lse) over keys [0, min(far_keys, last row - window + 1)), rows before the
    first that sees key 0 (row `window`) weighing nothing. Memory: rows × far_keys."""
    batch, heads, rows, dim = q_far.shape
    first = max(0, window - a0)  # rows before it are closer than the window to key 0
    keys = min(far_keys, a0 + rows - window)
    if first >= rows or keys <= 0:
        return []
    distance = torch.arange(a0 + first, a0 + rows, device=q_far.device)[:, None] - torch.arange(
        keys, device=q_far.device
    )
    mask = torch.zeros(distance.shape, dtype=q_far.dtype, device=q_far.device)
    mask = mask.masked_fill(distance < window, float("-inf"))[None]  # (1, rows - first, keys); key 0 always seen
    out, lse = fused.attend_band(q_far[:, :, first:], k_far[:, :, :keys], v[:, :, :keys], mask, scale)
    padded_out = out.new_zeros(batch, heads, rows, dim)
    padded_lse = lse.new_full((batch, heads, rows), float("-inf"))
    padded_out[:, :, first:], padded_lse[:, :, first:] = out, lse
    return [(padded_out, padded_lse)]


def blocked_attention(q, k, v, form: TwoPartRotary, block_elements: int | None) -> torch.Tensor:
    """The same attention with explicit score blocks (B, H, rows, keys): any device, differentiable.
    `block_elements=None`: one block holding the whole score matrix (the reference kernel)."""
    batch, heads, length, _ = q.shape
    keys = k.shape[2]
    offset = keys - length
    q_near, k_near, q_far, k_far = rotated_parts(q, k, form)
    k_near, k_far, v = (expand_kv_heads(t, heads) for t in (k_near, k_far, v))
    scale = q.shape[-1] ** -0.5
    rows = block_rows(q, keys, block_elements)
    k_pos = torch.arange(keys, device=q.device)
    pieces = []
    for q0 in range(0, length, rows):
        q1 = min(length, q0 + rows)
        end = offset + q1  # keys past the block's last query are masked: skip them
        distance = k_pos[offset + q0 : end, None] - k_pos[None, :end]  # (rows, end)
        near = q_near[:, :, q0:q1].float() @ k_near[:, :, :end].float().transpose(-1, -2)  # (B, H, rows, end)
        far = q_far[:, :, q0:q1].float() @ k_far[:, :, :end].float().transpose(-1, -2)  # (B, H, rows, end)
        if form.far_keys is not None:  # the far part sees the first far_keys keys only
            far = far.masked_fill(k_pos[None, :end] >= form.far_keys, float("-inf"))
        scores = torch.where(distance < form.window, near, far) * scale
        weights = scores.masked_fill(distance < 0, float("-inf")).softmax(-1)
        pieces.append((weights @ v[:, :, :end].float()).to(q.dtype))
    return torch.cat(pieces, dim=2)
