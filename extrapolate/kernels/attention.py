"""Causal attention kernels, every one in memory linear in the length, and the attention plan: which kernel
`causal_attention` runs for an (encoding, requested kernel, device, dtype, shape, backward). `attention_plan`
alone decides it and names it by an `AttentionPlan` value; `KERNEL_FUNCTIONS` maps each plan to its kernel,
and a result records that value's name (`recorded_kernel`), so the record cannot drift from what ran.

On CUDA every encoding runs a fused kernel, forward and backward: SDPA without a bias (a cache continued with
the lower-right causal alignment; one decoding query without a mask), flex_attention for bias and two-part
encodings (`flex.py`), and for a few queries (decoding, a short pass) one SDPA call with those rows' bias or
mask. On the CPU: fused SDPA, the fused bias kernels (float32 and bf16 evaluation, `fused_bias.py`), the
two-part kernel, and the blocked kernel — queries in blocks, keys past the block's end skipped (causal), the
bias of each block built from the (H, n) distance table as a Toeplitz view, never an n×n tensor — which is
also the portable fallback.

Soft-capped scores (an encoding with `score_cap`, Gemma 2) enter no fused causal or bias kernel, as the cap is
a function of the scores themselves: flex_attention caps them in its score modification where flex would run,
and elsewhere the capped blocked kernel computes each query block's scores explicitly.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from extrapolate.encodings.base import Decayed, PositionalEncoding
from extrapolate.kernels import dual_chunk, flex, forget, fused_bias, shifted_sparse, two_part
from extrapolate.kernels.blocked import (
    BLOCK_ELEMENTS,
    bias_rows,
    blocked_attention,
    capped_blocked_attention,
    reference_attention,
)
from extrapolate.kernels.cached import cached_sdpa, lower_right_sdpa
from extrapolate.kernels.own import KERNELS as OWN_KERNELS
from extrapolate.kernels.own import own_attention
from extrapolate.kernels.sdpa import compute_dtype, sdpa

KERNELS = ("auto", "sdpa", "fused-bias", "flex", "blocked", "reference")  # what a request may ask for
FLEX_MIN_QUERIES = 128  # fewer queries (decoding from a cache) skip flex: each new shape would recompile


@dataclass(frozen=True)
class AttentionPlan:
    """One kernel `causal_attention` can run, by the name a result records in its `kernel` column."""

    name: str


SDPA = AttentionPlan("sdpa")  # fused causal SDPA over queries and keys of one length
SDPA_CACHE = AttentionPlan("sdpa-cache")  # CPU, queries continuing a cache: two fused calls merged (`cached_sdpa`)
SDPA_LOWER_RIGHT = AttentionPlan("sdpa-lower-right")  # CUDA, queries continuing a cache (`lower_right_sdpa`)
SDPA_ROWS = AttentionPlan("sdpa-rows")  # CUDA, a few queries with a bias or two parts (`rows_attention`)
FUSED_BIAS = AttentionPlan("fused-bias")  # CPU evaluation of ALiBi and T5 (`fused_bias.fused_bias_attention`)
FLEX = AttentionPlan("flex")  # flex_attention (`flex_attention_of`); blocked where it fails to compile
TWO_PART = AttentionPlan("two-part")  # CPU evaluation of Self-Extend and ReRoPE (`two_part.fused_attention`)
DUAL_CHUNK = AttentionPlan("dual-chunk")  # CPU evaluation of dual chunk attention (`dual_chunk.fused_attention`)
SHIFTED_SPARSE = AttentionPlan("shifted-sparse")  # LongLoRA's training attention in shifted groups
FORGET = AttentionPlan("fused-forget")  # CPU evaluation with a forget gate (`forget.fused_attention`)
BLOCKED = AttentionPlan("blocked")  # query blocks against the keys up to theirs: any device, any encoding
REFERENCE = AttentionPlan("reference")  # the full score matrix: the slow ground truth for tests
FLEX_CAPPED = AttentionPlan("flex-capped")  # flex_attention capping each score (`flex_attention_of`)
BLOCKED_CAPPED = AttentionPlan("blocked-capped")  # explicit score blocks, capped: `capped_blocked_attention`
PLANS = (SDPA, SDPA_CACHE, SDPA_LOWER_RIGHT, SDPA_ROWS, FUSED_BIAS, FLEX, TWO_PART, BLOCKED, REFERENCE)
PLANS += (FLEX_CAPPED, BLOCKED_CAPPED, DUAL_CHUNK, FORGET, SHIFTED_SPARSE)
# encodings that attend by a rule of their own (`own_kernel`): their kernels, on every device, both directions
OWN_PLANS = {name: AttentionPlan(name) for name in OWN_KERNELS}
OWN = tuple(OWN_PLANS.values())
PLANS += OWN
COMPILED = (FLEX, FLEX_CAPPED)  # compiled at the first call of each shape: a benchmark warms them up at its own


@dataclass
class FlexStatus:
    """Where flex_attention may still be planned in this process.

    `failed`: a failure of flex itself (its compiler missing here), after which every plan that would have
    been flex is the blocked kernel. `failed_for`: failures of one encoding's score modification, by
    `flex_key` and direction ("forward" fails both directions, "backward" training only): a backend that
    cannot differentiate FIRE's MLP says nothing about ALiBi's table, so the others keep flex. Each failure is
    tried once (a retry would cost a compile). `backward_checked`: the (encoding, device) pairs whose flex
    gradients ran once here (`_check_backward`)."""

    failed: str | None = None
    failed_for: dict[tuple[str, str], str] = field(default_factory=dict)
    backward_checked: set[tuple[str, str]] = field(default_factory=set)

    def fail(self, error: Exception, encoding: PositionalEncoding | None = None, backward: bool = False) -> str:
        """Keep the failure's first line (its type where it has no message), for this encoding and direction,
        or for flex as a whole where `encoding` is None or flex's compiler cannot be imported; returns it."""
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        if encoding is None or isinstance(error, ImportError):
            self.failed = self.failed or message
        else:
            self.failed_for.setdefault((flex_key(encoding), "backward" if backward else "forward"), message)
        return message

    def usable(self, encoding: PositionalEncoding, backward: bool = False) -> bool:
        if self.failed is not None or (flex_key(encoding), "forward") in self.failed_for:
            return False
        return not (backward and (flex_key(encoding), "backward") in self.failed_for)


def flex_key(encoding: PositionalEncoding) -> str:
    """What a flex score modification is compiled from: the encoding, and whether it caps the scores."""
    return encoding.name + ("" if encoding.score_cap is None else "-capped")


FLEX_STATUS = FlexStatus()  # process-wide, as the compiler and backend it reflects are


def kernel_for(encoding: PositionalEncoding, requested: str = "auto") -> AttentionPlan:
    """The kernel family a request resolves to for this encoding, whatever the shapes, dtype and device: the
    first step of `attention_plan`, and what `run` names when an encoding cannot run the requested kernel."""
    if requested not in KERNELS:
        raise ValueError(f"unknown kernel {requested!r}; valid: {', '.join(KERNELS)}")
    if encoding.own_kernel is not None:  # its own rule of attention, in its own blocks (or one: the reference)
        if encoding.horizon is not None or encoding.score_cap is not None:
            raise ValueError(f"{encoding.name} attends by its own kernel, which takes no sliding window or cap")
        return REFERENCE if requested == "reference" else OWN_PLANS[encoding.own_kernel]
    if encoding.sparse_group is not None:  # a fine-tune's S²-attention (SDPA in groups, on every device)
        return SHIFTED_SPARSE
    if encoding.score_cap is not None:  # soft-capped scores: the capped kernels, whatever else was asked for
        return {"flex": FLEX_CAPPED, "reference": REFERENCE}.get(requested, BLOCKED_CAPPED)
    if encoding.two_part_form() is not None:  # Self-Extend, ReRoPE: their own two-part kernels
        return {"blocked": BLOCKED, "reference": REFERENCE}.get(requested, TWO_PART)
    if encoding.chunk_form() is not None:  # dual chunk attention: its own three-part kernel
        return {"blocked": BLOCKED, "reference": REFERENCE}.get(requested, DUAL_CHUNK)
    if encoding.forgets:  # a forget gate's decay: its own kernels (kernels/forget.py)
        return {"blocked": BLOCKED, "reference": REFERENCE, "flex": FLEX}.get(requested, FORGET)
    if requested == "auto":
        return _bias_family(encoding) if encoding.has_bias else SDPA
    if requested in ("sdpa", "fused-bias") and encoding.has_bias:
        return _bias_family(encoding)  # the fused causal call cannot take a bias
    if requested in ("fused-bias", "flex") and not encoding.has_bias:  # the fused causal call is the fast path
        return SDPA
    if requested == "flex" and not encoding.toeplitz:  # flex reads a distance table, which this bias has not
        return BLOCKED
    return {"sdpa": SDPA, "flex": FLEX, "blocked": BLOCKED, "reference": REFERENCE}[requested]


def _bias_family(encoding: PositionalEncoding) -> AttentionPlan:
    """A linear bias (ALiBi) and a bias constant past a saturation distance (T5) have a mask-free form that the
    fused bias kernels take; every other bias runs the blocked kernel."""
    return FUSED_BIAS if encoding.fused_form() is not None else BLOCKED


def attention_plan(
    encoding: PositionalEncoding,
    requested: str,
    device: torch.device | str,
    dtype: torch.dtype,
    queries: int,
    keys: int,
    backward: bool = False,
) -> AttentionPlan:
    """The kernel `causal_attention` runs for `queries` queries (the last of `keys` positions) in `dtype` on
    `device`; `backward`: gradients will flow (training).

    The one place the choice is made: `causal_attention` runs `KERNEL_FUNCTIONS[plan]`, and whatever records a
    kernel with a result asks here with the same shapes, so the record cannot drift from what ran."""
    family = kernel_for(encoding, requested)
    device_type = torch.device(device).type
    flex_usable = FLEX_STATUS.usable(encoding, backward)
    if encoding.score_cap is not None:
        return _capped_plan(family, requested, device_type, queries, backward, flex_usable)
    if family == SHIFTED_SPARSE or family in OWN:
        return family
    if family == FORGET:  # CUDA: flex (a few queries: one SDPA call); CPU evaluation: the fused kernel
        if device_type == "cuda":
            return SDPA_ROWS if queries < FLEX_MIN_QUERIES else FLEX if flex_usable else BLOCKED
        return FORGET if device_type == "cpu" and not backward and dtype in fused_bias.DTYPES else BLOCKED
    if family == DUAL_CHUNK:  # CUDA: flex (a few queries: one SDPA call); CPU evaluation: the flash op's parts
        if device_type == "cuda":
            return SDPA_ROWS if queries < FLEX_MIN_QUERIES else FLEX if flex_usable else BLOCKED
        return DUAL_CHUNK if device_type == "cpu" and not backward else BLOCKED
    if device_type == "cuda" and requested not in ("blocked", "reference"):
        # every encoding has a fused kernel here for every shape, forward and backward: the blocked kernel runs
        # only when asked for, or after flex_attention failed to compile
        if not encoding.has_bias and encoding.two_part_form() is None:
            return SDPA if queries == keys else SDPA_LOWER_RIGHT
        if queries < FLEX_MIN_QUERIES:  # decoding: these rows' bias (or mask) is small, and flex would recompile
            return SDPA_ROWS
        return FLEX if flex_usable else BLOCKED
    # the CPU flash op with its log-sum-exp, which the two-part, cache and fused bias kernels are built from,
    # has no backward
    cpu_inference = device_type == "cpu" and not backward
    if family == TWO_PART:
        return TWO_PART if cpu_inference else BLOCKED
    if family == SDPA:
        # fused causal SDPA aligns queries to the first keys, not the last: continuing a cache on the CPU runs
        # the cached keys and the new ones as two fused calls
        if queries == keys:
            return SDPA
        return SDPA_CACHE if cpu_inference else BLOCKED
    if family == REFERENCE:
        return REFERENCE
    if family == FUSED_BIAS and cpu_inference and dtype in fused_bias.DTYPES:
        return FUSED_BIAS
    # flex only when asked for, never for a few queries (each new shape would recompile), and not for CPU
    # training (the CPU build has no flex backward)
    cpu_training = device_type == "cpu" and backward
    if family == FLEX and not cpu_training and queries >= FLEX_MIN_QUERIES and flex_usable:
        return FLEX
    return BLOCKED


def _capped_plan(
    family: AttentionPlan, requested: str, device_type: str, queries: int, backward: bool, flex_usable: bool
):
    """The kernel of soft-capped scores: flex, which caps in its score modification, where flex would run for
    these shapes (on CUDA unless the blocked kernel is asked for; elsewhere when flex is), else the capped
    blocked kernel — for a few queries too, which no SDPA call can cap."""
    if family == REFERENCE:
        return REFERENCE
    wanted = family == FLEX_CAPPED or (device_type == "cuda" and requested != "blocked")
    cpu_training = device_type == "cpu" and backward  # the CPU build has no flex backward
    if wanted and queries >= FLEX_MIN_QUERIES and not cpu_training and flex_usable:
        return FLEX_CAPPED
    return BLOCKED_CAPPED


def recorded_kernel(
    encoding: PositionalEncoding | list[PositionalEncoding],
    requested: str,
    device: torch.device | str,
    dtype: torch.dtype,
    shapes,
) -> str:
    """What a measurement whose attention calls have these (queries, keys) `shapes` ran: the names of the plans
    `attention_plan` makes for them. Asked after the measurement, so a flex_attention that failed to compile is
    recorded as the blocked kernel it fell back to. `encoding`: the one every layer attends with, or the
    distinct ones of a model whose layers attend differently (Gemma's sliding and full layers), in layer order.

    Distinct kernels are joined by "+" in call order: passkey's prompt pass and its continuations from the KV
    cache can run different kernels (RoPE on the CPU: "sdpa+sdpa-cache", as fused causal SDPA cannot continue a
    cache; a bias encoding on CUDA: "flex+sdpa-rows", as a few queries never compile flex), and one name would
    hide that."""
    encodings = encoding if isinstance(encoding, list) else [encoding]
    plans = [attention_plan(e, requested, device, dtype, queries, keys) for queries, keys in shapes for e in encodings]
    return "+".join(dict.fromkeys(plan.name for plan in plans))


def causal_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    encoding: PositionalEncoding,
    kernel: str = "auto",
    block_elements: int = BLOCK_ELEMENTS,
) -> torch.Tensor:
    """q: (B, H, Tq, Dh); k, v: (B, Hkv, Tk, Dh), H a multiple of Hkv, Tk ≥ Tq -> (B, H, Tq, Dh).

    The queries are the last Tq of the Tk positions (Tk > Tq when earlier keys come from a cache). `kernel`:
    the requested kernel (one of KERNELS), which `attention_plan` resolves for these shapes."""
    backward = needs_backward(q, k, v, encoding)
    plan = attention_plan(encoding, kernel, q.device, q.dtype, q.shape[2], k.shape[2], backward)
    return KERNEL_FUNCTIONS[plan](q, k, v, encoding, block_elements, backward)


def _blocked(q, k, v, encoding, block_elements: int, backward: bool = False) -> torch.Tensor:
    """The blocked kernel of this encoding. A two-part encoding has its own: q and k arrive unrotated, and
    each part rotates them its own way; soft-capped scores have theirs, which caps each block's scores."""
    form = encoding.two_part_form()
    if form is not None:
        return two_part.blocked_attention(q, k, v, form, block_elements)
    if encoding.chunk_form() is not None:
        return dual_chunk.blocked_attention(q, k, v, encoding.chunk_form(), block_elements)
    if encoding.forgets:
        return forget.blocked_attention(q, k, v, encoding.decay, block_elements)
    if encoding.score_cap is not None:
        return capped_blocked_attention(q, k, v, encoding, block_elements, backward)
    return blocked_attention(q, k, v, encoding, block_elements)


def _reference(q, k, v, encoding, block_elements: int = BLOCK_ELEMENTS, backward: bool = False) -> torch.Tensor:
    """The full-matrix reference of this encoding; a two-part encoding's is its blocked kernel in one block."""
    if encoding.own_kernel is not None:
        return own_attention(q, k, v, encoding, None)
    form = encoding.two_part_form()
    if form is not None:
        return two_part.blocked_attention(q, k, v, form, None)
    if encoding.chunk_form() is not None:
        return dual_chunk.blocked_attention(q, k, v, encoding.chunk_form(), None)
    if encoding.forgets:
        return forget.blocked_attention(q, k, v, encoding.decay, None)
    return reference_attention(q, k, v, encoding)


def _flex_or_blocked(q, k, v, encoding, block_elements: int, backward: bool) -> torch.Tensor:
    """flex_attention, or where it fails (then marked failed, and every later plan is blocked) the blocked
    kernel."""
    out = _try_flex(q, k, v, encoding, backward)
    return out if out is not None else _blocked(q, k, v, encoding, block_elements, backward)


# Each plan's kernel, called as (q, k, v, encoding, block_elements, backward). The kernels are looked up by
# name when called, so a test that replaces one (`monkeypatch`) sees every call routed to it.
KernelFunction = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, PositionalEncoding, int, bool], torch.Tensor]
KERNEL_FUNCTIONS: dict[AttentionPlan, KernelFunction] = {
    SDPA: lambda q, k, v, *_: sdpa(q, k, v, is_causal=True, enable_gqa=q.shape[1] != k.shape[1]),
    SDPA_CACHE: lambda q, k, v, *_: cached_sdpa(q, k, v),
    SDPA_LOWER_RIGHT: lambda q, k, v, *_: lower_right_sdpa(q, k, v),
    SDPA_ROWS: lambda q, k, v, encoding, *_: rows_attention(q, k, v, encoding),
    FUSED_BIAS: lambda q, k, v, encoding, *_: fused_bias.fused_bias_attention(q, k, v, encoding),
    FLEX: _flex_or_blocked,
    TWO_PART: lambda q, k, v, encoding, *_: two_part.fused_attention(q, k, v, encoding.two_part_form()),
    DUAL_CHUNK: lambda q, k, v, encoding, *_: dual_chunk.fused_attention(q, k, v, encoding.chunk_form()),
    FORGET: lambda q, k, v, encoding, *_: forget.fused_attention(q, k, v, encoding.decay),
    SHIFTED_SPARSE: lambda q, k, v, encoding, *_: shifted_sparse.shifted_sparse_attention(
        q, k, v, encoding.sparse_group
    ),
    BLOCKED: _blocked,
    REFERENCE: _reference,
    **{
        plan: lambda q, k, v, encoding, block_elements, _: own_attention(q, k, v, encoding, block_elements)
        for plan in OWN
    },
    FLEX_CAPPED: _flex_or_blocked,
    BLOCKED_CAPPED: lambda q, k, v, encoding, block_elements, backward: capped_blocked_attention(
        q, k, v, encoding, block_elements, backward
    ),
}


def needs_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, encoding: PositionalEncoding) -> bool:
    """Whether gradients will flow through this attention: the fused bias kernels have no backward."""
    if not torch.is_grad_enabled():
        return False
    return any(t.requires_grad for t in (q, k, v, *encoding.parameters()))  # a learned bias (T5) trains too


def flex_attention_of(q, k, v, encoding, compiled: bool = True):
    """The encoding's attention through flex_attention: its bias (and its scores' soft cap) as a score
    modification, or its two parts side by side (q and k unrotated)."""
    form = encoding.two_part_form()
    if form is not None:
        both = two_part.side_by_side(q, k, v, form)
        return flex.flex_two_part_attention(*both, form.window, compiled=compiled, far_keys=form.far_keys)
    chunks = encoding.chunk_form()
    if chunks is not None:
        every = dual_chunk.side_by_side(q, k, v, chunks)
        return flex.flex_dual_chunk_attention(*every, chunks.chunk, compiled=compiled)
    if encoding.forgets:
        return flex.flex_decay_attention(q, k, v, encoding.decay, compiled=compiled)
    keys = k.shape[2]
    bias = encoding.score_bias(keys, device=q.device)  # None: capped scores without a bias
    # partial blocks score masked pairs too (and padding rows past the end): keep their lookups in the table
    lookup = None if bias is None else lambda h, i, d: bias(h, i, d.clamp(0, keys - 1))
    return flex.flex_bias_attention(
        q, k, v, lookup, compiled=compiled, cap=encoding.score_cap, horizon=encoding.horizon
    )


def _check_backward(q, encoding) -> None:
    """One small forward and backward through flex with this encoding, before training relies on it: a
    backend that cannot differentiate a score modification fails here, where the blocked kernel can still
    take over, rather than in the middle of a training step. Gradients go nowhere (no `.grad` is touched)."""
    key = (flex_key(encoding), str(q.device))
    if key in FLEX_STATUS.backward_checked:
        return
    heads, dim = q.shape[1], q.shape[-1]
    probe = [
        torch.randn(1, heads, 2 * flex.BLOCK, dim, device=q.device, dtype=q.dtype, requires_grad=True) for _ in range(3)
    ]
    if encoding.forgets:  # a decay of the probe's own length, which gradients flow into as in training
        decay = torch.zeros(1, heads, 2 * flex.BLOCK, device=q.device, requires_grad=True)
        probe, encoding = probe + [decay], Decayed(encoding, decay)
    inputs = probe + [p for p in encoding.parameters() if p.requires_grad]
    torch.autograd.grad(flex_attention_of(*probe[:3], encoding).float().sum(), inputs, allow_unused=True)
    FLEX_STATUS.backward_checked.add(key)


def _try_flex(q, k, v, encoding, backward: bool = False):
    """flex_attention for this encoding, or None where it cannot compile or run here: `FLEX_STATUS` then keeps
    why, and this and every later call of this encoding (in this direction) run the blocked kernel."""
    if not FLEX_STATUS.usable(encoding, backward):
        return None
    try:
        if backward:
            try:
                _check_backward(q, encoding)
            except Exception as error:  # the forward may still compile: evaluation keeps flex
                message = FLEX_STATUS.fail(error, encoding, backward=True)
                warnings.warn(
                    f"flex_attention cannot train {flex_key(encoding)} here ({message}); using the blocked kernel",
                    stacklevel=2,
                )
                return None
        return flex_attention_of(q, k, v, encoding)
    except Exception as error:  # a compiler missing or a backend without support: fall back, say it once
        message = FLEX_STATUS.fail(error, encoding)
        warnings.warn(
            f"flex_attention unavailable for {flex_key(encoding)} ({message}); using the blocked kernel", stacklevel=2
        )
        return None


def rows_attention(q, k, v, encoding):
    """A few queries (decoding from a cache, a short pass) in one SDPA call: the bias of those rows as its
    additive mask, (H, Tq, Tk) — linear in the keys — or, for a two-part encoding, the rows' visibility of
    both key copies (see `kernels.two_part.side_by_side`; dual chunk attention: of its three copies). Nothing
    to compile, so every shape is cheap."""
    queries, keys, gqa = q.shape[2], k.shape[2], q.shape[1] != k.shape[1]
    offset = keys - queries
    form = encoding.two_part_form()
    if form is not None:
        q_both, k_both, v_both = two_part.side_by_side(q, k, v, form)
        rows = torch.arange(queries, device=q.device)[:, None]  # (Tq, 1)
        columns = torch.arange(2 * keys, device=q.device)[None, :]  # (1, 2·Tk)
        visible = flex.mask_function(flex.two_part_ranges(keys, form.window, form.far_keys), offset)(
            None, None, rows, columns
        )
        return sdpa(q_both, k_both, v_both, attn_mask=visible, scale=q.shape[-1] ** -0.5, enable_gqa=gqa)
    if encoding.forgets:
        return forget.rows_attention(q, k, v, encoding.decay, sdpa)
    chunks = encoding.chunk_form()
    if chunks is not None:
        q_all, k_all, v_all = dual_chunk.side_by_side(q, k, v, chunks)
        rows = torch.arange(queries, device=q.device)[:, None]  # (Tq, 1)
        columns = torch.arange(flex.CHUNK_PARTS * keys, device=q.device)[None, :]  # (1, 3·Tk)
        visible = flex.chunk_mask_function(keys, offset, chunks.chunk)(None, None, rows, columns)
        return sdpa(q_all, k_all, v_all, attn_mask=visible, scale=q.shape[-1] ** -0.5, enable_gqa=gqa)
    table = encoding.bias_table(keys, device=q.device) if encoding.toeplitz else None
    bias = bias_rows(encoding, table, offset, keys, compute_dtype(q, keys), q.device)  # (H, Tq, Tk)
    return sdpa(q, k, v, attn_mask=bias.unsqueeze(0), enable_gqa=gqa)
