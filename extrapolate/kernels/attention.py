"""Causal attention kernels, every one in memory linear in the length, and `attention_plan`, the one place
that picks one for an (encoding, shape, dtype, device).

On CUDA every encoding runs a fused kernel, forward and backward: SDPA without a bias (a cache continued with
the lower-right causal alignment; one decoding query without a mask), flex_attention for bias and two-part
encodings (`flex.py`), and for a few queries (decoding, a short pass) one SDPA call with those rows' bias or
mask. On the CPU: fused SDPA, the fused bias kernels (float32 evaluation), the two-part kernel, and the blocked
kernel — queries in blocks, keys past the block's end skipped (causal), the bias of each block built from the
(H, n) distance table as a Toeplitz view, never an n×n tensor — which is also the portable fallback.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F

from extrapolate.kernels import flex
from extrapolate.kernels import two_part
from extrapolate.kernels.flash import _FLASH_LSE, _attend, _attend_band, _merge
from extrapolate.encodings.base import LinearBias, PositionalEncoding

KERNELS = ("auto", "sdpa", "fused-bias", "flex", "blocked", "reference")
FUSED_ROWS = 1024  # query rows per ALiBi block (measured at 16k: 512 rows is 1.8× slower)
BAND_ROWS = 256  # query rows per T5 block; its band is rows × (rows + 113) keys (attention alone at 16k: 512 rows 4% slower)
FLEX_MIN_QUERIES = 128  # fewer queries (decoding from a cache) skip flex: each new shape would recompile
BLOCK_ELEMENTS = 1 << 23  # bias + scores per block: B·H·Bq·K elements (32 MiB in float32)
# The CPU flash kernel is faster in float32 than in bfloat16 for short rows of small heads, where its bf16
# path spends more on converting blocks than on arithmetic. Forward + backward, float32 vs bf16 time:
# (B, H, T, Dh) = (64, 4, 128, 16) 0.32×, (32, 4, 256, 32) 0.81×, (16, 4, 512, 32) 0.98×, (10, 4, 768, 32) 1.28×,
# (32, 8, 256, 64) 1.15×. Within these bounds CPU attention runs in float32, which is also the more exact.
CPU_FLOAT32_MAX_KEYS = 512
CPU_FLOAT32_MAX_HEAD_DIM = 32


def kernel_for(encoding: PositionalEncoding, requested: str = "auto") -> str:
    """The kernel family a request resolves to for this encoding, before the shapes and dtype are known;
    `attention_plan` decides what actually runs."""
    if requested not in KERNELS:
        raise ValueError(f"unknown kernel {requested!r}; valid: {', '.join(KERNELS)}")
    if encoding.two_part_form() is not None:  # Self-Extend, ReRoPE: their own two-part kernels
        return requested if requested in ("blocked", "reference") else "two-part"
    if requested == "auto":
        if not encoding.has_bias:
            return "sdpa"
        return "fused-bias" if fused_bias_supported(encoding) else "blocked"
    if requested in ("sdpa", "fused-bias") and encoding.has_bias:
        # the fused causal call cannot take a bias: use the fused bias kernel where it applies
        return "fused-bias" if fused_bias_supported(encoding) else "blocked"
    if requested in ("fused-bias", "flex") and not encoding.has_bias:  # the fused causal call is the fast path
        return "sdpa"
    if requested == "flex" and not encoding.toeplitz:  # flex reads a distance table, which this bias has not
        return "blocked"
    return requested


def attention_plan(encoding: PositionalEncoding, requested: str, device: torch.device | str, dtype: torch.dtype,
                   queries: int, keys: int, backward: bool = False) -> str:
    """The kernel `causal_attention` runs for `queries` queries (the last of `keys` positions) in `dtype` on
    `device`: sdpa | sdpa-cache | sdpa-lower-right | sdpa-rows | fused-bias | flex | two-part | blocked |
    reference. `backward`: gradients will flow (training).

    The one place the choice is made: `causal_attention` executes it, and whatever records a kernel with a
    result asks it with the same shapes, so the record cannot drift from what ran."""
    kernel = kernel_for(encoding, requested)
    device_type = torch.device(device).type
    if device_type == "cuda" and requested not in ("blocked", "reference"):
        return cuda_plan(encoding, queries, keys)
    if kernel == "two-part":
        return kernel if two_part.applies(device_type, backward) else "blocked"
    if kernel == "sdpa":
        if queries == keys:
            return "sdpa"
        # fused causal SDPA aligns queries to the first keys, not the last: continuing a cache on the CPU runs
        # the cached keys and the new ones as two fused calls (the CPU op returns their log-sum-exp)
        cpu_inference = device_type == "cpu" and not backward
        return "sdpa-cache" if cpu_inference and _FLASH_LSE is not None else "blocked"
    if kernel == "reference":
        return kernel
    if kernel == "fused-bias" and fused_applies(device_type, dtype, backward):
        return kernel
    # the CPU build has no flex backward, and after a failure to compile flex is not tried again
    cpu_training = device_type == "cpu" and backward
    if not cpu_training and not _FLEX_FAILED and uses_flex(kernel, device_type, queries, keys):
        return "flex"
    return "blocked"


def cuda_plan(encoding: PositionalEncoding, queries: int, keys: int) -> str:
    """On CUDA every encoding has a fused kernel for every shape, forward and backward: the blocked kernel
    runs there only when asked for, or after flex_attention failed to compile."""
    if not encoding.has_bias and encoding.two_part_form() is None:
        return "sdpa" if queries == keys else "sdpa-lower-right"
    if queries < FLEX_MIN_QUERIES:  # decoding: these rows' bias (or mask) is small, and flex would recompile
        return "sdpa-rows"
    return "flex" if flex.available() and not _FLEX_FAILED else "blocked"


def recorded_kernel(encoding: PositionalEncoding, requested: str, device: torch.device | str, dtype: torch.dtype,
                    shapes) -> str:
    """What a measurement whose attention calls have these (queries, keys) `shapes` ran, as `attention_plan`
    decides it for `causal_attention`. Asked after the measurement, so a flex_attention that failed to
    compile is recorded as the blocked kernel it fell back to.

    Distinct kernels are joined by "+" in call order: passkey's prompt pass and its continuations from the KV
    cache can run different kernels (RoPE on the CPU: "sdpa+sdpa-cache", as fused causal SDPA cannot continue a cache; a
    bias encoding on CUDA: "flex+blocked", as a few queries never compile flex), and one name would hide that."""
    kernels = [attention_plan(encoding, requested, device, dtype, queries, keys) for queries, keys in shapes]
    return "+".join(dict.fromkeys(kernels))


def fused_applies(device_type: str, dtype: torch.dtype, backward: bool) -> bool:
    """The fused bias kernels serve float32 evaluation on the CPU; training (which needs gradients), bf16
    (too coarse for a bias folded into q·k) and other devices use the blocked kernel."""
    return device_type == "cpu" and dtype == torch.float32 and not backward


def fused_bias_supported(encoding: PositionalEncoding) -> bool:
    """A linear bias (ALiBi) and a bias constant past a saturation distance (T5) have a mask-free form."""
    return _FLASH_LSE is not None and encoding.fused_form() is not None


def causal_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    encoding: PositionalEncoding,
    kernel: str = "auto",
    block_elements: int = BLOCK_ELEMENTS,
) -> torch.Tensor:
    """q: (B, H, Tq, Dh); k, v: (B, Hkv, Tk, Dh), H a multiple of Hkv, Tk ≥ Tq -> (B, H, Tq, Dh).

    The queries are the last Tq of the Tk positions (Tk > Tq when earlier keys come from a cache)."""
    plan = attention_plan(encoding, kernel, q.device, q.dtype, q.shape[2], k.shape[2], needs_backward(q, k, v, encoding))
    if plan == "sdpa-rows":
        return rows_attention(q, k, v, encoding)
    if plan == "flex":
        out = _try_flex(q, k, v, encoding, needs_backward(q, k, v, encoding))
        if out is not None:
            return out  # else flex is marked failed, and this and every later plan is the blocked kernel
    form = encoding.two_part_form()
    if form is not None:  # q and k arrive unrotated: each part rotates them its own way
        if plan == "two-part":
            return two_part.fused_attention(q, k, v, form)
        return two_part.blocked_attention(q, k, v, form, None if plan == "reference" else block_elements)
    if plan == "sdpa":
        return sdpa(q, k, v, is_causal=True, enable_gqa=q.shape[1] != k.shape[1])
    if plan == "sdpa-cache":
        return cached_sdpa(q, k, v)
    if plan == "sdpa-lower-right":
        return lower_right_sdpa(q, k, v)
    if plan == "reference":
        return reference_attention(q, k, v, encoding)
    if plan == "fused-bias":
        return fused_bias_attention(q, k, v, encoding)
    return blocked_attention(q, k, v, encoding, block_elements)


def needs_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, encoding: PositionalEncoding) -> bool:
    """Whether gradients will flow through this attention: the fused bias kernels have no backward."""
    if not torch.is_grad_enabled():
        return False
    return any(t.requires_grad for t in (q, k, v, *encoding.parameters()))  # a learned bias (T5) trains too


def compute_dtype(q: torch.Tensor, keys: int) -> torch.dtype:
    """The dtype `sdpa` computes in for q (B, H, Tq, Dh) against `keys` keys: float32 for bf16 where that is
    the faster CPU kernel (see the bounds above), else q's own."""
    short_and_narrow = keys <= CPU_FLOAT32_MAX_KEYS and q.shape[-1] <= CPU_FLOAT32_MAX_HEAD_DIM
    upcast = q.device.type == "cpu" and q.dtype == torch.bfloat16 and short_and_narrow
    return torch.float32 if upcast else q.dtype


def sdpa(q, k, v, **options) -> torch.Tensor:
    """F.scaled_dot_product_attention in `compute_dtype`; the result keeps q's dtype. An additive
    `attn_mask` should already be in that dtype."""
    if compute_dtype(q, k.shape[2]) == q.dtype:
        return F.scaled_dot_product_attention(q, k, v, **options)
    with torch.autocast("cpu", enabled=False):  # autocast would cast the inputs straight back to bf16
        return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), **options).to(q.dtype)


def uses_flex(kernel: str, device_type: str, queries: int, keys: int) -> bool:
    """Whether a bias kernel choice off CUDA runs flex_attention: only when asked for (`flex`), and never for
    fewer than FLEX_MIN_QUERIES queries (each new shape would recompile). (The CPU build has no flex
    backward: CPU training stays on the blocked kernel.)"""
    return kernel == "flex" and queries >= FLEX_MIN_QUERIES and flex.available()


_FLEX_FAILED: list[str] = []  # the first failure's message: flex is not retried in this process
_BACKWARD_CHECKED: set[tuple[str, str]] = set()  # (encoding, device) whose flex gradients ran once here


def flex_attention_of(q, k, v, encoding, compiled: bool = True):
    """The encoding's attention through flex_attention: its bias as a score modification, or its two parts
    side by side (q and k unrotated)."""
    form = encoding.two_part_form()
    if form is not None:
        return flex.flex_two_part_attention(*two_part.side_by_side(q, k, v, form), form.window, compiled=compiled)
    keys = k.shape[2]
    bias = encoding.score_bias(keys, device=q.device)
    # partial blocks score masked pairs too (and padding rows past the end): keep their lookups in the table
    return flex.flex_bias_attention(q, k, v, lambda h, i, d: bias(h, i, d.clamp(0, keys - 1)), compiled=compiled)


def _check_backward(q, encoding) -> None:
    """One small forward and backward through flex with this encoding, before training relies on it: a
    backend that cannot differentiate a score modification fails here, where the blocked kernel can still
    take over, rather than in the middle of a training step. Gradients go nowhere (no `.grad` is touched)."""
    key = (encoding.name, str(q.device))
    if key in _BACKWARD_CHECKED:
        return
    heads, dim = q.shape[1], q.shape[-1]
    probe = [torch.randn(1, heads, 2 * flex.BLOCK, dim, device=q.device, dtype=q.dtype, requires_grad=True)
             for _ in range(3)]
    inputs = probe + [p for p in encoding.parameters() if p.requires_grad]
    torch.autograd.grad(flex_attention_of(*probe, encoding).float().sum(), inputs, allow_unused=True)
    _BACKWARD_CHECKED.add(key)


def _try_flex(q, k, v, encoding, backward: bool = False):
    """flex_attention for this encoding, or None where it cannot compile here (then blocked)."""
    if _FLEX_FAILED:
        return None
    try:
        if backward:
            _check_backward(q, encoding)
        return flex_attention_of(q, k, v, encoding)
    except Exception as error:  # a compiler missing or a backend without support: fall back, say it once
        _FLEX_FAILED.append(str(error).splitlines()[0] if str(error) else type(error).__name__)
        warnings.warn(f"flex_attention unavailable ({_FLEX_FAILED[0]}); using the blocked kernel", stacklevel=2)
        return None


def rows_attention(q, k, v, encoding):
    """A few queries (decoding from a cache, a short pass) in one SDPA call: the bias of those rows as its
    additive mask, (H, Tq, Tk) — linear in the keys — or, for a two-part encoding, the rows' visibility of
    both key copies (see `kernels.two_part.side_by_side`). Nothing to compile, so every shape is cheap."""
    queries, keys, gqa = q.shape[2], k.shape[2], q.shape[1] != k.shape[1]
    offset = keys - queries
    form = encoding.two_part_form()
    if form is not None:
        q_both, k_both, v_both = two_part.side_by_side(q, k, v, form)
        rows = torch.arange(queries, device=q.device)[:, None]  # (Tq, 1)
        columns = torch.arange(2 * keys, device=q.device)[None, :]  # (1, 2·Tk)
        visible = flex.mask_function(flex.two_part_ranges(keys, form.window), offset)(None, None, rows, columns)
        return sdpa(q_both, k_both, v_both, attn_mask=visible, scale=q.shape[-1] ** -0.5, enable_gqa=gqa)
    table = encoding.bias_table(keys, device=q.device) if encoding.toeplitz else None
    bias = bias_rows(encoding, table, offset, keys, compute_dtype(q, keys), q.device)  # (H, Tq, Tk)
    return sdpa(q, k, v, attn_mask=bias.unsqueeze(0), enable_gqa=gqa)


def lower_right_sdpa(q, k, v):
    """Queries continuing a cache without a bias, on CUDA: fused SDPA with the causal mask aligned to the
    last keys (one decoding query sees every key: no mask at all). The aligned variant has no grouped-query
    path, so the key heads are expanded for it (the cache of one layer, for one call)."""
    queries, keys = q.shape[2], k.shape[2]
    if queries == 1:
        return sdpa(q, k, v, enable_gqa=q.shape[1] != k.shape[1])
    if q.shape[1] != k.shape[1]:
        k, v = (t.repeat_interleave(q.shape[1] // t.shape[1], dim=1) for t in (k, v))
    from torch.nn.attention.bias import causal_lower_right

    return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(queries, keys))


def toeplitz_bias(table: torch.Tensor, q0: int, q1: int, dtype: torch.dtype, k0: int = 0) -> torch.Tensor:
    """(H, q1-q0, q1-k0) bias for queries q0 … q1-1 against keys k0 … q1-1, with -inf above the diagonal.

    Entry (r, c) is table[:, (q0 + r) - (k0 + c)]: a Toeplitz block, cut as a strided view of one
    (H, rows + keys - 1) strip of distances instead of gathering through an index matrix.
    """
    rows, keys = q1 - q0, q1 - k0
    # strip[t] holds the bias at distance (q0 + rows - 1 - k0) - t, for t = 0 … rows + keys - 2
    top = q0 + rows - 1 - k0
    distances = torch.arange(top, top - (rows + keys - 1), -1, device=table.device)  # (rows + keys - 1,)
    strip = table[:, distances.clamp(min=0)].masked_fill(distances < 0, float("-inf"))  # (H, rows + keys - 1)
    # unfold: window t = strip[t : t + keys]; row r of the block is window rows - 1 - r
    return strip.to(dtype).unfold(-1, keys, 1).flip(-2)  # (H, rows, keys)


def blocked_attention(q, k, v, encoding, block_elements: int = BLOCK_ELEMENTS):
    batch, heads, length, _ = q.shape
    keys = k.shape[2]
    offset = keys - length  # absolute position of the first query
    table = None
    if encoding.toeplitz:
        table = encoding.bias_table(keys, device=q.device)  # (H, Tk) float32
        if table is None:  # no bias: a zero table still gives the causal mask
            table = torch.zeros(1, keys, device=q.device)
    rows = max(16, min(length, block_elements // max(1, batch * heads * keys)))
    out = torch.empty_like(q)
    gqa = q.shape[1] != k.shape[1]
    for q0 in range(0, length, rows):
        q1 = min(length, q0 + rows)
        end = offset + q1  # keys past the block's last query are masked: skip them
        bias = bias_rows(encoding, table, offset + q0, end, compute_dtype(q, end), q.device)  # (H, rows, end)
        out[:, :, q0:q1] = sdpa(q[:, :, q0:q1], k[:, :, :end], v[:, :, :end], attn_mask=bias.unsqueeze(0), enable_gqa=gqa)
    return out


def bias_rows(encoding, table, q0: int, q1: int, dtype, device) -> torch.Tensor:
    """(H, q1-q0, q1) bias of queries q0 … q1-1 against every key up to the last of them, -inf above the
    diagonal: cut from the distance `table` (H, ≥ q1), or, for a bias of i as well as i - j (FIRE, `table`
    None), computed by the encoding for these rows only. Linear in the keys either way."""
    if table is not None:
        return toeplitz_bias(table, q0, q1, dtype)
    return encoding.bias_block(q0, q1, device=device).to(dtype)


def reference_attention(q, k, v, encoding):
    """Plain softmax(q·kᵀ/√d + bias + causal mask)·v with the full matrix: the slow ground truth for tests."""
    keys = k.shape[2]
    if q.shape[1] != k.shape[1]:
        repeat = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
    scores = (q.float() @ k.float().transpose(-1, -2)) / q.shape[-1] ** 0.5  # (B, H, Tq, Tk)
    k_pos = torch.arange(keys, device=q.device)
    q_pos = k_pos[keys - q.shape[2] :]
    bias = encoding.bias(q_pos, k_pos)
    if bias is not None:
        scores = scores + bias
    causal = k_pos[None, :] > q_pos[:, None]
    scores = scores.masked_fill(causal, float("-inf"))
    return (scores.softmax(-1) @ v.float()).to(q.dtype)


# ---- fused bias kernels ----------------------------------------------------------------------------------
# Each query block is split into the keys before it and the keys near it; every part goes through the fused
# flash kernel, and the partial softmaxes are merged through their log-sum-exp. The bias enters without an n×n
# (or even block×n) tensor:
# - ALiBi: -m·(i - j) = m·(j - q0) - m·(i - q0); the last term is constant per row and cancels in the softmax,
#   the first is one extra q·k dimension (q gets m·√d, k gets j - q0); the keys before the block and the
#   diagonal square (causal) need no mask at all;
# - T5: past its saturation distance S every key gets the same bias per head, so the far keys take it as a
#   constant added to their log-sum-exp, mask-free, and only the band of S keys before each block and the
#   block itself carry an explicit (rows × (rows + S)) bias, passed to the same kernel as its additive mask.

def cached_sdpa(q, k, v):
    """Attention without a bias for queries continuing a cache: q (B, H, Tq, Dh) are the last Tq of the
    Tk positions of k, v (B, Hkv, Tk, Dh), H a multiple of Hkv. Every cached key is visible to every query:
    one fused call without a mask, where the g = H / Hkv query heads of a key head are stacked as g·Tq queries
    (the private fused op has no grouped-query path, and this never copies the cache g times; a decoding step
    at 32k runs 5× faster than the blocked kernel). The new keys are causal among themselves: a square fused
    call. The two merge by log-sum-exp."""
    batch, heads, length, dim = q.shape
    kv_heads, past = k.shape[1], k.shape[2] - length
    group = heads // kv_heads
    scale = dim**-0.5
    stacked = q.reshape(batch, kv_heads, group * length, dim)  # heads h = j·g + i use key head j
    out, lse = _attend(stacked, k[:, :, :past], v[:, :, :past], False, scale)  # (B, Hkv, g·Tq, Dh), (B, Hkv, g·Tq)
    cached = out.reshape(batch, heads, length, dim), lse.reshape(batch, heads, length)
    k_new, v_new = k[:, :, past:], v[:, :, past:]  # (B, Hkv, Tq, Dh)
    if group > 1:
        k_new, v_new = k_new.repeat_interleave(group, dim=1), v_new.repeat_interleave(group, dim=1)
    return _merge([cached, _attend(q, k_new, v_new, True, scale)])


def fused_bias_attention(q, k, v, encoding, rows: int | None = None):
    """Bias attention through the fused kernel, exact up to float rounding; see the section comment."""
    batch, heads, length, dim = q.shape
    keys = k.shape[2]
    offset = keys - length  # absolute position of the first query (earlier keys come from a cache)
    if k.shape[1] != heads:  # the private fused op has no grouped-query path: expand once per call
        k = k.repeat_interleave(heads // k.shape[1], dim=1)
        v = v.repeat_interleave(heads // v.shape[1], dim=1)
    scale = dim**-0.5
    out = torch.empty_like(q)
    form = encoding.fused_form()
    if isinstance(form, LinearBias):
        rows = rows or FUSED_ROWS
        extra = 8  # one column carries the bias; seven zeros keep the width a multiple of 8
        q_ext = torch.cat([q, q.new_zeros(batch, heads, length, extra)], -1)
        q_ext[..., dim] = (form.slopes.to(q.device) / scale).to(q.dtype)[None, :, None]
        k_ext = torch.cat([k, k.new_zeros(batch, heads, keys, extra)], -1)
        v = torch.cat([v, v.new_zeros(batch, heads, keys, extra)], -1)  # the fused op wants one head size
        positions = torch.arange(keys, device=q.device, dtype=torch.float32)
        for q0 in range(0, length, rows):
            q1, a0 = min(length, q0 + rows), offset + q0
            k_ext[..., : offset + q1, dim] = (positions[: offset + q1] - a0).to(k.dtype)
            parts = [_attend(q_ext[:, :, q0:q1], k_ext[:, :, a0 : offset + q1], v[:, :, a0 : offset + q1], True, scale)]
            if a0 > 0:
                parts.append(_attend(q_ext[:, :, q0:q1], k_ext[:, :, :a0], v[:, :, :a0], False, scale))
            out[:, :, q0:q1] = _merge(parts)[..., :dim]
        return out
    rows = rows or BAND_ROWS
    saturation = form.saturation  # keys at least this far back all get the bias of the last bucket
    table = encoding.bias_table(keys, device=q.device)  # (H, Tk)
    far_bias = table[:, -1] if keys > saturation else table[:, 0]  # (H,)
    for q0 in range(0, length, rows):
        q1, a0 = min(length, q0 + rows), offset + q0
        near = max(0, a0 - saturation)  # keys [near, a0 + rows) form the explicit band
        band = toeplitz_bias(table, a0, offset + q1, q.dtype, k0=near)  # (H, rows, keys in the band)
        parts = [_attend_band(q[:, :, q0:q1], k[:, :, near : offset + q1], v[:, :, near : offset + q1], band, scale)]
        if near > 0:
            far_out, far_lse = _attend(q[:, :, q0:q1], k[:, :, :near], v[:, :, :near], False, scale)
            parts.append((far_out, far_lse + far_bias[None, :, None]))
        out[:, :, q0:q1] = _merge(parts)
    return out
