"""RoPE frequency functions: pure functions of one signature returning `(inv_freq, attention_factor)`.

Every scaling changes only `inv_freq` (and possibly an attention factor that multiplies cos and sin);
positions stay integers. Formulas follow the project's reference page; `s = factor`, `L = original_len`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from extrapolate.core.errors import UserError
from extrapolate.encodings.options import (
    LLAMA3_HIGH_FREQ_FACTOR,
    LLAMA3_LOW_FREQ_FACTOR,
    YARN_BETA_FAST,
    YARN_BETA_SLOW,
    YARN_TRUNCATE,
    option_defaults,
)

# (head_dim, base, factor, original_len, seq_len, **options) -> (inv_freq (head_dim/2,) float32, attention_factor)
FrequencyFn = Callable[..., "tuple[torch.Tensor, float]"]


def rope_inv_freq(head_dim: int, base: float) -> torch.Tensor:
    """θ_j = base^(-2j/d), j = 0 … d/2-1, in float32 exactly as the Hugging Face ecosystem computes it, so a
    pretrained checkpoint sees bit-identical frequencies here and there."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32) / head_dim  # (d/2,)
    return 1.0 / (float(base) ** exponents)


def rope(head_dim: int, base: float, factor: float, original_len: int, seq_len: int) -> tuple[torch.Tensor, float]:
    return rope_inv_freq(head_dim, base), 1.0


def rope_angles(
    head_dim: int, base: float, factor: float, original_len: int, seq_len: int, **query_options
) -> tuple[torch.Tensor, float]:
    """RoPE's own angles, for the scalings that change the queries' scale instead (`rotary.Rotary.query_scale`),
    whose options are the scale's."""
    return rope(head_dim, base, factor, original_len, seq_len)


def pi(head_dim: int, base: float, factor: float, original_len: int, seq_len: int) -> tuple[torch.Tensor, float]:
    """Position interpolation: every frequency divided by s (positions squeezed into the trained range)."""
    return rope_inv_freq(head_dim, base) / factor, 1.0


def ntk_exponent(head_dim: int) -> float:
    """d/(d-2), the exponent of NTK's base: undefined at d = 2 (a head of one pair has no lowest frequency
    distinct from its highest), so refused here too, for callers that skip `check_scaling` (figures)."""
    if head_dim < 4:
        raise UserError(f"NTK scaling needs a head dimension of at least 4 (its base b·s^(d/(d-2))), got {head_dim}")
    return head_dim / (head_dim - 2)


def ntk_base(head_dim: int, base: float, factor: float) -> float:
    """NTK-aware base b' = b · s^(d/(d-2)): the lowest frequency shrinks by exactly s, the highest is unchanged."""
    return base * factor ** ntk_exponent(head_dim)


def ntk(head_dim: int, base: float, factor: float, original_len: int, seq_len: int) -> tuple[torch.Tensor, float]:
    return rope_inv_freq(head_dim, ntk_base(head_dim, base, factor)), 1.0


def dynamic_ntk(
    head_dim: int, base: float, factor: float, original_len: int, seq_len: int
) -> tuple[torch.Tensor, float]:
    """The `dynamic` type of the Hugging Face ecosystem: the base grows with the sequence's own length."""
    length = max(seq_len, original_len)
    grown = base * ((factor * length / original_len) - (factor - 1)) ** ntk_exponent(head_dim)
    return rope_inv_freq(head_dim, grown), 1.0


def yarn_correction_dim(head_dim: int, base: float, original_len: int, rotations: float) -> float:
    """The (fractional) pair index whose wavelength fits `rotations` full turns into the original length."""
    return head_dim * math.log(original_len / (2 * math.pi * rotations)) / (2 * math.log(base))


def yarn_ramp(
    head_dim: int,
    base: float,
    original_len: int,
    beta_fast: float = YARN_BETA_FAST,
    beta_slow: float = YARN_BETA_SLOW,
    truncate: bool = YARN_TRUNCATE,
) -> torch.Tensor:
    """YaRN's ramp over the pairs, (d/2,) float32: 0 up to the β_fast pair (kept), 1 from the β_slow pair
    (interpolated), linear between; the reference code's `1 - inv_freq_mask`, which LongRoPE's search reuses."""
    low = yarn_correction_dim(head_dim, base, original_len, beta_fast)
    high = yarn_correction_dim(head_dim, base, original_len, beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001  # avoid a division by zero in the ramp
    return ((torch.arange(head_dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)  # (d/2,)


def yarn_mscale(factor: float) -> float:
    return 1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0


def yarn(
    head_dim: int,
    base: float,
    factor: float,
    original_len: int,
    seq_len: int,
    beta_fast: float = YARN_BETA_FAST,
    beta_slow: float = YARN_BETA_SLOW,
    truncate: bool = YARN_TRUNCATE,
    attention_factor: float | None = None,
) -> tuple[torch.Tensor, float]:
    """YaRN in the reference-code form: a linear ramp between extrapolated and interpolated pairs."""
    theta = rope_inv_freq(head_dim, base)  # (d/2,)
    ramp = yarn_ramp(head_dim, base, original_len, beta_fast, beta_slow, truncate)  # (d/2,)
    # θ/s·ramp + θ·(1-ramp), written so that s = 1 gives θ bit for bit
    inv_freq = theta * (1 - ramp * (1 - 1 / factor))
    mscale = yarn_mscale(factor) if attention_factor is None else attention_factor
    return inv_freq, mscale


def dynamic_yarn(
    head_dim: int, base: float, factor: float, original_len: int, seq_len: int, **options
) -> tuple[torch.Tensor, float]:
    """YaRN whose scale follows the sequence: s = max(1, l / L), recomputed per forward (`factor` unused)."""
    return yarn(head_dim, base, max(1.0, seq_len / original_len), original_len, seq_len, **options)


def llama3(
    head_dim: int,
    base: float,
    factor: float,
    original_len: int,
    seq_len: int,
    low_freq_factor: float = LLAMA3_LOW_FREQ_FACTOR,
    high_freq_factor: float = LLAMA3_HIGH_FREQ_FACTOR,
) -> tuple[torch.Tensor, float]:
    """Llama 3.1 scaling: short wavelengths kept, long ones divided by s, a smooth blend in between."""
    theta = rope_inv_freq(head_dim, base)
    wavelen = 2 * math.pi / theta
    smooth = (original_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    # (1-smooth)·θ/s + smooth·θ, written so that s = 1 gives θ bit for bit
    blended = theta * (1 - (1 - smooth) * (1 - 1 / factor))
    long_waves = wavelen > original_len / low_freq_factor
    short_waves = wavelen < original_len / high_freq_factor
    inv_freq = torch.where(long_waves, theta / factor, torch.where(short_waves, theta, blended))
    return inv_freq.to(torch.float32), 1.0


def longrope_attention_factor(factor: float, original_len: int) -> float:
    """√(1 + ln s / ln L), 1 when s ≤ 1: LongRoPE's (and Phi-3's) factor on cos and sin, at every length."""
    return 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original_len))


def longrope_default_long(head_dim: int, base: float, factor: float, original_len: int) -> list[float]:
    """Per-pair long factors when none are given: YaRN's frequencies as rescale factors (θ_j / θ'_j, 1 for the
    fast pairs up to s for the slow ones), a non-uniform list of the kind LongRoPE's search finds. The search
    itself starts from the reference's linear blend of the factors (run/longrope_search.py), not from this."""
    if factor <= 1:
        return [1.0] * (head_dim // 2)
    scaled, _ = yarn(head_dim, base, factor, original_len, original_len)
    return (rope_inv_freq(head_dim, base) / scaled).tolist()


def longrope_factors(
    head_dim: int, base: float, factor: float, original_len: int, short_factor=None, long_factor=None
) -> tuple[list[float], list[float]]:
    """(short, long) per-pair rescale factors, each checked: head_dim/2 finite numbers > 0. Defaults: short
    all 1 (plain RoPE up to L), long `longrope_default_long`."""
    short = [1.0] * (head_dim // 2) if short_factor is None else short_factor
    long = longrope_default_long(head_dim, base, factor, original_len) if long_factor is None else long_factor
    for name, values in (("short", short), ("long", long)):
        if len(values) != head_dim // 2:
            raise UserError(f"longrope {name} factors: need {head_dim // 2} (head_dim/2), got {len(values)}")
        if not all(isinstance(v, (int, float)) and 0 < v < float("inf") for v in values):
            raise UserError(f"longrope {name} factors must be finite numbers > 0")
    return [float(v) for v in short], [float(v) for v in long]


def longrope(
    head_dim: int,
    base: float,
    factor: float,
    original_len: int,
    seq_len: int,
    short_factor: list[float] | None = None,
    long_factor: list[float] | None = None,
    attention_factor: float | None = None,
) -> tuple[torch.Tensor, float]:
    """LongRoPE: θ_j divided by a per-pair factor, the short list for sequences of at most L tokens and the
    long list beyond; the attention factor applies at every length (as transformers' `longrope` does)."""
    short, long = longrope_factors(head_dim, base, factor, original_len, short_factor, long_factor)
    rescale = torch.tensor(long if seq_len > original_len else short, dtype=torch.float32)  # (d/2,)
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32) / head_dim  # (d/2,)
    inv_freq = 1.0 / (rescale * float(base) ** exponents)  # the reference's order of operations, bit for bit
    scale = longrope_attention_factor(factor, original_len) if attention_factor is None else attention_factor
    return inv_freq, scale


def longrope_resolved_factors(head_dim: int, base: float, factor: float, original_len: int, options: dict) -> dict:
    """LongRoPE's two factor lists as its frequencies use them, the defaults filled (they depend on the head size)."""
    short, long = longrope_factors(
        head_dim, base, factor, original_len, options.get("short_factor"), options.get("long_factor")
    )
    return {"short_factor": short, "long_factor": long}


@dataclass(frozen=True)
class TransformersRope:
    """How transformers' Llama computes what a scaling computes here: its `rope_type` and what its
    `rope_parameters` hold besides `rope_theta` (data/rope_config.py writes them). Options go under the
    `hf_key` of their declaration (options.py)."""

    rope_type: str
    reads: tuple[str, ...] = ()  # which of "factor" (s) and "original_max_position_embeddings" (L) it takes
    # True: every option is written, its default where it is not given (transformers requires them all);
    # False: the options given, the others left to transformers, whose defaults are the declared ones
    all_options: bool = False
    # (head_dim, base, factor) -> rope_theta, where transformers is given another base (static NTK)
    theta: Callable[[int, float, float], float] | None = None
    # (head_dim, base, factor, original_len, options) -> option values computed here that transformers takes
    # as given (LongRoPE's factor lists, whose defaults depend on the head size)
    resolved: Callable[..., dict] | None = None


SCALED = ("factor",)  # what transformers reads of a scaling: s
SCALED_FROM_L = ("factor", "original_max_position_embeddings")  # s and L


@dataclass(frozen=True)
class Scaling:
    fn: FrequencyFn
    dynamic: bool  # depends on the sequence length of each forward
    options: dict  # option name -> default (`option_defaults`: the declared ones)
    description: str
    colour: str = "#555555"  # in every figure
    min_head_dim: int = 2  # the smallest head dimension its formula is defined for
    reads_factor: bool = True  # s is an input (not for plain RoPE, nor dynamic YaRN, which takes s = l/L)
    transformers: TransformersRope | None = None  # None: transformers has no rope_type that computes it


SCALINGS: dict[str, Scaling] = {
    "rope": Scaling(
        rope,
        False,
        {},
        "rotary position embedding (Su et al.), half-pair layout",
        "#9467bd",
        reads_factor=False,
        transformers=TransformersRope("default"),
    ),
    "pi": Scaling(
        pi,
        False,
        {},
        "position interpolation: inv_freq / s (Chen et al. 2023)",
        "#8c564b",
        transformers=TransformersRope("linear", SCALED),
    ),
    # static NTK-aware is plain RoPE with a larger base
    "ntk": Scaling(
        ntk,
        False,
        {},
        "NTK-aware: base · s^(d/(d-2)), static",
        "#e377c2",
        min_head_dim=4,
        transformers=TransformersRope("default", theta=ntk_base),
    ),
    "dynamic-ntk": Scaling(
        dynamic_ntk,
        True,
        {},
        "NTK base recomputed from each sequence's length",
        "#7f7f7f",
        min_head_dim=4,
        transformers=TransformersRope("dynamic", SCALED),
    ),
    "yarn": Scaling(
        yarn,
        False,
        option_defaults("beta_fast", "beta_slow", "truncate", "attention_factor"),
        "YaRN ramp between kept and interpolated pairs + 0.1·ln(s)+1 attention factor (Peng et al. 2023)",
        "#bcbd22",
        transformers=TransformersRope("yarn", SCALED_FROM_L),
    ),
    "dynamic-yarn": Scaling(
        dynamic_yarn,
        True,
        option_defaults("beta_fast", "beta_slow", "truncate", "attention_factor"),
        "YaRN with s = max(1, l/L) recomputed per forward",
        "#17becf",
        reads_factor=False,
    ),
    "llama3": Scaling(
        llama3,
        False,
        option_defaults("low_freq_factor", "high_freq_factor"),
        "Llama 3.1 wavelength-banded scaling, no attention factor",
        "#393b79",
        transformers=TransformersRope("llama3", SCALED_FROM_L, all_options=True),
    ),
    "longrope": Scaling(
        longrope,
        True,
        option_defaults("short_factor", "long_factor", "attention_factor"),
        "LongRoPE per-pair factors (short ≤ L, long beyond) + √(1+ln s/ln L) attention factor (Ding et al. 2024)",
        "#8c6d31",
        transformers=TransformersRope("longrope", SCALED_FROM_L, resolved=longrope_resolved_factors),
    ),
    # RoPE's angles as they are; `rotary.Rotary` scales the queries past L (`logn_scale`)
    "logn": Scaling(
        rope,
        False,
        {},
        "log-n attention scaling: RoPE, queries past L × log_L(i + 1) (Qwen's logn_attn, Bai et al. 2023)",
        "#fdb462",
        reads_factor=False,
    ),
    # RoPE's angles as they are; `rotary.Rotary` scales every query by Llama 4's temperature (`temperature_scale`)
    "llama4-temperature": Scaling(
        rope_angles,
        False,
        option_defaults("floor_scale", "attn_scale"),
        "Llama 4's attention temperature: RoPE, queries × attn_scale·log(⌊(i+1)/floor_scale⌋ + 1) + 1 (Meta 2025)",
        "#e6ab02",
        reads_factor=False,
    ),
}


INT64_MAX = 2**63 - 1  # positions are int64 tensors


def check_scaling(name: str, head_dim: int, factor: float, original_len: int | None = None, **options) -> None:
    """Refuse, in one line, the inputs a scaling's formula is not defined for (the frequency functions stay
    pure: they would divide by zero or overflow instead). `original_len` None: not known yet (checked at build)."""
    scaling = SCALINGS[name]
    if head_dim < scaling.min_head_dim:
        # only the NTK kinds have a minimum above 2
        raise UserError(
            f"{name} needs a head dimension of at least {scaling.min_head_dim}, got {head_dim} "
            f"(NTK's base b·s^(d/(d-2)) divides by d - 2)"
        )
    if scaling.reads_factor:
        # s = L'/L: every method interpolates towards a longer context, and s = 1 is plain RoPE exactly
        if not (math.isfinite(factor) and factor >= 1):
            raise UserError(
                f"{name}: the scale factor s = L'/L must be a finite number ≥ 1 (1 is plain RoPE), got {factor:g}"
            )
        # L' = s·L with L ≥ 1 is a sequence length, which int64 positions bound (checked without L, so a run
        # refuses it before training)
        if factor > INT64_MAX:
            raise UserError(
                f"{name}: the scale factor s = L'/L must be at most 2^63 (L' is a sequence length, "
                f"indexed by int64 positions), got {factor:g}"
            )
    if name == "longrope" and original_len is not None and original_len < 2:
        raise UserError(
            f"longrope needs an original length of at least 2 (its attention factor divides by ln L), "
            f"got {original_len}"
        )
    values = {**scaling.options, **options}
    if values.get("attention_factor") is not None and not values["attention_factor"] > 0:
        raise UserError(
            f"{name}: attention_factor multiplies cos and sin and must be > 0, got {values['attention_factor']:g}"
        )
    if "beta_fast" in values and not values["beta_fast"] >= values["beta_slow"]:
        # the ramp runs from the β_fast pair to the β_slow pair: reversed, it would keep the slow pairs and
        # interpolate the fast ones (equal is a hard cut, which the ramp's guard keeps finite)
        raise UserError(
            f"{name}: beta_fast must be at least beta_slow, got {values['beta_fast']:g} < {values['beta_slow']:g}"
        )
    if "low_freq_factor" in values:
        low, high = values["low_freq_factor"], values["high_freq_factor"]
        # the bands are wavelengths above L/low (interpolated) and below L/high (kept), blended by (L/λ-low)/(high-low)
        if not 0 < low < high:
            raise UserError(f"{name}: need 0 < low_freq_factor < high_freq_factor, got {low:g} and {high:g}")
