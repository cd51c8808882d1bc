"""Attention through `torch.nn.attention.flex_attention`: the fused kernel of every encoding on CUDA, forward
and backward.

- Bias kinds: the bias enters as a score modification computed inside the kernel from the encoding's
  `score_bias` (ALiBi, T5, KERPLE read their (H, n) distance table; FIRE evaluates its MLP per score).
- Soft-capped scores (Gemma 2): the same score modification caps each score before it adds the bias.
- Two-part rotary kinds (Self-Extend, ReRoPE): one call over the keys twice, near copy then far copy, with
  q and k of each part side by side in a head of twice the size (see `kernels.two_part`): a single softmax
  over both parts, so gradients flow as through any attention. Dual chunk attention likewise over the keys
  three times, one copy a part, its block mask from the chunks (`chunk_block_mask`).

Fully masked blocks are skipped through a block mask built here from the mask's structure — every mask of
the project is a set of key ranges, each visible at a range of distances — so creating it costs
(queries / 128) × (keys / 128) block entries, never an n × n evaluation of the mask function.

flex compiles (seconds on a GPU, tens of seconds on a CPU, per shape; `FLEX_RECOMPILES` says why the compile
limit is raised); `attention.attention_plan` plans it on
CUDA, and on other devices only when asked (`--kernel flex`; the CPU build has no backward). Where it fails to
compile, `attention.FLEX_STATUS` keeps the reason and every later plan is the blocked kernel.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from extrapolate.encodings.softcap import soft_cap

BLOCK = 128  # flex's block size: the unit in which fully masked key blocks are skipped


# Each shape, grad mode and score modification compiles flex anew. Past dynamo's recompile limit (8 by default,
# reached by one run that evaluates several lengths) flex would run uncompiled, which builds the n × n score
# matrix: allow many compiles, and past them fail (attention.py then runs the blocked kernel, linear in memory)
# rather than silently build that matrix.
FLEX_RECOMPILES = 1024


@functools.cache
def _compiled():
    import torch._dynamo

    config = torch._dynamo.config
    config.recompile_limit = max(config.recompile_limit, FLEX_RECOMPILES)
    config.accumulated_recompile_limit = max(config.accumulated_recompile_limit, 4 * FLEX_RECOMPILES)
    config.fail_on_recompile_limit_hit = True
    return torch.compile(flex_attention, dynamic=False)


@dataclass(frozen=True)
class KeyRange:
    """Keys [start, start + length) of the key axis; query at absolute position i sees key start + j of them
    when min_distance ≤ i - j ≤ max_distance (None: no upper bound)."""

    start: int
    length: int
    min_distance: int = 0
    max_distance: int | None = None


def causal_ranges(keys: int) -> tuple[KeyRange, ...]:
    return (KeyRange(0, keys),)


def two_part_ranges(keys: int, window: int, far_keys: int | None = None) -> tuple[KeyRange, ...]:
    """The near copy of the keys at distances below the window, the far copy from the window on (only its
    first `far_keys` keys where the far part is limited to them)."""
    far = keys if far_keys is None else min(keys, far_keys)
    return KeyRange(0, keys, 0, window - 1), KeyRange(keys, far, window, None)


def mask_function(ranges: tuple[KeyRange, ...], offset: int):
    """flex's mask_mod for `ranges`, queries at absolute positions q_idx + offset."""

    def visible(b, h, q_idx, kv_idx):
        keep = None
        for r in ranges:
            j = kv_idx - r.start
            distance = q_idx + offset - j
            inside = (j >= 0) & (j < r.length) & (distance >= r.min_distance)
            if r.max_distance is not None:
                inside = inside & (distance <= r.max_distance)
            keep = inside if keep is None else keep | inside
        return keep

    return visible


def block_structure(
    queries: int, total_keys: int, offset: int, ranges: tuple[KeyRange, ...], device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """(partial, full): (Qb, Kb) bool maps of the key blocks a query block sees in part (the mask function
    decides inside) or whole, from the ranges alone. A block cut by the end of the queries or keys, or by a
    range's edge, is never full."""
    q_blocks, k_blocks = math.ceil(queries / BLOCK), math.ceil(total_keys / BLOCK)
    q0 = torch.arange(q_blocks, device=device) * BLOCK  # (Qb,) first query row of each block
    q1 = torch.clamp(q0 + BLOCK, max=queries) - 1  # (Qb,) last row
    k0 = torch.arange(k_blocks, device=device) * BLOCK  # (Kb,)
    k1 = torch.clamp(k0 + BLOCK, max=total_keys) - 1
    whole_rows = (q1 - q0 + 1 == BLOCK)[:, None]  # (Qb, 1)
    seen = torch.zeros(q_blocks, k_blocks, dtype=torch.bool, device=device)
    full = torch.zeros_like(seen)
    for r in ranges:
        a = torch.clamp(k0, min=r.start)  # (Kb,) the block's keys inside the range, as absolute key indices
        b = torch.clamp(k1, max=r.start + r.length - 1)
        overlaps = a <= b
        nearest = (q0 + offset)[:, None] - (b - r.start)[None, :]  # (Qb, Kb) smallest distance in the block
        farthest = (q1 + offset)[:, None] - (a - r.start)[None, :]  # largest
        top = math.inf if r.max_distance is None else r.max_distance
        # distances form one interval per block: it meets [min, max] or lies within it
        meets = overlaps[None, :] & (farthest >= r.min_distance) & (nearest <= top)
        within = (nearest >= r.min_distance) & (farthest <= top)
        whole_keys = (a == k0) & (b == k1) & (k1 - k0 + 1 == BLOCK)  # the block lies in this range, uncut
        seen |= meets
        full |= meets & within & whole_keys[None, :] & whole_rows
    return seen & ~full, full


def _as_indices(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(counts (1, 1, Qb), indices (1, 1, Qb, Kb)) int32: per query block, the listed key blocks first."""
    counts = blocks.sum(-1, dtype=torch.int32)
    order = torch.argsort((~blocks).to(torch.int8), dim=-1, stable=True).to(torch.int32)
    return counts[None, None], order[None, None]


def _block_mask(partial: torch.Tensor, full: torch.Tensor, mask_mod, seq_lengths: tuple[int, int]) -> BlockMask:
    (count, index), (full_count, full_index) = _as_indices(partial), _as_indices(full)
    return BlockMask.from_kv_blocks(
        count, index, full_count, full_index, BLOCK_SIZE=BLOCK, mask_mod=mask_mod, seq_lengths=seq_lengths
    )


@functools.lru_cache(maxsize=16)
def block_mask(queries: int, total_keys: int, offset: int, ranges: tuple[KeyRange, ...], device: str):
    """flex's BlockMask for queries at absolute positions offset … offset + queries - 1 against `total_keys`
    keys arranged as `ranges`, cached per shape (a model's layers and windows share it)."""
    partial, full = block_structure(queries, total_keys, offset, ranges, device)
    return _block_mask(partial, full, mask_function(ranges, offset), (queries, total_keys))


# ---- dual chunk attention: the keys three times, one copy a part, the part set by the chunks


CHUNK_PARTS = 3  # the query's own chunk (causal), the chunk before, every earlier chunk


def chunk_mask_function(keys: int, offset: int, chunk: int):
    """flex's mask_mod over the keys three times: copy c of key j is visible to the query at absolute position
    i = q_idx + offset when j ≤ i and the chunks apart, ⌊i/chunk⌋ - ⌊j/chunk⌋, select part c (0, 1, ≥ 2)."""

    def visible(b, h, q_idx, kv_idx):
        copy, j = kv_idx // keys, kv_idx % keys
        i = q_idx + offset
        apart = i // chunk - j // chunk
        part = torch.clamp(apart, max=CHUNK_PARTS - 1)
        return (j <= i) & (copy == part) & (kv_idx < CHUNK_PARTS * keys)

    return visible


def chunk_structure(queries: int, keys: int, offset: int, chunk: int, device: torch.device | str = "cpu"):
    """(partial, full) block maps of `chunk_mask_function`'s mask, from the chunk intervals alone: over a block
    of rows and keys, ⌊i/chunk⌋ - ⌊j/chunk⌋ runs from its value at (first row, last key) to (last row, first
    key), which decides whether the block's copy is seen in part, whole, or not at all."""
    q_blocks, k_blocks = math.ceil(queries / BLOCK), math.ceil(CHUNK_PARTS * keys / BLOCK)
    q0 = torch.arange(q_blocks, device=device) * BLOCK  # (Qb,) first row of each block
    q1 = torch.clamp(q0 + BLOCK, max=queries) - 1
    whole_rows = (q1 - q0 + 1 == BLOCK)[:, None]  # (Qb, 1)
    i0, i1 = (q0 + offset)[:, None], (q1 + offset)[:, None]  # (Qb, 1) absolute positions
    k0 = torch.arange(k_blocks, device=device) * BLOCK  # (Kb,)
    k1 = torch.clamp(k0 + BLOCK, max=CHUNK_PARTS * keys) - 1
    seen = torch.zeros(q_blocks, k_blocks, dtype=torch.bool, device=device)
    full = torch.zeros_like(seen)
    for copy in range(CHUNK_PARTS):
        a = torch.clamp(k0, min=copy * keys) - copy * keys  # (Kb,) the block's keys in this copy, as key indices
        b = torch.clamp(k1, max=(copy + 1) * keys - 1) - copy * keys
        overlaps = (a <= b)[None, :]
        whole_keys = ((a + copy * keys == k0) & (b + copy * keys == k1) & (k1 - k0 + 1 == BLOCK))[None, :]
        nearest, farthest = i0 // chunk - b[None, :] // chunk, i1 // chunk - a[None, :] // chunk  # (Qb, Kb)
        if copy == 0:  # the own chunk, causal: never whole (the diagonal cuts it)
            meets = (nearest <= 0) & (farthest >= 0) & (a[None, :] <= i1)
            within = torch.zeros_like(meets)
        elif copy == 1:
            meets, within = (nearest <= 1) & (farthest >= 1), (nearest == 1) & (farthest == 1)
        else:
            meets, within = farthest >= 2, nearest >= 2
        seen |= overlaps & meets
        full |= overlaps & meets & within & whole_keys & whole_rows
    return seen & ~full, full


@functools.lru_cache(maxsize=16)
def chunk_block_mask(queries: int, keys: int, offset: int, chunk: int, device: str):
    """flex's BlockMask for dual chunk attention's three key copies, cached per shape."""
    partial, full = chunk_structure(queries, keys, offset, chunk, device)
    return _block_mask(partial, full, chunk_mask_function(keys, offset, chunk), (queries, CHUNK_PARTS * keys))


def flex_bias_attention(q, k, v, bias, compiled: bool = True, cap: float | None = None, horizon: int | None = None):
    """q: (B, H, Tq, Dh); k, v: (B, Hkv, Tk, Dh); `bias(h, i, d)`: the encoding's bias of query i (absolute)
    at distance d, elementwise on index tensors (`PositionalEncoding.score_bias`), or None -> (B, H, Tq, Dh).
    `cap`: each score soft-capped at it (`soft_cap`) before the bias is added. `horizon`: keys this many tokens
    back or further are never seen (a sliding window): their blocks are skipped, so the work grows as
    n × horizon, not n²."""
    queries, keys = q.shape[2], k.shape[2]
    offset = keys - queries  # the queries are the last Tq positions (earlier keys come from a cache)
    # the cap as a 0-d tensor: flex takes captured tensors and ints, and from torch 2.15 traces a captured
    # Python float as a symbolic float, which it refuses
    cap_value = None if cap is None else torch.tensor(float(cap), device=q.device, dtype=torch.float32)

    def add_bias(score, b, h, q_idx, kv_idx):
        if cap_value is not None:
            score = soft_cap(score, cap_value)
        if bias is None:
            return score
        # only visible (causal) pairs reach the softmax, so the distance is ≥ 0 where it counts
        i = q_idx + offset
        return score + bias(h, i, i - kv_idx)

    ranges = causal_ranges(keys) if horizon is None else (KeyRange(0, keys, 0, horizon - 1),)
    mask = block_mask(queries, keys, offset, ranges, str(q.device))
    attend = _compiled() if compiled else flex_attention
    return attend(q, k, v, score_mod=add_bias, block_mask=mask, enable_gqa=q.shape[1] != k.shape[1])


def flex_decay_attention(q, k, v, decay: torch.Tensor, compiled: bool = True):
    """q: (B, H, Tq, Dh); k, v: (B, Hkv, Tk, Dh); decay (B, H, Tk) float32, a forget gate's cumulative log
    (kernels/forget.py) -> (B, H, Tq, Dh): each score plus c_i - c_j, read inside the kernel (and
    differentiated through, in training)."""
    queries, keys = q.shape[2], k.shape[2]
    offset = keys - queries
    # the queries' own c as a tensor of its own: flex differentiates a captured tensor read at one index only
    decay_q = decay[..., offset:].clone()  # (B, H, Tq)

    def add_decay(score, b, h, q_idx, kv_idx):
        # c_i - c_j first: c runs to thousands below zero over a long window, and score + c_i would round
        # the score away at that magnitude (the other kernels add the difference too)
        return score + (decay_q[b, h, q_idx] - decay[b, h, kv_idx])

    mask = block_mask(queries, keys, offset, causal_ranges(keys), str(q.device))
    attend = _compiled() if compiled else flex_attention
    return attend(q, k, v, score_mod=add_decay, block_mask=mask, enable_gqa=q.shape[1] != k.shape[1])


def flex_dual_chunk_attention(q_all, k_all, v_all, chunk: int, compiled: bool = True):
    """q_all: (B, H, Tq, 3·Dh); k_all: (B, Hkv, 3·Tk, 3·Dh); v_all: (B, Hkv, 3·Tk, Dh), as
    `kernels.dual_chunk.side_by_side` lays them out -> (B, H, Tq, Dh)."""
    queries, keys, dim = q_all.shape[2], k_all.shape[2] // CHUNK_PARTS, v_all.shape[-1]
    mask = chunk_block_mask(queries, keys, keys - queries, chunk, str(q_all.device))
    attend = _compiled() if compiled else flex_attention
    return attend(q_all, k_all, v_all, block_mask=mask, scale=dim**-0.5, enable_gqa=q_all.shape[1] != k_all.shape[1])


def flex_two_part_attention(q_both, k_both, v_both, window: int, compiled: bool = True, far_keys: int | None = None):
    """q_both: (B, H, Tq, 2·Dh); k_both: (B, Hkv, 2·Tk, 2·Dh); v_both: (B, Hkv, 2·Tk, Dh), as
    `kernels.two_part.side_by_side` lays them out -> (B, H, Tq, Dh)."""
    queries, keys, dim = q_both.shape[2], k_both.shape[2] // 2, v_both.shape[-1]
    ranges = two_part_ranges(keys, window, far_keys)
    mask = block_mask(queries, 2 * keys, keys - queries, ranges, str(q_both.device))
    attend = _compiled() if compiled else flex_attention
    return attend(
        q_both, k_both, v_both, block_mask=mask, scale=dim**-0.5, enable_gqa=q_both.shape[1] != k_both.shape[1]
    )
