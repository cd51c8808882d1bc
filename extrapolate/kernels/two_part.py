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


def rotated_parts(q, k, form: TwoPartRotary, near_from: int = 0, far_to: int | None = None):
    """(q_near, k_near, q_far, k_far): q (B, H, Tq, Dh) rotated for each part, the keys (B, Hkv, ·, Dh) of each
    part rotated from k (B, Hkv, Tk, Dh): keys [near_from, Tk) near, keys [0, far_to) far (default: all). The
    queries are the last Tq of the Tk positions (earlier keys come from a cache, unrotated)."""
    keys, queries = k.shape[2], q.shape[2]
    far_to = keys if far_to is None else far_to
    offset = keys - queries
    q_pos = torch.arange(offset, keys, device=q.device)  # (Tq,) int64
    q_near = form.rotate_from(q, offset, False)
    k_near = form.rotate_from(k[:, :, near_from:], near_from, False)
    q_far = form.rotate(q, form.far_query(q_pos))  # the far query positions differ from the far keys'
    k_far = form.rotate_from(k[:, :, :far_to], 0, True)
    return q_near, k_near, q_far, k_far


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


def visible(a0: int, a1: int, k0: int, k1: int, lowest: int, highest: int, dtype, device) -> torch.Tensor:
    """(a1 - a0, k1 - k0) additive mask of query rows [a0, a1) against keys [k0, k1): 0 where the distance
    i - j lies in [lowest, highest], else -inf."""
    distance = torch.arange(a0, a1, device=device)[:, None] - torch.arange(k0, k1, device=device)[None, :]
    keep = (distance >= lowest) & (distance <= highest)
    return torch.zeros(keep.shape, dtype=dtype, device=device).masked_fill(~keep, float("-inf"))


def fused_attention(q, k, v, form: TwoPartRotary, rows: int = ROWS) -> torch.Tensor:
    """q: (B, H, Tq, Dh) unrotated; k, v: (B, Hkv, Tk, Dh) unrotated -> (B, H, Tq, Dh).

    The keys are rotated only where some query sees them in that part (decoding at 16k with a window of
    L/3 rotates the near part's few thousand keys, not all of them twice), and never copied per query head:
    the query heads of a key head are stacked as rows (`flash.attend_grouped`), `rows` stacked rows a block."""
    batch, heads, length, dim = q.shape
    keys, group = k.shape[2], heads // k.shape[1]
    offset = keys - length  # absolute position of the first query
    scale, w = dim**-0.5, form.window
    near_from = max(0, offset - w + 1)  # keys before it are far for every query
    far_to = max(0, keys - w if form.far_keys is None else min(form.far_keys, keys - w))  # keys from it: near only
    q_near, k_near, q_far, k_far = rotated_parts(q, k, form, near_from, far_to)  # k_near: keys [near_from, Tk)
    out = torch.empty_like(q)
    step = max(1, rows // group)
    for q0 in range(0, length, step):
        q1 = min(length, q0 + step)
        a0, a1, block = offset + q0, offset + q1, q1 - q0
        n0 = max(0, a0 - w + 1)  # first near key of the block's first row
        # near: keys [n0, a1), row i seeing i - w < j ≤ i (a single row sees them all)
        mask = None if block == 1 else visible(a0, a1, n0, a1, 0, w - 1, q.dtype, q.device)
        near = slice(n0 - near_from, a1 - near_from)
        parts = [fused.attend_grouped(q_near[:, :, q0:q1], k_near[:, :, near], v[:, :, n0:a1], mask, scale)]
        if form.far_keys is not None:  # a far part of a few keys (sinks): one banded call, no staircase
            parts += sink_part(q_far[:, :, q0:q1], k_far, v, a0, w, form.far_keys, scale)
            out[:, :, q0:q1] = fused.merge(parts)
            continue
        if a0 - w >= 0:  # keys [0, a0 - w]: far for every row of the block
            whole = slice(0, a0 - w + 1)
            parts.append(fused.attend_grouped(q_far[:, :, q0:q1], k_far[:, :, whole], v[:, :, whole], None, scale))
        # keys [t0, a1 - w): row r of the block sees the first r - shift + 1 of them, rows before `shift` none
        t0 = max(0, a0 - w + 1)
        shift = t0 - (a0 - w)
        if shift < block:
            stair = slice(t0, t0 + block - shift)
            mask = visible(a0 + shift, a1, t0, t0 + block - shift, w, keys, q.dtype, q.device)
            stair_out, stair_lse = fused.attend_grouped(
                q_far[:, :, q0 + shift : q1], k_far[:, :, stair], v[:, :, stair], mask, scale
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
    mask = visible(a0 + first, a0 + rows, 0, keys, window, a0 + rows, q_far.dtype, q_far.device)  # key 0 always
    out, lse = fused.attend_grouped(q_far[:, :, first:], k_far[:, :, :keys], v[:, :, :keys], mask, scale)
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
