"""The fused bias kernels: ALiBi and T5 evaluated on the CPU through the flash op, exact up to float rounding,
in memory linear in the length, and their equivalent variants (`fused_variants`), among which
`kernels/tuning.py` chooses once per machine.

Each query block is split into the keys before it and the keys near it; every part goes through the fused
flash kernel, and the partial softmaxes are merged through their log-sum-exp. The bias enters without an n×n
(or even block×n) tensor:
- ALiBi: -m·(i - j) = m·(j - q0) - m·(i - q0); the last term is constant per row and cancels in the softmax,
  so within a block the bias is one value per key, m·(j - q0). Two exact forms carry it:
  - key bias (the default): an additive float32 mask of one row per head, (1, H, 1, keys), broadcast over the
    block's rows by the kernel (stride 0, never expanded); the head keeps its size, and the bias is exact in
    float32 whatever the inputs' dtype, so bf16 evaluation runs it too;
  - widened head (float32 only): one extra q·k dimension (q gets m·√d, k gets j - q0), the head padded with
    zeros to a width the CPU's op may run faster at; in bf16 the column's rounding (j - q0 to 8 bits) moves a
    logit by up to m·(rows / 256), so that form is never offered there.
  The keys before the block need no mask beyond the bias, and the diagonal square is the op's own causal call.
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
FUSED_EXTRA = 8  # zero columns the widened ALiBi form adds to each head, one carrying the bias
TUNED_SCORES = 2048 * 2048  # calls scoring fewer query-key pairs run the default variant, untimed
BAND_ROWS = 256  # query rows per T5 band block: rows × (rows + 112) keys
FAR_CHUNK = 16384  # T5's queries per chunk of far-key calls, whose outputs a chunk holds (at 32k: as fast as one)
DTYPES = (torch.float32, torch.bfloat16)  # what the fused bias kernels evaluate in (a float32 mask with either)


def fused_variants(encoding, dim: int, dtype: torch.dtype = torch.float32) -> dict[str, tuple[int, int]]:
    """The exact variants of the fused bias kernel for a head of `dim` features in `dtype`, name -> (rows,
    extra): for ALiBi the key-bias form (extra 0) in blocks of 1024 or 2048 rows, then in float32 the head
    widened to dim + 8 or to the next multiples of 16 and 32 (the fused op's speed depends on its head size,
    differently per CPU) in the same blocks; for T5 its band in blocks of 256, 128, 64 or 512 rows.
    The first is the default."""
    row_counts = (FUSED_ROWS, 2 * FUSED_ROWS)
    if isinstance(encoding.fused_form(), LinearBias):
        variants = {f"rows {r}, key bias": (r, 0) for r in row_counts}
        if dtype == torch.float32:
            widths = dict.fromkeys([dim + FUSED_EXTRA, -(-(dim + 1) // 16) * 16, -(-(dim + 1) // 32) * 32])
            variants |= {f"rows {r}, head {w}": (r, w - dim) for w in widths for r in row_counts}
        return variants
    return {f"rows {r}": (r, 0) for r in (BAND_ROWS, BAND_ROWS // 2, BAND_ROWS // 4, 2 * BAND_ROWS)}


def fused_variant(q, k, encoding) -> tuple[int, int]:
    """(rows, extra) of the fused bias kernel for this call: the variant `tuning.choose` found fastest on this
    machine for this kind of bias, dtype, head count and head size, timed once on a probe of 4096 tokens. Small
    calls, where the variants differ by little, run the default."""
    from extrapolate.kernels import tuning

    heads, dim = q.shape[1], q.shape[-1]
    variants = fused_variants(encoding, dim, q.dtype)
    default = next(iter(variants))
    if q.shape[2] * k.shape[2] < TUNED_SCORES or not tuning.tuning_enabled():
        return variants[default]
    kind = "alibi" if isinstance(encoding.fused_form(), LinearBias) else "saturating"

    @functools.cache
    def probe():  # made only when the variants are timed: a remembered choice costs nothing here
        return torch.randn(3, 1, heads, 4096, dim, dtype=q.dtype, generator=torch.Generator().manual_seed(0))

    def call(rows, extra):
        return lambda: fused_bias_attention(*probe(), encoding, rows, extra)

    problem = f"{kind} {str(q.dtype).removeprefix('torch.')} h{heads} d{dim}"
    chosen = tuning.choose("fused-bias", problem, {name: call(*v) for name, v in variants.items()}, default)
    return variants[chosen]


def fused_bias_attention(q, k, v, encoding, rows: int | None = None, extra: int | None = None):
    """q (B, H, Tq, Dh), k, v (B, Hkv, Tk, Dh) -> (B, H, Tq, Dh): bias attention through the fused kernel, the
    queries the last Tq of the Tk positions. `rows` (query rows per block) and `extra` (ALiBi: 0 for the key
    bias, else the zero columns added to each head, one carrying the bias): a variant of `fused_variants`;
    None: the one `fused_variant` chose for this machine."""
    if rows is None and extra is None:
        rows, extra = fused_variant(q, k, encoding)
    heads = q.shape[1]
    # the private fused op has no grouped-query path: expand once per call
    k, v = expand_kv_heads(k, heads), expand_kv_heads(v, heads)  # (B, H, Tk, Dh)
    form = encoding.fused_form()
    if isinstance(form, LinearBias):
        if extra:
            return _widened_linear_bias(q, k, v, form.slopes, rows or FUSED_ROWS, extra)
        return _key_linear_bias(q, k, v, form.slopes, rows or FUSED_ROWS)
    return _chunked_saturating_bias(q, k, v, encoding, form.saturation, rows or BAND_ROWS)


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


def key_bias_attention(q, k, v, block_bias, rows: int) -> torch.Tensor:
    """q (B, H, Tq, Dh), k, v (B, H, Tk, Dh) -> (B, H, Tq, Dh): causal attention with a bias that, once each
    row's own constant is dropped, is one value per key for a whole block of rows: `block_bias(a0, end)` gives
    it, float32 (B or 1, H, 1, end), for the rows from absolute position a0 against keys [0, end). Each block
    is the op's causal call on its diagonal square and one call on the keys before it, the mask one row per
    head that the op broadcasts; anchored at the block, the values that carry weight stay small."""
    length, keys, dim = q.shape[2], k.shape[2], q.shape[3]
    offset = keys - length  # absolute position of the first query (earlier keys come from a cache)
    scale = dim**-0.5
    out = torch.empty_like(q)
    for q0 in range(0, length, rows):
        q1, a0 = min(length, q0 + rows), offset + q0
        end = offset + q1
        bias = block_bias(a0, end)  # (B or 1, H, 1, end)
        block = q[:, :, q0:q1]
        parts = [attend(block, k[:, :, a0:end], v[:, :, a0:end], True, scale, bias[..., a0:end])]  # a square
        if a0 > 0:
            parts.append(attend(block, k[:, :, :a0], v[:, :, :a0], False, scale, bias[..., :a0]))
        out[:, :, q0:q1] = merge(parts)
    return out


def _key_linear_bias(q, k, v, slopes, rows: int) -> torch.Tensor:
    """ALiBi with the block's bias m·(j - a0) as a float32 mask over the keys, one row per head."""
    slope = slopes.to(q.device, torch.float32)[None, :, None, None]  # (1, H, 1, 1)
    positions = torch.arange(k.shape[2], device=q.device, dtype=torch.float32)  # (Tk,)
    return key_bias_attention(q, k, v, lambda a0, end: slope * (positions[:end] - a0), rows)


def _widened_linear_bias(q, k, v, slopes, rows: int, extra: int) -> torch.Tensor:
    """ALiBi with the bias as one more q·k column, the head widened by `extra` zero columns (float32)."""
    batch, heads, length, dim = q.shape
    keys = k.shape[2]
    offset = keys - length
    scale = dim**-0.5
    q_ext = torch.cat([q, q.new_zeros(batch, heads, length, extra)], -1)
    q_ext[..., dim] = (slopes.to(q.device) / scale).to(q.dtype)[None, :, None]
    k_ext = torch.cat([k, k.new_zeros(batch, heads, keys, extra)], -1)
    v = torch.cat([v, v.new_zeros(batch, heads, keys, extra)], -1)  # the fused op wants one head size
    positions = torch.arange(keys, device=q.device, dtype=torch.float32)
    out = torch.empty_like(q)
    for q0 in range(0, length, rows):
        q1, a0 = min(length, q0 + rows), offset + q0
        k_ext[..., : offset + q1, dim] = (positions[: offset + q1] - a0).to(k.dtype)
        parts = [attend(q_ext[:, :, q0:q1], k_ext[:, :, a0 : offset + q1], v[:, :, a0 : offset + q1], True, scale)]
        if a0 > 0:
            parts.append(attend(q_ext[:, :, q0:q1], k_ext[:, :, :a0], v[:, :, :a0], False, scale))
        out[:, :, q0:q1] = merge(parts)[..., :dim]
    return out


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
