"""The fused bias kernels: ALiBi and T5 evaluated on the CPU through the flash op, exact up to float rounding,
in memory linear in the length, and their equivalent variants (`fused_variants`), among which
`kernels/tuning.py` chooses once per machine.

Each query block is split into the keys before it and the keys near it; every part goes through the fused
flash kernel, and the partial softmaxes are merged through their log-sum-exp. The bias enters without an n×n
(or even block×n) tensor:
- ALiBi: -m·(i - j) = m·(j - q0) - m·(i - q0); the last term is constant per row and cancels in the softmax,
  so within a block the bias is one value per key, m·(j - q0): an additive float32 mask of one row per head,
  (1, H, 1, keys), broadcast over the block's rows by the kernel (stride 0, never expanded). The head keeps
  its size, and the bias is exact in float32 whatever the inputs' dtype, so bf16 evaluation runs it too. The
  keys before the block need no mask beyond the bias, and the diagonal square is the op's own causal call.
  Far keys, whose bias no score can overcome, are raised to a floor (`_floor`): their weight is 0 in
  float32 either way, and left as they are they make the softmax a stream of subnormal floats, which Intel's
  CPUs compute at a fraction of their speed (results/bench-cpus/NOTES.md has the measurement). A variant
  skips them instead, one call per head on the keys from its first above the floor: ALiBi's steep heads
  then see a few hundred keys before a block, its flattest all of them.
- T5: past its saturation distance S every key gets the same bias per head, so the far keys take it as a
  constant added to their log-sum-exp: the keys j ≤ i - S of every query are one causal call with the queries
  shifted S positions against the keys, over the whole length at once (the op's fastest shape, as RoPE's own
  call); only the band of S - 1 keys before each row carries an explicit float32 bias, in row blocks
  (rows × (rows + S - 1)), passed to the same kernel as its mask.
"""

from __future__ import annotations

import functools

import torch

from extrapolate.encodings.base import LinearBias
from extrapolate.kernels.blocked import toeplitz_bias
from extrapolate.kernels.flash import attend, attend_band, merge
from extrapolate.kernels.heads import expand_kv_heads

FUSED_ROWS = 1024  # query rows per ALiBi block by default (measured at 16k: 512 rows is 1.2–1.8× slower)
TUNED_SCORES = 2048 * 2048  # calls scoring fewer query-key pairs run the default variant, untimed
BAND_ROWS = 256  # query rows per T5 band block: rows × (rows + 112) keys
FAR_CHUNK = 16384  # T5's queries per chunk of far-key calls, whose outputs a chunk holds (at 32k: as fast as one)
FLOOR_MARGIN = 104.0  # e^-104 is under float32's least subnormal (1.4e-45 = e^-103.3): such a weight is 0
DTYPES = (torch.float32, torch.bfloat16)  # what the fused bias kernels evaluate in (a float32 mask with either)


def fused_variants(encoding) -> dict[str, tuple[int, bool]]:
    """The exact variants of the fused bias kernel, name -> (query rows per block, skip): for ALiBi blocks of
    1024 or 2048 rows, the keys before a block in one call for all heads or in one per head, from the head's
    first key that can weigh anything (`key_bias_attention`'s `skip`); for T5 its band in blocks of 256, 128,
    64 or 512 rows. The first is the default."""
    if isinstance(encoding.fused_form(), LinearBias):
        forms = {"key bias": False, "per head": True}
        return {f"rows {r}, {form}": (r, skip) for form, skip in forms.items() for r in (FUSED_ROWS, 2 * FUSED_ROWS)}
    return {f"rows {r}": (r, False) for r in (BAND_ROWS, BAND_ROWS // 2, BAND_ROWS // 4, 2 * BAND_ROWS)}


def fused_variant(q, k, encoding) -> tuple[int, bool]:
    """(rows, skip) of the fused bias kernel for this call: the variant `tuning.choose` found fastest on this
    machine for this kind of bias, dtype, head count and head size, timed once on a probe of 4096 tokens.
    Small calls, where the variants differ by little, run the default."""
    from extrapolate.kernels import tuning

    heads, dim = q.shape[1], q.shape[-1]
    variants = fused_variants(encoding)
    default = next(iter(variants))
    if q.shape[2] * k.shape[2] < TUNED_SCORES or not tuning.tuning_enabled():
        return variants[default]
    kind = "alibi" if isinstance(encoding.fused_form(), LinearBias) else "saturating"

    @functools.cache
    def probe():  # made only when the variants are timed: a remembered choice costs nothing here
        return torch.randn(3, 1, heads, 4096, dim, dtype=q.dtype, generator=torch.Generator().manual_seed(0))

    def call(rows, skip):
        return lambda: fused_bias_attention(*probe(), encoding, rows, skip)

    problem = f"{kind} {str(q.dtype).removeprefix('torch.')} h{heads} d{dim}"
    chosen = tuning.choose("fused-bias", problem, {name: call(*v) for name, v in variants.items()}, default)
    return variants[chosen]


def fused_bias_attention(q, k, v, encoding, rows: int | None = None, skip: bool = False):
    """q (B, H, Tq, Dh), k, v (B, Hkv, Tk, Dh) -> (B, H, Tq, Dh): bias attention through the fused kernel, the
    queries the last Tq of the Tk positions. `rows` (query rows per block) and `skip` (ALiBi: the keys before
    a block per head, from the first that can weigh anything): a variant of `fused_variants`; rows None: the
    one `fused_variant` chose for this machine."""
    if rows is None:
        rows, skip = fused_variant(q, k, encoding)
    heads = q.shape[1]
    # the private fused op has no grouped-query path: expand once per call
    k, v = expand_kv_heads(k, heads), expand_kv_heads(v, heads)  # (B, H, Tk, Dh)
    form = encoding.fused_form()
    if isinstance(form, LinearBias):
        return _key_linear_bias(q, k, v, form.slopes, rows, skip)
    return _chunked_saturating_bias(q, k, v, encoding, form.saturation, rows)


def _chunked_saturating_bias(q, k, v, encoding, saturation: int, rows: int) -> torch.Tensor:
    """T5 in chunks of FAR_CHUNK queries, each continuing the keys before it as a cache, so the far parts held
    at once are a chunk's, not the whole length's (attention alone at 32768: chunks of 16384 or 8192 as fast as
    one call; at 16384, chunks of 8192 or 4096 cost 5–6%)."""
    length, keys = q.shape[2], k.shape[2]
    offset = keys - length
    if length <= FAR_CHUNK:
        return _saturating_bias(q, k, v, encoding, saturation, rows)
    out = torch.empty_like(q)
    for c0 in range(0, length, FAR_CHUNK):
        c1 = min(length, c0 + FAR_CHUNK)
        end = offset + c1
        out[:, :, c0:c1] = _saturating_bias(q[:, :, c0:c1], k[:, :, :end], v[:, :, :end], encoding, saturation, rows)
    return out


def key_bias_attention(q, k, v, block_bias, rows: int, floor: bool = True, skip: bool = False) -> torch.Tensor:
    """q (B, H, Tq, Dh), k, v (B, H, Tk, Dh) -> (B, H, Tq, Dh): causal attention with a bias that, once each
    row's own constant is dropped, is one value per key for a whole block of rows: `block_bias(a0, end)` gives
    it, float32 (B or 1, H, 1, end), for the rows from absolute position a0 against keys [0, end). Each block
    is the op's causal call on its diagonal square and one call on the keys before it, the mask one row per
    head that the op broadcasts; anchored at the block, the values that carry weight stay small.
    `skip`: the keys before the block in one call per head, from the head's first key above the floor, as
    the keys before weigh nothing (ALiBi's steep heads see a few hundred keys): less work, but each call hands
    the op one head, less to share among many cores, so a variant the tuner weighs. `floor=False` leaves the
    bias of the keys that weigh nothing as it is (`_floor`), for measuring what the floor saves."""
    length, keys, dim = q.shape[2], k.shape[2], q.shape[3]
    offset = keys - length  # absolute position of the first query (earlier keys come from a cache)
    scale = dim**-0.5
    q_norm = torch.linalg.vector_norm(q, dim=-1, dtype=torch.float32)  # (B, H, Tq)
    k_reach = torch.linalg.vector_norm(k, dim=-1, dtype=torch.float32).cummax(-1).values  # (B, H, Tk)
    out = torch.empty_like(q)
    for q0 in range(0, length, rows):
        q1, a0 = min(length, q0 + rows), offset + q0
        end = offset + q1
        bias = block_bias(a0, end)  # (B or 1, H, 1, end)
        bound = q_norm[..., q0:q1].amax(-1) * k_reach[..., end - 1] * scale  # (B, H): |q·k|·scale of any pair
        least = _floor(bias[..., a0:end].amin(-1, keepdim=True), bound)  # (B, H, 1, 1)
        block = q[:, :, q0:q1]
        first = _first_reaching(bias[..., :a0], least) if skip and a0 > 0 else None  # (H,): each head's first key
        if floor:
            bias = torch.maximum(bias, least)  # (B, H, 1, end)
        parts = [attend(block, k[:, :, a0:end], v[:, :, a0:end], True, scale, bias[..., a0:end])]  # a square
        if a0 > 0 and skip:
            parts.append(_before_per_head(block, k, v, bias, first, a0, scale))
        elif a0 > 0:
            parts.append(attend(block, k[:, :, :a0], v[:, :, :a0], False, scale, bias[..., :a0]))
        out[:, :, q0:q1] = merge(parts)
    return out


def _floor(near_min: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
    """(B, H, 1, 1): the key bias per head below which no key can weigh anything in float32. A row's largest
    logit is at least its own key's, ≥ -bound + near_min (the least bias of the block's own keys, (B or 1, H,
    1, 1)), and a key's logit is at most bound + its bias, so a key whose bias is below
    near_min - 2·bound - FLOOR_MARGIN has a weight under e^-FLOOR_MARGIN: 0 in float32. Why the bias is raised
    to it: the softmax of such keys, left as they are, is a stream of subnormal floats, which some CPUs
    (Intel's among them) compute at a fraction of their speed; raised, their weights are exactly 0 after the
    op's running rescale, or ordinary floats that the rescale zeroes."""
    bound = bound.nan_to_num(nan=float("inf"))[..., None, None]  # (B, H, 1, 1); a non-finite input: no floor
    return near_min - 2 * bound - FLOOR_MARGIN


def _first_reaching(bias: torch.Tensor, least: torch.Tensor) -> list[int]:
    """Per head, the first of the keys before the block (bias (B or 1, H, 1, a0)) whose bias reaches the floor
    `least` (B, H, 1, 1), the earliest over the batch; a0 where none does."""
    reaches = bias >= least  # (B, H, 1, a0)
    before = bias.shape[-1]
    return torch.where(reaches.any(-1), reaches.int().argmax(-1), before).amin(0).flatten().tolist()


def _before_per_head(block, k, v, bias, first: list[int], a0: int, scale: float):
    """(out (B, H, rows, Dh), lse (B, H, rows)) of the block's rows against the keys before it, each head from
    its key `first[h]` on (the keys before weigh nothing); a head with none: lse -inf, weighing nothing in the
    merge."""
    out = block.new_zeros(block.shape)  # (B, H, rows, Dh)
    lse = torch.full(block.shape[:3], float("-inf"), device=block.device)  # (B, H, rows)
    for head, start in enumerate(first):
        if start < a0:
            h, keys = slice(head, head + 1), slice(start, a0)
            out[:, h], lse[:, h] = attend(block[:, h], k[:, h, keys], v[:, h, keys], False, scale, bias[:, h, :, keys])
    return out, lse


def _key_linear_bias(q, k, v, slopes, rows: int, skip: bool) -> torch.Tensor:
    """ALiBi with the block's bias m·(j - a0) as a float32 mask over the keys, one row per head."""
    slope = slopes.to(q.device, torch.float32)[None, :, None, None]  # (1, H, 1, 1)
    positions = torch.arange(k.shape[2], device=q.device, dtype=torch.float32)  # (Tk,)
    return key_bias_attention(q, k, v, lambda a0, end: slope * (positions[:end] - a0), rows, skip=skip)


def _saturating_bias(q, k, v, encoding, saturation: int, rows: int) -> torch.Tensor:
    """T5: the keys at least S = `saturation` back share the last bucket's bias per head, so they are causal
    flash calls with the queries shifted S positions against the keys (row i sees keys j ≤ i - S), whole
    calls over every query at once, that bias added to their log-sum-exp; the S - 1 nearer keys of each row
    carry their explicit float32 bias, in blocks of `rows` rows against (rows + S - 1) keys."""
    length, keys, dim = q.shape[2], k.shape[2], q.shape[3]
    offset = keys - length
    scale = dim**-0.5
    table = encoding.bias_table(keys, device=q.device)  # (H, Tk) float32
    far_bias = table[:, min(saturation, keys - 1)][None, :, None]  # (1, H, 1)
    far = [(first, out, lse + far_bias) for first, out, lse in _far_parts(q, k, v, offset, saturation, scale)]
    out = torch.empty_like(q)
    for q0 in range(0, length, rows):
        q1, a0, a1 = min(length, q0 + rows), offset + q0, offset + min(length, q0 + rows)
        parts = [_rows_of(part, q0, q1) for part in far if part[0] < q1]
        if saturation > 0:  # the keys nearer than S: [k0, a1) for this block
            k0 = max(0, a0 - saturation + 1)
            band = toeplitz_bias(table, a0, a1, torch.float32, k0=k0, below=saturation)  # (H, rows, a1 - k0)
            parts.append(attend_band(q[:, :, q0:q1], k[:, :, k0:a1], v[:, :, k0:a1], band, scale))
        out[:, :, q0:q1] = merge(parts)
    return out


def _far_parts(q, k, v, offset: int, saturation: int, scale: float) -> list:
    """(first, out (B, H, Tq - first, Dh), lse (B, H, Tq - first)): attentions of the rows from `first` on over
    disjoint keys, together the keys at least `saturation` back of each query (the query at absolute position
    a = offset + r sees keys [0, a - S])."""
    length = q.shape[2]
    last = offset - saturation  # the first query's last far key (below 0: it has none)
    if last < 0:  # rows from -last on see keys [0, r + last]: a causal square
        first = -last
        if first >= length:
            return []
        square = slice(0, length - first)
        return [(first, *attend(q[:, :, first:], k[:, :, square], v[:, :, square], True, scale))]
    parts = [(0, *attend(q, k[:, :, : last + 1], v[:, :, : last + 1], False, scale))]  # keys [0, last]: every row's
    if length > 1:  # row r also sees keys last + 1 … last + r: a causal square from row 1 on
        stair = slice(last + 1, last + length)
        parts.append((1, *attend(q[:, :, 1:], k[:, :, stair], v[:, :, stair], True, scale)))
    return parts


def _rows_of(part, q0: int, q1: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows [q0, q1) of a part of the rows from `first` on (first < q1), the rows before `first` weighing
    nothing: (out (B, H, q1 - q0, Dh), lse (B, H, q1 - q0))."""
    first, out, lse = part
    if first <= q0:
        return out[:, :, q0 - first : q1 - first], lse[..., q0 - first : q1 - first]
    block_out = out.new_zeros(*out.shape[:2], q1 - q0, out.shape[3])
    block_lse = lse.new_full((*lse.shape[:2], q1 - q0), float("-inf"))
    block_out[:, :, first - q0 :], block_lse[..., first - q0 :] = out[:, :, : q1 - first], lse[..., : q1 - first]
    return block_out, block_lse
